"""ClusterClient.start on a started client keeps its live connection. A broker answers
Metadata with no broker before the controller's first UpdateMetadata (as Kafka), and the
Spark fetcher starts its client again while it knows no broker: every retry (0.1 s)
opened a new bootstrap connection and dropped the old one unclosed."""

from __future__ import annotations

import asyncio

from kafkarepl.client.cluster import ClusterClient


class _Conn:
    def __init__(self) -> None:
        self.connected = True
        self.closed = False

    def close(self) -> None:
        self.closed = self.connected = True


class _JustStarted(ClusterClient):
    """Its bootstrap broker has had no UpdateMetadata yet: Metadata lists no broker."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:1")
        self.opened: list[_Conn] = []
        self.asked = 0

    async def _open(self, host: str, port: int) -> _Conn:  # type: ignore[override]
        conn = _Conn()
        self.opened.append(conn)
        self._conns[(host, port)] = conn  # type: ignore[assignment]
        return conn

    async def metadata(self, topics=None, allow_auto_topic_creation=False) -> dict:  # type: ignore[no-untyped-def]
        self.asked += 1
        self.brokers, self.controller_id = {}, -1
        return {"brokers": [], "controller_id": -1, "topics": []}


def test_starting_again_reuses_the_live_connection() -> None:
    c = _JustStarted()

    async def run() -> None:
        for _ in range(20):  # the Spark fetcher's retries: `if not client.brokers: start()`
            await c.start()
            assert not c.brokers

    asyncio.run(run())
    assert len(c.opened) == 1 and c.asked == 20


def test_a_dead_connection_is_replaced() -> None:
    c = _JustStarted()
    asyncio.run(c.start())
    c.opened[0].connected = False
    asyncio.run(c.start())
    assert len(c.opened) == 2
