"""InitProducerId for idempotent producers: ids handed out from blocks this broker claims
in ZooKeeper (/latest_producer_id_block), as Kafka's ZooKeeper mode does."""

from __future__ import annotations

import asyncio
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import Request
from kafkarepl.server.zk_guard import GuardedStore


class ProducerIdManager:
    def __init__(self, broker_id: int, store: GuardedStore) -> None:
        self.broker_id = broker_id
        self.store = store
        self._block: tuple[int, int] | None = None  # (next, end)
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._block is None or self._block[0] > self._block[1]:
                self._block = await self.store.allocate_producer_id_block(self.broker_id)
            pid = self._block[0]
            self._block = (pid + 1, self._block[1])
            return pid

    async def init_producer_id(self, req: Request) -> dict[str, Any]:
        def answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": pid, "producer_epoch": epoch}

        if req.body.get("transactional_id") is not None:
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        try:
            return answer(ErrorCode.NONE, await self.next_id(), 0)
        except KafkaError as exc:
            return answer(exc.code)
