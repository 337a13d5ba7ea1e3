"""The flushes logs leave to the broker (Log.on_flush), run off the event loop.

A log asks for a flush up to an offset at a roll (the segments below the new one, as
Kafka's roll schedules) and when flush.messages is reached (up to the LEO: Kafka flushes
inline in the append, so the produce is answered, and a follower fetches again, only
after the fsync). Here the begin and the end of each flush stay on the loop, which owns
the log, and the fdatasyncs run in the flush executor; one task per log at a time, which
flushes up to the highest offset asked meanwhile (a group commit: under flush.messages=1
the appends that arrive during an fsync share the next one).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from kafkarepl.errors import KafkaStorageError
from kafkarepl.storage.log import Log, PendingFlush


class LogFlusher:
    def __init__(self, executor: concurrent.futures.Executor,
                 spawn: Callable[[Coroutine[Any, Any, Any], str], None],
                 on_flushed: Callable[[Log], None]) -> None:
        self._executor = executor  # the fdatasyncs' thread
        self._spawn = spawn  # runs a task nobody awaits (the broker's _background)
        self._on_flushed = on_flushed  # a log's recovery point moved: its parked produces
        self._targets: dict[Log, int] = {}  # logs with a flush task: the highest offset asked
        self._waiters: dict[Log, list[tuple[int, asyncio.Future[None]]]] = {}
        self.active = False  # set while the broker's loop runs tasks (start to shutdown)

    def request(self, lg: Log, offset: int) -> None:
        """Log.on_flush (on the loop, inside the append that asks): flush `lg` up to
        `offset` soon."""
        if not self.active:
            lg.flush(offset)  # no loop to run a task on (a broker starting or stopping)
            return
        if lg in self._targets:
            self._targets[lg] = max(self._targets[lg], offset)
            return
        self._targets[lg] = offset
        self._spawn(self._flush(lg), f"flush of {lg.tp}")

    async def _flush(self, lg: Log) -> None:
        try:
            while not lg.closed:
                target = self._targets[lg]
                if lg.recovery_point >= min(target, lg.log_end_offset):
                    break
                pending = lg.begin_flush(target)
                if not await self.run(lg, pending):
                    break
                self._on_flushed(lg)
                self._release(lg, lg.recovery_point)
        finally:
            del self._targets[lg]
            self._release(lg, None)

    async def run(self, lg: Log, pending: PendingFlush) -> bool:
        """The fdatasyncs of a begun flush in the flush executor, then its completion
        on the loop; False when they failed (run() has reported the disk error, which
        takes the log dir offline) or the log closed meanwhile."""
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, pending.run)
        except KafkaStorageError:
            return False
        if lg.closed:
            return False
        lg.complete_flush(pending)
        return True

    async def flushed(self, logs: Iterable[Log]) -> None:
        """Until each of `logs` is flushed up to its LEO as of now, or its flush task
        ends without (a failed disk, a closed log): a follower's next fetch, whose
        offset tells the leader this replica has the records, waits for the flush
        flush.messages asked for, as Kafka's fetcher thread does."""
        loop = asyncio.get_running_loop()
        waits = []
        for lg in logs:
            if lg in self._targets and lg.recovery_point < lg.log_end_offset:
                fut: asyncio.Future[None] = loop.create_future()
                self._waiters.setdefault(lg, []).append((lg.log_end_offset, fut))
                waits.append(fut)
        if waits:
            await asyncio.gather(*waits)

    def _release(self, lg: Log, upto: int | None) -> None:
        """Wake the waiters of `lg` whose offset is flushed (upto None: all of them)."""
        waiters = self._waiters.get(lg)
        if not waiters:
            return
        keep = []
        for offset, fut in waiters:
            if upto is None or offset <= upto:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((offset, fut))
        if keep:
            self._waiters[lg] = keep
        else:
            del self._waiters[lg]
