"""One pipelined Kafka-protocol connection to a broker (asyncio).

Many requests may be in flight; the broker answers in request order, so responses are
matched to a FIFO of pending requests and their correlation ids checked. Versions are
negotiated with ApiVersions when connecting. A request timeout closes the connection
(later responses could no longer be matched reliably), failing every pending request.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from typing import Any

from kafkarepl.aio import with_timeout
from kafkarepl.client.security import ClientSecurity, sasl_login

from ..errors import ErrorCode, KafkaError, UnsupportedVersionError
from ..protocol import (
    API,
    ApiKey,
    FrameReader,
    decode_response,
    encode_request,
    peek_correlation_id,
)

DEFAULT_MAX_RESPONSE_BYTES = 256 << 20
SOFTWARE_NAME = "kafkarepl"
SOFTWARE_VERSION = "0.1.0"


_SASL_KEYS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


class BrokerConnectionError(KafkaError):
    """Connecting failed, or the connection broke / was closed with requests in flight."""

    code = ErrorCode.NETWORK_EXCEPTION


class RequestTimeoutError(KafkaError):
    """No response within request_timeout (the connection is closed)."""

    code = ErrorCode.REQUEST_TIMED_OUT


class _Pending:
    __slots__ = ("correlation_id", "api_key", "api_version", "future")

    def __init__(self, correlation_id: int, api_key: int, api_version: int,
                 future: asyncio.Future) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.future = future


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str | None = "kafkarepl", *,
                 connect_timeout: float = 10.0, request_timeout: float = 30.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 security: ClientSecurity | None = None) -> None:
        self.security = security  # TLS and/or SASL (a secured listener)
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.api_versions: dict[int, tuple[int, int]] = {}  # broker's ranges, per API key
        self._max_response_bytes = max_response_bytes
        self._transport: asyncio.Transport | None = None
        self._protocol: _Protocol | None = None
        self._pending: collections.deque[_Pending] = collections.deque()
        self._correlation_ids = itertools.count(1)
        self._error: KafkaError | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._reauth_at: float | None = None  # loop time of the next SASL re-authentication
        self._reauth_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._error is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def connect(self, negotiate: bool = True) -> None:
        """Open the socket, then learn the broker's API versions (ApiVersions). May be
        called again after a failure or close() to reconnect."""
        if self.connected:
            raise BrokerConnectionError(f"{self} is already connected")
        loop = asyncio.get_running_loop()
        try:
            ctx = self.security.ssl_context if self.security is not None else None
            tls: dict[str, Any] = {} if ctx is None else {
                "ssl": ctx, "server_hostname": self.host if ctx.check_hostname else None}
            transport, protocol = await with_timeout(
                loop.create_connection(lambda: _Protocol(self), self.host, self.port, **tls),
                self.connect_timeout)
        except asyncio.TimeoutError:
            raise BrokerConnectionError(
                f"connect to {self.host}:{self.port} timed out after {self.connect_timeout}s"
            ) from None
        except OSError as e:
            raise BrokerConnectionError(f"connect to {self.host}:{self.port}: {e}") from None
        self._transport = transport
        self._protocol = protocol
        self._error = None
        self._can_write.set()
        if negotiate:
            await self._negotiate_versions()
        if self.security is not None and self.security.sasl_mechanism:
            try:
                self._session_started(await sasl_login(self.send, self.security))
            except BaseException:
                self.close()
                raise

    def _session_started(self, lifetime_ms: int) -> None:
        # Log in again at 85% of the session the broker granted (KIP-368), as Kafka's
        # clients re-authenticate before connections.max.reauth.ms closes the connection.
        self._reauth_at = (asyncio.get_running_loop().time() + lifetime_ms * 0.85 / 1000
                           if lifetime_ms > 0 else None)

    async def _reauthenticate(self) -> None:
        """Nothing may be sent between the SASL requests of a re-authentication: later
        senders wait on the lock, in-flight requests are answered first."""
        async with self._reauth_lock:
            if self._reauth_at is None or asyncio.get_running_loop().time() < self._reauth_at:
                return  # done by another sender meanwhile
            while self._pending and self._error is None:
                await asyncio.sleep(0.005)
            assert self.security is not None
            try:
                self._session_started(await sasl_login(self.send, self.security))
            except KafkaError as exc:
                self._fail(exc if isinstance(exc, BrokerConnectionError) else BrokerConnectionError(str(exc)))
                raise

    async def _negotiate_versions(self) -> None:
        body = {"client_software_name": SOFTWARE_NAME,
                "client_software_version": SOFTWARE_VERSION}
        resp = await self.send(ApiKey.API_VERSIONS, API[ApiKey.API_VERSIONS].max_version, body)
        assert resp is not None  # a response is expected
        # UNSUPPORTED_VERSION comes with the broker's ranges in a v0 body: good enough
        if resp["error_code"] not in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_VERSION):
            raise KafkaError(f"ApiVersions failed on {self}", ErrorCode(resp["error_code"]))
        self.api_versions = {k["api_key"]: (k["min_version"], k["max_version"])
                             for k in resp["api_keys"]}

    def pick_version(self, api_key: int, max_we_support: int | None = None) -> int:
        """Highest version both sides support (ours: the declared range, or less)."""
        spec = API[api_key]
        ours_max = spec.max_version if max_we_support is None else min(max_we_support,
                                                                        spec.max_version)
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(f"{self} does not support {spec.name}")
        version = min(ours_max, theirs[1])
        if version < max(spec.min_version, theirs[0]):
            raise UnsupportedVersionError(
                f"{spec.name}: no common version (ours {spec.min_version}-{ours_max}, "
                f"broker {theirs[0]}-{theirs[1]})")
        return version

    async def send(self, api_key: int, api_version: int | None, body: dict[str, Any], *,
                   expect_response: bool = True) -> dict | None:
        """Send one request; return the decoded response body (None when no response is
        expected, e.g. Produce with acks=0). api_version None = pick_version(api_key)."""
        if self._error is not None:
            raise self._error
        if self._transport is None:
            raise BrokerConnectionError(f"{self} is not connected")
        if (self._reauth_at is not None and api_key not in _SASL_KEYS
                and asyncio.get_running_loop().time() >= self._reauth_at):
            await self._reauthenticate()
        if api_version is None:
            api_version = self.pick_version(api_key)
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        data = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        future = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending.append(_Pending(correlation_id, api_key, api_version, future))
        self._transport.write(data)
        if not self._can_write.is_set():
            await self._can_write.wait()
        if future is None:
            return None
        try:
            return await with_timeout(future, self.request_timeout)
        except asyncio.TimeoutError:
            err = RequestTimeoutError(
                f"{API[api_key].name} v{api_version} to {self.host}:{self.port}: no response "
                f"within {self.request_timeout}s")
            self._fail(err)
            raise err from None

    def close(self) -> None:
        self._fail(BrokerConnectionError(f"{self} closed"))

    # --- called by the protocol -----------------------------------------------------------

    def _on_frame(self, frame: memoryview) -> None:
        if not self._pending:
            self._fail(BrokerConnectionError(f"{self}: response without a request"))
            return
        pending = self._pending.popleft()
        try:
            if peek_correlation_id(frame) != pending.correlation_id:
                raise BrokerConnectionError(
                    f"{self}: correlation id {peek_correlation_id(frame)} does not match the "
                    f"oldest request's {pending.correlation_id}")
            _, body = decode_response(pending.api_key, pending.api_version, frame)
        except KafkaError as e:
            if not pending.future.done():
                pending.future.set_exception(e)
            self._fail(e if isinstance(e, BrokerConnectionError)
                       else BrokerConnectionError(f"{self}: {e}"))
            return
        if not pending.future.done():
            pending.future.set_result(body)

    def _fail(self, error: KafkaError) -> None:
        if self._error is None:
            self._error = error
        while self._pending:
            p = self._pending.popleft()
            if not p.future.done():
                p.future.set_exception(error)
        self._can_write.set()
        if self._transport is not None:
            self._transport.close()


class _Protocol(asyncio.BufferedProtocol):
    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.frames = FrameReader(conn._max_response_bytes)

    @property
    def current(self) -> bool:
        """False once the connection reconnected: late callbacks of an old socket."""
        return self.conn._protocol is self

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if not self.current:
            return
        try:
            frames = self.frames.buffer_updated(nbytes)
        except KafkaError as e:
            self.conn._fail(BrokerConnectionError(f"{self.conn}: {e}"))
            return
        for frame in frames:
            self.conn._on_frame(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.current:
            return
        self.conn._fail(BrokerConnectionError(
            f"{self.conn}: connection lost" + (f": {exc}" if exc else "")))

    def pause_writing(self) -> None:
        if self.current:
            self.conn._can_write.clear()

    def resume_writing(self) -> None:
        if self.current:
            self.conn._can_write.set()
