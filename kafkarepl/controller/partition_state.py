"""Leader/ISR state changes of partitions (Kafka's PartitionStateMachine).

New partitions come online, partitions whose leader is gone get a new one (clean, or
unclean where the topic allows it) and dead brokers leave the ISRs. Every change is a
conditional ZooKeeper write fenced by the controller epoch, and the context takes it
only once written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kafkarepl.controller import election
from kafkarepl.controller.config import as_bool
from kafkarepl.controller.context import ControllerMetrics, TopicPartition
from kafkarepl.controller.requests import RequestBatch
from kafkarepl.controller.scope import ControllerScope
from kafkarepl.zk.znodes import PartitionState

log = logging.getLogger(__name__)

# PartitionStateMachine.write_states, as the services that change leaders and ISRs get it.
WriteStates = Callable[
    [Mapping[TopicPartition, election.LeaderAndIsr]],
    Awaitable[dict[TopicPartition, PartitionState]],
]


class PartitionStateMachine:
    def __init__(
        self,
        scope: ControllerScope,
        metrics: ControllerMetrics,
        config: Mapping[str, Any],
    ) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self.metrics = metrics
        self.config = config

    async def write_states(
        self, changes: Mapping[TopicPartition, election.LeaderAndIsr]
    ) -> dict[TopicPartition, PartitionState]:
        """Conditional writes of new leader/ISR; updates the context; returns what was written.
        A zkVersion mismatch re-reads that partition's state and drops the change (the
        caller's next event recomputes it)."""
        fence = self.scope.require_active()
        if not changes:
            return {}
        updates = {
            tp: (
                PartitionState(lai.leader, lai.leader_epoch, list(lai.isr), fence.epoch),
                self.ctx.states[tp].zk_version,
            )
            for tp, lai in changes.items()
        }
        done, failed = await self.scope.store.update_partition_states(fence, updates)
        written = {}
        for tp, version in done.items():
            st = updates[tp][0]
            st.zk_version = version
            self.ctx.states[tp] = st
            written[tp] = st
        if failed:
            log.warning(
                "controller: partition state changed under us for %s; re-reading", sorted(failed)
            )
            fresh = await self.scope.store.get_partition_states(failed)
            self.ctx.states.update(fresh)
        return written

    async def _unclean_allowed(self, topic: str) -> bool:
        cfg = await self.scope.store.get_topic_config(topic)
        if "unclean.leader.election.enable" in cfg:
            return as_bool(cfg["unclean.leader.election.enable"])
        dynamic = await self.scope.store.get_broker_config()
        if "unclean.leader.election.enable" in dynamic:
            return as_bool(dynamic["unclean.leader.election.enable"])
        return as_bool(self.config["unclean.leader.election.enable"])

    async def on_new_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """NewPartition -> OnlinePartition: leader = first live replica, ISR = live replicas."""
        fence = self.scope.require_active()
        ctx = self.ctx
        electable = ctx.electable_ids
        initial: dict[TopicPartition, PartitionState] = {}
        for tp in tps:
            if tp in ctx.states or ctx.is_deleting(tp[0]):
                continue
            live_replicas = [b for b in ctx.replicas(tp) if b in electable]
            if not live_replicas:
                continue  # stays new until one of its replicas comes up
            initial[tp] = PartitionState(live_replicas[0], 0, live_replicas, fence.epoch)
        if not initial:
            return
        started = time.perf_counter()
        created = await self.scope.store.create_partition_states(fence, initial)
        for tp, version in created.items():
            st = initial[tp]
            st.zk_version = version
            ctx.states[tp] = st
        leftover = [tp for tp in initial if tp not in created]
        if leftover:  # a previous controller got there first
            ctx.states.update(await self.scope.store.get_partition_states(leftover))
        batch = self.scope.new_batch()
        batch.add_leader_and_isr_for_replicas(initial, is_new=True)
        batch.add_update_metadata(ctx.live, initial)
        self.scope.send_batch(batch)
        log.info("controller: %d new partitions online (states written in %.0f ms)", len(initial),
                 (time.perf_counter() - started) * 1000)

    async def elect_offline_and_shrink_isr(
        self, candidates: Iterable[TopicPartition] | None = None, batch: RequestBatch | None = None
    ) -> None:
        """For partitions whose leader is not live: elect (clean, or unclean if the topic
        allows it); for the others: drop dead brokers from the ISR. Sends the results
        (or adds them to `batch`, for the caller to send)."""
        ctx = self.ctx
        all_live = ctx.live_ids
        all_electable = ctx.electable_ids
        changes: dict[TopicPartition, election.LeaderAndIsr] = {}
        unclean_cache: dict[str, bool] = {}
        started = time.perf_counter()
        elections = 0
        for tp in list(ctx.states) if candidates is None else list(candidates):
            st = ctx.states.get(tp)
            if st is None or ctx.is_deleting(tp[0]):
                continue
            replicas = ctx.replicas(tp)
            live = ctx.usable_for(tp, all_live)  # replicas on failed log dirs count as not live (KIP-112)
            electable = ctx.usable_for(tp, all_electable)
            if st.leader == -1 or st.leader not in live:
                result = election.clean_election(replicas, st.isr, electable, st.leader_epoch)
                if isinstance(result, election.NoLeader):
                    if tp[0] not in unclean_cache:
                        unclean_cache[tp[0]] = await self._unclean_allowed(tp[0])
                    if unclean_cache[tp[0]]:
                        result = election.unclean_election(
                            replicas, st.isr, electable, st.leader_epoch
                        )
                if isinstance(result, election.LeaderAndIsr):
                    elections += 1
                    if result.unclean:
                        self.metrics.unclean_elections += 1
                        log.error(
                            "UNCLEAN leader election for %s-%d: broker %d was not in the ISR %s; "
                            "acknowledged records may be lost",
                            tp[0],
                            tp[1],
                            result.leader,
                            st.isr,
                        )
                    changes[tp] = result
                elif st.leader != -1:
                    changes[tp] = election.offline(st.isr, live, st.leader_epoch)
                    log.warning("partition %s-%d is offline: %s", tp[0], tp[1], result.reason)
            else:
                new_isr = [b for b in st.isr if b in live]
                if new_isr != st.isr and new_isr:
                    changes[tp] = election.LeaderAndIsr(st.leader, st.leader_epoch + 1, new_isr)
        written = await self.write_states(changes)
        if elections:
            self.metrics.leader_elections += elections
            elapsed = (time.perf_counter() - started) * 1000
            self.metrics.leader_election_time_ms_total += elapsed
            self.metrics.leader_election_time_ms_last = elapsed
        own_batch = batch is None
        batch = batch or self.scope.new_batch()
        batch.add_leader_and_isr_for_replicas(written)
        batch.add_update_metadata(ctx.live, written)
        if own_batch:
            self.scope.send_batch(batch)
