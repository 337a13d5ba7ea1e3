"""Partition reassignment (Kafka's KIP-455 reassignment in the ZooKeeper-mode controller).

Asked for by AlterPartitionReassignments or the /admin/reassign_partitions znode. The
partition first gets origin + target replicas (adding/removing recorded in its
assignment znode); once every target replica is in the ISR, leadership moves into the
target if needed, the assignment becomes the target and the removed replicas are
deleted (StopReplica).
"""

from __future__ import annotations

import logging

from kafkarepl.controller import election
from kafkarepl.controller.context import TopicPartition
from kafkarepl.controller.partition_state import WriteStates
from kafkarepl.controller.scope import ControllerScope
from kafkarepl.errors import ErrorCode
from kafkarepl.zk.znodes import TopicAssignment

log = logging.getLogger(__name__)


class ReassignmentManager:
    def __init__(self, scope: ControllerScope, write_states: WriteStates) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self._write_states = write_states
        # Partitions of the znode's request already started: a later firing of its watch
        # starts only the new ones (forgotten once the znode is empty or gone).
        self._znode_seen: set[TopicPartition] = set()

    def clear(self) -> None:
        """On resignation: a new term reads the znode afresh."""
        self._znode_seen.clear()

    async def alter(self, body: dict) -> dict:
        """AlterPartitionReassignments request body -> response body."""
        self.scope.require_active()
        responses = []
        for topic in body.get("topics", []) or []:
            parts = []
            for part in topic.get("partitions", []) or []:
                tp = (topic["name"], part["partition_index"])
                code, msg = await self.start(tp, part.get("replicas"))
                parts.append(
                    {"partition_index": tp[1], "error_code": int(code), "error_message": msg}
                )
            responses.append({"name": topic["name"], "partitions": parts})
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "responses": responses,
        }

    def in_progress(
        self,
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """{tp: (replicas, adding, removing)} of reassignments in progress."""
        out: dict[TopicPartition, tuple[list[int], list[int], list[int]]] = {}
        for tp in self.ctx.reassigning:
            ta = self.ctx.topics[tp[0]]
            out[tp] = (
                list(ta.partitions.get(tp[1], [])),
                list(ta.adding_replicas.get(tp[1], [])),
                list(ta.removing_replicas.get(tp[1], [])),
            )
        return out

    async def start(
        self, tp: TopicPartition, target: list[int] | None
    ) -> tuple[ErrorCode, str | None]:
        """Start (or, target None, cancel) reassigning `tp` to the target replicas."""
        fence = self.scope.require_active()
        ctx = self.ctx
        st = ctx.states.get(tp)
        if st is None or ctx.is_deleting(tp[0]):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown partition"
        if target is None:
            if tp not in ctx.reassigning:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment in progress"
            target = ctx.reassign_origin[tp]
        target = [int(b) for b in target]
        if not target or len(set(target)) != len(target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty or duplicate replicas"
        unknown = [b for b in target if b not in ctx.live]
        if unknown:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown or dead brokers {unknown}"
        origin = ctx.reassign_origin.get(tp, ctx.replicas(tp))
        ta = ctx.topics[tp[0]]
        full = list(target) + [b for b in origin if b not in target]
        adding = [b for b in target if b not in origin]
        removing = [b for b in origin if b not in target]
        if not adding and not removing and ctx.replicas(tp) == target:
            ctx.reassigning.pop(tp, None)
            ctx.reassign_origin.pop(tp, None)
            return ErrorCode.NONE, None
        new_ta = TopicAssignment(
            ta.name,
            ta.topic_id,
            {**ta.partitions, tp[1]: full},
            {**ta.adding_replicas, tp[1]: adding},
            {**ta.removing_replicas, tp[1]: removing},
        )
        if not adding:
            new_ta.adding_replicas.pop(tp[1])
        if not removing:
            new_ta.removing_replicas.pop(tp[1])
        new_ta.zk_version = await self.scope.store.set_topic_assignment(fence, new_ta)
        ctx.topics[tp[0]] = new_ta
        ctx.reassigning[tp] = target
        ctx.reassign_origin[tp] = origin
        # Bump the leader epoch so every replica, new ones included, learns the new set.
        written = await self._write_states(
            {tp: election.LeaderAndIsr(st.leader, st.leader_epoch + 1, list(st.isr))}
        )
        batch = self.scope.new_batch()
        batch.add_leader_and_isr_for_replicas(written, is_new=False)
        for wtp in written:  # Kafka's NewReplica: created even while a log dir is offline there
            batch.add_leader_and_isr(adding, wtp, is_new=True)
        batch.add_update_metadata(ctx.live, written)
        self.scope.send_batch(batch)
        await self.maybe_complete(tp)
        return ErrorCode.NONE, None

    async def maybe_complete(self, tp: TopicPartition) -> None:
        """Once the target replicas are all in the ISR: lead from one, drop the others."""
        fence = self.scope.require_active()
        ctx = self.ctx
        target = ctx.reassigning.get(tp)
        st = ctx.states.get(tp)
        if target is None or st is None:
            return
        if not all(b in st.isr for b in target):
            return  # new replicas still catching up; AlterPartition will bring us back
        live = ctx.usable_for(tp, ctx.electable_ids)
        if st.leader in target and st.leader in live:
            lai = election.LeaderAndIsr(
                st.leader, st.leader_epoch + 1, [b for b in st.isr if b in target]
            )
        else:
            result = election.reassignment_election(target, st.isr, live, st.leader_epoch)
            if isinstance(result, election.NoLeader):
                log.warning("reassignment of %s-%d waits: %s", tp[0], tp[1], result.reason)
                return
            lai = result
        written = await self._write_states({tp: lai})
        if tp not in written:
            return
        ta = ctx.topics[tp[0]]
        removed = [b for b in ta.partitions.get(tp[1], []) if b not in target]
        new_ta = TopicAssignment(
            ta.name,
            ta.topic_id,
            {**ta.partitions, tp[1]: list(target)},
            dict(ta.adding_replicas),
            dict(ta.removing_replicas),
        )
        new_ta.adding_replicas.pop(tp[1], None)
        new_ta.removing_replicas.pop(tp[1], None)
        new_ta.zk_version = await self.scope.store.set_topic_assignment(fence, new_ta)
        ctx.topics[tp[0]] = new_ta
        ctx.reassigning.pop(tp, None)
        ctx.reassign_origin.pop(tp, None)
        batch = self.scope.new_batch()
        batch.add_leader_and_isr_for_replicas(written)
        for b in removed:
            batch.add_stop_replica([b], tp, delete=True)
        batch.add_update_metadata(ctx.live, written)
        self.scope.send_batch(batch)
        log.info("controller: reassignment of %s-%d to %s complete", tp[0], tp[1], target)
        if tp in ctx.reassign_from_znode:
            ctx.reassign_from_znode.discard(tp)
            if not ctx.reassign_from_znode:
                await self.scope.store.delete_reassignment_request(fence)

    async def on_reassign_znode(self) -> None:
        """/admin/reassign_partitions changed: start the reassignments newly asked for."""
        self.scope.require_active()
        requested = await self.scope.store.get_partition_reassignments()
        for tp, target in sorted(requested.items()):
            if tp in self._znode_seen:
                continue
            self._znode_seen.add(tp)
            self.ctx.reassign_from_znode.add(tp)
            code, msg = await self.start(tp, target)
            if code != ErrorCode.NONE or tp not in self.ctx.reassigning:
                self.ctx.reassign_from_znode.discard(tp)
        if requested and not self.ctx.reassign_from_znode:
            await self.scope.store.delete_reassignment_request(self.scope.require_active())
        if not requested:
            self._znode_seen.clear()
