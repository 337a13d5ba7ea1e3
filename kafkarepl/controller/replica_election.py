"""Leader elections that are asked for rather than forced by a failure (Kafka's
onReplicaElection and its triggers): ElectLeaders requests (preferred or unclean), the
/admin/preferred_replica_election znode, and the periodic auto leader rebalance that
moves leadership back to preferred replicas.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafkarepl.aio import Pacer
from kafkarepl.controller import election
from kafkarepl.controller.context import ControllerMetrics, TopicPartition
from kafkarepl.controller.partition_state import WriteStates
from kafkarepl.controller.scope import ControllerScope
from kafkarepl.errors import ErrorCode

log = logging.getLogger(__name__)

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1


class ReplicaElection:
    def __init__(
        self,
        scope: ControllerScope,
        metrics: ControllerMetrics,
        config: Mapping[str, Any],
        write_states: WriteStates,
    ) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self.metrics = metrics
        self.config = config
        self._write_states = write_states

    async def elect_leaders(self, body: dict) -> dict:
        """ElectLeaders request body (v0-v2) -> response body (AdminClientTriggered)."""
        self.scope.require_active()
        ctx = self.ctx
        kind = body.get("election_type", ELECTION_PREFERRED)
        requested = body.get("topic_partitions")
        if requested is None:
            tps = [tp for tp in ctx.all_partitions() if tp in ctx.states]
        else:
            tps = [(t["topic"], p) for t in requested for p in t.get("partitions", [])]
        codes = await self.run(tps, kind)
        by_topic: dict[str, list[dict]] = {}
        pace = Pacer()  # the client may name any number of partitions
        for (t, p), (code, msg) in codes.items():
            if pace.due():
                await asyncio.sleep(0)
            by_topic.setdefault(t, []).append(
                {"partition_id": p, "error_code": int(code), "error_message": msg}
            )
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "replica_election_results": [
                {"topic": t, "partition_result": r} for t, r in by_topic.items()
            ],
        }

    async def run(
        self, tps: Iterable[TopicPartition], kind: int
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Elect `kind` leaders for `tps`; sends the changes; returns each partition's outcome."""
        ctx = self.ctx
        all_electable = ctx.electable_ids
        codes: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        changes: dict[TopicPartition, election.LeaderAndIsr] = {}
        for tp in tps:
            st = ctx.states.get(tp)
            if st is None or ctx.is_deleting(tp[0]):
                codes[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown partition")
                continue
            replicas = ctx.replicas(tp)
            electable = ctx.usable_for(tp, all_electable)
            if kind == ELECTION_UNCLEAN:
                if st.leader in ctx.usable_for(tp, ctx.live_ids):
                    codes[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "partition has a leader")
                    continue
                r = election.unclean_election(replicas, st.isr, electable, st.leader_epoch)
                missing = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            else:
                if replicas and st.leader == replicas[0]:
                    codes[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "preferred replica is the leader")
                    continue
                r = election.preferred_election(replicas, st.isr, electable, st.leader_epoch)
                missing = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            if isinstance(r, election.NoLeader):
                codes[tp] = (missing, r.reason)
                continue
            if r.unclean:
                self.metrics.unclean_elections += 1
                log.error(
                    "UNCLEAN leader election (requested) for %s-%d: broker %d",
                    tp[0],
                    tp[1],
                    r.leader,
                )
            changes[tp] = r
        started = time.perf_counter()
        written = await self._write_states(changes)
        if written:
            self.metrics.leader_elections += len(written)
            self.metrics.leader_election_time_ms_total += (time.perf_counter() - started) * 1000
        for tp in changes:
            codes[tp] = (
                (ErrorCode.NONE, None)
                if tp in written
                else (ErrorCode.INVALID_UPDATE_VERSION, "retry")
            )
        batch = self.scope.new_batch()
        batch.add_leader_and_isr_for_replicas(written)
        batch.add_update_metadata(ctx.live, written)
        self.scope.send_batch(batch)
        return codes

    async def on_preferred_replica_election_znode(self) -> None:
        """/admin/preferred_replica_election: elect the preferred replicas it names (ZkTriggered)."""
        fence = self.scope.require_active()
        tps = await self.scope.store.get_preferred_replica_election()
        if not tps:
            return
        await self.run(sorted(tps), ELECTION_PREFERRED)
        await self.scope.store.delete_preferred_replica_election(fence)

    async def auto_rebalance(self) -> None:
        """AutoTriggered: move leadership back to preferred replicas on brokers whose share of
        partitions led by someone else exceeds leader.imbalance.per.broker.percentage."""
        self.scope.require_active()
        ctx = self.ctx
        threshold = float(self.config["leader.imbalance.per.broker.percentage"]) / 100.0
        preferred_of: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            reps = ctx.replicas(tp)
            if (
                reps
                and tp in ctx.states
                and not ctx.is_deleting(tp[0])
                and tp not in ctx.reassigning
            ):
                preferred_of.setdefault(reps[0], []).append(tp)
        to_elect: list[TopicPartition] = []
        for b, tps in preferred_of.items():
            if b not in ctx.electable_ids:
                continue
            not_led = [tp for tp in tps if ctx.states[tp].leader != b]
            if tps and len(not_led) / len(tps) > threshold:
                to_elect.extend(tp for tp in not_led if b in ctx.states[tp].isr and ctx.usable_for(tp, {b}))
        if to_elect:
            log.info("controller: auto leader rebalance of %d partitions", len(to_elect))
            await self.run(to_elect, ELECTION_PREFERRED)
