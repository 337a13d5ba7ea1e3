"""The log of one partition: a directory `<topic>-<partition>/` of segments.

Offsets are assigned here (leader) or checked (follower); reads return file ranges of
whole batches for sendfile; recovery after an unclean stop validates every batch from
the recovery point and cuts the log at the first torn or invalid one.
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
import random
import re
import shutil
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TypeVar

from kafkarepl import _core
from kafkarepl.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from kafkarepl.storage.cleaner import (
    STAGING_DIR,
    SWAP_SUFFIX,
    CleanedGroup,
    CleaningPlan,
    CleaningResult,
    SourceSegment,
)
from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.disk_errors import disk_error
from kafkarepl.storage.epoch_cache import CHECKPOINT_NAME, LeaderEpochCache
from kafkarepl.storage.fsync import fsync_dir
from kafkarepl.storage.janitor import JANITOR
from kafkarepl.storage.loader import load_segments, rebuild_from_headers, scan_directory
from kafkarepl.storage.log_validator import check_sizes, validate_leader_append
from kafkarepl.storage.producer_state import (
    PRODUCER_ID_EXPIRATION_MS,
    SNAPSHOT_NAME,
    ProducerStateTable,
)
from kafkarepl.storage.records import (
    NO_TIMESTAMP,
    set_log_append_time,
)
from kafkarepl.storage.segment import LogSegment, segment_file
from kafkarepl.storage.txn_index import SUFFIX as TXN_INDEX_SUFFIX
from kafkarepl.storage.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger("kafkarepl.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# The producer state as of a roll, `<new segment base>.snapshot` (Kafka's name and rule):
# after an unclean stop, or a truncation, only the segments from the newest one still
# standing are replayed, not the whole log.
ROLL_SNAPSHOT_SUFFIX = ".snapshot"


_closer = JANITOR  # descriptors of deleted segments are closed on its thread
# `<topic>-<partition>`, or a future log's `<topic>-<partition>.<uuid>-future` (storage.log_copy)
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)(?:\.[0-9a-f]{32}-future)?$")


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int
    size: int
    duplicate: bool = False


class FetchSlice(NamedTuple):
    """Whole batches in one segment file: send fd[position:position+size].
    first_offset is the base offset of the first batch (<= the offset asked for)."""

    fd: int
    position: int
    size: int
    first_offset: int


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` (or a future log's name) -> (topic, partition); ValueError
    otherwise."""
    m = _PARTITION_DIR.match(name)
    if not m:
        raise ValueError(f"not a partition directory name: {name!r}")
    return m.group(1), int(m.group(2))


_R = TypeVar("_R")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _writes(method: Callable[..., _R]) -> Callable[..., _R]:
    """A Log method that writes: an I/O error in it is reported to `on_io_error` (the
    LogManager's log dir failure handling, as Kafka's LogDirFailureChannel) before the
    caller gets KafkaStorageError (KAFKA_STORAGE_ERROR)."""
    @functools.wraps(method)
    def guarded(self: Log, *args: Any, **kwargs: Any) -> _R:
        try:
            return method(self, *args, **kwargs)
        except (OSError, KafkaStorageError) as exc:
            self._write_failed(exc, method.__name__)

    return guarded


class Log:
    def __init__(self, dir: Path, config: LogConfig) -> None:
        """Use Log.open()."""
        self.dir = dir
        self.topic, self.partition = parse_partition_dir(dir.name)
        self.tp = f"{self.topic}-{self.partition}"  # for messages (a rename keeps the partition)
        self.config = config
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        # False for a directory just created: the parent directory is fsynced (making its
        # entry durable) by the first flush, not at creation, so creating thousands of
        # partitions costs no fsync each. Only flushed data needs the entry to last.
        self.dir_entry_durable = True
        self.leader_epoch_cache = LeaderEpochCache(dir / CHECKPOINT_NAME)
        self.producer_state = ProducerStateTable()
        self._txn_indexes: dict[int, TransactionIndex] = {}  # segment base -> its aborted txns
        self.truncations = 0  # bumped by every truncation: a cleaning planned before is void
        self._snapshots: list[int] = []  # offsets of the roll snapshots on disk, ascending
        self._flushes: weakref.WeakSet[PendingFlush] = weakref.WeakSet()  # begun, not completed
        self._pending_swap: dict[int, list[Path]] | None = None  # group base -> swap files (begin_swap)
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        self._roll_jitter: tuple[LogSegment, int] | None = None  # the active segment's segment.jitter.ms share
        self._closed = False
        # Told of every I/O error of a write or a read (the owner takes the log dir down); None: only raised.
        self.on_io_error: Callable[[BaseException], None] | None = None
        # Told of each flush the log wants and leaves to its owner, to run off its thread
        # (begin_flush up to the offset, PendingFlush.run, complete_flush): a roll's, up
        # to the new segment's base (Kafka's roll schedules it), and flush.messages', up
        # to the LEO (Kafka's append flushes inline; the appends up to it wait for it
        # before they are acknowledged: flush_pending). None: flush.messages flushes
        # inline, a roll not at all.
        self.on_flush: Callable[[Log, int], None] | None = None
        self._ack_flush_offset = 0  # appends ending at or below it are acked once flushed

    def _report_io_error(self, exc: OSError | KafkaStorageError) -> None:
        """A write path's error: a disk error goes to on_io_error (unless the log was
        closed meanwhile: then it is not the disk's)."""
        disk = disk_error(exc)
        if disk is not None and self.on_io_error is not None and not self._closed:
            self.on_io_error(disk)

    def _write_failed(self, exc: OSError | KafkaStorageError, what: str) -> NoReturn:
        """Every write path's error exit: reported, and raised as KafkaStorageError (the
        OSError as its cause)."""
        if isinstance(exc, OSError):
            raise self._read_error(exc, what) from exc
        self._report_io_error(exc)
        raise exc

    def _read_error(self, exc: OSError, what: str) -> KafkaStorageError:
        """A read or write of the log's files failed: the disk's (Kafka's LocalLog.read
        fails its log dir too), reported to on_io_error; the caller gets
        KafkaStorageError (KAFKA_STORAGE_ERROR), not the OSError."""
        self._report_io_error(exc)
        return KafkaStorageError(f"{self.dir}: {what} failed: {exc}")

    def reconfigure(self, config: LogConfig) -> None:
        """A topic config change (AlterConfigs): segment, retention and flush settings are
        read from self.config at each use, so swapping it applies them from now on."""
        self.config = config

    # ================================================================ opening / recovery
    @classmethod
    def open(cls, dir: Path | str, config: LogConfig, recovery_point: int = 0,
             log_start_offset: int | None = None, *,
             clean_shutdown: bool | None = None, lazy_empty: bool = False) -> Log:
        """Open (creating if needed) the partition directory `dir`.

        clean_shutdown: None = look for the `.kafka_cleanshutdown` marker in the parent
        log dir. After a clean shutdown the segments are trusted (index sanity checks
        only); otherwise every segment from the one holding `recovery_point` on is
        scanned and validated (CRC included) and cut at the first bad batch.

        lazy_empty: a directory without segments gets a segment without a file until its
        first data (as Log.create; the LogManager's partitions), else an empty .log now.
        """
        dir = Path(dir)
        dir.mkdir(parents=True, exist_ok=True)
        if clean_shutdown is None:
            clean_shutdown = (dir.parent / CLEAN_SHUTDOWN_FILE).exists()
        self = cls(dir, config)
        try:
            self._load(recovery_point, log_start_offset, clean_shutdown, lazy_empty)
        except BaseException:
            self._close_files()
            raise
        return self

    @classmethod
    def create(cls, dir: Path | str, config: LogConfig) -> Log:
        """A new partition directory, empty: what open() makes of it without the scan,
        recovery and checkpoint reads (a broker creating thousands of partitions does
        only mkdir and the first segment's .log here). FileExistsError if it exists."""
        dir = Path(dir)
        dir.mkdir()
        self = cls(dir, config)
        try:
            self.leader_epoch_cache = LeaderEpochCache(dir / CHECKPOINT_NAME, on_disk=False)
            seg = LogSegment(dir, 0, config.index_interval_bytes, config.segment_index_bytes, new=True)
            self._segments, self._bases = [seg], [0]
            seg.make_active()
        except BaseException:
            self._close_files()
            raise
        return self

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(self.dir, base_offset, self.config.index_interval_bytes,
                          self.config.segment_index_bytes)

    def _load(self, recovery_point: int, log_start_offset: int | None, clean: bool,
              lazy_empty: bool = False) -> None:
        bases, missing_indexes, self._snapshots = scan_directory(self.dir)
        if not bases:
            bases = [log_start_offset or 0]
        if lazy_empty and len(bases) == 1 and bases[0] not in missing_indexes \
                and not (self.dir / f"{bases[0]:020d}.log").exists():
            # no records yet: a segment without a file until its first data
            self._segments = [LogSegment(self.dir, bases[0], self.config.index_interval_bytes,
                                         self.config.segment_index_bytes, new=True)]
        else:
            self._segments = [self._new_segment(base) for base in bases]
        first_recovered = len(self._segments)
        if not clean:
            first_recovered = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        recovered_any = load_segments(self.dir, self._segments, first_recovered,
                                      missing_indexes, self._retire)
        self._bases = [seg.base_offset for seg in self._segments]
        recovered = self._segments[first_recovered:]
        if any(seg.size for seg in recovered):  # (Kafka's "Recovering unflushed segment")
            log.info("%s: recovered %d unflushed segment(s) from offset %d (recovery point %d)",
                     self.dir, len(recovered), recovered[0].base_offset, recovery_point)
        self.log_end_offset = self._segments[-1].next_offset
        self.log_start_offset = min(max(log_start_offset or 0, self._bases[0]),
                                    self.log_end_offset)

        cache, cache_ok = LeaderEpochCache.load(self.dir / CHECKPOINT_NAME)
        self.leader_epoch_cache = cache
        snapshot_path = self.dir / SNAPSHOT_NAME
        snapshot = ProducerStateTable.read_snapshot(snapshot_path)
        # Used at most once: later appends/truncations would make it stale.
        snapshot_path.unlink(missing_ok=True)
        producers_ok = (clean and not recovered_any and snapshot is not None
                        and snapshot[1] == self.log_end_offset)
        if producers_ok and snapshot is not None:  # (producers_ok implies the snapshot)
            self.producer_state = snapshot[0]
            for seg in self._segments:  # trusted with the snapshot; rebuilt with the state
                idx = TransactionIndex.load(self._txn_index_path(seg.base_offset))
                if idx.entries:
                    self._txn_indexes[seg.base_offset] = idx
        if not cache_ok or not producers_ok:
            # Recovered segments replay from a snapshot at or below the first of them:
            # their aborted-transaction indexes are rebuilt, the older ones trusted.
            limit = (self._bases[first_recovered] if first_recovered < len(self._bases)
                     else self.log_end_offset)
            self._rebuild_from_headers(epochs=not cache_ok, producers=not producers_ok,
                                       snapshot_limit=limit)
        self._prune_snapshots()
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        # As Kafka: only a flush moves the recovery point, so after an unclean stop it
        # stays where it was (the recovered tail is not fsynced here: a crash before
        # the next flush simply recovers it again).
        self.recovery_point = (self.log_end_offset if clean and not recovered_any
                               else min(recovery_point, self.log_end_offset))

    def _rebuild_from_headers(self, epochs: bool, producers: bool, snapshot_limit: int = -1) -> None:
        """The epoch cache from every segment's headers; the producer state (and the
        aborted-transaction indexes its markers write) from the newest roll snapshot at
        or below `snapshot_limit` whose segment is still there, replaying the segments
        from it on (Kafka's rebuildProducerState), or from every segment without one."""
        if not producers:
            rebuild_from_headers(self._segments, self.leader_epoch_cache if epochs else None, None)
            return
        table, start = self._latest_snapshot(snapshot_limit)
        if epochs and start:  # the epochs need every segment; the replay below only the later ones
            rebuild_from_headers(self._segments, self.leader_epoch_cache, None)
        self.producer_state = table if table is not None else ProducerStateTable()
        replay = self._segments[start:]
        replay_from = replay[0].base_offset
        for base in {seg.base_offset for seg in replay} | set(self._txn_indexes):
            if base >= replay_from:
                TransactionIndex(self._txn_index_path(base)).reset()
                self._txn_indexes.pop(base, None)
        for seg in self._segments[:start]:  # kept: their markers are not replayed
            if seg.base_offset not in self._txn_indexes:
                idx = TransactionIndex.load(self._txn_index_path(seg.base_offset))
                if idx.entries:
                    self._txn_indexes[seg.base_offset] = idx
        rebuild_from_headers(replay, self.leader_epoch_cache if epochs and not start else None,
                             self.producer_state, self._record_aborted)

    # ================================================================ roll snapshots
    def _snapshot_path(self, offset: int) -> Path:
        return self.dir / f"{offset:020d}{ROLL_SNAPSHOT_SUFFIX}"

    def _latest_snapshot(self, limit: int) -> tuple[ProducerStateTable | None, int]:
        """(the newest readable roll snapshot at or below `limit` whose offset is still a
        segment's base, that segment's index), or (None, 0)."""
        for offset in reversed(self._snapshots):
            if offset > limit:
                continue
            i = bisect.bisect_left(self._bases, offset)
            if i == len(self._bases) or self._bases[i] != offset:
                continue  # its segment went (a truncation or cleaning a crash interrupted)
            got = ProducerStateTable.read_snapshot(self._snapshot_path(offset))
            if got is not None and got[1] == offset:
                return got[0], i
        return None, 0

    def _take_snapshot(self, offset: int) -> None:
        """The producer state at `offset` (the LEO, a new segment's base), unsynced: the
        roll's flush syncs it with the segments below it."""
        self.producer_state.write_snapshot(self._snapshot_path(offset), offset, sync=False)
        if not self._snapshots or self._snapshots[-1] < offset:
            self._snapshots.append(offset)

    def _prune_snapshots(self) -> None:
        """Keep a roll snapshot while a segment starts at its offset (Kafka deletes a
        segment's snapshot with it)."""
        if not self._snapshots:
            return
        bases = set(self._bases)
        keep = []
        for offset in self._snapshots:
            if offset in bases:
                keep.append(offset)
            else:
                self._snapshot_path(offset).unlink(missing_ok=True)
        self._snapshots = keep

    def _slice_end_offset(self, read: FetchSlice) -> int:
        """The offset after the last batch of `read`: the base offset of the batch that
        follows it (one 8-byte pread), or of the next segment, or the LEO."""
        for i in range(len(self._segments) - 1, -1, -1):
            seg = self._segments[i]
            if seg.fd == read.fd:
                end = read.position + read.size
                if end < seg.size:
                    head = os.pread(seg.fd, 8, end)
                    if len(head) == 8:
                        return int.from_bytes(head, "big", signed=True)
                return self._bases[i + 1] if i + 1 < len(self._segments) else self.log_end_offset
        return self.log_end_offset

    # ================================================================ compaction
    def cleanable_range(self, first_dirty: int, high_watermark: int, now_ms: int) -> tuple[int, int, int]:
        """(first dirty, first uncleanable, dirty bytes) for the cleaner: the head from
        the checkpointed first dirty offset up to the active segment, the LSO (open
        transactions and the HW) and the first segment with records younger than
        min.compaction.lag.ms, whichever comes first (Kafka's cleanableOffsets)."""
        first_dirty = max(first_dirty, self.log_start_offset)
        end = min(self.active_segment.base_offset, self.last_stable_offset(high_watermark))
        lag = self.config.min_compaction_lag_ms
        for seg in self._segments[:-1]:
            if lag > 0 and seg.largest_timestamp > now_ms - lag:
                end = min(end, seg.base_offset)
                break
        end = self._bases[self._segment_index(end)]  # whole segments: not the one holding `end`
        first_dirty = min(first_dirty, end)
        dirty = sum(seg.size for seg in self._segments[:-1]
                    if seg.next_offset > first_dirty and seg.base_offset < end)
        return first_dirty, end, dirty

    def cleaning_plan(self, first_dirty: int, end: int, now_ms: int) -> CleaningPlan:
        """What a cleaner thread needs to clean [log start, end): the segments, with
        duplicated descriptors it owns (plan.close() releases them)."""
        segs = []
        for seg in self._segments[:-1]:
            if seg.next_offset > end:
                break
            segs.append(SourceSegment(seg.base_offset, seg.next_offset, seg.size, os.dup(seg.fd)))
        last = {pid: e.last_offset for pid, e in self.producer_state.producers.items() if e.batches}
        # Transactions aborted below the end, their markers wherever (Kafka's
        # collectAbortedTransactions reads on into later segments' indexes).
        aborted = tuple(sorted((e for _b, idx in sorted(self._txn_indexes.items()) for e in idx.entries
                                if e.first_offset < end), key=lambda e: e.first_offset))
        cfg = self.config
        return CleaningPlan(self.dir, segs, first_dirty, end, cfg.segment_bytes, cfg.index_interval_bytes,
                            cfg.segment_index_bytes, cfg.delete_retention_ms, last, now_ms, self.truncations,
                            aborted)

    def replace_segments(self, plan: CleaningPlan, result: CleaningResult) -> bool:
        """Swap the cleaned groups in, all at once (begin_swap, directory fsync,
        complete_swap, directory fsync). The broker runs the steps apart, group by group,
        so that the loop is never held long and the fsyncs happen off it
        (server/log_cleaner.py)."""
        try:
            if not self.begin_swap(plan, result):
                return False
            fsync_dir(self.dir)
            if not self.complete_swap(plan, result):
                return False
            fsync_dir(self.dir)
            return True
        finally:
            result.close()  # the opened segments of groups not swapped in

    def _groups_still_valid(self, plan: CleaningPlan, groups: list[CleanedGroup]) -> bool:
        current = {seg.base_offset for seg in self._segments[:-1]}
        return not self._closed and plan.truncations == self.truncations and all(
            all(b in current for b in g.replaced) for g in groups)

    def begin_swap(self, plan: CleaningPlan, result: CleaningResult,
                   groups: list[CleanedGroup] | None = None) -> bool:
        """First swap step, on the loop, after the cleaner thread staged the cleaned
        groups: renames `groups` (default: all) `<base>.log.swap` (...). Refused (False,
        every swap file and staged file removed) when the log changed under the cleaning:
        truncated, or segments of a group gone (retention, DeleteRecords). The caller
        makes the renames durable (fsync of the directory, anywhere) before complete_swap:
        only then may old segments go. A truncation or deletion meanwhile removes the swap
        files first (_abort_swap), so a crash never completes a swap the log has moved past."""
        groups = result.groups if groups is None else groups
        if not self._groups_still_valid(plan, groups):
            self._abort_swap()
            shutil.rmtree(self.dir / STAGING_DIR, ignore_errors=True)
            return False
        staging = self.dir / STAGING_DIR
        pending = self._pending_swap = self._pending_swap or {}
        for g in groups:
            paths = pending.setdefault(g.base_offset, [])
            for name in g.files:
                swap = self.dir / f"{name}{SWAP_SUFFIX}"
                os.replace(staging / name, swap)
                paths.append(swap)
        return True

    def complete_swap(self, plan: CleaningPlan, result: CleaningResult,
                      groups: list[CleanedGroup] | None = None) -> bool:
        """Second swap step, on the loop, once the swap files are durable: for `groups`
        (default: every group begun), old segments retired, swap files renamed to their
        final names, the new segment loaded. Each group is whole on its own, so the steps
        may be spread over several loop turns. False (the swap files left removed) if the
        log changed since begin_swap; groups completed before stay. Nothing here waits for
        the disk; a directory fsync afterwards makes it durable (until then a crash
        completes the swap at the next open, storage.loader.complete_swaps)."""
        pending = self._pending_swap
        groups = result.groups if groups is None else groups
        if pending is None or any(g.base_offset not in pending for g in groups) \
                or not self._groups_still_valid(plan, groups):
            self._abort_swap()
            return False
        current = {seg.base_offset: seg for seg in self._segments[:-1]}
        for g in groups:
            olds = [current[b] for b in g.replaced]
            swaps = pending.pop(g.base_offset)
            targets = frozenset(swap.with_suffix("") for swap in swaps)
            # Old files unlinked now (or renamed over below). Their descriptors go to the
            # closer only after the renames: a rename over a file whose last descriptor
            # is already closed frees its blocks inside the call (0.1-0.2 ms an index).
            released = [self._retire(old, targets, close=False) for old in olds]
            for swap in swaps:
                os.replace(swap, swap.with_suffix(""))
            for fds in released:
                self._close_later(*fds)
            new, g.segment = g.segment, None  # opened and loaded by the cleaner thread
            assert new is not None, "a cleaned group's segment is taken once"
            new.moved_to(self.dir)
            i = self._bases.index(g.replaced[0])
            self._segments[i:i + len(olds)] = [new]
            self._bases[i:i + len(olds)] = [g.base_offset]
            txn_path = self._txn_index_path(g.base_offset)
            if txn_path in targets:  # else none was written: no lookup of a missing file
                idx = TransactionIndex.load(txn_path)  # (a negative lookup took 10 ms once)
                if idx.entries:
                    self._txn_indexes[g.base_offset] = idx
        self._prune_snapshots()  # those of segments merged into one
        if not pending:
            self._pending_swap = None
            shutil.rmtree(self.dir / STAGING_DIR, ignore_errors=True)
        return True

    def _abort_swap(self) -> None:
        """Drop the swap files of groups begun but not completed, and the staging dir."""
        if self._pending_swap is None:
            return
        for paths in self._pending_swap.values():
            for path in paths:
                path.unlink(missing_ok=True)
        self._pending_swap = None
        shutil.rmtree(self.dir / STAGING_DIR, ignore_errors=True)

    # ================================================================ transactions
    def _txn_index_path(self, base: int) -> Path:
        return segment_file(self.dir, base, TXN_INDEX_SUFFIX)

    def _record_aborted(self, seg: LogSegment, completed: list) -> None:
        """Index the transactions that markers in `seg` aborted."""
        for t in completed:
            if t.aborted:
                idx = self._txn_indexes.get(seg.base_offset)
                if idx is None:
                    idx = self._txn_indexes[seg.base_offset] = TransactionIndex(
                        self._txn_index_path(seg.base_offset))
                idx.append(AbortedTxn(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset))

    def last_stable_offset(self, high_watermark: int) -> int:
        """LSO: read_committed consumers read below it (min of the HW and the first
        offset of the earliest transaction not yet decided below the HW)."""
        first = self.producer_state.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int,
                             read: FetchSlice | None = None) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), from the
        segment holding fetch_offset on (Kafka's collectAbortedTransactions). With the
        `read` slice the bound is where the slice ends, so a fetch gets the transactions
        its records need, not every abort up to the LSO."""
        out: list[AbortedTxn] = []
        if not self._txn_indexes:
            return out
        if read is not None and read.size:
            try:
                upper_bound = min(upper_bound, self._slice_end_offset(read))
            except OSError as exc:
                raise self._read_error(exc, "aborted transactions") from exc
        for seg in self._segments[self._segment_index(fetch_offset):]:
            idx = self._txn_indexes.get(seg.base_offset)
            if idx is not None and idx.collect(fetch_offset, upper_bound, out):
                break
        return out

    # ================================================================ properties
    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def __repr__(self) -> str:
        return (f"Log({self.tp}, start={self.log_start_offset}, "
                f"leo={self.log_end_offset}, segments={len(self._segments)})")

    # ================================================================ append
    def append_as_leader(self, records, leader_epoch: int, now_ms: int,
                         control_allowed: bool = False, *, client: bool = False) -> AppendInfo:
        """Validate, deduplicate, assign offsets and `leader_epoch` in place (a read-only
        buffer is copied once) and write the batches with one write.

        Validation is Kafka's LogValidator's: headers and CRC, no empty batch, then the
        records of every compressed batch, streamed through its decompressor within the
        request's budget (storage.validation). The records of uncompressed batches are
        walked in C as well (~8 ns per record) unless the topic turns
        kafkarepl.validate.uncompressed.records off (bench/RESULTS.md has the cost).
        Nothing is written unless every batch passes. Control batches (transaction
        markers) only come from the broker's own WriteTxnMarkers (control_allowed);
        a client's are refused, as Kafka refuses them.

        `client` (Kafka's AppendOrigin.CLIENT: a producer's records) adds Kafka's
        client-only rules: every batch at base offset 0 (UnifiedLog.analyzeAndValidateRecords)
        and one batch only (LogValidator's getFirstBatchAndMaybeValidateNoMoreBatches;
        Kafka holds its coordinators to it too, kafkarepl's write one batch anyway and
        tools and tests append many). A batch flagged LogAppendTime is refused or
        restamped as LogValidator.validateTimestamp does (storage.log_validator)."""
        buf, batches, has_pid = validate_leader_append(records, self.config, self.tp, now_ms, control_allowed,
                                                       client)
        first = self.log_end_offset
        append_time = now_ms if self.config.log_append_time else None
        prepared = None
        if has_pid:
            prepared = self.producer_state.prepare(batches, first, True, append_time, buf)
            dup = prepared.duplicate
            if dup is not None:
                lat = dup.timestamp if append_time is not None else -1
                return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp, lat,
                                  dup.last_offset - dup.first_offset + 1, 0, True)
        if append_time is not None:
            set_log_append_time(buf, batches, now_ms)
        next_offset = _core.assign_offsets(buf, first, leader_epoch)
        try:  # the I/O (inline rather than @_writes: this is the produce path)
            seg = self._maybe_roll(len(buf), first, next_offset - 1, now_ms)
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or leader_epoch > latest:  # before the write, as Kafka
                self.leader_epoch_cache.assign(leader_epoch, first)
            count, max_ts = self._write(seg, buf, batches, now_ms, first, append_time)
        except (OSError, KafkaStorageError) as exc:
            self._write_failed(exc, "append")
        if prepared is not None:
            self.producer_state.commit(prepared)
            if prepared.completed:
                self._record_aborted(seg, prepared.completed)
        self._appended(next_offset, count)
        return AppendInfo(first, next_offset - 1, max_ts,
                          -1 if append_time is None else append_time, count, len(buf), False)

    def append_as_follower(self, records, *, gaps: bool = False) -> AppendInfo:
        """Append batches that carry the leader's offsets and epochs; they must start at
        the log end offset and ascend. gaps: the first may start above the log end
        offset (a copy of a compacted log, whose batches leave holes; Kafka's
        appendAsFollower allows them)."""
        buf = memoryview(records).cast("B")
        batches = _core.validate_batches(buf)
        leo = self.log_end_offset
        if not batches:
            return AppendInfo(leo, leo - 1, NO_TIMESTAMP, -1, 0, 0, False)
        tp = self.tp
        if batches[0].base_offset < leo or (batches[0].base_offset != leo and not gaps):
            raise KafkaStorageError(
                f"{tp}: follower append starts at offset {batches[0].base_offset} but the "
                f"log end offset is {leo}")
        prev_last = leo - 1
        for b in batches:
            if b.base_offset <= prev_last:
                raise KafkaStorageError(
                    f"{tp}: follower batch at position {b.position} has base offset "
                    f"{b.base_offset}, not above the previous last offset {prev_last}")
            prev_last = b.base_offset + b.last_offset_delta
        has_pid = check_sizes(batches, len(buf), self.config, tp)
        prepared = self.producer_state.prepare(batches, None, False, buf=buf) if has_pid else None
        now_ms = _now_ms()
        try:  # the I/O (inline rather than @_writes: this is the replication path)
            seg = self._maybe_roll(len(buf), leo, prev_last, now_ms)
            # The batches' epochs are recorded before the batches are written (as Kafka): a
            # crash in between leaves an entry past the log end, which loading truncates.
            for b in batches:
                latest = self.leader_epoch_cache.latest_epoch
                if latest is None or b.partition_leader_epoch > latest:
                    self.leader_epoch_cache.assign(b.partition_leader_epoch, b.base_offset)
            count, max_ts = self._write(seg, buf, batches, now_ms)
        except (OSError, KafkaStorageError) as exc:
            self._write_failed(exc, "append")
        if prepared is not None:
            self.producer_state.commit(prepared)
            if prepared.completed:
                self._record_aborted(seg, prepared.completed)
        self._appended(prev_last + 1, count)
        return AppendInfo(leo, prev_last, max_ts, -1, count, len(buf), False)

    def _write(self, seg: LogSegment, buf, batches: list, now_ms: int,
               first_offset: int | None = None,
               log_append_time: int | None = None) -> tuple[int, int]:
        if seg.size == 0 and seg.first_append_ms is None:
            seg.first_append_ms = now_ms
        try:
            out = seg.append(buf, batches, first_offset, log_append_time)
            self.leader_epoch_cache.write_pending()  # the log's first records: its first checkpoint
            return out
        except OSError as exc:
            raise KafkaStorageError(f"{seg.log_path}: append failed: {exc}") from exc

    def _appended(self, next_offset: int, count: int) -> None:
        self.log_end_offset = next_offset
        self.unflushed_messages += count
        flush_messages = self.config.flush_messages
        if flush_messages is not None and self.unflushed_messages >= flush_messages:
            if self.on_flush is None:
                self.flush()
                return
            self.unflushed_messages = 0  # what comes next counts towards the next flush
            self._ack_flush_offset = next_offset
            self.on_flush(self, next_offset)

    def flush_pending(self, end_offset: int) -> bool:
        """Whether an append ending at `end_offset` (its last offset + 1) waits for a
        flush.messages flush that on_flush's owner has not completed yet: its produce is
        answered, or a follower fetches past it, only once the flush moved the recovery
        point there (as Kafka's append returns only after flushing)."""
        return self.recovery_point < end_offset <= self._ack_flush_offset

    # ================================================================ roll
    def _maybe_roll(self, size: int, first: int, last: int, now_ms: int) -> LogSegment:
        seg = self._segments[-1]
        if seg.size == 0:
            return seg
        cfg = self.config
        if (seg.size + size > cfg.segment_bytes
                or now_ms - seg.rolling_base_ms() > cfg.segment_ms - self._jitter_of(seg)
                or not seg.can_hold(first, last)):
            return self.roll()
        return seg

    def _jitter_of(self, seg: LogSegment) -> int:
        """The active segment's roll jitter, drawn once for it (Kafka draws it as it
        creates the segment, loaded ones included)."""
        if self._roll_jitter is None or self._roll_jitter[0] is not seg:
            self._roll_jitter = (seg, self.config.random_segment_jitter(random.randrange))
        return self._roll_jitter[1]

    @_writes
    def roll(self) -> LogSegment:
        """Start a new active segment at the LEO (no-op while the active one is empty)."""
        seg = self._segments[-1]
        if seg.size == 0:
            return seg
        base = self.log_end_offset
        seg.make_inactive(shrink_later=True)
        for suffix in (".log", ".index", ".timeindex", TXN_INDEX_SUFFIX):
            stale = self.dir / f"{base:020d}{suffix}"
            if stale.exists():
                log.warning("%s: replacing stale file %s", self.dir, stale.name)
                stale.unlink()
        new = self._new_segment(base)
        new.make_active()
        self._segments.append(new)
        self._bases.append(base)
        self._take_snapshot(base)
        if self.on_flush is not None:
            self.on_flush(self, base)
        return new

    # ================================================================ read
    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def read(self, from_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchSlice:
        """Whole batches of one segment from the batch holding `from_offset`, all below
        `max_offset` (exclusive: the HW for consumers; None = LEO), at most `max_bytes`
        unless min_one_batch and the first batch alone is larger (returned whole, as
        Kafka does so a consumer can always make progress).

        O(log index entries): a C binary search plus one pread of batch headers. When
        max_bytes cuts the range, the slice ends at the last indexed batch start inside
        it (up to index.interval.bytes + one batch short of max_bytes) instead of walking
        further. At a segment's end the read continues in the next segment; at the LEO
        or max_offset the slice is empty. OffsetOutOfRangeError outside
        [log_start_offset, LEO]."""
        leo = self.log_end_offset
        if from_offset < self.log_start_offset or from_offset > leo:
            raise OffsetOutOfRangeError(
                f"{self.tp}: offset {from_offset} is outside "
                f"[{self.log_start_offset}, {leo}]")
        limit = leo if max_offset is None else min(max_offset, leo)
        i = self._segment_index(from_offset)
        seg = self._segments[i]
        if from_offset >= limit:
            return self._empty_slice(from_offset)
        try:  # the header preads (inline rather than a wrapper: this is the fetch path)
            h, slot = seg.find_batch_and_slot(from_offset)
            while h is None and i + 1 < len(self._segments):
                i += 1
                seg = self._segments[i]
                h, slot = seg.find_batch_and_slot(from_offset)
            if h is None or h.last_offset >= limit:
                return self._empty_slice(from_offset)
            end = seg.end_position_before(limit)
            size = end - h.position
            if size > max_bytes:
                boundary = seg.last_boundary_within(h.position, h.position + max(0, max_bytes), slot)
                if boundary > h.position:
                    size = boundary - h.position
                else:
                    size = h.size if min_one_batch else 0
        except OSError as exc:
            raise self._read_error(exc, "read") from exc
        return FetchSlice(seg.fd, h.position, size, h.base_offset)

    def read_bytes(self, fd: int, position: int, size: int) -> bytes:
        """`size` bytes at `position` of one of this log's files (a slice read() gave),
        read into memory (a coordinator's load, a record lookup, a JBOD copy). A disk
        error fails the log dir, as read()'s: KafkaStorageError."""
        try:
            return _core.file_pread(fd, size, position)
        except OSError as exc:
            raise self._read_error(exc, "read") from exc

    def _empty_slice(self, offset: int) -> FetchSlice:
        seg = self._segments[-1]
        return FetchSlice(seg.fd, seg.size, 0, offset)

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch whose max timestamp is >= ts_ms: its
        base offset (clamped to the log start) and that max timestamp. Batch granularity:
        records are never decoded, so a consumer seeking there may see a few records of
        the same batch with earlier timestamps. None when no batch qualifies."""
        for seg in self._segments:
            if seg.max_timestamp < ts_ms:
                continue
            try:
                h = seg.find_offset_by_timestamp(ts_ms)
            except OSError as exc:
                raise self._read_error(exc, "offset by timestamp") from exc
            if h is not None and h.last_offset >= self.log_start_offset:
                return max(h.base_offset, self.log_start_offset), h.max_timestamp
        return None

    # ================================================================ truncation
    @_writes
    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= `offset` (a follower diverged from its leader).

        `offset` should be a batch boundary; if it falls inside a batch, that whole batch
        goes too and the LEO ends up at its base offset. Epoch entries starting at or
        after `offset` are dropped even when nothing is truncated (Kafka does the same)."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(offset)
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._abort_swap()
        while len(self._segments) > 1 and self._bases[-1] >= offset:
            self._retire(self._segments.pop())
            self._bases.pop()
        self.truncations += 1
        seg = self._segments[-1]
        seg.truncate_to(offset)
        seg.make_active()
        idx = self._txn_indexes.get(seg.base_offset)
        if idx is not None:
            idx.truncate_to(offset)
        self.log_end_offset = seg.next_offset
        self._cut_flushes(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        if self.producer_state.has_batches_from(self.log_end_offset):
            self._rebuild_from_headers(epochs=False, producers=True,
                                       snapshot_limit=self.log_end_offset)
        self._prune_snapshots()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)

    @_writes
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log empty at `offset`."""
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        self._abort_swap()
        self.truncations += 1
        self._cut_flushes(-1)  # nothing they synced is in the log any more
        for seg in self._segments:
            self._retire(seg)
        new = self._new_segment(offset)
        new.make_active()
        self._segments = [new]
        self._bases = [offset]
        self.log_start_offset = self.log_end_offset = self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.clear()
        self._prune_snapshots()

    # ================================================================ retention
    def expire_producers(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """producer.id.expiration.ms: forget idle producer ids; returns how many."""
        return self.producer_state.expire(now_ms, expiration_ms)

    @_writes
    def delete_old_segments(self, now_ms: int) -> int:
        """Delete whole leading segments (never the active one) past retention.ms or
        retention.bytes, or wholly below the log start offset. Returns how many."""
        candidates = self._segments[:-1]
        n = 0
        # Segments entirely below the log start offset (DeleteRecords) always go.
        while n < len(candidates) and self._bases[n + 1] <= self.log_start_offset:
            n += 1
        cfg = self.config
        if "delete" in cfg.cleanup_policy:
            if cfg.retention_ms >= 0:
                k = 0
                while k < len(candidates) and now_ms - candidates[k].largest_timestamp > cfg.retention_ms:
                    k += 1
                n = max(n, k)
            if cfg.retention_bytes >= 0:
                excess = self.size_in_bytes - cfg.retention_bytes
                k = 0
                while k < len(candidates) and excess - candidates[k].size >= 0:
                    excess -= candidates[k].size
                    k += 1
                n = max(n, k)
        if not n:
            return 0
        self._abort_swap()
        for seg in self._segments[:n]:
            self._retire(seg)
        del self._segments[:n]
        del self._bases[:n]
        self._prune_snapshots()
        self.log_start_offset = max(self.log_start_offset, self._bases[0])
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return n

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start forward (a follower following its leader's retention, or
        DeleteRecords). Whole segments below it go at the next retention pass."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.recovery_point = max(self.recovery_point, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        return True

    # ================================================================ ReplicaLog helpers
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def epoch_entries(self) -> list[tuple[int, int]]:
        return self.leader_epoch_cache.epochs()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    @_writes
    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.leader_epoch_cache.assign(epoch, start_offset)

    # ================================================================ flush / close
    @_writes
    def flush(self, offset: int | None = None) -> None:
        """fdatasync segments holding offsets [recovery_point, offset) (default: LEO) and
        move the recovery point there. Blocking; see begin_flush to fsync elsewhere."""
        pending = self.begin_flush(offset)
        pending.run()
        self.complete_flush(pending)

    def begin_flush(self, offset: int | None = None) -> PendingFlush:
        """First step of a flush, cheap, on the thread that owns the log: duplicate the
        descriptors to sync. PendingFlush.run() (the fdatasyncs) may then run in a worker
        thread while appends go on; complete_flush(pending) moves the recovery point."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        fds: list[int] = []
        if target > self.recovery_point:
            first = self._segment_index(self.recovery_point)
            last = self._segment_index(max(target - 1, 0))
            # Then what a restart trusts below the recovery point without replaying it:
            # the flushed segments' aborted-transaction indexes and the roll snapshots
            # up to the target; last the directory, for the new files' entries.
            paths = [self._txn_index_path(b) for b in self._bases[first:last + 1]
                     if b in self._txn_indexes]
            paths += [self._snapshot_path(o) for o in self._snapshots
                      if self.recovery_point < o <= target]
            try:
                for seg in self._segments[first:last + 1]:
                    fds.extend(seg.dup_fds())
                for path in paths:
                    try:
                        fds.append(os.open(path, os.O_RDONLY))
                    except FileNotFoundError:
                        pass
                fds.append(os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY))
                if not self.dir_entry_durable:
                    fds.append(os.open(self.dir.parent, os.O_RDONLY | os.O_DIRECTORY))
            except BaseException:
                for fd in fds:  # (out of descriptors, say): none left open
                    os.close(fd)
                raise
        pending = PendingFlush(self.dir, target, fds, self.on_io_error)
        self._flushes.add(pending)
        return pending

    def _cut_flushes(self, offset: int) -> None:
        """A truncation to `offset`: flushes in flight cover nothing at or above it any
        more (what is written there next is not what they sync)."""
        for pending in self._flushes:
            pending.target = min(pending.target, offset)
        self._ack_flush_offset = min(self._ack_flush_offset, offset)

    def complete_flush(self, pending: PendingFlush) -> None:
        self._flushes.discard(pending)
        target = min(pending.target, self.log_end_offset)
        if pending.target > self.recovery_point:
            self.dir_entry_durable = True
        if target > self.recovery_point:
            self.recovery_point = target
        if target >= self.log_end_offset:
            self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()

    def close(self, sync: bool = True) -> None:
        """Close files (indexes trimmed) and save the producer state for a fast reopen.
        Writes no clean-shutdown marker: LogManager does, after flushing every log and
        (sync=False) syncing the file system the unsynced snapshot went to."""
        if self._closed:
            return
        # Written even when the table is empty, or a clean reopen would rescan every
        # header; not for a log without batches, whose rescan costs nothing.
        if self.producer_state.producers or any(seg.size for seg in self._segments):
            self.producer_state.write_snapshot(self.dir / SNAPSHOT_NAME, self.log_end_offset,
                                               sync=sync)
            self.leader_epoch_cache.write_pending()
        self._close_files()

    def _close_files(self) -> None:
        self._abort_swap()
        self._closed = True
        for seg in self._segments:
            seg.close()

    def close_for_deletion(self) -> None:
        """Close a log whose directory is about to be removed: nothing is written (no
        snapshot, no index trim), and the descriptors are closed on the janitor's thread
        as those of deleted segments are (_close_later)."""
        self._abort_swap()
        self._closed = True
        for seg in self._segments:
            self._close_later(*seg.release())

    def rename_dir(self, new_dir: Path) -> None:
        """Rename the partition directory (a future log becoming the current one): the
        descriptors and index mappings follow the rename, only the paths change. The
        caller makes the rename durable (fsync of the parent directories)."""
        os.rename(self.dir, new_dir)
        self.dir = new_dir
        for seg in self._segments:
            seg.moved_to(new_dir)
        self.leader_epoch_cache.path = new_dir / CHECKPOINT_NAME
        for base, idx in self._txn_indexes.items():
            idx.path = self._txn_index_path(base)

    def bytes_from(self, offset: int) -> int:
        """How many bytes of batches lie at or after `offset` (from the batch holding it):
        what a copy positioned there still has to read. O(log index + segments)."""
        if offset >= self.log_end_offset:
            return 0
        i = self._segment_index(max(offset, self._bases[0]))
        seg = self._segments[i]
        h, _slot = seg.find_batch_and_slot(offset)
        position = h.position if h is not None else seg.size
        return seg.size - position + sum(s.size for s in self._segments[i + 1:])

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self._close_files()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _retire(self, seg: LogSegment, replaced: frozenset[Path] = frozenset(),
                close: bool = True) -> tuple[int, list[int]]:
        """Remove `seg`'s files (but those in `replaced`); its descriptors go to the
        closer, or back to the caller (close=False) to hand over later."""
        idx = self._txn_indexes.pop(seg.base_offset, None)
        if idx is not None:
            idx.delete()
        fds = seg.unlink(replaced)
        if close:
            self._close_later(*fds)
        return fds

    def _close_later(self, log_fd: int, index_fds: list[int]) -> None:
        """Off the loop: the indexes' descriptors at once (nothing reads them), the .log's
        after the topic's file.delete.delay.ms (a Fetch answer may still be sending from
        it; broker default log.segment.delete.delay.ms, 60 s), or when the broker owning
        the log directory stops (LogManager.shutdown); so a big deletion holds one
        descriptor per segment for that long, as Kafka keeps its `.deleted` files.

        Kafka renames a retired segment's files to `.deleted` and removes them after the
        delay (and any left at a restart); here they are unlinked at once and only the
        open descriptor keeps the data: nothing is left on disk for a crash to leave
        behind, and the space is freed when the descriptor is closed. The delay is read
        when the segment is retired: a change applies to segments retired later. Under a
        delay shorter than the janitor's REUSE_GUARD_S only the data goes at the delay, the
        descriptor's number stays until the guard is over (storage/janitor.py)."""
        for fd in index_fds:
            _closer.close(fd)
        if log_fd >= 0:
            _closer.close(log_fd, self.config.file_delete_delay_ms / 1000, owner=self.dir.parent)


class PendingFlush:
    """Descriptors (duplicates, so closing the log meanwhile is safe) to fdatasync."""

    def __init__(self, dir: Path, target: int, fds: list[int],
                 on_io_error: Callable[[BaseException], None] | None = None) -> None:
        self.dir = dir
        self.target = target  # lowered by truncations while in flight (Log._cut_flushes)
        self.fds = fds
        self.on_io_error = on_io_error  # the log's (run() may be on another thread)

    def release(self) -> None:
        """Close the descriptors without syncing (the caller syncs the file system)."""
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)

    def run(self) -> None:
        fds, self.fds = self.fds, []
        error = None
        for fd in fds:
            try:
                if error is None:
                    _core.file_fdatasync(fd)
            except OSError as exc:
                error = exc
            finally:
                os.close(fd)
        if error is not None:
            # A failed fsync leaves the page cache's state unknown ("fsyncgate"): the log
            # dir is not to be trusted again, as Kafka takes it offline.
            if self.on_io_error is not None:
                self.on_io_error(error)
            raise KafkaStorageError(f"{self.dir}: flush failed: {error}") from error

