"""AlterPartition: ISR changes asked for by partition leaders (KIP-497).

The leader proposes a new ISR against the partition epoch (zkVersion) it knows; the
controller checks it (leader, leader epoch, partition epoch, eligible replicas, broker
epochs), writes it conditionally, tells the brokers, and answers with the state now in
force. An ISR that grows to the whole target may complete a reassignment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafkarepl.controller import election
from kafkarepl.controller.context import TopicPartition
from kafkarepl.controller.partition_state import WriteStates
from kafkarepl.controller.scope import ControllerScope
from kafkarepl.errors import ErrorCode
from kafkarepl.zk.znodes import PartitionState, topic_id_from_uuid


class AlterPartitionHandler:
    def __init__(
        self,
        scope: ControllerScope,
        write_states: WriteStates,
        maybe_complete_reassignment: Callable[[TopicPartition], Awaitable[None]],
    ) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self._write_states = write_states
        self._maybe_complete_reassignment = maybe_complete_reassignment

    def _resolve_topic(self, entry: dict) -> tuple[str | None, Any]:
        name = entry.get("topic_name")
        tid = entry.get("topic_id")
        if name:
            return name, tid
        if tid is not None:
            text = topic_id_from_uuid(tid)
            for n, ta in self.ctx.topics.items():
                if ta.topic_id == text:
                    return n, tid
        return None, tid

    async def handle(self, body: dict) -> dict:
        """AlterPartition request body -> response body (v0-v3 fields)."""
        self.scope.require_active()
        ctx = self.ctx
        broker_id = body.get("broker_id", -1)
        broker_epoch = body.get("broker_epoch", -1)
        info = ctx.live.get(broker_id)
        if info is None or (broker_epoch != -1 and broker_epoch != info.epoch):
            return {
                "throttle_time_ms": 0,
                "error_code": int(ErrorCode.STALE_BROKER_EPOCH),
                "topics": [],
            }
        changes: dict[TopicPartition, election.LeaderAndIsr] = {}
        expected: dict[TopicPartition, int] = {}
        results: dict[TopicPartition, int] = {}
        order: list[tuple[dict, str | None, list[tuple[int, TopicPartition | None]]]] = []
        for entry in body.get("topics", []) or []:
            name, _ = self._resolve_topic(entry)
            parts: list[tuple[int, TopicPartition | None]] = []
            for part in entry.get("partitions", []) or []:
                p = part.get("partition_index", -1)
                tp = (name, p) if name is not None else None
                parts.append((p, tp))
                if tp is None or tp not in ctx.states:
                    continue
                code = self._check_alter_partition(broker_id, tp, part)
                if code != ErrorCode.NONE:
                    results[tp] = int(code)
                    continue
                st = ctx.states[tp]
                new_isr = self._requested_isr(part)
                if new_isr == st.isr:
                    results[tp] = 0  # a retry of an applied change: answer with the current state
                    continue
                changes[tp] = election.LeaderAndIsr(st.leader, st.leader_epoch, new_isr)
                expected[tp] = part.get("partition_epoch", -1)
            order.append((entry, name, parts))
        written = await self._write_states(changes)
        for tp in changes:
            results[tp] = 0 if tp in written else int(ErrorCode.INVALID_UPDATE_VERSION)
        if written:
            batch = self.scope.new_batch()
            batch.add_update_metadata(ctx.live, written)
            self.scope.send_batch(batch)
            for tp in written:
                if tp in ctx.reassigning:
                    await self._maybe_complete_reassignment(tp)
        out_topics = []
        for entry, name, parts in order:
            out_parts = []
            for p, tp in parts:
                if tp is None or tp not in ctx.states:
                    code = (
                        ErrorCode.UNKNOWN_TOPIC_ID
                        if name is None
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                    out_parts.append(self._alter_partition_result(p, int(code), None))
                    continue
                out_parts.append(
                    self._alter_partition_result(p, results.get(tp, 0), ctx.states[tp])
                )
            out = {"partitions": out_parts}
            if "topic_name" in entry:
                out["topic_name"] = entry["topic_name"]
            if "topic_id" in entry:
                out["topic_id"] = entry["topic_id"]
            out_topics.append(out)
        return {"throttle_time_ms": 0, "error_code": 0, "topics": out_topics}

    @staticmethod
    def _requested_isr(part: dict) -> list[int]:
        if part.get("new_isr_with_epochs"):
            return [int(b["broker_id"]) for b in part["new_isr_with_epochs"]]
        return [int(b) for b in part.get("new_isr", []) or []]

    def _check_alter_partition(self, broker_id: int, tp: TopicPartition, part: dict) -> ErrorCode:
        ctx = self.ctx
        st = ctx.states[tp]
        if st.leader != broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if part.get("leader_epoch", -1) != st.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if part.get("partition_epoch", -1) != st.zk_version:
            return ErrorCode.INVALID_UPDATE_VERSION
        new_isr = self._requested_isr(part)
        replicas = ctx.replicas(tp)
        if broker_id not in new_isr or len(set(new_isr)) != len(new_isr):
            return ErrorCode.INVALID_REQUEST
        added = [b for b in new_isr if b not in st.isr]
        for b in new_isr:
            if b not in replicas:
                return ErrorCode.INELIGIBLE_REPLICA
        for b in added:
            if b not in ctx.live or b in ctx.shutting_down:
                return ErrorCode.INELIGIBLE_REPLICA
        for b in part.get("new_isr_with_epochs") or []:
            epoch = b.get("broker_epoch", -1)
            if (
                epoch != -1
                and b["broker_id"] in ctx.live
                and epoch != ctx.live[b["broker_id"]].epoch
            ):
                return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.NONE

    @staticmethod
    def _alter_partition_result(p: int, code: int, st: PartitionState | None) -> dict:
        return {
            "partition_index": p,
            "error_code": code,
            "leader_id": st.leader if st and code == 0 else -1,
            "leader_epoch": st.leader_epoch if st and code == 0 else -1,
            "isr": list(st.isr) if st and code == 0 else [],
            "leader_recovery_state": 0,
            "partition_epoch": st.zk_version if st and code == 0 else -1,
        }
