"""Client quotas applied to requests (the request layer's side of
server/client_quotas.py), as Kafka's KafkaApis does:

- Produce: the request's bytes count; it is served either way; over the quota its answer
  carries the throttle time.
- Fetch (consumers only; replication has its own throttles): one response carries at
  most the quota's padded window; its bytes count; over the quota the answer is empty
  (its bytes not counted) and carries the throttle time.
- Request time (request_percentage, KIP-124): the time the loop spends in the steps of a
  client's request handlers, decoding its requests and encoding their answers
  (server/request_cost.py) counts, for every API but the handshake and the requests
  between brokers; over the quota the answer carries the throttle time (the larger one
  when a byte quota throttles it too).
- Partition mutations (controller_mutation_rate, KIP-599): CreateTopics, CreatePartitions
  and DeleteTopics take their partitions from a token bucket (see mutations()).
- The connection then reads no request for the throttle time (KIP-219), and its quota'd
  requests already read wait it out in order. Clients of versions before KIP-219
  (Produce < 6, Fetch < 8) do not wait on their own, so their answer itself is held back
  for that long.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey, Request
from kafkarepl.server.client_quotas import FETCH, MUTATION, PRODUCE, REQUEST, ClientQuotas
from kafkarepl.server.request_cost import current_cost

# First versions whose clients wait out throttle_time_ms themselves (KIP-219).
CLIENT_THROTTLES_PRODUCE = 6
CLIENT_THROTTLES_FETCH = 8
_PARTITION_OVERHEAD = 48  # bytes of a fetched partition's fields besides its records (about)
# Never throttled for request time: the handshake, and requests between brokers (Kafka
# exempts cluster actions; follower fetches and KIP-890 verification are checked below).
EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.LEADER_AND_ISR,
                    ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
                    ApiKey.ALTER_PARTITION, ApiKey.WRITE_TXN_MARKERS})


# The partition mutations of controller_mutation_rate (KIP-599): API -> (the request's
# topic list, the response's, the first version whose quota is strict).
MUTATIONS = {ApiKey.CREATE_TOPICS: ("topics", "topics", 6), ApiKey.CREATE_PARTITIONS: ("topics", "results", 3),
             ApiKey.DELETE_TOPICS: ("topics", "responses", 5)}
_QUOTA_EXCEEDED = "The throttling quota has been exceeded."

# (topic name or None, topic id or None) -> its partitions in this broker's metadata (0: unknown)
TopicPartitions = Callable[[str | None, Any], int]


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


class _Timed:
    """Awaits a coroutine, adding up the time its steps run (not the time it waits)."""

    __slots__ = ("_coro", "elapsed")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.elapsed = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        it = self._coro.__await__()
        send: Callable[[Any], Any] = it.send
        value: Any = None
        while True:
            t0 = time.perf_counter()
            try:
                yielded = send(value)
            except StopIteration as stop:
                return stop.value
            finally:
                self.elapsed += time.perf_counter() - t0
            try:
                value, send = (yield yielded), it.send
            except GeneratorExit:
                self._coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - e.g. a cancellation: passed in
                value, send = exc, it.throw


def _exempt(req: Request) -> bool:
    """From the request-time quota: also Produce with acks=0, as Kafka (no answer to carry it)."""
    k = req.api_key
    return (k in EXEMPT or (k == ApiKey.FETCH and req.body.get("replica_id", -1) >= 0)
            or (k == ApiKey.ADD_PARTITIONS_TO_TXN and req.api_version >= 4)
            or (k == ApiKey.PRODUCE and req.body.get("acks") == 0))


class ClientQuotaGate:
    def __init__(self, quotas: ClientQuotas, topic_partitions: TopicPartitions | None = None,
                 default_partitions: int = 1) -> None:
        self.quotas = quotas
        self.topic_partitions: TopicPartitions = topic_partitions or (lambda _name, _tid: 0)
        self.default_partitions = default_partitions  # num.partitions: a CreateTopics with -1

    @property
    def active(self) -> bool:
        """Whether any quota is configured (otherwise requests skip the gate)."""
        return self.quotas.active

    def record_network(self, account: tuple[str, str], seconds: float) -> None:
        """Time the connection spent on a request outside its handler (encoding the
        answer): counted against the request-time quota, throttling the next request."""
        self.quotas.record_only(REQUEST, account[0], account[1], seconds * 100)

    async def serve(self, req: Request, conn: Throttleable, serve: Callable[[Request], Awaitable[Any]]) -> Any:
        """Every request: the byte quotas of Produce and Fetch, the request-time quota of all."""
        q = self.quotas
        if not q.active:
            return await serve(req)
        user, client_id, k = quota_user(conn.principal), req.client_id or "", req.api_key
        work: Coroutine[Any, Any, Any] | None = None
        if k == ApiKey.PRODUCE:
            if conn.quota_tail is not None or q.quota(PRODUCE, user, client_id) is not None:
                work = self.produce(req, conn, serve)
        elif k == ApiKey.FETCH:
            if q.quota(FETCH, user, client_id) is not None:
                work = self.fetch(req, conn, serve)
        elif k in MUTATIONS:
            if q.quota(MUTATION, user, client_id) is not None:
                work = self.mutations(req, conn, serve)
        if _exempt(req) or q.quota(REQUEST, user, client_id) is None:
            return await (serve(req) if work is None else work)
        if work is None:
            work = _awaited(serve(req))
        timed, cost = _Timed(work), current_cost()
        try:
            result = await timed
        finally:
            spent = timed.elapsed
            if cost is not None:  # decoding it; encoding the answer is counted by the connection
                spent += cost.network_s
                cost.network_s, cost.account = 0.0, (user, client_id)
            throttle = self.quotas.record(REQUEST, user, client_id, spent * 100)
            if throttle:
                conn.throttle(throttle)
        if throttle and isinstance(result, dict) and "throttle_time_ms" in result:
            result["throttle_time_ms"] = max(result["throttle_time_ms"], throttle)
        return result

    async def produce(self, req: Request, conn: Throttleable,
                      serve: Callable[[Request], Awaitable[Any]]) -> Any:
        """For a client with a produce quota, or on a connection already taking turns."""
        user, client_id = quota_user(conn.principal), req.client_id or ""
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
        if b.get("replica_id", -1) >= 0:  # replication has its own throttles
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


    def _mutated(self, key: ApiKey, t: dict[str, Any]) -> int:
        """Partitions a topic entry of CreateTopics / CreatePartitions / DeleteTopics
        creates or deletes."""
        if key == ApiKey.CREATE_TOPICS:
            n = len(t.get("assignments") or []) or t.get("num_partitions", -1)
            return n if n > 0 else self.default_partitions
        if key == ApiKey.CREATE_PARTITIONS:
            return max(0, t.get("count", 0) - self.topic_partitions(t.get("name"), None))
        return self.topic_partitions(t.get("name"), t.get("topic_id"))

    async def mutations(self, req: Request, conn: Throttleable,
                        serve: Callable[[Request], Awaitable[Any]]) -> Any:
        """controller_mutation_rate (KIP-599): each topic takes its partitions from the
        client's bucket; with the strict versions a topic asked for while the bucket is
        empty is answered THROTTLING_QUOTA_EXCEEDED, not served. The answer carries the
        time until the bucket is back to 0, and the connection is muted that long."""
        b = req.body
        bucket = self.quotas.mutation_bucket(quota_user(conn.principal), req.client_id or "")
        if bucket is None:
            return await serve(req)
        topics_key, results_key, strict_from = MUTATIONS[req.api_key]
        if req.api_key == ApiKey.DELETE_TOPICS and req.api_version < 6:  # topic names only
            entries: list[dict[str, Any]] = [{"name": n} for n in b.get("topic_names") or []]
        else:
            entries = list(b.get(topics_key) or [])
        strict = req.api_version >= strict_from
        now = self.quotas.clock_ms()
        kept, refused = [], []
        for t in entries:
            if strict and bucket.exceeded(now):
                refused.append(t)
                continue
            kept.append(t)
            if not b.get("validate_only", False):
                bucket.take(self._mutated(req.api_key, t), now)
        if refused:
            if req.api_key == ApiKey.DELETE_TOPICS and req.api_version < 6:
                b["topic_names"] = [t["name"] for t in kept]
            else:
                b[topics_key] = kept
        result = await serve(req)
        throttle = bucket.throttle_ms(self.quotas.clock_ms())
        if result is None:
            return None
        code = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        for t in refused:
            row: dict[str, Any] = {"name": t.get("name"), "error_code": code, "error_message": _QUOTA_EXCEEDED}
            if req.api_key == ApiKey.CREATE_TOPICS:
                row.update(num_partitions=-1, replication_factor=-1, configs=None)
            elif req.api_key == ApiKey.DELETE_TOPICS and t.get("topic_id") is not None:
                row["topic_id"] = t["topic_id"]
            result[results_key].append(row)
        if throttle:
            self.quotas.note_throttle(MUTATION, throttle)
            conn.throttle(throttle)
            result["throttle_time_ms"] = max(result.get("throttle_time_ms", 0), throttle)
        return result


async def _throttle(conn: Throttleable, ms: int, hold_answer: bool) -> None:
    conn.throttle(ms)
    if hold_answer:
        await asyncio.sleep(ms / 1000)


async def _awaited(work: Awaitable[Any]) -> Any:
    return await work
