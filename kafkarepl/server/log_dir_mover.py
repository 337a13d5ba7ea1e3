"""JBOD replica moves between this broker's log dirs (AlterReplicaLogDirs, Kafka's
ReplicaManager.alterReplicaLogDirs + ReplicaAlterLogDirsThread).

A move fills a future log in the destination dir from the current log (storage.log_copy)
while the partition keeps serving: the bulk copy runs on the mover's thread, chunk by
chunk (replica.alter.log.dirs.io.max.bytes.per.second throttles it), the loop only hands
out the byte ranges. Once less than FINAL_BYTES remain, one loop step copies the rest,
swaps the logs (LogManager.replace_current_with_future) and points the partition at the
new log, with no await in between: no append can fall between the copy and the swap.
The log cleaner leaves the partition alone during the move, as Kafka pauses it.

A replica not on this broker yet: the destination is remembered (Kafka's preferred log
dir) and the log is created there when the replica comes; the answer is
REPLICA_NOT_AVAILABLE, as Kafka's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import ReplicaManager, TopicPartition
from kafkarepl.storage import Log
from kafkarepl.storage.cleaner import Throttle
from kafkarepl.storage.fsync import fsync_dir
from kafkarepl.storage.log_copy import LogCopy, RestartCopy, future_dir_name
from kafkarepl.storage.manager import LogManager

log = logging.getLogger(__name__)

CHUNK_BYTES = 4 << 20  # one thread hop per chunk
FINAL_BYTES = 256 << 10  # what the swap step may still copy on the loop (~10 ms)
RATE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
MAX_PREFERRED = 10_000  # preferred dirs kept for partitions not (yet) in the metadata


@dataclass
class Move:
    tp: TopicPartition
    dest: Path
    task: asyncio.Task | None = None
    copied_bytes: int = 0
    restarts: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class LogDirMover:
    def __init__(self, log_manager: LogManager, replicas: ReplicaManager,
                 pause_cleaning: Callable[[TopicPartition], None],
                 resume_cleaning: Callable[[TopicPartition], None],
                 on_swapped: Callable[[TopicPartition, Path, Path], Any] | None = None, *,
                 known: Callable[[TopicPartition], bool] = lambda tp: True,
                 max_preferred: int = MAX_PREFERRED,
                 chunk_bytes: int = CHUNK_BYTES, final_bytes: int = FINAL_BYTES) -> None:
        self.log_manager = log_manager
        self.replicas = replicas
        self.pause_cleaning = pause_cleaning
        self.resume_cleaning = resume_cleaning
        self.on_swapped = on_swapped  # (tp, old dir, new dir): the checkpoints of the dirs involved
        self.known = known  # the partition is in the cluster's metadata
        self.max_preferred = max_preferred
        self.moves: dict[TopicPartition, Move] = {}
        self.chunk_bytes = chunk_bytes
        self.final_bytes = final_bytes
        self.rate = float("inf")
        self._throttles: set[Throttle] = set()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-dir-mover")
        self.completed = 0  # a metric

    # ------------------------------------------------------------------ requests -----
    def alter(self, tp: TopicPartition, path: str) -> ErrorCode:
        """One partition of an AlterReplicaLogDirs request (Kafka's order of checks)."""
        lm = self.log_manager
        if len(future_dir_name(tp.topic, tp.partition).encode()) > 255:  # a file name's limit (KAFKA-4893)
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        d = lm.log_dir(path)
        if d is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if d in lm.offline_dirs or (tp.topic, tp.partition) in lm.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR  # a failed dir, as Kafka's "offline" answer
        move = self.moves.get(tp)
        if move is not None and move.dest != d:
            move.dest = d  # the running move drops its future log and starts over there
        if self.replicas.get(tp) is None or lm.get_log(tp.topic, tp.partition) is None:
            # Remembered for when the replica comes, as Kafka's preferred log dir (the
            # reassign tool asks right after creating the reassignment, often before this
            # broker's metadata has the topic). Past MAX_PREFERRED entries only partitions
            # the metadata knows are: a client naming made-up partitions cannot grow the
            # map without bound.
            if self.known(tp) or lm.preferred_count() < self.max_preferred:
                lm.set_preferred_dir(tp.topic, tp.partition, d)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        lm.set_preferred_dir(tp.topic, tp.partition, d)
        if move is None and lm.log_dir_of(tp.topic, tp.partition) != d:
            self.start(tp, d)
        return ErrorCode.NONE

    def start(self, tp: TopicPartition, d: Path) -> Move:
        move = self.moves[tp] = Move(tp, d)
        move.task = asyncio.ensure_future(self._run(move))
        return move

    def resume_interrupted(self) -> None:
        """Moves a stop or crash interrupted (their future logs were dropped at startup)."""
        for (topic, partition), d in sorted(self.log_manager.pending_moves.items()):
            tp = TopicPartition(topic, partition)
            if tp not in self.moves and self.log_manager.get_log(topic, partition) is not None:
                log.info("%s-%d: restarting the interrupted move to %s", topic, partition, d)
                self.start(tp, d)
        self.log_manager.pending_moves.clear()

    def set_rate(self, value: str | None) -> None:
        try:
            rate = float(value) if value is not None else float("inf")
        except ValueError:
            rate = float("inf")
        self.rate = rate if rate > 0 else float("inf")
        for t in self._throttles:
            t.rate = self.rate

    # ------------------------------------------------------------------ the move -----
    async def _run(self, move: Move) -> None:
        tp = move.tp
        lm = self.log_manager
        self.pause_cleaning(tp)
        try:
            while True:
                source = lm.get_log(tp.topic, tp.partition)
                if source is None:
                    return  # deleted meanwhile (its future log went with it)
                if lm.log_dir_of(tp.topic, tp.partition) == move.dest:
                    lm.abort_future((tp.topic, tp.partition))
                    return
                if move.dest in lm.offline_dirs:  # failed under the move (its future log went with it)
                    log.warning("%s-%d: the move to %s is dropped: the log dir is offline", tp.topic, tp.partition,
                                move.dest)
                    return
                fut = lm.future_log(tp.topic, tp.partition)
                if fut is not None and fut.dir.parent != move.dest:
                    lm.abort_future((tp.topic, tp.partition))  # the destination changed
                    fut = None
                if fut is None:
                    fut = lm.create_future_log(tp.topic, tp.partition, move.dest)
                    await self._on_thread(fsync_dir, move.dest)
                    log.info("%s-%d: moving from %s to %s", tp.topic, tp.partition,
                             lm.log_dir_of(tp.topic, tp.partition), move.dest)
                if await self._copy(move, source, fut):
                    return
        except Exception:
            log.exception("%s-%d: the move to %s failed; dropping its future log", tp.topic, tp.partition,
                          move.dest)
            if lm.future_log(tp.topic, tp.partition) is not None:
                lm.abort_future((tp.topic, tp.partition))
        finally:
            if self.moves.get(tp) is move:
                del self.moves[tp]
            self.resume_cleaning(tp)
            move.done.set()

    def _current(self, move: Move, source: Log, fut: Log) -> bool:
        lm = self.log_manager
        tp = move.tp
        return (lm.get_log(tp.topic, tp.partition) is source and lm.future_log(tp.topic, tp.partition) is fut
                and fut.dir.parent == move.dest)

    async def _copy(self, move: Move, source: Log, fut: Log) -> bool:
        """Fill `fut` and swap it in: True when done, False to look again (the log or the
        destination changed)."""
        tp = move.tp
        copy = LogCopy(source, fut)
        throttle = Throttle(self.rate)
        self._throttles.add(throttle)
        presynced = False
        try:
            while True:
                if not self._current(move, source, fut):
                    return False
                try:
                    if copy.remaining_bytes() > self.final_bytes:
                        # a throttled copy in chunks of a tenth of a second's worth
                        limit = self.chunk_bytes if self.rate == float("inf") else \
                            int(min(self.chunk_bytes, max(16384, self.rate / 10)))
                        chunk = copy.next_chunk(limit)
                        if chunk is not None:
                            move.copied_bytes += await self._on_thread(_copy_chunk, copy, chunk, throttle)
                            continue
                    # Nearly there: what was copied made durable off the loop (once; the
                    # appends meanwhile are then caught up by more rounds), then the last
                    # bytes and the swap in one loop step.
                    if not presynced:
                        await self._on_thread(_presync, fut, _dup_log_fd(source),
                                              [source.dir.parent, fut.dir.parent])
                        presynced = True
                        continue
                    self._swap(move, copy)
                    return True
                except RestartCopy as exc:
                    if not self._current(move, source, fut):
                        return False
                    move.restarts += 1
                    log.info("%s-%d: the log changed under the move (%s); copying again", tp.topic, tp.partition,
                             exc)
                    copy.restart()
                    presynced = False
                except Exception:
                    if not self._current(move, source, fut):  # deleted or cancelled under the copy
                        return False
                    raise
        finally:
            self._throttles.discard(throttle)

    def _swap(self, move: Move, copy: LogCopy) -> None:
        """On the loop, no await: the last bytes, the renames, the partition's new log."""
        tp = move.tp
        source, fut = copy.source, copy.future
        t0 = time.monotonic()
        before = copy.copied_bytes
        if not copy.finish(self.final_bytes):
            raise RestartCopy("the final catch-up found the copy stale")
        move.copied_bytes += copy.copied_bytes - before
        if source.recovery_point > fut.recovery_point:  # flushed there (strict flush settings)
            fut.flush(source.recovery_point)
        t1 = time.monotonic()
        old_dir = source.dir.parent
        new = self.log_manager.replace_current_with_future(tp.topic, tp.partition)
        p = self.replicas.get(tp)
        if p is not None and p.log is source:
            p.log = new
        self.completed += 1
        log.info("%s-%d: moved to %s (%d bytes copied, %d restarts; on the loop: %d bytes caught up in "
                 "%.1f ms, swap marker, renames and fsyncs %.1f ms)", tp.topic, tp.partition, move.dest,
                 move.copied_bytes, move.restarts, copy.copied_bytes - before, (t1 - t0) * 1000,
                 (time.monotonic() - t1) * 1000)
        if self.on_swapped is not None:
            self.on_swapped(tp, old_dir, move.dest)

    async def _on_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # ------------------------------------------------------------------ views / stop -----
    def future_lag(self, tp: TopicPartition) -> int:
        """Kafka's offset lag of a future log: the current log's LEO minus the future's."""
        lm = self.log_manager
        cur, fut = lm.get_log(tp.topic, tp.partition), lm.future_log(tp.topic, tp.partition)
        if cur is None or fut is None:
            return -1
        return max(0, cur.log_end_offset - fut.log_end_offset)

    async def shutdown(self) -> None:
        tasks = [m.task for m in self.moves.values() if m.task is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._executor.shutdown(wait=True)


def _dup_log_fd(lg: Log) -> list[int]:
    fd = lg.active_segment.fd
    return [os.dup(fd)] if fd >= 0 else []


def _presync(fut: Log, source_fds: list[int], dirs: list[Path]) -> None:
    """Before the swap step, off the loop: the future log durable, and the dirty data the
    swap's directory fsyncs would otherwise wait for (a journal commit writes out the
    appended blocks of the source's active segment too) written out, so that the loop
    waits little. The source's recovery point is not moved."""
    fut.flush()
    try:
        for fd in source_fds:
            os.fdatasync(fd)
    finally:
        for fd in source_fds:
            os.close(fd)
    for d in dirs:
        fsync_dir(d)


def _copy_chunk(copy: LogCopy, chunk: Any, throttle: Throttle) -> int:
    n = copy.copy(chunk)
    throttle(n)
    return n
