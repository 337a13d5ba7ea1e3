"""Controlled shutdown: a broker about to stop asks the controller to move its
leaderships away first (Kafka's ControlledShutdown request).

The broker is marked shutting down (no longer electable, nor added to an ISR); each
partition it leads gets another ISR member as leader; where it follows, it
leaves the ISR and its replica stops (StopReplica without delete). The answer lists the
partitions it still leads; the broker retries until none is left.
"""

from __future__ import annotations

from kafkarepl.controller import election
from kafkarepl.controller.context import TopicPartition
from kafkarepl.controller.partition_state import WriteStates
from kafkarepl.controller.scope import ControllerScope
from kafkarepl.errors import ErrorCode


class ControlledShutdown:
    def __init__(self, scope: ControllerScope, write_states: WriteStates) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self._write_states = write_states

    async def handle(self, body: dict) -> dict:
        """ControlledShutdown request body -> response body."""
        self.scope.require_active()
        ctx = self.ctx
        b = body.get("broker_id", -1)
        epoch = body.get("broker_epoch", -1)
        if b not in ctx.live:
            return {"error_code": int(ErrorCode.BROKER_NOT_AVAILABLE), "remaining_partitions": []}
        if epoch != -1 and epoch != ctx.live[b].epoch:
            return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH), "remaining_partitions": []}
        ctx.shutting_down.add(b)
        live = ctx.live_ids
        changes: dict[TopicPartition, election.LeaderAndIsr] = {}
        followers: list[TopicPartition] = []
        for tp in ctx.partitions_on_broker(b):
            st = ctx.states.get(tp)
            if st is None or ctx.is_deleting(tp[0]):
                continue
            replicas = ctx.replicas(tp)
            if st.leader == b:
                if len(replicas) > 1:
                    r = election.controlled_shutdown_election(
                        replicas, st.isr, ctx.usable_for(tp, live), st.leader_epoch, ctx.shutting_down
                    )
                    if isinstance(r, election.LeaderAndIsr):
                        changes[tp] = r
            elif b in st.isr:
                changes[tp] = election.LeaderAndIsr(
                    st.leader, st.leader_epoch + 1, [x for x in st.isr if x != b]
                )
                followers.append(tp)
        written = await self._write_states(changes)
        batch = self.scope.new_batch()
        batch.add_leader_and_isr_for_replicas(written)
        for tp in followers:
            if tp in written:
                batch.add_stop_replica([b], tp, delete=False)
        batch.add_update_metadata(ctx.live, written)
        self.scope.send_batch(batch)
        remaining = [
            {"topic_name": tp[0], "partition_index": tp[1]}
            for tp in ctx.partitions_on_broker(b)
            if tp in ctx.states and ctx.states[tp].leader == b and len(ctx.replicas(tp)) > 1
        ]
        return {"error_code": 0, "remaining_partitions": remaining}
