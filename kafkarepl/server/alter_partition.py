"""AlterPartitionManager: ISR changes proposed by this broker's leaders, sent to the
controller in batches (one AlterPartition in flight; what arrives meanwhile goes in the
next), carrying this broker's registration epoch so a controller can refuse a zombie.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ZERO_UUID, ApiKey
from kafkarepl.replication import IsrChange, IsrChangeResult, TopicPartition
from kafkarepl.server.controller_channel import ControllerChannel

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 1
RETRY_BACKOFF_S = 0.1
LOG_BATCHES_FROM = 100  # partitions: large ISR changes (a broker back) get a log line

Callback = Callable[[IsrChangeResult], None]


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        channel: ControllerChannel,
        topic_id: Callable[[str], uuid.UUID | None],
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.channel = channel
        self.topic_id = topic_id
        self._pending: dict[TopicPartition, tuple[IsrChange, Callback]] = {}
        self._task: asyncio.Future | None = None

    def submit(self, tp: TopicPartition, change: IsrChange, callback: Callback) -> None:
        self._pending[tp] = (change, callback)  # a newer proposal replaces an unsent one
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, {}
            started = time.monotonic()
            try:
                resp = await self.channel.send(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, self._body(batch))
            except Exception as exc:  # noqa: BLE001 - every item learns it failed; leaders retry
                log.info("AlterPartition for %d partitions failed: %r", len(batch), exc)
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.NETWORK_EXCEPTION
                for _change, callback in batch.values():
                    callback(IsrChangeResult(code))
                await asyncio.sleep(RETRY_BACKOFF_S)  # the controller is moving or unreachable
                continue
            if len(batch) >= LOG_BATCHES_FROM:
                log.info("AlterPartition for %d partitions answered in %.0f ms", len(batch),
                         (time.monotonic() - started) * 1000)
            self._deliver(batch, resp)

    def _body(self, batch: dict[TopicPartition, tuple[IsrChange, Callback]]) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, (change, _cb) in batch.items():
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition,
                "leader_epoch": change.leader_epoch,
                "new_isr": list(change.new_isr),
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in change.new_isr],
                "leader_recovery_state": 0,
                "partition_epoch": change.partition_epoch,
            })
        return {
            "broker_id": self.broker_id,
            "broker_epoch": self.broker_epoch(),
            "topics": [
                {"topic_name": t, "topic_id": self.topic_id(t) or ZERO_UUID, "partitions": ps}
                for t, ps in by_topic.items()
            ],
        }

    @staticmethod
    def _deliver(batch: dict[TopicPartition, tuple[IsrChange, Callback]], resp: dict[str, Any]) -> None:
        top = ErrorCode(resp.get("error_code", 0))
        answers: dict[TopicPartition, dict[str, Any]] = {}
        for t in resp.get("topics") or []:
            for p in t["partitions"]:
                answers[TopicPartition(t.get("topic_name") or "", p["partition_index"])] = p
        for tp, (_change, callback) in batch.items():
            p = answers.get(tp)
            if top is not ErrorCode.NONE or p is None:
                callback(IsrChangeResult(top if top is not ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR))
            elif p["error_code"]:
                callback(IsrChangeResult(ErrorCode(p["error_code"])))
            else:
                callback(IsrChangeResult(ErrorCode.NONE, tuple(p["isr"]), p["partition_epoch"]))
