"""One log segment: `<base offset>.log` plus its `.index` and `.timeindex`.

The .log file is exactly the wire record batches. A segment knows its byte size, next
offset and largest timestamp; it finds batch positions by offset (sparse index + a short
header walk) and by timestamp, and rebuilds its indexes from the log during recovery.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from kafkarepl import _core
from kafkarepl.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from kafkarepl.storage.records import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    scan_windows,
    walk_headers,
)

log = logging.getLogger("kafkarepl.storage")

INT32_MAX = 0x7FFFFFFF


def segment_file(dir: Path, base_offset: int, suffix: str) -> Path:
    return dir / f"{base_offset:020d}{suffix}"


class LogSegment:
    def __init__(self, dir: Path, base_offset: int, index_interval_bytes: int,
                 max_index_size: int, new: bool = False) -> None:
        """new: an empty segment of a new (or emptied) partition: no file exists yet and
        none is created until its first data (append), so a partition without records
        costs no file at all; fd is -1 until then."""
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        stem = f"{base_offset:020d}"
        self.log_path = dir / (stem + ".log")
        if new:
            self.fd, self.size = -1, 0
            self.created_ms = int(time.time() * 1000)
        else:
            self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            st = os.fstat(self.fd)
            self.size = st.st_size
            self.created_ms = int(st.st_mtime * 1000) if self.size else int(time.time() * 1000)
        self.offset_index = OffsetIndex(dir / (stem + ".index"), base_offset, max_index_size,
                                        exists=not new)
        self.time_index = TimeIndex(dir / (stem + ".timeindex"), base_offset, max_index_size,
                                    exists=not new)
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self.first_append_ms: int | None = None  # wall clock of the first append here
        self.bytes_since_last_index_entry = 0

    def moved_to(self, dir: Path) -> None:
        """Its files were renamed into `dir` under the same names: only the paths change
        (descriptors and index mappings follow a rename)."""
        self.dir = dir
        self.log_path = dir / self.log_path.name
        self.offset_index.path = dir / self.offset_index.path.name
        self.time_index.path = dir / self.time_index.path.name

    # -- loading -------------------------------------------------------------------
    def load(self) -> None:
        """Trust the indexes of a cleanly written segment after a sanity check, and find
        the next offset and largest timestamp by walking the headers after the last index
        entry. Raises IndexCorruptError / CorruptBatchError: the caller then recovers."""
        self.offset_index.sanity_check(self.size)
        last = self.offset_index.last_entry()
        start = last[1] if last else 0
        if self.size and not 0 <= start < self.size:
            raise IndexCorruptError(f"{self.offset_index.path}: last entry past the log")
        self.next_offset = self.base_offset
        ts_last = self.time_index.last_entry()
        if ts_last is not None:
            self.max_timestamp = ts_last[0]
            self.offset_of_max_timestamp = self.base_offset + ts_last[1]
        for h in walk_headers(self.fd, start, self.size):
            if last and h.position == start and h.last_offset != self.base_offset + last[0]:
                # The last entry must name the batch it points at (catches stale indexes).
                raise IndexCorruptError(
                    f"{self.offset_index.path}: last entry says offset "
                    f"{self.base_offset + last[0]} but the batch at {start} ends at {h.last_offset}")
            self.next_offset = h.last_offset + 1
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        self.time_index.sanity_check(max(self.next_offset, self.base_offset + 1))
        # Bytes since the last entry include the indexed batch itself (as in append).
        self.bytes_since_last_index_entry = self.size - start
        self._load_first_timestamp()

    def _load_first_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            h = next(walk_headers(self.fd, 0, self.size), None)
            self.first_batch_timestamp = h.max_timestamp if h else None

    def recover(self) -> int:
        """Validate every batch (CRC included), rebuild both indexes and cut the file at
        the first torn or invalid batch. Returns the bytes truncated. The file is read
        window by window (records.scan_windows: reads, so a disk error is an OSError)."""
        valid, error, errpos = 0, None, -1
        self._reset_indexes()
        first_ts = None
        # Offsets must ascend and stay within the segment's int32 relative range.
        prev_last = self.base_offset - 1
        for w in scan_windows(self.fd, self.size, True) if self.size else ():
            batches = w.batches
            for i, b in enumerate(batches):
                last = b.base_offset + b.last_offset_delta
                if b.base_offset <= prev_last or last - self.base_offset > INT32_MAX:
                    error = (f"batch offsets {b.base_offset}..{last} out of order or range "
                             f"(previous last offset {prev_last}, segment base {self.base_offset})")
                    errpos = w.position + b.position
                    batches = batches[:i]
                    break
                prev_last = last
            if batches:
                first_ts = batches[0].max_timestamp if first_ts is None else first_ts
                self._index_batches(batches, w.position)
            if error is not None:  # offsets out of order: cut at that batch
                valid = errpos
                break
            valid, error, errpos = w.end, w.error, w.error_position  # the walk ends after an error
        truncated = self.size - valid
        if truncated:
            log.warning("%s: truncating %d bytes at position %d: %s", self.log_path,
                        truncated, errpos, error)
            _core.file_truncate(self.fd, valid)
            self.size = valid
        self.first_batch_timestamp = first_ts
        return truncated

    def _ensure_index_files(self) -> None:
        self.offset_index.ensure_file()
        self.time_index.ensure_file()

    def _reset_indexes(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        if self.size:
            self._ensure_index_files()
        self.offset_index.make_appendable()
        self.time_index.make_appendable()
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        self.next_offset = self.base_offset

    # -- append ----------------------------------------------------------------------
    def _index_batches(self, batches: list, base_position: int,
                       first_offset: int | None = None,
                       log_append_time: int | None = None) -> tuple[int, int]:
        """Index batches written at base_position; returns (record count, max timestamp).

        first_offset: offsets are consecutive from it (leader appends: `batches` were
        read before offsets were assigned); else each batch's own base offset.
        log_append_time: the max timestamp every batch was stamped with.
        One pass of plain tuple unpacking: this loop runs once per batch on the hot path.
        """
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        seg_max, seg_max_off = self.max_timestamp, self.offset_of_max_timestamp
        seg_base = self.base_offset
        entries: list[int] = []  # flat (relative offset, position) pairs
        time_entries: list[int] = []  # flat (timestamp, relative offset) pairs
        last_indexed_ts = self.time_index.last_timestamp
        count = 0
        append_max = NO_TIMESTAMP
        last = self.next_offset - 1
        off = first_offset
        for (position, size, base, delta, _epoch, _magic, _crc, _attrs, _first_ts, max_ts,
             _pid, _pepoch, _seq, n) in batches:
            if off is not None:
                base = off
                off = base + delta + 1
            last = base + delta
            if log_append_time is not None:
                max_ts = log_append_time
            count += n
            if max_ts > append_max:
                append_max = max_ts
            if max_ts > seg_max:
                seg_max, seg_max_off = max_ts, last
            if since > interval:
                entries.append(last - seg_base)
                entries.append(base_position + position)
                if seg_max > last_indexed_ts:
                    time_entries.append(seg_max)
                    time_entries.append(seg_max_off - seg_base)
                    last_indexed_ts = seg_max
                since = 0
            since += size
        if entries:
            self.offset_index.append_many(entries)
            self.time_index.append_many(time_entries)
        self.bytes_since_last_index_entry = since
        self.max_timestamp, self.offset_of_max_timestamp = seg_max, seg_max_off
        self.next_offset = last + 1
        return count, append_max

    def append(self, data, batches: list, first_offset: int | None = None,
               log_append_time: int | None = None) -> tuple[int, int]:
        """Write `data` (whole batches, offsets assigned) with one write, then index it.
        `batches`: BatchInfo of data (see _index_batches for the two keywords).
        Returns (record count, max timestamp) of the appended batches."""
        position = self.size
        if not position:
            if self.fd < 0:
                self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            self._ensure_index_files()  # before the data: a non-empty .log has its indexes
        try:
            _core.file_append(self.fd, data)
        except OSError:
            # A short write (ENOSPC, EIO) leaves part of a batch after `position`: cut it,
            # or the next append would land behind it and reads at our positions would
            # serve it. Best effort: the log dir is being taken down anyway.
            try:
                os.ftruncate(self.fd, position)
            except OSError:
                pass
            raise
        self.size += len(data)
        if self.first_batch_timestamp is None and batches:
            self.first_batch_timestamp = (log_append_time if log_append_time is not None
                                          else batches[0].max_timestamp)
        return self._index_batches(batches, position, first_offset, log_append_time)

    def appended(self, size: int, batches: _core.BatchVec) -> None:
        """Account for `size` bytes of whole batches written to the .log fd by someone
        else (the log cleaner's C loop, which writes as it goes); `batches` carry their
        positions in the file. Indexed in C (as _index_batches does it): a cleaned
        segment has thousands of batches, and a Python loop over them held the GIL,
        which the broker's event loop waited for, for milliseconds."""
        if not size:
            return
        self.size += size
        if not len(batches):
            return
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = batches[0].max_timestamp
        (offsets, times, self.bytes_since_last_index_entry, self.max_timestamp,
         self.offset_of_max_timestamp, _indexed_ts, last) = batches.index_entries(
            0, self.index_interval_bytes, self.base_offset, self.bytes_since_last_index_entry,
            self.max_timestamp, self.offset_of_max_timestamp, self.time_index.last_timestamp,
            self.next_offset - 1)
        if offsets:
            self.offset_index.append_raw(offsets)
            self.time_index.append_raw(times)
        self.next_offset = last + 1

    def can_hold(self, first_offset: int, last_offset: int) -> bool:
        """Relative offsets must fit in int32 and the indexes must have room."""
        return (first_offset >= self.base_offset
                and last_offset - self.base_offset <= INT32_MAX
                and not self.offset_index.is_full and not self.time_index.is_full)

    def rolling_base_ms(self) -> int:
        """What segment.ms counts from: when this process first appended here; for a
        segment loaded from disk, its first batch's timestamp (Kafka), else creation."""
        if self.first_append_ms is not None:
            return self.first_append_ms
        if self.first_batch_timestamp is not None and self.first_batch_timestamp >= 0:
            return self.first_batch_timestamp
        return self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """For retention.ms: the largest batch timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        if self.fd < 0:
            return self.created_ms
        return int(os.fstat(self.fd).st_mtime * 1000)

    # -- lookups ---------------------------------------------------------------------
    def _walk_chunk(self) -> int:
        # One pread usually covers the walk from an index entry to the target batch.
        return min(max(self.index_interval_bytes, 512) + 2 * HEADER_SIZE, 1 << 16)

    def find_batch_and_slot(self, offset: int) -> tuple[BatchHeader | None, int]:
        """(first batch whose last offset is >= `offset`, the index slot the walk started
        from or -1); the batch is None when the segment ends before `offset`."""
        if offset >= self.next_offset:
            return None, -1
        index = self.offset_index
        slot = index.lookup_slot(offset)
        start = index.entry(slot)[1] if slot >= 0 else 0
        chunk = self._walk_chunk()
        if slot + 1 < index.n_entries:
            # The batch holding `offset` starts at or before the next indexed batch: one
            # pread up to that batch's header covers the whole walk.
            span = index.entry(slot + 1)[1] + HEADER_SIZE - start
            if span <= 1 << 17:
                chunk = span
        for h in walk_headers(self.fd, start, self.size, chunk):
            if h.last_offset >= offset:
                return h, slot
        return None, slot

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is >= `offset` (the one holding it), or None
        when the segment ends before it."""
        return self.find_batch_and_slot(offset)[0]

    def end_position_before(self, limit_offset: int) -> int:
        """Position where whole batches below `limit_offset` end (a batch boundary)."""
        if limit_offset >= self.next_offset:
            return self.size
        h = self.find_batch(limit_offset)
        return h.position if h else self.size

    def last_boundary_within(self, start: int, cap: int, start_slot: int = -1) -> int:
        """A batch end position <= cap among batches from `start`: the greatest one when
        no index entry lies in (start, cap], else the last indexed batch start in that
        range (0 if the first batch already ends past cap). start_slot: an index slot at
        or before `start`."""
        index = self.offset_index
        lo = max(start_slot, 0)
        hi = index.n_entries
        if self.index_interval_bytes > 0:
            # Entries lie more than index.interval.bytes apart: bound the search.
            hi = min(hi, lo + (cap - start) // self.index_interval_bytes + 2)
            if hi < index.n_entries and index.entry(hi - 1)[1] <= cap:
                hi = index.n_entries  # not the spacing expected: search everything
        slot = index.slot_at_or_below_position(cap, lo, hi)
        if slot >= 0:
            pos = index.entry(slot)[1]
            if pos > start:
                # An indexed position is a batch start, i.e. a boundary. Stopping there
                # gives up at most index.interval.bytes plus one batch of the budget and
                # saves a header walk on every large read.
                return pos
        best = 0
        for h in walk_headers(self.fd, start, self.size, self._walk_chunk()):
            end = h.position + h.size
            if end > cap:
                break
            best = end
        return best

    def find_offset_by_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch whose max timestamp is >= `timestamp`, or None."""
        if self.max_timestamp < timestamp:
            return None
        # Entries hold the max timestamp so far; every batch up to the greatest entry
        # strictly below the target is below it too, so the walk can start there.
        entry = self.time_index.lookup(timestamp - 1)
        start = 0
        if entry is not None:
            pos_entry = self.offset_index.lookup(entry[1])
            start = pos_entry[1] if pos_entry else 0
        for h in walk_headers(self.fd, start, self.size):
            if h.max_timestamp >= timestamp:
                return h
        return None

    # -- truncation / lifecycle -------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop every batch from the one holding `offset` on (if `offset` falls inside a
        batch, that whole batch goes: offsets are cut at batch starts). Returns bytes
        removed."""
        h = self.find_batch(offset)
        if h is None:
            return 0
        position = h.position
        removed = self.size - position
        _core.file_truncate(self.fd, position)
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(h.base_offset)
        # Rebuild next offset / max timestamp from the last surviving index entries.
        last = self.offset_index.last_entry()
        ts_last = self.time_index.last_entry()
        self.max_timestamp = ts_last[0] if ts_last else NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset + ts_last[1] if ts_last else self.base_offset
        start = last[1] if last else 0
        self.next_offset = self.base_offset
        for b in walk_headers(self.fd, start, self.size):
            self.next_offset = b.last_offset + 1
            if b.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = b.max_timestamp, b.last_offset
        self.bytes_since_last_index_entry = self.size - start
        if self.size == 0:
            self.first_batch_timestamp = None
        return removed

    def make_active(self) -> None:
        self.offset_index.make_appendable()
        self.time_index.make_appendable()

    def make_inactive(self, shrink_later: bool = False) -> None:
        """Rolled (or written by the cleaner): record the final max timestamp and trim
        both indexes, whose files exist from now on even for an empty segment.
        shrink_later: the files' shrinks on the janitor's thread (a roll on the loop)."""
        self._ensure_index_files()
        self._finish_indexes(shrink_later)

    def _finish_indexes(self, shrink_later: bool = False) -> None:
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.trim(shrink_later)
        self.time_index.trim(shrink_later)

    def flush(self) -> None:
        if self.fd >= 0:
            _core.file_fdatasync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def dup_fds(self) -> list[int]:
        """Duplicates of the log and index descriptors (fdatasync of an index file also
        writes back pages dirtied through its shared mapping)."""
        out = []
        for fd in (self.fd, self.offset_index.fd, self.time_index.fd):
            if fd >= 0:
                out.append(os.dup(fd))
        return out

    def close(self) -> None:
        if self.fd < 0:
            return  # closed, or never given a file (no data)
        self._finish_indexes()  # an empty segment keeps having no index files
        self.offset_index.close()
        self.time_index.close()
        os.close(self.fd)
        self.fd = -1

    def unlink(self, replaced: frozenset[Path] = frozenset()) -> tuple[int, list[int]]:
        """Remove the files but keep their descriptors open, returned (release()) for the
        caller to close later: a reader may still be sending from the .log, and the last
        close of a removed file frees its blocks and page cache, the slow part, for a
        background thread. Files in `replaced` are not unlinked: a rename is about to put
        a new file at that path (a cleaned segment of the same base offset), which removes
        the old one atomically."""
        for path in (self.offset_index.path, self.time_index.path, self.log_path):
            if path not in replaced:
                path.unlink(missing_ok=True)
        return self.release()

    def release(self) -> tuple[int, list[int]]:
        """Unmap the indexes and hand over the open descriptors (the caller closes them):
        the .log's (-1 if none), which readers may still send from, and the indexes',
        which nothing reads once unmapped. The files are left as they are."""
        index_fds = [fd for fd in (self.offset_index.detach(), self.time_index.detach()) if fd >= 0]
        log_fd, self.fd = self.fd, -1
        return log_fd, index_fds

    def __repr__(self) -> str:
        return (f"LogSegment(base={self.base_offset}, next={self.next_offset}, "
                f"size={self.size})")
