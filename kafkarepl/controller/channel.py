"""How the controller talks to brokers: LeaderAndIsr, UpdateMetadata, StopReplica.

`BrokerChannel` is the interface the controller is given. Requests to one broker are
delivered in the order `send` was called (the controller relies on that: a later
LeaderAndIsr must not overtake an earlier one), and `send` keeps retrying until it has
a response or the broker leaves the set given to `set_brokers` (BrokerGoneError).

`NetworkBrokerChannel` is the real one: one connection and one FIFO queue per broker,
over kafkarepl.client.BrokerConnection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

log = logging.getLogger(__name__)

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6

# The versions of the controller -> broker requests (Kafka's ZooKeeper-mode ones).
API_VERSIONS = {LEADER_AND_ISR: 5, STOP_REPLICA: 3, UPDATE_METADATA: 7}


class BrokerGoneError(Exception):
    """The broker left the cluster (or the channel closed) before answering."""


class BrokerChannel(Protocol):
    def set_brokers(self, brokers: dict[int, tuple[str, int]]) -> None: ...

    async def send(self, broker_id: int, api_key: int, body: dict) -> dict: ...

    async def close(self) -> None: ...


class _BrokerQueue:
    def __init__(self, broker_id: int, address: tuple[str, int]) -> None:
        self.broker_id = broker_id
        self.address = address
        self.queue: asyncio.Queue[tuple[int, dict, asyncio.Future]] = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.conn: Any = None
        self.current: asyncio.Future | None = None  # the request being delivered


class NetworkBrokerChannel:
    """One connection + queue per broker; retries with backoff until the broker is gone."""

    def __init__(
        self,
        client_id: str = "controller",
        retry_backoff_s: float = 0.1,
        max_backoff_s: float = 1.0,
        on_connection_lost: Any = None,
        security: Any = None,
    ) -> None:
        self.client_id = client_id
        self.security = security  # ssl.SSLContext of an SSL inter-broker listener
        self.on_connection_lost = on_connection_lost  # broker id -> None: it may be dead
        self.retry_backoff_s = retry_backoff_s
        self.max_backoff_s = max_backoff_s
        self._brokers: dict[int, _BrokerQueue] = {}
        self._closed = False

    def set_brokers(self, brokers: dict[int, tuple[str, int]]) -> None:
        for bid in list(self._brokers):
            if bid not in brokers or self._brokers[bid].address != tuple(brokers[bid]):
                self._remove(bid)
        for bid, addr in brokers.items():
            if bid not in self._brokers:
                host, port = addr
                bq = _BrokerQueue(bid, (host, port))
                bq.task = asyncio.get_running_loop().create_task(self._worker(bq))
                self._brokers[bid] = bq

    def _remove(self, bid: int) -> None:
        bq = self._brokers.pop(bid)
        if bq.task is not None:
            bq.task.cancel()
        self._close_conn(bq)
        gone = BrokerGoneError(f"broker {bid} is gone")
        if bq.current is not None and not bq.current.done():
            bq.current.set_exception(gone)
        while not bq.queue.empty():
            _, _, fut = bq.queue.get_nowait()
            if not fut.done():
                fut.set_exception(gone)

    async def send(self, broker_id: int, api_key: int, body: dict) -> dict:
        # Enqueued before the first await: per-broker order = call order.
        bq = self._brokers.get(broker_id)
        if bq is None or self._closed:
            raise BrokerGoneError(f"broker {broker_id} is not live")
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        bq.queue.put_nowait((api_key, body, fut))
        return await fut

    async def close(self) -> None:
        self._closed = True
        for bid in list(self._brokers):
            self._remove(bid)

    @staticmethod
    def _close_conn(bq: _BrokerQueue) -> None:
        if bq.conn is not None:
            try:
                result = bq.conn.close()
                if asyncio.iscoroutine(result):
                    asyncio.ensure_future(result)
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            bq.conn = None

    async def _worker(self, bq: _BrokerQueue) -> None:
        from kafkarepl.client import BrokerConnection  # the client layer, loaded lazily

        while True:
            api_key, body, fut = await bq.queue.get()
            bq.current = fut
            backoff = self.retry_backoff_s
            while not fut.done():
                try:
                    if bq.conn is not None and not bq.conn.connected:
                        # closed since its last request (the broker's connections.max.idle.ms):
                        # a new one, without the retry and liveness probe of a failed send
                        self._close_conn(bq)
                    if bq.conn is None:
                        conn = BrokerConnection(bq.address[0], bq.address[1], self.client_id,
                                                security=self.security)
                        await conn.connect()
                        bq.conn = conn
                    response = await bq.conn.send(api_key, API_VERSIONS[api_key], body)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - network errors: reconnect and retry
                    log.info("controller -> broker %d: %s; retrying", bq.broker_id, e)
                    self._close_conn(bq)
                    if self.on_connection_lost is not None:  # it probes: only a refusal counts
                        self.on_connection_lost(bq.broker_id)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.max_backoff_s)
                    continue
                if not fut.done():
                    fut.set_result(response)
            bq.current = None


class RecordingBrokerChannel:
    """Records every request and answers with success (tests, and a controller whose
    brokers are simulated). `responses` may map (broker_id, api_key) -> callable(body)."""

    def __init__(self) -> None:
        self.brokers: dict[int, tuple[str, int]] = {}
        self.sent: list[tuple[int, int, dict]] = []
        self.responders: dict[tuple[int, int], Any] = {}
        self.down: set[int] = set()

    def set_brokers(self, brokers: dict[int, tuple[str, int]]) -> None:
        self.brokers = dict(brokers)

    async def send(self, broker_id: int, api_key: int, body: dict) -> dict:
        if broker_id not in self.brokers or broker_id in self.down:
            raise BrokerGoneError(f"broker {broker_id} is not live")
        self.sent.append((broker_id, api_key, body))
        responder = self.responders.get((broker_id, api_key))
        if responder is not None:
            return responder(body)
        return success_response(api_key, body)

    async def close(self) -> None:
        pass

    def requests(
        self, api_key: int | None = None, broker_id: int | None = None
    ) -> list[tuple[int, dict]]:
        return [
            (b, body)
            for b, k, body in self.sent
            if (api_key is None or k == api_key) and (broker_id is None or b == broker_id)
        ]

    def clear(self) -> None:
        self.sent.clear()


def success_response(api_key: int, body: dict) -> dict:
    """The error-free response a broker gives to a controller request."""
    if api_key == STOP_REPLICA:
        return {
            "error_code": 0,
            "partition_errors": [
                {
                    "topic_name": t["topic_name"],
                    "partition_index": p["partition_index"],
                    "error_code": 0,
                }
                for t in body.get("topic_states", [])
                for p in t.get("partition_states", [])
            ],
        }
    if api_key == LEADER_AND_ISR:
        return {
            "error_code": 0,
            "topics": [
                {
                    "topic_id": t.get("topic_id"),
                    "partition_errors": [
                        {"partition_index": p["partition_index"], "error_code": 0}
                        for p in t["partition_states"]
                    ],
                }
                for t in body.get("topic_states", [])
            ],
        }
    return {"error_code": 0}
