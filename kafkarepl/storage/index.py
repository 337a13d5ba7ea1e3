"""Sparse offset and time indexes: Kafka's .index / .timeindex files.

Both are preallocated to segment.index.bytes and memory-mapped while their segment is
active, then trimmed to the entries actually written when the segment rolls or closes
(so a file's size tells how many entries a clean index holds). The files are created
lazily, when their segment gets its first data (LogSegment.append), so an empty
partition costs no index files: creating thousands of partitions does that many fewer
file system operations. A segment whose .log is empty may lack them. Entries are
big-endian:

  .index      8 bytes: relative offset int32 (of a batch's last offset), position int32
  .timeindex 12 bytes: timestamp int64 (max so far), relative offset int32

Lookups go through kafkarepl._core (binary search in C over the mapping).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from pathlib import Path

import numpy as np

from kafkarepl import _core
from kafkarepl.storage.janitor import JANITOR

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
OFFSET_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
TIME_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])


class IndexCorruptError(Exception):
    """An index file fails its sanity check; the segment rebuilds it from the log."""


class _SparseIndex:
    ENTRY: struct.Struct
    DTYPE: np.dtype
    RESERVED = 0  # slots kept free for the entry written when the segment rolls

    def __init__(self, path: Path, base_offset: int, max_index_size: int, exists: bool = True) -> None:
        """exists=False: the file is known not to exist yet (a new segment)."""
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.ENTRY.size)
        self._mm: mmap.mmap | None = None
        self._mapped_entries = 0
        self._shrinking: threading.Event | None = None  # a shrink of the file on the janitor's thread
        self._appendable = False  # preallocate once the file exists
        self.torn = False
        self.n_entries = 0
        self._fd = -1  # until ensure_file() creates it
        if not exists:
            return
        try:
            self._fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return
        size = os.fstat(self._fd).st_size
        self.n_entries = size // self.ENTRY.size
        # A torn trailing entry fails the sanity check: the segment rebuilds the index.
        self.torn = bool(size % self.ENTRY.size)
        self._map(self.n_entries)

    @property
    def fd(self) -> int:
        """The file's descriptor, -1 while the file does not exist."""
        return self._fd

    def ensure_file(self) -> None:
        """Create the file (preallocated if the segment is active) unless it exists."""
        if self._fd >= 0:
            return
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if self._appendable:
            self._map(self.max_entries)

    # -- mapping -------------------------------------------------------------------
    def _map(self, entries: int, shrink_later: bool = False) -> None:
        # The new mapping first: if it fails (ENOMEM, EMFILE: mmap dups the descriptor),
        # the old one still serves the written entries, which lie inside both sizes.
        # shrink_later: a smaller file's ftruncate goes to the janitor's thread (freeing
        # the preallocated blocks waits on the journal); the new mapping lies inside both
        # sizes, and any later resize of this file waits for it first.
        self._await_shrink()
        size = entries * self.ENTRY.size
        later = shrink_later and entries < self._mapped_entries
        if not later:
            os.ftruncate(self._fd, size)
        new = mmap.mmap(self._fd, size) if entries else None
        if self._mm is not None:
            self._mm.close()
        self._mm = new
        self._mapped_entries = entries
        if later:
            try:
                self._shrinking = JANITOR.shrink(os.dup(self._fd), size)
            except OSError:  # no descriptor to spare: shrink it here
                os.ftruncate(self._fd, size)

    def _await_shrink(self) -> None:
        if self._shrinking is not None:
            self._shrinking.wait()
            self._shrinking = None

    def make_appendable(self) -> None:
        """Grow the file to its preallocated size (the segment became active); without a
        file yet, when it is created."""
        self._appendable = True
        if self._fd >= 0 and self._mapped_entries < self.max_entries:
            self._map(self.max_entries)

    def trim(self, shrink_later: bool = False) -> None:
        """Shrink the file to the written entries (segment rolled or closing);
        shrink_later: the file's ftruncate on the janitor's thread (a roll on the loop)."""
        self._appendable = False
        if self._fd >= 0 and self._mapped_entries != self.n_entries:
            self._map(self.n_entries, shrink_later)

    # -- entries -------------------------------------------------------------------
    @property
    def is_full(self) -> bool:
        return self.n_entries >= self.max_entries - self.RESERVED

    def _unpack(self, slot: int) -> tuple[int, int]:
        assert self._mm is not None
        return self.ENTRY.unpack_from(self._mm, slot * self.ENTRY.size)

    def _pack(self, a: int, b: int) -> None:
        if self.n_entries >= self._mapped_entries:
            self.ensure_file()
            self.make_appendable()
        if self.n_entries >= self._mapped_entries:
            raise IndexError(f"{self.path}: index is full ({self.n_entries} entries)")
        assert self._mm is not None
        self.ENTRY.pack_into(self._mm, self.n_entries * self.ENTRY.size, a, b)
        self.n_entries += 1

    def append_many(self, flat: list[int]) -> int:
        """Append entries given as a flat list (a0, b0, a1, b1, ...) in one pass; entries
        beyond the preallocated size are dropped (a sparser index is still correct, and
        a full index makes the log roll). Returns how many were written."""
        k = self._room(len(flat) // 2)
        pack, size, mm = self.ENTRY.pack_into, self.ENTRY.size, self._mm
        if not k:
            return 0
        assert mm is not None
        off = self.n_entries * size
        for i in range(0, 2 * k, 2):
            pack(mm, off, flat[i], flat[i + 1])
            off += size
        self.n_entries += k
        return k

    def append_raw(self, data: bytes) -> int:
        """Append entries already in the file's format (big-endian, as _core's
        BatchVec.index_entries makes them) with one copy; as append_many otherwise."""
        size = self.ENTRY.size
        k = self._room(len(data) // size)
        if not k:
            return 0
        assert self._mm is not None
        off = self.n_entries * size
        self._mm[off:off + k * size] = memoryview(data)[:k * size]
        self.n_entries += k
        return k

    def _room(self, k: int) -> int:
        """How many of k new entries fit (mapping the file for appends first)."""
        if k <= 0:
            return 0
        if self.n_entries + k > self._mapped_entries:
            self.ensure_file()
            self.make_appendable()
        return max(0, min(k, self.max_entries - self.RESERVED - self.n_entries))

    def entry(self, slot: int) -> tuple[int, int]:
        if not 0 <= slot < self.n_entries:
            raise IndexError(slot)
        return self._unpack(slot)

    def last_entry(self) -> tuple[int, int] | None:
        return self._unpack(self.n_entries - 1) if self.n_entries else None

    def entries(self) -> np.ndarray:
        """A copy of the written entries as a big-endian structured numpy array (a copy,
        so no live view pins the mapping when the index is resized or closed)."""
        if not self.n_entries:
            return np.zeros(0, dtype=self.DTYPE)
        assert self._mm is not None
        return np.frombuffer(self._mm, dtype=self.DTYPE, count=self.n_entries).copy()

    def truncate_entries(self, n: int) -> None:
        self.n_entries = max(0, min(n, self.n_entries))

    def reset(self) -> None:
        self.n_entries = 0
        self.torn = False

    def _check_torn(self) -> None:
        if self.torn:
            raise IndexCorruptError(f"{self.path}: size is not a multiple of {self.ENTRY.size}")

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        self._await_shrink()  # closed files are at their size (a reopen trusts a clean one)
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def detach(self) -> int:
        """Unmap and hand over the descriptor (-1 if none) for the caller to close."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        fd, self._fd = self._fd, -1
        return fd

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_SparseIndex):
    ENTRY = OFFSET_ENTRY
    DTYPE = OFFSET_DTYPE

    def append(self, offset: int, position: int) -> None:
        self._pack(offset - self.base_offset, position)

    def lookup_slot(self, offset: int) -> int:
        """Slot of the greatest entry with offset <= target, or -1."""
        if not self.n_entries:
            return -1
        mm = self._mm
        assert mm is not None  # open while it has entries
        return _core.index_lookup(mm, self.n_entries, offset - self.base_offset)

    def lookup(self, offset: int) -> tuple[int, int] | None:
        """(absolute offset, position) of the greatest entry with offset <= target."""
        slot = self.lookup_slot(offset)
        if slot < 0:
            return None
        rel, pos = self._unpack(slot)
        return self.base_offset + rel, pos

    def slot_at_or_below_position(self, position: int, lo: int = 0, hi: int | None = None) -> int:
        """Greatest slot whose position is <= `position`, or lo-1 (positions ascend);
        the caller may narrow the search to slots [lo, hi)."""
        hi = self.n_entries if hi is None else min(hi, self.n_entries)
        lo = max(lo, 0)  # invariant: answer in [lo-1, hi-1]
        if lo >= hi:
            return lo - 1
        unpack, size, mm = self.ENTRY.unpack_from, self.ENTRY.size, self._mm
        assert mm is not None  # mapped while it has entries
        while lo < hi:
            mid = (lo + hi) // 2
            if unpack(mm, mid * size)[1] <= position:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position` (the log was cut there)."""
        self.truncate_entries(self.slot_at_or_below_position(position - 1) + 1)

    def sanity_check(self, log_size: int) -> None:
        self._check_torn()
        if not self.n_entries:
            return
        arr = self.entries()
        rel = arr["relative_offset"].astype(np.int64)
        pos = arr["position"].astype(np.int64)
        if rel[0] < 0 or pos[0] <= 0 or pos[-1] >= log_size:
            raise IndexCorruptError(f"{self.path}: entry out of the segment's range")
        if len(arr) > 1 and (np.any(np.diff(rel) <= 0) or np.any(np.diff(pos) <= 0)):
            raise IndexCorruptError(f"{self.path}: entries not strictly ascending")


class TimeIndex(_SparseIndex):
    ENTRY = TIME_ENTRY
    DTYPE = TIME_DTYPE
    # The final (max timestamp, offset) entry written on roll/close always has room, so
    # the last entry always holds the segment's largest timestamp.
    RESERVED = 1

    @property
    def last_timestamp(self) -> int:
        """Timestamp of the last entry, or -1 (an append must exceed it)."""
        last = self.last_entry()
        return last[0] if last is not None else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append (timestamp, offset) when the timestamp grows the index's maximum."""
        last = self.last_entry()
        if last is not None and timestamp <= last[0]:
            return
        self._pack(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the greatest entry with timestamp <= target."""
        if not self.n_entries:
            return None
        mm = self._mm
        assert mm is not None  # open while it has entries
        slot = _core.timeindex_lookup(mm, self.n_entries, timestamp)
        if slot < 0:
            return None
        ts, rel = self._unpack(slot)
        return ts, self.base_offset + rel

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        n = self.n_entries
        while n and self._unpack(n - 1)[1] + self.base_offset >= offset:
            n -= 1
        self.n_entries = n

    def sanity_check(self, next_offset: int) -> None:
        self._check_torn()
        if not self.n_entries:
            return
        arr = self.entries()
        ts = arr["timestamp"]
        rel = arr["relative_offset"].astype(np.int64)
        if rel[0] < 0 or self.base_offset + rel[-1] >= next_offset:
            raise IndexCorruptError(f"{self.path}: entry out of the segment's range")
        if len(arr) > 1 and (np.any(np.diff(ts) <= 0) or np.any(np.diff(rel) < 0)):
            raise IndexCorruptError(f"{self.path}: entries not ascending")
