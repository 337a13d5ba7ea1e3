"""The ZooKeeper store as the request layer sees it: ZooKeeper trouble (connection loss,
session expiry) becomes a retriable Kafka error the handler answers with, never a
closed connection."""

from __future__ import annotations

import asyncio
from typing import Any

from kazoo.exceptions import KazooException

from kafkarepl.errors import ErrorCode, KafkaError


class GuardedStore:
    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return await attr(*args, **kwargs)
            except (KazooException, ConnectionError) as exc:
                raise KafkaError(f"ZooKeeper unavailable: {exc!r}", ErrorCode.REQUEST_TIMED_OUT) from None

        return call
