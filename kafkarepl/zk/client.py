"""kazoo's KazooClient used from asyncio without ever blocking the event loop.

kazoo runs its own threads. Every request here goes through kazoo's `*_async` call and
its IAsyncResult is adapted to an asyncio future with `loop.call_soon_threadsafe`; watch
callbacks and connection-state listeners are likewise handed to the loop, so all of our
code runs on the loop thread only.

Session states (kazoo's KazooState): CONNECTED, SUSPENDED (connection lost, session may
still live: do not trust ephemeral ownership), LOST (session expired or closed: our
ephemeral znodes are gone). kazoo re-creates a session by itself after LOST; then the
`on_session_reestablished` hooks run (the broker re-registers, the controller re-runs
its election).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadArgumentsError,
    ConnectionLoss,
    MarshallingError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from kafkarepl.aio import wait_event
from kafkarepl.zk.multi_read import MultiRead, get_children_op, get_data_op

log = logging.getLogger(__name__)

CONNECTED = KazooState.CONNECTED
SUSPENDED = KazooState.SUSPENDED
LOST = KazooState.LOST

Hook = Callable[[], Any]  # plain function or coroutine function, run on the loop
# Reads per multiRead: ~1,000 partition states make a response of ~200 KB.
MAX_READS_PER_REQUEST = 1000
# A request cut off by ZooKeeper going away; the same request may succeed once connected.
CONNECTION_ERRORS = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)
T = TypeVar("T")


class ZkTransactionError(Exception):
    """A multi failed; `.errors` holds the per-op exception (RolledBackError for the rest)."""

    def __init__(self, cause: Exception, results: list) -> None:
        self.cause = cause
        self.results = results
        super().__init__(f"ZooKeeper multi failed: {type(cause).__name__}: {cause}")


class WatchHandle:
    """Stops a ChildrenWatch/DataWatch: its next firing returns False to kazoo."""

    def __init__(self) -> None:
        self.active = True

    def cancel(self) -> None:
        self.active = False


class AsyncZk:
    def __init__(
        self,
        hosts: str,
        session_timeout_ms: int = 18000,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self._loop = loop
        # Reconnect quickly (ZooKeeper restarts, short outages): small capped backoff.
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=0.5, ignore_expire=True)
        self.client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=retry,
            command_retry=None,
        )
        self.state: str = LOST
        self._ever_connected = False
        self._lost_since_connected = False
        self._state_hooks: list[Callable[[str], Any]] = []
        self._reestablished_hooks: list[Hook] = []
        self._lost_hooks: list[Hook] = []
        self._connected_event: asyncio.Event | None = None
        self._multi_read_supported = True
        self.client.add_listener(self._kazoo_listener)

    # --- lifecycle -----------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    async def start(self, timeout: float = 15.0) -> None:
        loop = self.loop
        self._connected_event = asyncio.Event()
        # kazoo's start() = start_async() + wait; done here so that a missing chroot is
        # created (as Kafka does) instead of warned about.
        started = self.client.start_async()
        await loop.run_in_executor(None, started.wait, timeout)
        if not self.client.connected:
            # kazoo would keep trying in the background: stop it.
            await loop.run_in_executor(None, self.client.stop)
            await loop.run_in_executor(None, self.client.close)
            raise ConnectionError(f"cannot connect to ZooKeeper at {self.hosts} within {timeout}s")
        if self.client.chroot:
            await self.until_done(lambda: loop.run_in_executor(None, self._ensure_chroot), "chroot")
        self.state = CONNECTED
        self._ever_connected = True
        self._connected_event.set()

    def _ensure_chroot(self) -> None:
        # Like Kafka, create the chroot of "host:port/chroot" if missing (kazoo does not).
        chroot = self.client.chroot
        self.client.chroot = ""
        try:
            self.client.ensure_path(chroot)
        finally:
            self.client.chroot = chroot

    async def stop(self) -> None:
        """Close the session (ephemeral znodes go at once) and the kazoo threads."""
        loop = self.loop

        def _stop() -> None:
            self.client.stop()
            self.client.close()

        await loop.run_in_executor(None, _stop)

    @property
    def session_id(self) -> int | None:
        sid = self.client.client_id
        return sid[0] if sid else None

    @property
    def connected(self) -> bool:
        return self.state == CONNECTED

    async def wait_connected(self, timeout: float | None = None) -> None:
        if self._connected_event is None:
            self._connected_event = asyncio.Event()
        if not await wait_event(self._connected_event, timeout):
            raise asyncio.TimeoutError("not connected to ZooKeeper")

    async def until_done(self, step: Callable[[], Awaitable[T]], what: str) -> T:
        """Run an idempotent step (a broker's start-up reads and registration) until it
        is not cut off by a lost connection or session, as Kafka's
        retryRequestsUntilConnected: a ZooKeeper blip during start-up waits instead of
        stopping the broker. Request handlers do not use it: they answer with an error."""
        while True:
            try:
                return await step()
            except CONNECTION_ERRORS as exc:
                log.warning("zookeeper %s: %s interrupted (%r); retrying once connected", self.hosts, what, exc)
                # The error can reach the loop before the state change does: pause so
                # that a stale "connected" does not spin.
                await asyncio.sleep(0.1)
                await self.wait_connected()

    # --- state listeners -------------------------------------------------------------

    def add_state_listener(self, fn: Callable[[str], Any]) -> None:
        """fn(state) on the loop for every CONNECTED/SUSPENDED/LOST transition."""
        self._state_hooks.append(fn)

    def on_session_reestablished(self, fn: Hook) -> None:
        """fn() on the loop when a NEW session is up after the previous one was lost."""
        self._reestablished_hooks.append(fn)

    def on_session_lost(self, fn: Hook) -> None:
        """fn() on the loop when the session expired (ephemeral znodes are gone)."""
        self._lost_hooks.append(fn)

    def _kazoo_listener(self, state: str) -> None:
        # kazoo's thread: must not block; hand over to the loop.
        self._threadsafe(self._on_state, state)

    def _on_state(self, state: str) -> None:
        prev = self.state
        self.state = state
        if self._connected_event is None:
            self._connected_event = asyncio.Event()
        if state == CONNECTED:
            self._connected_event.set()
        else:
            self._connected_event.clear()
        log.info("zookeeper %s: %s -> %s", self.hosts, prev, state)
        for fn in list(self._state_hooks):
            self._run_hook(fn, state)
        if state == LOST and self._ever_connected:
            self._lost_since_connected = True
            for hook in list(self._lost_hooks):
                self._run_hook(hook)
        elif state == CONNECTED:
            if self._lost_since_connected:
                self._lost_since_connected = False
                for hook in list(self._reestablished_hooks):
                    self._run_hook(hook)
            self._ever_connected = True

    def _run_hook(self, fn: Callable, *args: Any) -> None:
        try:
            result = fn(*args)
            if asyncio.iscoroutine(result):
                task = self.loop.create_task(result)
                task.add_done_callback(_log_task_error)
        except Exception:
            log.exception("zookeeper state hook %r failed", fn)

    def _threadsafe(self, fn: Callable, *args: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # loop closed: the process is shutting down

    # --- requests --------------------------------------------------------------------

    def _wrap(self, async_result) -> Awaitable:
        loop = self.loop
        fut = loop.create_future()

        def transfer(res) -> None:
            if fut.cancelled():
                return
            try:
                value = res.get_nowait()
            except Exception as e:  # noqa: BLE001 - re-raised on the loop
                fut.set_exception(e)
            else:
                fut.set_result(value)

        def on_done(res) -> None:  # kazoo's completion thread
            self._threadsafe(transfer, res)

        async_result.rawlink(on_done)
        return fut

    def _watcher(self, fn: Callable | None) -> Callable | None:
        if fn is None:
            return None

        def watcher(event) -> None:  # kazoo's event thread
            self._threadsafe(fn, event)

        return watcher

    async def get(self, path: str, watch: Callable | None = None) -> tuple[bytes, ZnodeStat]:
        return await self._wrap(self.client.get_async(path, watch=self._watcher(watch)))

    async def get_children(self, path: str, watch: Callable | None = None) -> list[str]:
        return await self._wrap(self.client.get_children_async(path, watch=self._watcher(watch)))

    async def exists(self, path: str, watch: Callable | None = None) -> ZnodeStat | None:
        return await self._wrap(self.client.exists_async(path, watch=self._watcher(watch)))

    async def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        return await self._wrap(
            self.client.create_async(
                path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath
            )
        )

    async def ensure_path(self, path: str) -> None:
        await self._wrap(self.client.ensure_path_async(path))

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return await self._wrap(self.client.set_async(path, value, version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._wrap(self.client.delete_async(path, version))

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """getData of every path (None: no such node), in multiRead requests of up to
        MAX_READS_PER_REQUEST, all in flight at once; one by one on a ZooKeeper without
        multiRead (before 3.6)."""
        return await self._read_many([get_data_op(self._chrooted(p)) for p in paths], paths,
                                     self.get)

    async def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        """getChildren of every path (None: no such node), as get_many."""
        return await self._read_many([get_children_op(self._chrooted(p)) for p in paths], paths,
                                     self.get_children)

    def _chrooted(self, path: str) -> str:
        chroot = self.client.chroot
        return chroot + path if chroot else path

    async def _read_many(self, ops: list, paths: Sequence[str], one: Callable) -> list:
        if self._multi_read_supported:
            chunks = [ops[i:i + MAX_READS_PER_REQUEST] for i in range(0, len(ops), MAX_READS_PER_REQUEST)]
            try:
                replies = await asyncio.gather(*(self._multi_read(c) for c in chunks))
            except (UnimplementedError, BadArgumentsError, MarshallingError) as e:
                log.warning("zookeeper %s: no multiRead (%r); reading one znode at a time", self.hosts, e)
                self._multi_read_supported = False
            else:
                out: list = []
                for reply in replies:
                    for r in reply:
                        if isinstance(r, NoNodeError):
                            out.append(None)
                        elif isinstance(r, Exception):
                            raise r
                        else:
                            out.append(r)
                return out

        async def single(path: str) -> Any:
            try:
                return await one(path)
            except NoNodeError:
                return None

        return list(await asyncio.gather(*(single(p) for p in paths)))

    def _multi_read(self, ops: list) -> Awaitable:
        async_result = self.client.handler.async_result()
        self.client._call(MultiRead(ops), async_result)
        return self._wrap(async_result)

    async def multi(self, ops: Iterable[tuple]) -> list:
        """Atomic multi. ops: ("check", path, version) | ("create", path, value[, ephemeral])
        | ("set", path, value[, version]) | ("delete", path[, version]).
        Returns kazoo's per-op results; raises ZkTransactionError(cause) when it failed,
        cause being the first real error (NodeExistsError, BadVersionError, ...)."""
        t = self.client.transaction()
        for op in ops:
            kind = op[0]
            if kind == "check":
                t.check(op[1], op[2])
            elif kind == "create":
                t.create(op[1], op[2], ephemeral=len(op) > 3 and bool(op[3]))
            elif kind == "set":
                t.set_data(op[1], op[2], op[3] if len(op) > 3 else -1)
            elif kind == "delete":
                t.delete(op[1], op[2] if len(op) > 2 else -1)
            else:
                raise ValueError(f"unknown multi op {kind!r}")
        results = await self._wrap(t.commit_async())
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            real = [r for r in failures if not isinstance(r, RolledBackError)]
            raise ZkTransactionError(real[0] if real else failures[0], results)
        return results

    # --- persistent watches (kazoo recipes; survive reconnects and session loss) -------

    async def children_watch(self, path: str, fn: Callable[[list[str]], Any]) -> WatchHandle:
        """fn(children) on the loop now and after every change of path's children.
        The path must exist (the recipe stops when it is deleted)."""
        handle = WatchHandle()

        def func(children):  # kazoo thread
            if not handle.active:
                return False
            self._threadsafe(self._deliver, handle, fn, children)
            return True

        # The recipe's constructor reads synchronously: build it off the loop.
        await self.loop.run_in_executor(
            None, lambda: ChildrenWatch(self.client, path, func, allow_session_lost=True)
        )
        return handle

    async def data_watch(
        self, path: str, fn: Callable[[bytes | None, ZnodeStat | None], Any]
    ) -> WatchHandle:
        """fn(data, stat) on the loop now and after every change (None, None: no node)."""
        handle = WatchHandle()

        def func(data, stat):  # kazoo thread
            if not handle.active:
                return False
            self._threadsafe(self._deliver, handle, fn, data, stat)
            return True

        await self.loop.run_in_executor(None, lambda: DataWatch(self.client, path, func))
        return handle

    def _deliver(self, handle: WatchHandle, fn: Callable, *args: Any) -> None:
        if handle.active:
            self._run_hook(fn, *args)


def _log_task_error(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("zookeeper hook task failed", exc_info=task.exception())
