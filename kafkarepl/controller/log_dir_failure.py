"""Replicas on failed log dirs (KIP-112; Kafka's onBrokerLogDirFailure).

A broker whose log dir fails notes it under /log_dir_event_notification; the controller
then sends it LeaderAndIsr for all its replicas, and those answered KAFKA_STORAGE_ERROR
are offline: they leave the ISRs, leaders move off them, and UpdateMetadata lists them
as offline replicas until the broker restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kafkarepl.controller.context import TopicPartition
from kafkarepl.controller.requests import RequestBatch
from kafkarepl.controller.scope import ControllerScope
from kafkarepl.errors import ErrorCode
from kafkarepl.zk.znodes import topic_id_to_uuid

log = logging.getLogger(__name__)

# PartitionStateMachine.elect_offline_and_shrink_isr
ElectOfflineAndShrinkIsr = Callable[
    [Iterable[TopicPartition] | None, RequestBatch | None], Awaitable[None]
]


class LogDirFailureHandler:
    def __init__(
        self,
        scope: ControllerScope,
        elect_offline_and_shrink_isr: ElectOfflineAndShrinkIsr,
    ) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self._elect_offline_and_shrink_isr = elect_offline_and_shrink_isr

    def leader_and_isr_callback(self, broker_id: int) -> Callable[[Any], Awaitable[None]]:
        """A LeaderAndIsr answer: partitions answered KAFKA_STORAGE_ERROR are on a failed
        log dir of that broker: its replicas there go offline (Kafka's
        replicasOnOfflineDirs), leaders move and the ISRs shrink."""
        async def on_response(result: Any) -> None:
            ctx = self.ctx
            if not self.scope.is_active() or not isinstance(result, dict) or broker_id not in ctx.live:
                return
            failed: set[TopicPartition] = set()
            errored = [t for t in result.get("topics") or []
                       if any(e.get("error_code") == ErrorCode.KAFKA_STORAGE_ERROR for e in t.get("partition_errors") or [])]
            if errored:  # rare: the topic-id map is built only then (every ISR change gets an answer)
                ids = {t.get("topic_id") for t in errored}
                names = {u: t for t, ta in ctx.topics.items() if ta.topic_id
                         and (u := topic_id_to_uuid(ta.topic_id)) in ids}
                for t in errored:
                    name = names.get(t.get("topic_id"))
                    for e in t.get("partition_errors") or []:
                        topic = e.get("topic_name") or name
                        if topic is not None and e.get("error_code") == ErrorCode.KAFKA_STORAGE_ERROR:
                            failed.add((topic, e["partition_index"]))
            for e in result.get("partition_errors") or []:  # versions before 5
                if e.get("error_code") == ErrorCode.KAFKA_STORAGE_ERROR:
                    failed.add((e["topic_name"], e["partition_index"]))
            known = ctx.offline_replicas.setdefault(broker_id, set())
            new = failed - known
            if not new:
                return
            known |= new
            log.warning("controller: replicas of broker %d on a failed log dir: %s", broker_id,
                        ",".join(f"{t}-{p}" for t, p in sorted(new)))
            tps = [tp for tp in new if tp in ctx.states]
            batch = self.scope.new_batch()
            await self._elect_offline_and_shrink_isr(tps, batch)
            batch.add_update_metadata(ctx.live, tps)  # offline_replicas, even if nothing else changed
            self.scope.send_batch(batch)

        return on_response

    async def on_log_dir_event(self) -> None:
        """/log_dir_event_notification: a broker's log dir failed. Ask that broker about
        all its replicas (LeaderAndIsr); its KAFKA_STORAGE_ERROR answers say which went
        offline (leader_and_isr_callback)."""
        self.scope.require_active()
        ctx = self.ctx
        brokers = await self.scope.store.take_log_dir_events()
        batch = self.scope.new_batch()
        for b in sorted(brokers):
            if b in ctx.live:
                log.info("controller: broker %d reported a log dir failure", b)
                for tp in ctx.partitions_on_broker(b):
                    if tp in ctx.states:
                        batch.add_leader_and_isr([b], tp)
        self.scope.send_batch(batch)
