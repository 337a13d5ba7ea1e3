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
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from kafkarepl import _core
from kafkarepl.errors import InvalidRequestError, KafkaError, UnsupportedVersionError
from kafkarepl.protocol import FileRange, Request, decode_request, encode_response

log = logging.getLogger(__name__)

# A handler returns the response body, or None when no response is due (acks=0).
Handler = Callable[[Request, "Connection"], Awaitable[dict[str, Any] | None]]
UnsupportedVersionHandler = Callable[[UnsupportedVersionError], dict[str, Any] | None]

_READ_CHUNK = 256 * 1024
_MAX_PIPELINED = 64  # requests read ahead of their responses before reading pauses


class FrameError(Exception):
    """The peer sent a frame size we refuse; the connection is closed."""


class Connection:
    def __init__(self, server: SocketServer, sock: socket.socket, peer: Any) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self.loop = asyncio.get_running_loop()
        self._buf = bytearray(_READ_CHUNK)
        self._start = 0
        self._end = 0
        # (api_key, api_version, correlation_id, future-of-body) in request order
        self._pending: collections.deque[tuple[int, int, int, asyncio.Future]] = collections.deque()
        self._pending_changed = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self.closed = False

    # -- reading --------------------------------------------------------------------
    async def _read_frame(self) -> bytearray | None:
        max_size = self.server.max_request_bytes
        while True:
            have = self._end - self._start
            if have >= 4:
                size = int.from_bytes(self._buf[self._start : self._start + 4], "big", signed=True)
                if size < 0 or size > max_size:
                    raise FrameError(
                        f"request size {size} is outside [0, socket.request.max.bytes={max_size}]"
                    )
                if have - 4 >= size:
                    s = self._start + 4
                    frame = bytearray(self._buf[s : s + size])
                    self._start = s + size
                    return frame
                if size + 4 > len(self._buf):
                    # Large frame: read the rest straight into its own buffer.
                    frame = bytearray(size)
                    got = have - 4
                    frame[:got] = self._buf[self._start + 4 : self._end]
                    self._start = self._end = 0
                    view = memoryview(frame)
                    while got < size:
                        n = await self.loop.sock_recv_into(self.sock, view[got:])
                        if n == 0:
                            return None
                        got += n
                    return frame
            if self._start:
                self._buf[: self._end - self._start] = self._buf[self._start : self._end]
                self._end -= self._start
                self._start = 0
            n = await self.loop.sock_recv_into(self.sock, memoryview(self._buf)[self._end :])
            if n == 0:
                return None
            self._end += n

    async def read_loop(self) -> None:
        while not self.closed:
            frame = await self._read_frame()
            if frame is None:
                return
            self._accept_frame(frame)
            if len(self._pending) >= _MAX_PIPELINED:
                self._room.clear()
                await self._room.wait()

    def _accept_frame(self, frame: bytearray) -> None:
        try:
            req = decode_request(memoryview(frame))
        except UnsupportedVersionError as exc:
            body = self.server.on_unsupported_version(exc)
            cid = getattr(exc, "correlation_id", None)
            if body is None or cid is None:
                raise
            fut = self.loop.create_future()
            fut.set_result(body)
            # The error answer to ApiVersions is always encoded at v0.
            self._enqueue(int(exc.api_key), 0, cid, fut)
            return
        fut = asyncio.ensure_future(self.server.handler(req, self))
        self._enqueue(req.api_key, req.api_version, req.correlation_id, fut)

    def _enqueue(self, key: int, version: int, cid: int, fut: asyncio.Future) -> None:
        self._pending.append((key, version, cid, fut))
        self._pending_changed.set()

    # -- writing --------------------------------------------------------------------
    async def write_loop(self) -> None:
        while True:
            while not self._pending:
                if self.closed:
                    return
                self._pending_changed.clear()
                await self._pending_changed.wait()
            key, version, cid, fut = self._pending[0]
            body = await fut
            self._pending.popleft()
            if len(self._pending) < _MAX_PIPELINED:
                self._room.set()
            if body is None:
                continue
            await self.send_chunks(encode_response(key, version, cid, body))

    async def send_chunks(self, chunks: list[Any]) -> None:
        for chunk in chunks:
            if isinstance(chunk, FileRange):
                await self._sendfile(chunk)
            else:
                await self.loop.sock_sendall(self.sock, chunk)

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
        writer = asyncio.ensure_future(self.write_loop())
        try:
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
        except (FrameError, KafkaError) as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
        except (ConnectionError, OSError) as exc:
            log.debug("connection from %s ended: %s", self.peer, exc)
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.closed = True
            for t in (writer,):
                t.cancel()
            for *_x, fut in self._pending:
                fut.cancel()
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
    ) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.on_unsupported_version = on_unsupported_version
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.connections: set[Connection] = set()
        self._lsock: socket.socket | None = None
        self._accept_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        lsock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((self.host, self.port))
        lsock.listen(1024)
        lsock.setblocking(False)
        self.port = lsock.getsockname()[1]
        self._lsock = lsock
        self._accept_task = asyncio.ensure_future(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._lsock is not None
        while True:
            try:
                sock, peer = await loop.sock_accept(self._lsock)
            except OSError as exc:  # EMFILE and friends: back off, keep serving
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if len(self.connections) >= self.max_connections:
                log.warning("max.connections=%d reached: refusing %s", self.max_connections, peer)
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock, peer)
            self.connections.add(conn)
            task = asyncio.ensure_future(conn.serve())
            self._tasks.add(task)
            task.add_done_callback(lambda t, c=conn: (self._tasks.discard(t), self.connections.discard(c)))

    async def stop(self) -> None:
        if self._accept_task:
            self._accept_task.cancel()
        if self._lsock:
            self._lsock.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = ["Connection", "SocketServer", "FrameError", "InvalidRequestError"]
