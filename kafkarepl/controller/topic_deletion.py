"""Deleting topics (Kafka's TopicDeletionManager).

A topic marked under /admin/delete_topics is deleted replica by replica: every live
replica gets StopReplica(delete); replicas on dead brokers wait until their broker comes
back. When every replica has confirmed, the topic's znodes go and the controller forgets
the topic.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kafkarepl.controller.config import as_bool
from kafkarepl.controller.context import TopicDeletion, TopicPartition
from kafkarepl.controller.scope import ControllerScope

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(
        self,
        scope: ControllerScope,
        config: Mapping[str, Any],
        forget_topic: Callable[[str], None],
    ) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self.config = config
        self._forget_topic = forget_topic

    async def on_delete_topics_change(self) -> None:
        """/admin/delete_topics changed: start deleting the topics newly marked."""
        fence = self.scope.require_active()
        names = await self.scope.store.get_topics_to_delete()
        for name in names:
            if name in self.ctx.deleting:
                continue
            if not as_bool(self.config["delete.topic.enable"]):
                log.warning("delete.topic.enable=false: ignoring deletion of %s", name)
                await self.scope.store.remove_deletion_marker(fence, name)
                continue
            await self.start(name)

    async def start(self, name: str) -> None:
        fence = self.scope.require_active()
        ctx = self.ctx
        if name in ctx.deleting:
            return
        if name not in ctx.topics:
            await self.scope.store.remove_deletion_marker(fence, name)
            return
        log.info("controller: deleting topic %s", name)
        deletion = TopicDeletion()
        ctx.deleting[name] = deletion
        for tp in ctx.partitions_of(name):
            for b in ctx.replicas(tp):
                deletion.ineligible.add((tp[1], b))
            ctx.reassigning.pop(tp, None)
            ctx.reassign_origin.pop(tp, None)
        batch = self.scope.new_batch()
        batch.add_update_metadata(ctx.live, ctx.partitions_of(name))  # leader -2: forget it
        self.scope.send_batch(batch)
        await self.resume(name)

    async def resume(self, name: str) -> None:
        """Send StopReplica(delete) to every live replica not yet confirmed."""
        ctx = self.ctx
        deletion = ctx.deleting.get(name)
        if deletion is None:
            return
        batch = self.scope.new_batch()
        for p, b in sorted(deletion.ineligible):
            if b in ctx.live:
                deletion.ineligible.discard((p, b))
                deletion.pending.add((p, b))
                batch.add_stop_replica([b], (name, p), delete=True)
        self.scope.send_batch(batch)
        await self.maybe_complete(name)

    def on_brokers_failed(self, dead: set[int]) -> None:
        """Replicas awaiting StopReplica on dead brokers wait for their broker's return."""
        for deletion in self.ctx.deleting.values():
            for pb in list(deletion.pending):
                if pb[1] in dead:
                    deletion.pending.discard(pb)
                    deletion.ineligible.add(pb)

    def stop_replica_callback(
        self, broker_id: int, parts: dict[TopicPartition, bool]
    ) -> Callable[[Any], Awaitable[None]]:
        """A StopReplica answer (or the send's exception): the replicas it confirms are
        deleted; the others are retried when their broker next comes up."""
        async def on_response(result: Any) -> None:
            ctx = self.ctx
            if not self.scope.is_active():
                return
            errors: dict[TopicPartition, int] = {}
            if isinstance(result, dict):
                top = result.get("error_code", 0)
                for e in result.get("partition_errors", []) or []:
                    errors[(e["topic_name"], e["partition_index"])] = e.get("error_code", 0) or top
                for tp in parts:
                    errors.setdefault(tp, top)
            touched = set()
            for tp, delete in parts.items():
                deletion = ctx.deleting.get(tp[0])
                if not delete or deletion is None or (tp[1], broker_id) not in deletion.pending:
                    continue
                deletion.pending.discard((tp[1], broker_id))
                if isinstance(result, dict) and errors.get(tp, 0) == 0:
                    deletion.done.add((tp[1], broker_id))
                else:
                    deletion.ineligible.add((tp[1], broker_id))
                touched.add(tp[0])
            for name in sorted(touched):
                await self.maybe_complete(name)

        return on_response

    async def maybe_complete(self, name: str) -> None:
        fence = self.scope.require_active()
        deletion = self.ctx.deleting.get(name)
        if deletion is None or deletion.pending or deletion.ineligible:
            return
        await self.scope.store.delete_topic_znodes(fence, name)
        log.info("controller: topic %s deleted", name)
        self._forget_topic(name)
