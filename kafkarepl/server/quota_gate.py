"""Client byte-rate quotas applied to Produce and consumer Fetch requests (the request
layer's side of server/client_quotas.py), as Kafka's KafkaApis does:

- Produce: the request's bytes count; it is served either way; over the quota its answer
  carries the throttle time.
- Fetch (consumers only; replication has its own throttles): one response carries at
  most the quota's padded window; its bytes count; over the quota the answer is empty
  (its bytes not counted) and carries the throttle time.
- The connection then reads no request for the throttle time (KIP-219), and its quota'd
  requests already read wait it out in order. Clients of
  versions before KIP-219 (Produce < 6, Fetch < 8) do not wait on their own, so their
  answer itself is held back for that long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kafkarepl.protocol import Request
from kafkarepl.server.client_quotas import FETCH, PRODUCE, ClientQuotas

# First versions whose clients wait out throttle_time_ms themselves (KIP-219).
CLIENT_THROTTLES_PRODUCE = 6
CLIENT_THROTTLES_FETCH = 8
_PARTITION_OVERHEAD = 48  # bytes of a fetched partition's fields besides its records (about)


class Throttleable(Protocol):
    principal: str
    quota_tail: asyncio.Future | None  # the turn of the connection's last quota'd request

    def throttle(self, ms: int) -> None: ...

    def muted_for(self) -> float: ...


async def _take_turn(conn: Throttleable) -> asyncio.Future:
    """Waits for the connection's earlier quota'd requests to be started, then for its
    throttle to end: a request read before the throttle began (pipelined) waits it out
    too, as in Kafka, which reads one request of a connection at a time. The turns keep
    the requests' order (a producer's sequence numbers). Pass it on with `.set_result`."""
    prev, mine = conn.quota_tail, asyncio.get_running_loop().create_future()
    conn.quota_tail = mine
    try:
        if prev is not None and not prev.done():
            await prev
        wait = conn.muted_for()
        if wait > 0:
            await asyncio.sleep(wait)
    except BaseException:
        mine.set_result(None)
        raise
    return mine


async def _started(turn: asyncio.Future, work: Awaitable[Any]) -> Any:
    """Starts `work`, passes the turn on once it has started (its first step runs before
    the next request's), and returns its result."""
    task = asyncio.ensure_future(work)
    turn.set_result(None)
    return await task


def quota_user(principal: str) -> str:
    """The quota entity's user: the principal's name ("User:alice" -> "alice")."""
    return principal.partition(":")[2] or principal


def fetch_response_bytes(body: dict[str, Any]) -> int:
    return sum(len(p["records"]) + _PARTITION_OVERHEAD for t in body["responses"] for p in t["partitions"])


class ClientQuotaGate:
    def __init__(self, quotas: ClientQuotas) -> None:
        self.quotas = quotas

    async def produce(self, req: Request, conn: Throttleable,
                      serve: Callable[[Request], Awaitable[Any]]) -> Any:
        if not self.quotas.active:
            return await serve(req)
        user, client_id = quota_user(conn.principal), req.client_id or ""
        if conn.quota_tail is None and self.quotas.quota(PRODUCE, user, client_id) is None:
            return await serve(req)  # never throttled on this connection: no turns needed
        turn = await _take_turn(conn)
        throttle = self.quotas.record(PRODUCE, user, client_id, req.size)
        if throttle:  # before the turn passes: the next request waits it out
            conn.throttle(throttle)
        result = await _started(turn, serve(req))
        if throttle:
            if req.api_version < CLIENT_THROTTLES_PRODUCE:
                await asyncio.sleep(throttle / 1000)
            if result is not None:  # acks=0 has no answer: the mute alone slows it
                result["throttle_time_ms"] = throttle
        return result

    async def fetch(self, req: Request, conn: Throttleable,
                    serve: Callable[[Request], Awaitable[Any]]) -> Any:
        b = req.body
        if not self.quotas.active or b.get("replica_id", -1) >= 0:
            return await serve(req)
        user, client_id = quota_user(conn.principal), req.client_id or ""
        window = self.quotas.max_bytes_in_window(FETCH, user, client_id)
        if window is None:
            return await serve(req)
        b["max_bytes"] = min(b.get("max_bytes", window), window)
        result = await _started(await _take_turn(conn), serve(req))
        size = fetch_response_bytes(result)
        throttle = self.quotas.record(FETCH, user, client_id, size)
        if not throttle:
            return result
        self.quotas.unrecord(FETCH, user, client_id, size)
        await _throttle(conn, throttle, req.api_version < CLIENT_THROTTLES_FETCH)
        return {"throttle_time_ms": throttle, "error_code": 0, "session_id": 0, "responses": []}


async def _throttle(conn: Throttleable, ms: int, hold_answer: bool) -> None:
    conn.throttle(ms)
    if hold_answer:
        await asyncio.sleep(ms / 1000)
