"""The broker's socket server: framing, in-order responses, sendfile for record bytes.

Each connection has a reader (splits frames, decodes headers, starts one handler task
per request so pipelined requests run concurrently, e.g. an acks=all produce waiting
in purgatory does not block a fetch behind it) and a writer that sends the responses
strictly in request order, as Kafka clients require. Record bytes of fetch responses
go file -> socket with sendfile, never through Python memory.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import functools
import logging
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kafkarepl import _core
from kafkarepl.aio import wait_event, with_timeout
from kafkarepl.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    UnsupportedVersionError,
)
from kafkarepl.protocol import (
    API,
    ApiKey,
    EncodeError,
    FileRange,
    Request,
    decode_request,
    encode_response,
)
from kafkarepl.protocol.audit import missing_fields
from kafkarepl.protocol.codec import EntryBudgetExceeded
from kafkarepl.protocol.error_counts import error_counts
from kafkarepl.server.listeners import Listener, set_current_listener
from kafkarepl.server.log_limit import LogLimiter
from kafkarepl.server.request_cost import CostSink, RequestCost, set_request_cost
from kafkarepl.server.request_metrics import RequestMetrics
from kafkarepl.server.sasl_session import SASL_APIS, SaslSession
from kafkarepl.server.ssl_principal import distinguished_name
from kafkarepl.storage.validation import DEFAULT_MAX_DECOMPRESSED_BYTES, request_budget

log = logging.getLogger(__name__)
# Tests set it to have every response checked for fields the handler left out.
_AUDIT = bool(os.environ.get("KAFKAREPL_AUDIT_RESPONSES"))

# A handler returns the response body, or None when no response is due (acks=0).
Handler = Callable[[Request, "Connection"], Awaitable[dict[str, Any] | None]]
UnsupportedVersionHandler = Callable[[UnsupportedVersionError], dict[str, Any] | None]

_READ_CHUNK = 256 * 1024  # most bytes asked of one recv
_SMALL_BUF = 16 * 1024  # per-connection read buffer: thousands of idle connections stay cheap
_MAX_PIPELINED = 64  # requests read ahead of their responses before reading pauses
_SEND_SLICE = 1 << 20  # an answer's bytes sent a slice at a time: its progress is seen
# A connection whose answer has got no byte out for this long, or whose request has been
# arriving this long, while the request memory pool is full is closed: the room it holds
# (requests pipelined behind the unread answer, the announced frame) is what every
# connection's next read waits for. A client's default request.timeout.ms: such a client
# has given up on that request anyway.
STALLED_ANSWER_S = 30.0
# queued.max.request.bytes: Kafka's default is -1 (unbounded); here 256 MiB, so request
# bytes read but not yet answered stay bounded whatever the clients do.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS_PER_IP = 2147483647  # Kafka's default
DEFAULT_MAX_REQUEST_ENTRIES = 1_000_000  # kafkarepl.max.request.entries
# What one decoded array entry is charged to the request memory pool: the decoded dict and
# what its handling builds (answer entry, lookups) take ~0.8 KiB here (an OffsetFetch of
# 4M partitions, 15 MiB on the wire, peaked at 3 GiB before this charge existed).
DECODED_ENTRY_BYTES = 1024
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600_000  # Kafka's default


class RequestMemoryPool:
    """queued.max.request.bytes: bytes of requests read and not yet answered, over all
    connections. A connection whose next frame does not fit waits before reading it
    (backpressure; its bytes stay in the kernel's socket buffer) until responses free
    room. A frame larger than the whole pool is let in when the pool is empty, so it
    cannot wait forever. limit <= 0: unbounded (Kafka's -1). While a frame waits,
    `on_pressure` is called every PRESSURE_CHECK_S (SocketServer: drop connections that
    hold room without reading their answers)."""

    PRESSURE_CHECK_S = 0.5

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Event()
        self.on_pressure: Callable[[], None] | None = None

    def _fits(self, size: int) -> bool:
        return self.limit <= 0 or self.used == 0 or self.used + size <= self.limit

    async def acquire(self, size: int) -> None:
        while not self._fits(size):
            self._freed.clear()
            if not await wait_event(self._freed, self.PRESSURE_CHECK_S) and self.on_pressure is not None:
                self.on_pressure()
        self.used += size

    def take(self, size: int) -> None:
        """Charge `size` without waiting (what a frame decoded into): the pool may go over
        its limit, and the next frame of any connection then waits until it is back under."""
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size
        self._freed.set()


class FrameError(Exception):
    """The peer sent a frame size we refuse; the connection is closed."""


class ConnectionClosing(Exception):
    """A request failed and no error response can be built for it: the connection is
    closed (after the responses before it), as Kafka does."""


class _Tls:
    """TLS over the connection's non-blocking socket through memory BIOs, so the
    event loop keeps driving the socket itself. Writes (ours and any the TLS layer makes
    while reading) go out under one lock: records of two writers never interleave."""

    HANDSHAKE_TIMEOUT_S = 10.0

    def __init__(self, ctx: ssl.SSLContext, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.sock, self.loop = sock, loop
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self._lock = asyncio.Lock()

    async def _flush(self) -> None:
        async with self._lock:
            data = self.outgoing.read()
            if data:
                await self.loop.sock_sendall(self.sock, data)

    async def _fill(self) -> None:
        data = await self.loop.sock_recv(self.sock, 256 * 1024)
        if not data:
            raise EOFError
        self.incoming.write(data)

    def principal(self, name_of: Callable[[str], str | None] | None) -> str | None:
        """User:<name> of a verified client certificate: its subject's RFC 2253 name,
        mapped by ssl.principal.mapping.rules (Kafka's default principal builder); None
        without a certificate. No matching rule fails the login, as Kafka."""
        cert: Any = self.obj.getpeercert() or {}
        if not cert.get("subject"):
            return None
        dn = distinguished_name(cert["subject"])
        name = name_of(dn) if name_of is not None else dn
        if name is None:
            raise ConnectionClosing(f"no ssl.principal.mapping.rules rule matches {dn!r}")
        return f"User:{name}"

    async def handshake(self) -> None:
        async def run() -> None:
            while True:
                try:
                    self.obj.do_handshake()
                    await self._flush()
                    return
                except ssl.SSLWantReadError:
                    await self._flush()
                    await self._fill()

        try:
            await with_timeout(run(), self.HANDSHAKE_TIMEOUT_S)
        except ssl.SSLError as exc:
            raise ConnectionClosing(f"TLS handshake failed: {exc}") from None
        except asyncio.TimeoutError:
            raise ConnectionClosing("TLS handshake timed out") from None

    async def recv_into(self, view: memoryview) -> int:
        while True:
            try:
                n = int(self.obj.read(len(view), view))  # with a buffer: the count read
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()
                continue
            except ssl.SSLZeroReturnError:
                raise EOFError from None
            except ssl.SSLError as exc:
                raise ConnectionClosing(f"TLS error: {exc}") from None
            if n == 0:
                raise EOFError
            return n

    async def sendall(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while view:
            n = self.obj.write(view[: 256 * 1024])
            view = view[n:]
            await self._flush()


# The codec thread: decodes of large request frames and encodes of large answers, whose
# cost a client controls (entries per request), run there rather than on the event loop.
# It holds the GIL while it works, but the interpreter hands the GIL over every switch
# interval (5 ms), so the loop keeps serving everyone else meanwhile.
_CODEC = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="request-codec")
_OFFLOAD_FRAME_BYTES = 64 * 1024  # ~4,000 partition entries: a few ms to decode
_OFFLOAD_PRODUCE_BYTES = 1 << 20  # a Produce's bytes are mostly record sets: cheap to decode
_OFFLOAD_ENTRIES = 1000  # answer entries (topics, partitions, ...) encoded on the loop at most


def _offload_decode(frame: bytearray) -> bool:
    if len(frame) <= _OFFLOAD_FRAME_BYTES:
        return False
    return int.from_bytes(frame[:2], "big") != ApiKey.PRODUCE or len(frame) > _OFFLOAD_PRODUCE_BYTES


def _decode_or_error(frame: memoryview, entry_budget: int | None = None) -> Request | UnsupportedVersionError:
    """The request, or the UnsupportedVersionError that is answered (other decode errors
    raise: the connection closes; EntryBudgetExceeded past `entry_budget`)."""
    try:
        return decode_request(frame, entry_budget)
    except UnsupportedVersionError as exc:
        return exc


def _entries_over(body: dict[str, Any], limit: int) -> bool:
    """Whether an answer holds more than `limit` entries in its arrays and their items'
    arrays (topics and their partitions), counted only until the limit is passed."""
    n = 0
    for v in body.values():
        if not isinstance(v, list):
            continue
        n += len(v)
        if n > limit:
            return True
        for item in v:
            if isinstance(item, dict):
                for w in item.values():
                    if isinstance(w, list):
                        n += len(w)
                        if n > limit:
                            return True
    return False


class _Pending:
    """A request in a connection's answer queue."""

    __slots__ = ("key", "version", "cid", "fut", "held", "cost", "started", "name")

    def __init__(self, key: int, version: int, cid: int, fut: asyncio.Future, held: int,
                 cost: RequestCost | None, started: float, name: str | None) -> None:
        self.key, self.version, self.cid, self.fut, self.held = key, version, cid, fut, held
        self.cost = cost  # its cost when request-time quotas are on
        self.started = started  # perf_counter at its frame's arrival
        self.name = name  # its RequestMetrics name; None: not counted (answers before decoding)


class Connection:
    def __init__(self, server: SocketServer, sock: socket.socket, peer: Any, listener: Listener) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self.listener = listener
        self.loop = asyncio.get_running_loop()
        self.tls: _Tls | None = (_Tls(listener.ssl_context, sock, self.loop)
                                 if listener.ssl_context is not None else None)
        self.sasl = SaslSession(listener.sasl_factory) if listener.sasl_factory is not None else None
        self.principal = "User:ANONYMOUS"
        self._buf = bytearray(_SMALL_BUF)
        self._start = 0
        self._end = 0
        self._pending: collections.deque[_Pending] = collections.deque()  # in request order
        self._pending_changed = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self.closed = False
        self._close_after_failure = False
        self._muted_until = 0.0  # loop time: no request is read before it (client quotas)
        self._serial = False  # set by the first throttle (read_loop)
        self._idle = asyncio.Event()  # set when no request is pending
        self.quota_tail: asyncio.Future | None = None  # server/quota_gate.py
        self.last_active = self.loop.time()  # bytes last read or written (idle expiry)
        self._sending_since: float | None = None  # an answer's send started, not finished
        self._arriving: tuple[float, int] | None = None  # a frame's (start, pool bytes) while its body arrives
        self._sent_at = 0.0  # loop time of the last bytes an answer's send got out
        self.serving: asyncio.Future | None = None  # serve(), cancelled to close it

    # -- reading --------------------------------------------------------------------
    async def _recv_into(self, view: memoryview) -> int:
        if self.tls is not None:
            n = await self.tls.recv_into(view)
        else:
            n = await self.loop.sock_recv_into(self.sock, view)
            if n == 0:
                raise EOFError
        self.last_active = self.loop.time()
        return n

    async def _read_frame(self) -> tuple[bytearray, int]:
        """The next frame and the pool bytes it holds. The size prefix is checked against
        socket.request.max.bytes before anything is allocated for it, and a large frame's
        buffer grows with the bytes that actually arrive (never more than twice what was
        received), so announcing a huge size costs the sender, not the broker."""
        max_size = self.server.max_request_bytes
        if self.sasl is not None and not self.sasl.complete:
            # Before the login (ApiVersions, SaslHandshake, SaslAuthenticate): Kafka's
            # SaslServerAuthenticator reads no larger frame.
            max_size = min(max_size, self.server.sasl_max_receive_size)
        while self._end - self._start < 4:
            self._compact()
            self._end += await self._recv_into(memoryview(self._buf)[self._end :])
        size = int.from_bytes(self._buf[self._start : self._start + 4], "big", signed=True)
        if size < 0 or size > max_size:
            raise FrameError(
                f"request size {size} is outside [0, {max_size}] (socket.request.max.bytes; "
                f"sasl.server.max.receive.size before a SASL login)")
        self._start += 4
        if self._serial:
            # Throttled once by a quota: from then on one request at a time, as Kafka
            # reads a connection, and none while muted; the frame stays in the kernel,
            # so a throttle never holds request memory the pool lends to others.
            while self._pending:
                self._idle.clear()
                await self._idle.wait()
            muted = self._muted_until - self.loop.time()
            if muted > 0:
                await asyncio.sleep(muted)
        await self.server.pool.acquire(size)
        try:
            have = self._end - self._start
            if have >= size:
                frame = bytearray(self._buf[self._start : self._start + size])
                self._start += size
                return frame, size
            frame = bytearray(self._buf[self._start : self._end])
            self._start = self._end = 0
            got = len(frame)
            self._arriving = (self.loop.time(), size)
            while got < size:
                if got == len(frame):  # grow geometrically, only as bytes arrive
                    frame.extend(bytes(min(size, max(2 * got, _SMALL_BUF)) - got))
                got += await self._recv_into(memoryview(frame)[got : got + _READ_CHUNK])
            return frame, size
        except BaseException:
            self.server.pool.release(size)
            raise
        finally:
            self._arriving = None

    def _compact(self) -> None:
        if self._start:
            self._buf[: self._end - self._start] = self._buf[self._start : self._end]
            self._end -= self._start
            self._start = 0

    async def read_loop(self) -> None:
        while not self.closed:
            try:
                frame, held = await self._read_frame()
            except EOFError:
                return
            try:
                started = time.perf_counter()
                # A decode's cost grows with the entries a client puts in the frame: a
                # large frame's, or one with more than _OFFLOAD_ENTRIES (a Produce of
                # many tiny partitions), runs on the codec thread; this connection
                # waits, others run.
                req = None
                if not _offload_decode(frame):
                    try:
                        req = _decode_or_error(memoryview(frame), _OFFLOAD_ENTRIES)
                    except EntryBudgetExceeded:
                        pass
                if req is None:
                    req, charge = await self._decode_large(frame)
                else:
                    charge = self._charge(req)
                held += charge
                self._accept_frame(req, held, started)
            except BaseException:
                self.server.pool.release(held)
                raise
            if len(self._pending) >= _MAX_PIPELINED:
                self._room.clear()
                await self._room.wait()

    async def _decode_large(self, frame: bytearray) -> tuple[Request | UnsupportedVersionError, int]:
        """A frame's decode on the codec thread, and what it is charged: one at a time
        over all connections, each started only while the request memory pool is not over
        its limit, so decoded requests stay bounded (the pool, plus one decode of at most
        kafkarepl.max.request.entries)."""
        server = self.server
        async with server.large_decodes:
            await server.pool.acquire(0)  # the pool back under its limit
            try:
                req = await self.loop.run_in_executor(
                    _CODEC, _decode_or_error, memoryview(frame), server.max_request_entries)
            except EntryBudgetExceeded:
                raise ConnectionClosing(f"a request of more than {server.max_request_entries} array entries "
                                        "(kafkarepl.max.request.entries)") from None
            return req, self._charge(req)

    def _charge(self, req: Request | UnsupportedVersionError) -> int:
        """A decoded entry weighs ~1 KiB against a few bytes on the wire: the request
        memory pool (queued.max.request.bytes) holds that until the answer is sent."""
        if not isinstance(req, Request) or not req.entries:
            return 0
        charge = req.entries * DECODED_ENTRY_BYTES
        self.server.pool.take(charge)
        return charge

    def _accept_frame(self, req: Request | UnsupportedVersionError, held: int, started: float) -> None:
        if isinstance(req, UnsupportedVersionError):
            exc = req
            body = self.server.on_unsupported_version(exc)
            cid = getattr(exc, "correlation_id", None)
            if body is None or cid is None:
                raise exc
            fut = self.loop.create_future()
            fut.set_result(body)
            # The error answer to ApiVersions is always encoded at v0.
            self._enqueue(int(exc.api_key or 0), 0, cid, fut, held, None, started, None)
            return
        sasl = self.sasl
        if sasl is not None and req.api_key != ApiKey.API_VERSIONS:
            # Served synchronously, so a pipelined request after them sees the outcome.
            now = self.loop.time()
            if not sasl.complete:
                if not sasl.readable_before_login(req.api_key):
                    raise ConnectionClosing(f"request {req.api_key} before SASL authentication")
                step = sasl.login(req.api_key, req.api_version, req.body, now)
                if sasl.complete:
                    self.principal = sasl.principal
            elif req.api_key in SASL_APIS:
                step = sasl.relogin(req.api_key, req.body, now)
                if step.reauthenticated:
                    self.server.reauthentications += 1
            elif sasl.expired(now):
                # KIP-368: no re-authentication within connections.max.reauth.ms
                raise ConnectionClosing("SASL session expired without re-authentication")
            else:
                step = None
            if step is not None:
                self._answer_now(req, step.body, held, started)
                # Answer, then close after connection.failed.authentication.delay.ms.
                self._close_after_failure |= step.failed
                return
        # Each request's handler runs in its own context holding its decompression
        # budget (kafkarepl.max.decompressed.request.bytes, storage.validation).
        ctx = contextvars.copy_context()
        ctx.run(request_budget, self.server.max_decompressed_request_bytes)
        ctx.run(set_current_listener, self.listener.name)
        cost = None
        costs = self.server.request_costs
        if costs is not None and costs.active:  # request-time quotas: decoding counts too
            cost = RequestCost(time.perf_counter() - started)
            ctx.run(set_request_cost, cost)
        task: asyncio.Future = ctx.run(self.loop.create_task, self.server.handler(req, self))  # type: ignore[arg-type]
        self._enqueue(req.api_key, req.api_version, req.correlation_id, task, held, cost, started,
                      RequestMetrics.name_of(req.api_key, req.body))

    def throttle(self, ms: int) -> None:
        """KIP-219: serve no further request of this connection for `ms` (a client over
        its quota; the answer saying so goes out at once)."""
        self._muted_until = max(self._muted_until, self.loop.time() + ms / 1000)
        self._serial = True

    def muted_for(self) -> float:
        """Seconds left of the throttle."""
        return max(0.0, self._muted_until - self.loop.time())

    def _answer_now(self, req: Any, body: dict[str, Any], held: int, started: float) -> None:
        fut = self.loop.create_future()
        fut.set_result(body)
        self._enqueue(req.api_key, req.api_version, req.correlation_id, fut, held, None, started,
                      RequestMetrics.name_of(req.api_key, req.body))

    def _enqueue(self, key: int, version: int, cid: int, fut: asyncio.Future, held: int,
                 cost: RequestCost | None, started: float, name: str | None) -> None:
        self._pending.append(_Pending(key, version, cid, fut, held, cost, started, name))
        self._pending_changed.set()

    # -- writing --------------------------------------------------------------------
    async def write_loop(self) -> None:
        while True:
            while not self._pending:
                if self.closed:
                    return
                self._pending_changed.clear()
                await self._pending_changed.wait()
            entry = self._pending[0]
            key, version, cid, cost = entry.key, entry.version, entry.cid, entry.cost
            errors: dict[int, int] | None = None  # the answer's error counts, when counted here
            try:
                result = await self._result(entry.fut)
                encoding = time.perf_counter() if cost is not None else 0.0
                if isinstance(result, dict) and _entries_over(result, _OFFLOAD_ENTRIES):
                    chunks, errors = await self.loop.run_in_executor(
                        _CODEC, self._encode_counted, key, version, cid, result, entry.name is not None)
                else:
                    chunks = self._response(key, version, cid, result)
                # request-time quotas: encoding the answer counts too
                if cost is not None and cost.account is not None and self.server.request_costs is not None:
                    self.server.request_costs.record_network(
                        cost.account, cost.network_s + time.perf_counter() - encoding)
            finally:
                # The connection's teardown may have cleared the queue (and released its
                # memory) while this waited: only what is still ours is popped and released.
                if self._pending and self._pending[0] is entry:
                    self._pending.popleft()
                    self.server.pool.release(entry.held)
                if not self._pending:
                    self._idle.set()
            if len(self._pending) < _MAX_PIPELINED:
                self._room.set()
            sending = time.perf_counter()
            if chunks is not None:
                await self.send_chunks(chunks)
            if entry.name is not None:
                done = time.perf_counter()
                self.server.request_metrics.record(entry.name, key, version, (done - entry.started) * 1000,
                                                   (done - sending) * 1000, result, errors)
            if chunks is not None and self._close_after_failure and not self._pending:
                await asyncio.sleep(self.server.failed_authentication_delay_ms / 1000)
                raise ConnectionClosing("SASL authentication failed")

    def _encode_counted(self, key: int, version: int, cid: int, body: dict[str, Any],
                        count: bool) -> tuple[list[Any] | None, dict[int, int] | None]:
        """On the codec thread: a large answer encoded, and its error codes counted for
        RequestMetrics (the same walk over every entry) when `count`."""
        return self._response(key, version, cid, body), error_counts(key, version, body) if count else None

    async def _result(self, fut: asyncio.Future) -> dict[str, Any] | None | BaseException:
        """The handler's body; its exception (not raised) when it failed."""
        try:
            return await fut
        except asyncio.CancelledError:
            if self.closed:
                raise
            return ConnectionError("request handler cancelled")
        except Exception as exc:  # noqa: BLE001 - answered with an error below, or closed
            return exc

    def _response(self, key: int, version: int, cid: int,
                  body: dict[str, Any] | None | BaseException) -> list[Any] | None:
        """The encoded response, or None when none is due. A handler that failed, or a
        body that cannot be encoded, gets the API's error response (every top-level
        error_code set) when its schema has a top-level error_code; otherwise no faithful
        answer exists and ConnectionClosing closes the connection, so that the client
        fails fast instead of waiting for its request timeout."""
        if isinstance(body, BaseException):
            code = body.code if isinstance(body, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            if not isinstance(body, KafkaError):
                log.error("request %s v%d (correlation id %d) from %s failed", key, version,
                          cid, self.peer, exc_info=body)
            return self._error_response(key, version, cid, int(code), body)
        if body is None:
            return None
        if _AUDIT and key in API:
            missing = missing_fields(API[key].response, version, body)
            if missing:
                log.warning("response audit: %s v%d leaves out %s", API[key].name, version, ", ".join(missing))
        try:
            return encode_response(key, version, cid, body)
        except (EncodeError, ValueError, TypeError, OverflowError) as exc:
            log.error("response to %s v%d (correlation id %d) cannot be encoded: %s",
                      key, version, cid, exc)
            return self._error_response(key, version, cid,
                                        int(ErrorCode.UNKNOWN_SERVER_ERROR), exc)

    def _error_response(self, key: int, version: int, cid: int, code: int,
                        cause: BaseException) -> list[Any]:
        spec = API.get(key)
        keys = {f.key for f in spec.response} if spec else set()
        if "error_code" not in keys:
            raise ConnectionClosing(f"no error response for API {key}: {cause}")
        body: dict[str, Any] = {"error_code": code}
        if "error_message" in keys:
            body["error_message"] = str(cause)[:1000] or None
        try:
            return encode_response(key, version, cid, body)
        except Exception as exc:  # noqa: BLE001 - then closing is the only answer
            raise ConnectionClosing(f"error response for API {key} failed: {exc}") from exc

    async def send_chunks(self, chunks: list[Any]) -> None:
        tls = self.tls
        self._sending_since = self._sent_at = self.loop.time()
        try:
            for chunk in chunks:
                if isinstance(chunk, FileRange):
                    if tls is not None:  # TLS encrypts in user space: no sendfile
                        await self._send_file_range_tls(tls, chunk)
                    else:
                        await self._sendfile(chunk)
                elif len(chunk) > _SEND_SLICE:
                    await self._send_sliced(chunk)
                elif tls is not None:
                    await tls.sendall(chunk)
                else:
                    await self.loop.sock_sendall(self.sock, chunk)
                self.last_active = self._sent_at = self.loop.time()
        finally:
            self._sending_since = None

    async def _send_sliced(self, chunk: Any) -> None:
        """A large chunk a slice at a time: its progress is seen (stalled_for)."""
        view = memoryview(chunk).cast("B")
        for i in range(0, len(view), _SEND_SLICE):
            if self.tls is not None:
                await self.tls.sendall(view[i:i + _SEND_SLICE])
            else:
                await self.loop.sock_sendall(self.sock, view[i:i + _SEND_SLICE])
            self._sent_at = self.loop.time()

    def stalled_for(self, now: float) -> float:
        """Seconds this connection has held up the request memory pool's turnover: an
        answer's send that got no byte out for that long (its client does not read), or a
        frame whose body has been arriving that long (0 when neither)."""
        sending = 0.0 if self._sending_since is None else now - self._sent_at
        arriving = 0.0 if self._arriving is None else now - self._arriving[0]
        return max(sending, arriving)

    def pool_bytes(self) -> int:
        """Request memory pool bytes its requests read and not yet answered hold, and the
        frame being read."""
        return sum(e.held for e in self._pending) + (self._arriving[1] if self._arriving else 0)

    async def _send_file_range_tls(self, tls: _Tls, rng: FileRange) -> None:
        offset, left = rng.position, rng.size
        while left > 0:
            data = os.pread(rng.fd, min(left, 256 * 1024), offset)
            if not data:
                raise ConnectionError(f"file range ended at offset {offset}")
            await tls.sendall(data)
            offset += len(data)
            left -= len(data)

    async def _sendfile(self, rng: FileRange) -> None:
        fd = self.sock.fileno()
        offset, left = rng.position, rng.size
        idle = 0
        while left > 0:
            try:
                n = _core.sendfile(fd, rng.fd, offset, left)
            except BlockingIOError:
                n = 0
            if n > 0:
                offset += n
                left -= n
                idle = 0
                self.last_active = self._sent_at = self.loop.time()
                continue
            idle += 1
            if idle > 2:
                # Writable socket but nothing sent: the file range vanished (truncated or
                # deleted under us). A short frame would corrupt the stream: close instead.
                raise ConnectionError(f"sendfile made no progress at file offset {offset}")
            await self._writable()

    def _writable(self) -> asyncio.Future:
        fut = self.loop.create_future()
        fd = self.sock.fileno()

        def ready() -> None:
            self.loop.remove_writer(fd)
            if not fut.done():
                fut.set_result(None)

        self.loop.add_writer(fd, ready)
        return fut

    # -- lifecycle ------------------------------------------------------------------
    async def serve(self) -> None:
        writer: asyncio.Future | None = None
        reader: asyncio.Future | None = None
        try:
            if self.tls is not None:
                await self.tls.handshake()
                if self.sasl is None:
                    self.principal = self.tls.principal(self.listener.principal_name) or self.principal
            writer = asyncio.ensure_future(self.write_loop())
            reader = asyncio.ensure_future(self.read_loop())
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                exc = t.exception()
                if exc is not None:
                    raise exc
            # Reader hit EOF: let the writer flush what is pending, then stop.
            self.closed = True
            self._pending_changed.set()
            await writer
        except (FrameError, KafkaError, ConnectionClosing) as exc:
            self.server.client_log.log(logging.INFO, "closing connection from %s: %s", self.peer, exc)
        except (ConnectionError, OSError, EOFError) as exc:
            log.debug("connection from %s ended: %s", self.peer, exc)
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.closed = True
            running: tuple[asyncio.Future | None, ...] = (writer, reader)
            for f in running:
                if f is not None:
                    f.cancel()
            for entry in self._pending:
                entry.fut.cancel()
                self.server.pool.release(entry.held)
            self._pending.clear()
            try:
                self.loop.remove_writer(self.sock.fileno())
            except (ValueError, OSError):
                pass
            self.sock.close()


class SocketServer:
    """Accepts connections on one listener and serves each with a Connection."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        on_unsupported_version: UnsupportedVersionHandler,
        max_request_bytes: int,
        max_connections: int,
        *,
        queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES,
        connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS,
        max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP,
        max_connections_per_ip_overrides: dict[str, int] | None = None,
        max_decompressed_request_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
        max_request_entries: int = DEFAULT_MAX_REQUEST_ENTRIES,
        stalled_answer_s: float = STALLED_ANSWER_S,
        ssl_context: ssl.SSLContext | None = None,
        sasl_factory: Callable[[], Any] | None = None,
        failed_authentication_delay_ms: int = 100,
        sasl_max_receive_size: int = 524288,
        listener_name: str = "PLAINTEXT",
        principal_name: Callable[[str], str | None] | None = None,
        more_listeners: Sequence[Listener] = (),
        connection_throttle: Callable[[str], int] | None = None,
        accept_throttle: Callable[[str, bool], int] | None = None,
        protected_listener: str | None = None,
        request_costs: CostSink | None = None,
        request_metrics: RequestMetrics | None = None,
    ) -> None:
        # The first listener from the arguments, more from more_listeners; connection
        # limits and the request memory pool are shared by all, as Kafka's.
        self.listeners = [Listener(listener_name, host, port, ssl_context, sasl_factory, principal_name),
                          *more_listeners]
        # Lines a client can cause (malformed requests, refused connections), capped.
        self.client_log = LogLimiter(log, schedule=lambda delay, fn: asyncio.get_running_loop().call_later(delay, fn))
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self.sasl_max_receive_size = sasl_max_receive_size  # sasl.server.max.receive.size
        self.reauthentications = 0  # successful KIP-368 re-authentications
        self.handler = handler
        self.on_unsupported_version = on_unsupported_version
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.max_connections_per_ip_overrides = max_connections_per_ip_overrides or {}
        self.max_decompressed_request_bytes = max_decompressed_request_bytes
        self.max_request_entries = max_request_entries
        self.connections_max_idle_ms = connections_max_idle_ms
        self.pool = RequestMemoryPool(queued_max_request_bytes)
        self.pool.on_pressure = self._drop_stalled
        self.stalled_answer_s = stalled_answer_s
        self.large_decodes = asyncio.Lock()  # decodes on the codec thread, one at a time
        self.connections: set[Connection] = set()
        self._per_ip: collections.Counter[str] = collections.Counter()
        # IP address -> ms to hold a new connection before closing it unserved (0: serve it)
        self.connection_throttle = connection_throttle
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}  # closing after their delay
        # (listener, is the inter-broker one) -> ms to wait before accepting more
        # (max.connection.creation.rate, per listener and broker-wide but for the
        # inter-broker listener, `protected_listener`, as Kafka)
        self.accept_throttle = accept_throttle
        self.protected_listener = protected_listener
        self.request_costs = request_costs  # decode/encode time for request-time quotas
        self.request_metrics = request_metrics or RequestMetrics()
        self._lsocks: list[socket.socket] = []
        self._accept_tasks: list[asyncio.Task] = []
        self._tasks: set[asyncio.Task] = set()

    @property
    def host(self) -> str:
        return self.listeners[0].host

    @property
    def port(self) -> int:
        return self.listeners[0].port

    def bound_ports(self) -> dict[str, int]:
        return {lst.name: lst.port for lst in self.listeners}

    async def start(self) -> None:
        for lst in self.listeners:
            lsock = socket.socket(socket.AF_INET6 if ":" in lst.host else socket.AF_INET)
            try:
                lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                lsock.bind((lst.host, lst.port))
                lsock.listen(1024)
                lsock.setblocking(False)
            except OSError:
                lsock.close()
                await self.stop()
                raise
            lst.port = lsock.getsockname()[1]
            self._lsocks.append(lsock)
            self._accept_tasks.append(asyncio.ensure_future(self._accept_loop(lsock, lst)))
        if self.connections_max_idle_ms >= 0:
            self._accept_tasks.append(asyncio.ensure_future(self._expire_idle()))

    def _drop_stalled(self) -> None:
        """The request memory pool is full: close the connections holding room in it that
        have stalled for stalled_answer_s: an answer that got no byte out (the client does
        not read) or a frame still arriving (a client's request.timeout.ms has passed:
        it has given up on it). The others' reads wait on that room."""
        now = asyncio.get_running_loop().time()
        for conn in list(self.connections):
            if conn.stalled_for(now) >= self.stalled_answer_s and conn.serving is not None \
                    and not conn.serving.done() and conn.pool_bytes():
                self.client_log.log(logging.WARNING, "closing connection from %s: stalled for %.0f s (an answer unread or a request "
                            "still arriving) while it holds %d bytes of the full request memory pool "
                            "(queued.max.request.bytes)", conn.peer, conn.stalled_for(now), conn.pool_bytes())
                conn.serving.cancel()

    async def _expire_idle(self) -> None:
        """connections.max.idle.ms: a connection with no bytes read or written for that
        long is closed, whatever it has in flight (Kafka's Selector does the same; its
        clients close theirs at 9 minutes, before the broker's 10). Wakes at the oldest
        connection's deadline, and at most 100 times per idle period."""
        idle_s = self.connections_max_idle_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            oldest = now
            for conn in list(self.connections):
                if now - conn.last_active >= idle_s:
                    if conn.serving is not None and not conn.serving.done():
                        log.debug("closing connection from %s: idle for %.0f ms (connections.max.idle.ms)",
                                  conn.peer, (now - conn.last_active) * 1000)
                        conn.serving.cancel()
                else:
                    oldest = min(oldest, conn.last_active)
            await asyncio.sleep(max(oldest + idle_s - now, idle_s / 100, 0.001))

    async def _accept_loop(self, lsock: socket.socket, listener: Listener) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(lsock)
            except OSError as exc:  # EMFILE and friends: back off, keep serving
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if self.accept_throttle is not None:
                wait_ms = self.accept_throttle(listener.name, listener.name == self.protected_listener)
                if wait_ms > 0:  # this one is served after the wait; later ones queue in the backlog
                    await asyncio.sleep(wait_ms / 1000)
            if len(self.connections) + len(self._throttled) >= self.max_connections \
                    and not (listener.name == self.protected_listener and self._close_lru_client()):
                self.client_log.log(logging.WARNING, "max.connections=%d reached: refusing %s",
                                    self.max_connections, peer)
                sock.close()
                continue
            ip = peer[0] if isinstance(peer, tuple) else str(peer)
            delay_ms = self.connection_throttle(ip) if self.connection_throttle is not None else 0
            if delay_ms > 0:
                # Over its connection_creation_rate (KIP-612): closed unserved after the
                # throttle time, so the client backs off before it reconnects.
                self._throttled[sock] = loop.call_later(delay_ms / 1000, self._close_throttled, sock)
                continue
            limit = self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)
            if self._per_ip[ip] >= limit:
                # As Kafka: the connection is closed at once, before any request is read.
                self.client_log.log(logging.WARNING, "max.connections.per.ip=%d reached for %s: refusing", limit, ip)
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock, peer, listener)
            self.connections.add(conn)
            self._per_ip[ip] += 1
            task = asyncio.ensure_future(conn.serve())
            conn.serving = task
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._closed, conn=conn, ip=ip))

    def _close_lru_client(self) -> bool:
        """KIP-402: max.connections is reached and a broker connects on the inter-broker
        listener: the least recently active connection of another listener is closed to
        make room (as Kafka's ConnectionQuotas), so clients cannot lock replication and
        the controller out. False when there is none to close."""
        others = [c for c in self.connections if c.listener.name != self.protected_listener
                  and not c.closed and c.serving is not None and not c.serving.done()]
        if not others:
            return False
        lru = min(others, key=lambda c: c.last_active)
        self.client_log.log(logging.INFO, "max.connections=%d reached: closing the least recently active client "
                            "connection, from %s, for a connection on the inter-broker listener",
                            self.max_connections, lru.peer)
        assert lru.serving is not None
        lru.closed = True  # not picked again before its task ends
        lru.serving.cancel()
        return True

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.pop(sock, None)
        sock.close()

    def _closed(self, task: asyncio.Task, conn: Connection, ip: str) -> None:
        self._tasks.discard(task)
        self.connections.discard(conn)
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]

    async def stop(self) -> None:
        for task in self._accept_tasks:
            task.cancel()
        for lsock in self._lsocks:
            lsock.close()
        self._accept_tasks, self._lsocks = [], []
        for sock, timer in list(self._throttled.items()):
            timer.cancel()
            self._close_throttled(sock)
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = [
    "Connection",
    "ConnectionClosing",
    "FrameError",
    "InvalidRequestError",
    "RequestMemoryPool",
    "SocketServer",
]
