"""Log compaction: the cleaning of one log, as Kafka's LogCleaner does it.

A log with `cleanup.policy` containing `compact` keeps, for every key, at least its
latest record. The log's head since the last cleaning (from the first dirty offset up to
the first uncleanable offset: the active segment, open transactions, records younger than
min.compaction.lag.ms) is scanned into an offset map (key hash -> latest offset, the C
loops of csrc/kr_clean.c over numpy memory). Then every segment from the log start up to
the mapped end is rewritten without the records the map shows superseded, without
keyless records, and without expired tombstones. Consecutive cleaned segments are merged
while they fit in segment.bytes. Offsets never change: batches keep their base and last
offsets and producer fields.

Tombstones and transaction markers go as KIP-534 has it (Kafka's LogCleaner and
MemoryRecords.filterTo): the first cleaning that keeps a tombstone (or a marker whose
transaction has no batch left) rewrites its batch with the delete-horizon attribute
(bit 6) and base timestamp = now + delete.retention.ms, each record's timestamp delta
re-encoded so that base + delta is still its own timestamp; a later cleaning at or past
that horizon removes the tombstone or marker. So a consumer behind gets at least
delete.retention.ms from the first cleaning to read a delete, whatever the tombstone's
own timestamp. The earliest horizon still in the log comes back in the result
(CleaningResult.delete_horizon), for the scheduler to clean again once it has passed.

This module is the part that runs on a cleaner thread, never on the event loop: it reads
the segments through duplicated descriptors (plan) and writes each cleaned group as a
complete, fsynced segment in the staging directory `<partition>/cleaning/`. Both passes
take a whole segment per C call (kr_map_segment / kr_clean_segment, GIL released): 1 MiB
preads, every plain batch (uncompressed, neither transactional nor control) mapped or
cleaned, the output written; Python sees only the other batches, one by one. For each
piece the C loop parses all records first and then probes the map with prefetching, so a
large map's cache misses overlap. The written batches' BatchInfo comes back from C and
feeds the index directly (no second walk), and writeback of each written piece starts at
once (sync_file_range), so the final fsync has little left to wait for.
`Log.replace_segments` (on the loop, where truncations happen, so a cleaning made void by
one is never swapped in) renames the files to `<base>.log.swap` (and `.index.swap`, ...),
retires the old segments and renames the swap files to their final names. A crash before
the `.swap` rename leaves the staging directory (removed at the next open, the old
segments intact); after it, the next open completes the swap (storage.loader).

Transactions, as Kafka's LogCleaner (CleanedTransactionMetadata): the aborted
transactions of every .txnindex file tell which transactional batches are aborted. Those
are never mapped (an aborted write never makes an older committed value look superseded)
and are removed; committed transactional records are mapped and cleaned like any others.
A marker stays while any batch of its transaction is still in the log (seen in this
cleaning's pass, which covers the log from its start), and after that until its delete
horizon (above) has passed; an ABORT marker whose batches this pass still saw keeps its .txnindex
entry in the cleaned segment. Each producer's last data batch is kept, emptied if need
be, so its sequence and epoch survive, and the marker after it survives with it. Only the
cleanable range is cleaned: it ends at the LSO, so every transaction in it is decided.
"""

from __future__ import annotations

import os
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kafkarepl import _core
from kafkarepl.errors import CorruptBatchError
from kafkarepl.storage import codecs
from kafkarepl.storage.fsync import fsync_dir
from kafkarepl.storage.records import (
    CONTROL_ABORT,
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    control_record_type,
)
from kafkarepl.storage.segment import LogSegment
from kafkarepl.storage.timestamps import records_section
from kafkarepl.storage.txn_index import SUFFIX as TXN_INDEX_SUFFIX
from kafkarepl.storage.txn_index import AbortedTxn, TransactionIndex

STAGING_DIR = "cleaning"
SWAP_SUFFIX = ".swap"
_HEADER = struct.Struct(">qiibIhiqqqhii")
DELETE_HORIZON = _core.ATTR_DELETE_HORIZON  # batch attribute bit 6 (KIP-534)
LOG_APPEND_TIME = 0x08
NO_TIMESTAMP = -1
INT64_MAX = (1 << 63) - 1
_READ_CHUNK = 1 << 20
TIMEINDEX_ENTRY = _core.TIMEINDEX_ENTRY_SIZE
# Bytes per offset map slot pair (hash, offset), as Kafka counts 24 bytes per entry.
MAP_SLOT_BYTES = 16


@dataclass(frozen=True)
class SourceSegment:
    """A segment as planned on the loop: its own descriptor (dup) for the cleaner thread."""

    base_offset: int
    next_offset: int
    size: int
    fd: int


@dataclass
class CleaningPlan:
    dir: Path
    segments: list[SourceSegment]  # from the log start up to the first uncleanable offset
    first_dirty: int
    first_uncleanable: int
    segment_bytes: int
    index_interval_bytes: int
    segment_index_bytes: int
    delete_retention_ms: int
    last_batch_offsets: dict[int, int]  # producer id -> last offset of its last batch (kept)
    now_ms: int
    truncations: int = 0  # the log's truncation count when planned (Log.replace_segments)
    # every aborted transaction of the log's .txnindex files starting below the cleaning
    # end (markers past it included), by first offset
    aborted: tuple[AbortedTxn, ...] = ()

    def close(self) -> None:
        """Release the duplicated descriptors."""
        for seg in self.segments:
            try:
                os.close(seg.fd)
            except OSError:
                pass
        self.segments = []


@dataclass
class CleanedGroup:
    replaced: list[int]  # base offsets of the source segments it replaces
    base_offset: int
    next_offset: int
    size: int
    # the staged files' names, .log first: begin_swap renames exactly these (a lookup of
    # a file that may not exist, the .txnindex, is what it would cost on the loop)
    files: list[str]
    # The staged segment opened and loaded on the cleaner thread (descriptors and index
    # mappings stay valid across the renames), so that the swap on the loop opens no
    # file: an open or mmap there waited up to 10 ms behind the cleaner's fsyncs. Taken
    # (set to None) by Log.complete_swap; CleaningResult.close() closes it otherwise.
    segment: LogSegment | None = None


@dataclass
class CleaningResult:
    groups: list[CleanedGroup] = field(default_factory=list)
    cleaned_up_to: int = 0  # the next first dirty offset (cleaner-offset-checkpoint)
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    map_entries: int = 0  # keys in the offset map (the dedupe buffer's use)
    map_seconds: float = 0.0  # the offset map pass (Kafka's "Indexed ... in N seconds")
    # the earliest delete horizon of the kept batches holding tombstones or markers
    # (KIP-534); None: none left
    delete_horizon: int | None = None

    def close(self) -> None:
        """Close the opened segments that no swap took (a discarded cleaning)."""
        for g in self.groups:
            if g.segment is not None:
                g.segment.close()
                g.segment = None

    def note_horizon(self, horizon: int | None) -> None:
        if horizon is not None and (self.delete_horizon is None or horizon < self.delete_horizon):
            self.delete_horizon = horizon


class Throttle:
    """log.cleaner.io.max.bytes.per.second over the bytes read and written."""

    def __init__(self, max_bytes_per_s: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = max_bytes_per_s
        self.sleep = sleep
        self.start = time.monotonic()
        self.done = 0

    def __call__(self, n: int) -> None:
        if self.rate <= 0 or self.rate == float("inf"):
            return
        self.done += n
        ahead = self.done / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            self.sleep(ahead)


def new_offset_map(buffer_bytes: int, load_factor: float) -> _core.OffsetMap:
    """An offset map filling at most `buffer_bytes` (log.cleaner.dedupe.buffer.size per
    thread), in anonymous mmap-backed numpy memory."""
    slots = 1 << max(1, (max(2, buffer_bytes // MAP_SLOT_BYTES)).bit_length() - 1)
    mem = np.zeros(2 * slots, dtype=np.uint64)  # large zeroed arrays are mmap'd pages
    return _core.OffsetMap(mem, slots, load_factor)


class IoBuffers:
    """The segment passes' read buffer and cleaned-output buffer. A cleaner thread keeps
    one set between groups and cleanings (MapBuffer.io): a fresh 1 or 2 MiB bytearray is
    zeroed, a page fault per page, while its thread holds the GIL, which kept the event
    loop waiting 0.5-2 ms at each group's start (bench/RESULTS.md)."""

    def __init__(self) -> None:
        self.read = bytearray(_READ_CHUNK)
        self.write = bytearray(2 * _READ_CHUNK)

    def grow(self, need: int) -> None:
        """Room for a batch of `need` bytes read, and its cleaned copy."""
        self.read = bytearray(max(need, len(self.read)))
        self.write = bytearray(max(len(self.write), 3 * len(self.read)))


class MapBuffer:
    """One cleaner thread's offset map memory (log.cleaner.dedupe.buffer.size per thread),
    kept between cleanings as Kafka keeps its dedupe buffer. Each cleaning's map is a
    prefix sized to its work, so only that prefix is zeroed, and pages once touched stay
    mapped: no page faults and no 128 MiB munmap per cleaning (which stall every thread
    of the process on the address space lock)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._mem: np.ndarray | None = None
        self.io = IoBuffers()  # the segment passes' read and write buffers, kept too

    def offset_map(self, buffer_bytes: int, load_factor: float) -> _core.OffsetMap:
        slots = 1 << max(1, (max(2, min(buffer_bytes, self.budget_bytes) // MAP_SLOT_BYTES)).bit_length() - 1)
        if self._mem is None or len(self._mem) < 2 * slots:
            self._mem = np.zeros(2 * slots, dtype=np.uint64)
        return _core.OffsetMap(self._mem[: 2 * slots], slots, load_factor)


def sized_offset_map(plan: CleaningPlan, budget_bytes: int, load_factor: float,
                     buffer: MapBuffer | None = None) -> _core.OffsetMap:
    """A map for the dirty section's records, estimated from a 1 MiB sample of its
    headers, capped by the budget (log.cleaner.dedupe.buffer.size per thread): a map no
    larger than needed stays in cache and costs no page faults. In `buffer` if given."""
    dirty = [s for s in plan.segments if s.next_offset > plan.first_dirty]
    dirty_bytes = sum(s.size for s in dirty)
    per_byte = 1 / 7  # at most one record per 7 bytes
    if dirty:
        sample = os.pread(dirty[0].fd, min(_READ_CHUNK, dirty[0].size), 0)
        infos = _core.scan_batches(sample, 0, False)[0]
        sampled = sum(b.size for b in infos)
        if sampled:
            per_byte = min(per_byte, 1.25 * sum(b.records_count for b in infos) / sampled)
    need = int(dirty_bytes * per_byte / load_factor + 16) * MAP_SLOT_BYTES
    # new_offset_map rounds down to a power of two; round up instead while in budget, so
    # the map holds the estimate below its load limit (fewer probes per key).
    size = min(budget_bytes, 1 << (need - 1).bit_length())
    return buffer.offset_map(size, load_factor) if buffer is not None else new_offset_map(size, load_factor)


class TxnCleaning:
    """Kafka's CleanedTransactionMetadata, over one pass through the log in offset order:
    which transactional batches are aborted, and which markers guard nothing any more."""

    def __init__(self, aborted: tuple[AbortedTxn, ...]) -> None:
        self._pending = sorted(aborted, key=lambda a: a.first_offset, reverse=True)  # popped from the end
        self._aborted: dict[int, list] = {}  # producer id -> [AbortedTxn, a batch seen]
        self._committed: set[int] = set()  # producers with batches of an open commit seen
        self.kept_entries: list[AbortedTxn] = []  # for the cleaned segment's .txnindex

    def _reach(self, offset: int) -> None:
        while self._pending and self._pending[-1].first_offset <= offset:
            a = self._pending.pop()
            self._aborted.setdefault(a.producer_id, [a, False])

    def on_batch(self, producer_id: int, last_offset: int) -> bool:
        """A transactional data batch: True when its transaction was aborted."""
        self._reach(last_offset)
        state = self._aborted.get(producer_id)
        if state is not None:
            state[1] = True
            return True
        self._committed.add(producer_id)
        return False

    def on_marker(self, producer_id: int, last_offset: int, abort: bool) -> bool:
        """A control batch: True when no batch of its transaction was seen in this pass
        (it may go once delete.retention.ms has passed)."""
        self._reach(last_offset)
        if abort:
            state = self._aborted.pop(producer_id, None)
            if state is not None and state[1]:
                self.kept_entries.append(state[0])
                return False
            return True
        if producer_id in self._committed:
            self._committed.discard(producer_id)
            return False
        return True


def _budget(throttle: Throttle | None) -> int:
    """Bytes one C call may read: unbounded, or ~50 ms of log.cleaner.io.max.bytes.per.second
    so that the throttle's sleeps come in small steps."""
    if throttle is None or throttle.rate <= 0 or throttle.rate == float("inf"):
        return 0
    return max(_READ_CHUNK, int(throttle.rate * 0.05))


def _read_batch(seg: SourceSegment, pos: int, size: int) -> memoryview:
    data = os.pread(seg.fd, size, pos)
    if len(data) != size:
        raise CorruptBatchError(pos, "batch cut short while cleaning")
    return memoryview(data)


def _map_batch(batch: memoryview, offset_map: _core.OffsetMap, first_dirty: int, txn: TxnCleaning) -> bool:
    """Map one batch the C loop left (compressed, transactional or control); True: full."""
    h = _HEADER.unpack_from(batch, 0)
    base, attrs, pid, count = h[0], h[5], h[9], h[12]
    last = base + h[6]
    if attrs & CONTROL_MASK:
        txn.on_marker(pid, last, control_record_type(batch, 0, len(batch)) == CONTROL_ABORT)
    elif not (attrs & TRANSACTIONAL_MASK and txn.on_batch(pid, last)) and last >= first_dirty:
        recs = batch[61:] if attrs & 0x07 == 0 else records_section(batch)
        return bool(offset_map.map_records(recs, count, base)[0])
    return False


def build_offset_map(plan: CleaningPlan, offset_map: _core.OffsetMap,
                     throttle: Throttle | None = None, io: IoBuffers | None = None) -> int:
    """Map the dirty section; returns the offset up to which it is fully mapped (the
    cleaning end: a full map stops at the start of the segment that did not fit).
    Whole segments go through one C call each (plain batches, GIL released); only the
    batches it leaves (compressed, transactional, control) come back here, one by one."""
    if offset_map.size:  # a new map is already clear; clearing touches all its pages
        offset_map.clear()
    first_dirty = plan.first_dirty
    io = io or IoBuffers()
    txn = TxnCleaning(plan.aborted)  # aborted batches are not mapped
    budget = _budget(throttle)
    end = first_dirty
    for seg in plan.segments:
        if seg.next_offset <= first_dirty:
            continue
        pos = 0
        while pos < seg.size:
            stop, pos, need, nread, full = offset_map.map_segment(seg.fd, pos, seg.size, io.read, first_dirty,
                                                                  budget)
            if throttle is not None:
                throttle(nread)
            if full:
                return max(end, first_dirty)
            if stop == _core.SEG_GROW:
                io.grow(need)
            elif stop == _core.SEG_BATCH:
                if _map_batch(_read_batch(seg, pos, need), offset_map, first_dirty, txn):
                    return max(end, first_dirty)
                pos += need
            elif stop == _core.SEG_SHORT:
                break  # the file shrank under us: a truncation, which voids this cleaning
        end = seg.next_offset
    return end


def _compress(codec: int, data: bytes) -> bytes | None:
    """The batch's codec applied again to its surviving records; None when this process
    cannot (the batch is then kept as it was)."""
    try:
        return codecs.compress(codec, data)
    except (ImportError, ValueError):
        return None


def _rebuild_batch(batch: memoryview, records: bytes, kept: int, attrs: int, base_ts: int, max_ts: int) -> bytes:
    header = bytearray(batch[:61])
    struct.pack_into(">i", header, 8, 61 - 12 + len(records))
    struct.pack_into(">h", header, 21, attrs)
    struct.pack_into(">qq", header, 27, base_ts, max_ts)
    struct.pack_into(">i", header, 57, kept)
    out = header + records
    struct.pack_into(">I", out, 17, _core.crc32c(memoryview(out)[21:]))
    return bytes(out)


def _empty_batch(batch: memoryview) -> bytes:
    """A producer's last batch emptied: the bare header Kafka's writeEmptyHeader writes (no
    codec, no delete horizon, base timestamp -1, maxTimestamp kept), so its sequence and
    epoch survive."""
    attrs, max_ts = _HEADER.unpack_from(batch, 0)[5], _HEADER.unpack_from(batch, 0)[8]
    return _rebuild_batch(batch, b"", 0, attrs & ~(0x07 | DELETE_HORIZON), NO_TIMESTAMP, max_ts)


def _horizon_of(plan: CleaningPlan) -> int:
    return min(plan.now_ms + plan.delete_retention_ms, INT64_MAX)


def _rewrite(batch: memoryview, records: bytes, kept: int, tombstones: int,
             plan: CleaningPlan) -> tuple[bytes | None, int | None]:
    """The batch holding `kept` of its records (`records`, uncompressed), with the delete
    horizon set when it keeps tombstones (or is a marker: tombstones > 0) and had none, each
    record's timestamp re-encoded against the new base timestamp, maxTimestamp recomputed
    (CreateTime), its codec applied again. (None, _) when this process lacks the codec."""
    h = _HEADER.unpack_from(batch, 0)
    attrs, base_ts, max_ts = h[5], h[7], h[8]
    new_base = base_ts
    if tombstones and not attrs & DELETE_HORIZON:
        attrs |= DELETE_HORIZON
        new_base = _horizon_of(plan)
    records, greatest = _core.rebase_records(records, kept, base_ts, new_base)
    codec = attrs & 0x07
    packed = _compress(codec, records) if codec else records
    if packed is None:
        return None, None
    if not attrs & LOG_APPEND_TIME and greatest is not None:
        max_ts = greatest
    horizon = new_base if attrs & DELETE_HORIZON and tombstones else None
    return _rebuild_batch(batch, packed, kept, attrs, new_base, max_ts), horizon


def clean_batch(batch: memoryview, offset_map: _core.OffsetMap, plan: CleaningPlan, out: bytearray,
                txn: TxnCleaning | None = None) -> tuple[bytes | memoryview | None, int, int | None]:
    """The cleaned form of one batch (None: dropped), how many records it lost, and its
    delete horizon when it keeps tombstones or is a marker waiting for it (KIP-534).
    Without `txn`, transactional and control batches are kept as they are."""
    h = _HEADER.unpack_from(batch, 0)
    base, delta, attrs, base_ts, pid, count = h[0], h[6], h[5], h[7], h[9], h[12]
    keep_if_empty = pid >= 0 and plan.last_batch_offsets.get(pid) == base + delta
    if attrs & (CONTROL_MASK | TRANSACTIONAL_MASK):
        if txn is None:
            return batch, 0, None
        if attrs & CONTROL_MASK:
            abort = control_record_type(batch, 0, len(batch)) == CONTROL_ABORT
            if not txn.on_marker(pid, base + delta, abort):
                return batch, 0, None  # its transaction's batches are still in the log
            if attrs & DELETE_HORIZON:  # Kafka: discarded once now >= its horizon
                return (None, count, None) if plan.now_ms >= base_ts else (batch, 0, base_ts)
            rewritten, horizon = _rewrite(batch, records_section(batch), count, 1, plan)
            return (batch, 0, None) if rewritten is None else (rewritten, 0, horizon)
        if txn.on_batch(pid, base + delta):  # aborted: its records go
            if keep_if_empty:  # the producer's last batch: its sequence and epoch stay
                return _empty_batch(batch), count, None
            return None, count, None
    codec = attrs & 0x07
    if codec == 0:
        if len(out) < 3 * len(batch):  # a rewritten record grows by 10 bytes at most
            out.extend(bytes(3 * len(batch) - len(out)))
        n, kept, horizon = offset_map.clean_batch(batch, plan.now_ms, plan.delete_retention_ms,
                                                  keep_if_empty, out, 0)
        return (bytes(out[:n]) if n else None), count - kept, horizon
    has_horizon = attrs & DELETE_HORIZON
    retain = not has_horizon or plan.now_ms < base_ts
    records, kept, tombstones = offset_map.filter_records(records_section(batch), count, base, retain)
    if kept == count and (has_horizon or not tombstones):
        return batch, 0, (base_ts if has_horizon and tombstones else None)
    if kept == 0:
        return (_empty_batch(batch) if keep_if_empty else None), count, None
    rewritten, horizon = _rewrite(batch, records, kept, tombstones, plan)
    if rewritten is None:  # no codec here: kept as it was
        return batch, 0, None
    return rewritten, count - kept, horizon


def group_segments(plan: CleaningPlan, end: int) -> list[list[SourceSegment]]:
    """Consecutive segments below `end` merged while their sizes fit in segment.bytes
    and their offsets in one segment's int32 range (Kafka's groupSegmentsBySize)."""
    groups: list[list[SourceSegment]] = []
    current: list[SourceSegment] = []
    size = 0
    for seg in plan.segments:
        if seg.next_offset > end:
            break
        if current and (size + seg.size > plan.segment_bytes
                        or seg.next_offset - 1 - current[0].base_offset > 0x7FFFFFFF):
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        groups.append(current)
    return groups


def clean(plan: CleaningPlan, offset_map: _core.OffsetMap | None = None, throttle: Throttle | None = None,
          map_budget_bytes: int = 128 * 1024 * 1024, load_factor: float = 0.9,
          map_buffer: MapBuffer | None = None) -> CleaningResult:
    """Clean the planned log (cleaner thread): stages the cleaned segments for
    Log.replace_segments; raises on I/O or corruption (nothing is swapped then).
    Without an offset map, one sized to the dirty section is made (sized_offset_map), in
    map_buffer if given."""
    if offset_map is None:
        offset_map = sized_offset_map(plan, map_budget_bytes, load_factor, map_buffer)
    result = CleaningResult()
    io = map_buffer.io if map_buffer is not None else IoBuffers()
    t0 = time.monotonic()
    end = build_offset_map(plan, offset_map, throttle, io)
    result.map_seconds = time.monotonic() - t0
    result.cleaned_up_to = end
    result.map_entries = offset_map.size
    staging = plan.dir / STAGING_DIR
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    scratch = bytearray()
    txn = TxnCleaning(plan.aborted)  # one pass from the log start: spans the groups
    try:
        for group in group_segments(plan, end):
            result.groups.append(_clean_group(plan, group, offset_map, staging, scratch, result, throttle, txn,
                                              io))
        fsync_dir(staging)
    except BaseException:
        result.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


def _clean_group(plan: CleaningPlan, group: list[SourceSegment], offset_map: _core.OffsetMap,
                 staging: Path, scratch: bytearray, result: CleaningResult,
                 throttle: Throttle | None, txn: TxnCleaning, io: IoBuffers) -> CleanedGroup:
    base = group[0].base_offset
    # Indexes preallocated to what the group can need, not segment.index.bytes: the first
    # write to each page of a large sparse mapping reads a window around it (zeroed pages)
    # that the trim then drops again, which cost more than the index entries themselves.
    need = (sum(s.size for s in group) // max(1, plan.index_interval_bytes) + 4) * TIMEINDEX_ENTRY
    seg = LogSegment(staging, base, plan.index_interval_bytes, min(plan.segment_index_bytes, need))
    retain = np.array(sorted(plan.last_batch_offsets.values()), dtype=np.int64)
    budget = _budget(throttle)
    removed = 0
    try:
        seg.make_active()
        for src in group:
            result.bytes_read += src.size
            pos = 0
            while pos < src.size:  # plain batches in C, a whole segment per call
                stop, pos, need, nread, nwritten, lost, infos, horizon = offset_map.clean_segment(
                    src.fd, pos, src.size, io.read, io.write, _READ_CHUNK, seg.fd, seg.size, plan.now_ms,
                    plan.delete_retention_ms, retain, budget)
                seg.appended(nwritten, infos)
                removed += lost
                result.note_horizon(horizon)
                result.bytes_written += nwritten
                if throttle is not None:
                    throttle(nread + nwritten)
                if stop == _core.SEG_GROW:  # a batch larger than the read buffer, or its cleaned copy
                    io.grow(need)
                elif stop == _core.SEG_BATCH:  # compressed, transactional or control
                    cleaned, lost, horizon = clean_batch(_read_batch(src, pos, need), offset_map, plan, scratch, txn)
                    removed += lost
                    result.note_horizon(horizon)
                    if cleaned is not None:
                        seg.append(cleaned, _core.validate_batches(cleaned, False))
                        result.bytes_written += len(cleaned)
                    pos += need
                elif stop == _core.SEG_SHORT:
                    break  # the file shrank under us: a truncation, which voids this cleaning
        seg.make_inactive()  # no seg.flush(): its msync holds the GIL; the fsyncs below do it
        size, next_offset = seg.size, max(seg.next_offset, group[-1].next_offset)
    finally:
        seg.close()
    result.records_removed += removed
    names = [f"{base:020d}{suffix}" for suffix in (".log", ".index", ".timeindex")]
    if txn.kept_entries:  # aborted transactions whose markers in this group stayed
        idx = TransactionIndex(staging / f"{base:020d}{TXN_INDEX_SUFFIX}")
        for e in txn.kept_entries:
            idx.append(e)
        txn.kept_entries = []
        names.append(f"{base:020d}{TXN_INDEX_SUFFIX}")
    for name in names:  # durable before the loop renames them into the log directory
        fd = os.open(staging / name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    ready = LogSegment(staging, base, plan.index_interval_bytes, plan.segment_index_bytes)
    try:
        ready.load()
        ready.make_inactive()
    except BaseException:
        ready.close()
        raise
    return CleanedGroup([s.base_offset for s in group], base, next_offset, size, names, ready)
