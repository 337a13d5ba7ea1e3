"""The broker's log cleaner (log compaction), as Kafka's LogCleanerManager schedules it.

Every log.cleaner.backoff.ms each idle cleaner thread (log.cleaner.threads) takes the
dirtiest compacted log: the one with the largest share of dirty bytes (written since its
last cleaning) at or above its min.cleanable.dirty.ratio, or any log whose oldest dirty
record is older than max.compaction.lag.ms, or any log whose earliest delete horizon
(KIP-534: the time after which a cleaning removes a kept tombstone or marker) has passed,
even without dirty bytes. The plan is made on the event loop, the
cleaning (storage/cleaner.py: offset map, rewriting, fsync, `.swap` files) runs on the
cleaner thread, and the swap happens back on the loop, where appends, reads and
truncations happen; a log truncated meanwhile is not swapped. The first dirty offset of
each log is kept in `cleaner-offset-checkpoint` per log dir (Kafka's file and format), the
earliest delete horizon in `cleaner-delete-horizon-checkpoint` (same format, ms instead
of offsets; not a Kafka file), so a restarted broker still removes expired tombstones of
a log nobody writes to.
Followers clean their own logs, as every Kafka replica does. A log whose cleaning fails
(a corrupt segment, an I/O error) is marked uncleanable and skipped until it is deleted or
recreated, as Kafka's LogCleanerManager does, instead of being read again every backoff.
The metrics are Kafka's LogCleaner and LogCleanerManager gauges (metrics()).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkarepl import _core
from kafkarepl.errors import CheckpointCorruptError
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.io_priority import set_thread_io_priority
from kafkarepl.storage.checkpoints import read_offsets, write_offsets
from kafkarepl.storage.cleaner import (
    MAP_SLOT_BYTES,
    CleaningPlan,
    CleaningResult,
    MapBuffer,
    Throttle,
    clean,
)
from kafkarepl.storage.disk_errors import DISK_ONLY, disk_error
from kafkarepl.storage.fsync import fsync_dir
from kafkarepl.storage.log import Log
from kafkarepl.storage.manager import LogManager

log = logging.getLogger(__name__)

# A cleaner thread takes the GIL back after every C call (one per 1 MiB piece); with
# Python's default 5 ms switch interval the event loop, waking up for a request while
# the cleaner holds it, may wait up to that long. 1 ms bounds the wait (the broker's
# other threads mostly sleep, so more frequent switch requests cost next to nothing).
# (A lower nice value for cleaner threads was tried: worse, a descheduled cleaner thread
# holding the GIL then stalls the loop for a whole scheduling period.)
SWITCH_INTERVAL_S = 0.001


# Errors of the disk or file system (not e.g. ENOMEM for the offset map): the cleaner
# fails the log dir on these, as Kafka's on an IOException.
def _cleaner_thread_started(yield_interval_us: int, nice: int, sched_idle: bool, io_priority: str) -> None:
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
    _core.set_bulk_yield_interval(yield_interval_us * 1000)
    tid = threading.get_native_id()
    try:  # Linux, per thread; lowering a thread's own priority needs no privilege
        if sched_idle:  # preempted at once by any normal thread that wakes (the loop)
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        elif nice > 0:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (OSError, AttributeError) as exc:
        log.warning("cleaner thread priority (nice %d, SCHED_IDLE %s) not set: %s", nice, sched_idle, exc)
    if io_priority:
        try:
            set_thread_io_priority(tid, io_priority)
        except OSError as exc:
            log.warning("cleaner thread I/O priority %r not set: %s", io_priority, exc)

# Between two swap steps (one cleaned group each, 0.1-0.3 ms on the loop) the loop runs
# for this long: a request needs several loop turns (read, handle, append, answer), and
# with a bare `sleep(0)` each of its turns could wait behind another step. The swap takes
# a few ms longer; groups swap one at a time either way, each whole.
SWAP_STEP_PAUSE_S = 0.001

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
HORIZON_CHECKPOINT = "cleaner-delete-horizon-checkpoint"
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class CleanerStats:
    """What one cleaning did (Kafka's CleanerStats, the parts its gauges read)."""

    bytes_read: int
    bytes_written: int
    elapsed_s: float
    buffer_utilization: float  # keys mapped / the thread's dedupe buffer's slots


def compaction_delay_ms(lg: Log, first_dirty: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the log's earliest dirty record is (Kafka's
    LogCleanerManager.maxCompactionDelay: the first batch timestamps of the dirty
    segments but the active one); 0 when none is overdue."""
    stamps = [seg.first_batch_timestamp for seg in lg.segments[:-1]
              if seg.next_offset > first_dirty and seg.first_batch_timestamp]
    clean_until = now_ms - max(lg.config.max_compaction_lag_ms, 0)
    earliest = min(stamps, default=clean_until)
    return max(0, clean_until - earliest)


class LogCleanerService:
    def __init__(self, log_manager: LogManager, config: BrokerConfig,
                 high_watermark: Callable[[str, int], int | None],
                 wall_ms: Callable[[], int]) -> None:
        self.log_manager = log_manager
        self.config = config
        self.high_watermark = high_watermark  # the partition's HW (leader or follower), None if unknown
        self.wall_ms = wall_ms
        threads = max(1, config.log_cleaner_threads)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            threads, thread_name_prefix="log-cleaner", initializer=_cleaner_thread_started,
            initargs=(config.log_cleaner_yield_interval_us, config.log_cleaner_thread_nice,
                      config.log_cleaner_thread_sched_idle, config.log_cleaner_thread_io_priority))
        # Checkpoint files are written by one thread, in the order the loop asks: with
        # log.cleaner.threads > 1 two writes of one dir's file would share its `.tmp`.
        self._checkpoint_writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cleaner-checkpoint")
        self._local = threading.local()  # each cleaner thread's MapBuffer
        self._map_bytes = config.log_cleaner_dedupe_buffer_size // threads
        self._threads = threads
        self._busy: set[TopicPartition] = set()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._horizons: dict[Path, dict[TopicPartition, int]] = {}  # earliest delete horizon
        self.cleanings = 0  # completed cleanings (a metric)
        self.records_removed = 0
        # Kafka's gauges: each thread's last cleaning, the last selection, the last run
        self._last_stats: deque[CleanerStats] = deque(maxlen=threads)
        self._max_dirty_ratio = 0.0
        self._max_compaction_delay_ms = 0
        self._last_run_ms: int | None = None
        self._uncleanable: dict[TopicPartition, Log] = {}  # until that log object goes
        self._paused: set[TopicPartition] = set()  # moving between log dirs (log_dir_mover)

    def pause(self, tp: TopicPartition) -> None:
        """Not cleaned until resume(tp) (Kafka's abortAndPauseCleaning, minus the abort: a
        cleaning in flight may still swap; the move copies by offset, unaffected)."""
        self._paused.add(tp)

    def resume(self, tp: TopicPartition) -> None:
        self._paused.discard(tp)

    # ------------------------------------------------------------ checkpoints -----
    def first_dirty(self, tp: TopicPartition) -> int:
        d = self.log_manager.log_dir_of(*tp)
        if d is None:
            return 0
        return self.first_dirty_in(d).get(tp, 0)

    def first_dirty_in(self, d: Path) -> dict[TopicPartition, int]:
        if d not in self._checkpoints:
            try:
                self._checkpoints[d] = read_offsets(d / CLEANER_CHECKPOINT)
            except CheckpointCorruptError as exc:
                log.error("%s; cleaning every compacted log from its start", exc)
                self._checkpoints[d] = {}
        return self._checkpoints[d]

    async def alter_checkpoint_dir(self, tp: TopicPartition, src: Path, dest: Path) -> None:
        """The log moved from log dir `src` to `dest` (JBOD): its cleaner offset and delete
        horizon go with it (Kafka's alterCheckpointDir), else its next cleaning would start
        from the log start and expired tombstones would wait for the dirty ratio. Both dirs'
        files are written in order with the cleanings' own checkpoint writes."""
        for d in (src, dest):
            self.first_dirty_in(d)
            self.delete_horizon_in(d)
        offset = self._checkpoints[src].pop(tp, None)
        horizon = self._horizons[src].pop(tp, None)
        if offset is not None:
            self._checkpoints[dest][tp] = offset
        if horizon is not None:
            self._horizons[dest][tp] = horizon
        if offset is None and horizon is None:
            return
        for d in (src, dest):
            try:
                await self._write_checkpoint(d, CLEANER_CHECKPOINT, self._checkpoints)
                await self._write_checkpoint(d, HORIZON_CHECKPOINT, self._horizons)
            except OSError as exc:  # a failed disk is reported; the other dir is still written
                log.error("%s-%d: the cleaner checkpoints of %s could not be written: %s", *tp, d, exc)

    async def _write_checkpoint(self, d: Path, name: str, table: dict[Path, dict[TopicPartition, int]]) -> None:
        """One of dir `d`'s cleaner checkpoint files, on the single checkpoint thread (two
        writes of a file must not share its .tmp). A disk error fails the dir, as Kafka."""
        try:
            await asyncio.get_running_loop().run_in_executor(
                self._checkpoint_writer, write_offsets, d / name, self._checkpoint_of(d, table))
        except OSError as exc:
            if disk_error(exc) is not None:
                self.log_manager.dir_failed(d, exc)
            raise

    def _set_first_dirty(self, tp: TopicPartition, offset: int) -> Path | None:
        d = self.log_manager.log_dir_of(*tp)
        if d is None:
            return None
        self._checkpoints.setdefault(d, {})[tp] = offset
        return d

    def _checkpoint_of(self, d: Path, which: dict[Path, dict[TopicPartition, int]] | None = None
                       ) -> dict[TopicPartition, int]:
        live = self.log_manager.logs()
        src = self._checkpoints if which is None else which
        return {tp: o for tp, o in src.get(d, {}).items() if tp in live}

    def delete_horizon(self, tp: TopicPartition) -> int | None:
        """The earliest delete horizon of the log's kept tombstones and markers, if any."""
        d = self.log_manager.log_dir_of(*tp)
        if d is None:
            return None
        return self.delete_horizon_in(d).get(tp)

    def delete_horizon_in(self, d: Path) -> dict[TopicPartition, int]:
        if d not in self._horizons:
            try:
                self._horizons[d] = read_offsets(d / HORIZON_CHECKPOINT)
            except CheckpointCorruptError as exc:
                log.error("%s; delete horizons are learnt again from new cleanings", exc)
                self._horizons[d] = {}
        return self._horizons[d]

    def _set_delete_horizon(self, tp: TopicPartition, horizon: int | None) -> Path | None:
        """Records the log's horizon; the log dir when it changed (to be written)."""
        d = self.log_manager.log_dir_of(*tp)
        if d is None or self.delete_horizon(tp) == horizon:
            return None
        if horizon is None:
            self._horizons[d].pop(tp, None)
        else:
            self._horizons[d][tp] = horizon
        return d

    # ------------------------------------------------------------ choosing -----
    def _candidates(self, now_ms: int) -> list[tuple[float, TopicPartition, Log, int, int]]:
        out = []
        logs = self.log_manager.logs()
        for tp in [tp for tp, lg in self._uncleanable.items() if logs.get(tp) is not lg]:
            del self._uncleanable[tp]  # deleted or recreated: cleanable again
        max_ratio, max_delay = 0.0, 0
        for tp, lg in logs.items():
            cfg = lg.config
            if ("compact" not in cfg.cleanup_policy or tp in self._busy or tp in self._uncleanable
                    or tp in self._paused):
                continue
            hw = self.high_watermark(*tp)
            if hw is None:
                continue
            first_dirty, end, dirty = lg.cleanable_range(self.first_dirty(tp), hw, now_ms)
            delay = compaction_delay_ms(lg, first_dirty, now_ms)
            max_delay = max(max_delay, delay)
            horizon = self.delete_horizon(tp)
            expired = horizon is not None and now_ms >= horizon  # tombstones to remove
            if end <= lg.log_start_offset or (dirty == 0 and not expired):
                continue
            total = sum(seg.size for seg in lg.segments if seg.next_offset <= end) or 1
            ratio = dirty / total
            overdue = delay > 0
            if ratio >= cfg.min_cleanable_dirty_ratio or overdue or expired:
                out.append((2.0 if overdue else ratio, tp, lg, first_dirty, end))
                max_ratio = max(max_ratio, ratio)
        out.sort(key=lambda c: c[0], reverse=True)
        self._max_dirty_ratio, self._max_compaction_delay_ms = max_ratio, max_delay
        return out

    async def run_once(self) -> int:
        """Clean the dirtiest logs, one per idle thread; returns how many were cleaned."""
        if not self.config.log_cleaner_enable:
            return 0
        now = self.wall_ms()
        self._last_run_ms = now
        picks = self._candidates(now)[: max(0, self._threads - len(self._busy))]
        if not picks:
            return 0
        done = await asyncio.gather(*(self._clean_one(tp, lg, fd, end, now) for _r, tp, lg, fd, end in picks))
        return sum(done)

    async def _clean_one(self, tp: TopicPartition, lg: Log, first_dirty: int, end: int, now_ms: int) -> int:
        loop = asyncio.get_running_loop()
        self._busy.add(tp)
        t0 = time.monotonic()
        plan = lg.cleaning_plan(first_dirty, end, now_ms)
        result: CleaningResult | None = None
        try:
            throttle = Throttle(self.config.log_cleaner_io_max_bytes_per_second)
            result = await loop.run_in_executor(self._executor, self._clean_on_thread, plan, throttle)
            pause_ms = self.config.log_cleaner_test_pause_before_swap_ms
            if pause_ms > 0:  # test-only: a window where a kill -9 finds the cleaning staged
                log.warning("%s-%d: cleaned segments staged; holding the swap %d ms "
                            "(kafkarepl.log.cleaner.test.pause.before.swap.ms)", tp[0], tp[1], pause_ms)
                await asyncio.sleep(pause_ms / 1000)
            t1 = time.monotonic()
            # The swap in two steps on the loop; the directory fsyncs, which wait for the
            # disk the cleaning kept busy, run on the cleaner thread in between.
            # One group per step, SWAP_STEP_PAUSE_S apart, so that requests wait at most
            # one group's file operations (0.1-0.3 ms).
            on_loop = 0.0
            swapped = True
            for step in (lg.begin_swap, None, lg.complete_swap):
                if step is None:
                    await loop.run_in_executor(self._executor, fsync_dir, lg.dir)
                    continue
                for g in result.groups:
                    t = time.monotonic()
                    swapped = self.log_manager.get_log(*tp) is lg and step(plan, result, [g])
                    on_loop += time.monotonic() - t
                    if not swapped:
                        break
                    await asyncio.sleep(SWAP_STEP_PAUSE_S)
                if not swapped:
                    log.info("%s-%d: changed while cleaning; the cleaning is discarded", *tp)
                    return 0
            swap_ms = (time.monotonic() - t1) * 1000
            on_loop_ms = on_loop * 1000
            await loop.run_in_executor(self._executor, fsync_dir, lg.dir)
            self.cleanings += 1
            self.records_removed += result.records_removed
            try:  # the cleaning is done: a checkpoint that cannot be written fails its dir, not the log
                d = self._set_first_dirty(tp, result.cleaned_up_to)
                if d is not None:
                    await self._write_checkpoint(d, CLEANER_CHECKPOINT, self._checkpoints)
                d = self._set_delete_horizon(tp, result.delete_horizon)
                if d is not None:
                    await self._write_checkpoint(d, HORIZON_CHECKPOINT, self._horizons)
            except OSError as exc:
                log.error("%s-%d: cleaned, but its cleaner checkpoints could not be written: %s", *tp, exc)
            log.info("%s-%d: cleaned up to offset %d: %d segments -> %d, %d records removed, "
                     "%d -> %d bytes in %.2f s (offset map %.2f s; swap %.1f ms, %.1f ms of it on the loop)",
                     tp[0], tp[1], result.cleaned_up_to, len(plan.segments), len(result.groups),
                     result.records_removed, result.bytes_read, result.bytes_written, t1 - t0,
                     result.map_seconds, swap_ms, on_loop_ms)
            self._last_stats.append(CleanerStats(
                result.bytes_read, result.bytes_written, time.monotonic() - t0,
                result.map_entries / max(1, self._map_bytes // MAP_SLOT_BYTES)))
            return 1
        except Exception as exc:  # noqa: BLE001 - a log the cleaner cannot clean stays as it is
            if self.log_manager.get_log(*tp) is not lg:  # deleted or replaced meanwhile
                log.info("%s-%d: cleaning aborted: the log went away", *tp)
                return 0
            disk = disk_error(exc, DISK_ONLY)
            if disk is not None:
                # As Kafka's cleaner on an IOException: the log dir is failed (taken
                # offline, or the broker halts if it was the last one), not the log.
                log.error("%s-%d: Failed to clean up log in dir %s due to %r", *tp, lg.dir.parent, disk)
                self.log_manager.dir_failed(lg.dir.parent, disk)
                return 0
            # As Kafka: skipped from now on (until deleted or recreated), not read again
            # every backoff; counted in the uncleanable-partitions gauges.
            self._uncleanable[tp] = lg
            log.exception("%s-%d: unexpected exception while cleaning; marking the partition "
                          "uncleanable", *tp)
            return 0
        finally:
            plan.close()
            if result is not None:
                result.close()  # segments of groups not swapped in
            self._busy.discard(tp)

    def metrics(self) -> dict[str, float]:
        """Kafka's kafka.log LogCleaner and LogCleanerManager gauges, Prometheus-named;
        the uncleanable ones per log directory."""
        stats = list(self._last_stats)
        read = sum(st.bytes_read for st in stats)
        out: dict[str, float] = {
            "kafka_log_logcleaner_max_buffer_utilization_percent":
                int(100 * max((st.buffer_utilization for st in stats), default=0.0)),
            "kafka_log_logcleaner_cleaner_recopy_percent":
                int(100 * sum(st.bytes_written for st in stats) / max(read, 1)),
            "kafka_log_logcleaner_max_clean_time_secs": int(max((st.elapsed_s for st in stats), default=0.0)),
            "kafka_log_logcleaner_max_compaction_delay_secs": self._max_compaction_delay_ms // 1000,
            "kafka_log_logcleanermanager_max_dirty_percent": int(100 * self._max_dirty_ratio),
            "kafka_log_logcleanermanager_time_since_last_run_ms":
                0 if self._last_run_ms is None else max(0, self.wall_ms() - self._last_run_ms),
        }
        for d in self.log_manager.log_dirs:
            # Kafka's uncleanable-bytes: what the cleaning would have read (first dirty
            # segment up to the active one)
            mine = [(lg, self.first_dirty(tp)) for tp, lg in self._uncleanable.items()
                    if self.log_manager.log_dir_of(*tp) == d]
            label = f'{{logDirectory="{d}"}}'
            out[f"kafka_log_logcleanermanager_uncleanable_partitions_count{label}"] = len(mine)
            out[f"kafka_log_logcleanermanager_uncleanable_bytes{label}"] = sum(
                seg.size for lg, first_dirty in mine for seg in lg.segments[:-1] if seg.next_offset > first_dirty)
        return out

    def _clean_on_thread(self, plan: CleaningPlan, throttle: Throttle) -> CleaningResult:
        maps = getattr(self._local, "maps", None)
        if maps is None:
            maps = self._local.maps = MapBuffer(self._map_bytes)
        return clean(plan, None, throttle, self._map_bytes, self.config.log_cleaner_io_buffer_load_factor, maps)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)  # staged files of one in flight go at open
        self._checkpoint_writer.shutdown(wait=True)
