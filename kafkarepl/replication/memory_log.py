"""An in-memory ReplicaLog for tests and the deterministic simulator.

Records are (epoch, value) pairs, one per offset; "batches" for followers are lists of
(offset, epoch, value). A flushed offset models the page cache: `crash(lose_unflushed)`
drops what was never flushed, as a power loss would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkarepl.errors import KafkaStorageError, OffsetOutOfRangeError

from .log import EpochEndOffset, epoch_end_offset

Record = tuple[int, int, object]  # (offset, epoch, value)


class MemoryAppend(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int


class MemorySlice(list[Record]):
    """Records read for a fetch; `size` counts records (one "byte" each)."""

    @property
    def size(self) -> int:
        return len(self)


@dataclass
class MemoryLog:
    log_start_offset: int = 0
    records: list[tuple[int, object]] = field(default_factory=list)  # index = offset - start
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start_offset)
    flushed_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return self.log_start_offset + len(self.records)

    def latest_epoch(self) -> int | None:
        return self.epochs[-1][0] if self.epochs else None

    def epoch_entries(self) -> Sequence[tuple[int, int]]:
        return list(self.epochs)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        return epoch_end_offset(self.epochs, epoch, self.log_end_offset)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        if self.epochs and epoch <= self.epochs[-1][0] and start_offset >= self.epochs[-1][1]:
            return  # not newer: nothing to record
        while self.epochs and (self.epochs[-1][0] >= epoch or self.epochs[-1][1] >= start_offset):
            self.epochs.pop()
        self.epochs.append((epoch, start_offset))

    # -- appends -------------------------------------------------------------------------

    def append_as_leader(self, values: Sequence[object], epoch: int, now_ms: int = -1, *,
                         client: bool = False) -> MemoryAppend:
        """Append values at LEO with `epoch` (the leader's append; records are values, so
        `client` - the storage log's client-only batch rules - changes nothing here)."""
        first = self.log_end_offset
        self.assign_epoch(epoch, first)
        self.records.extend((epoch, v) for v in values)
        return MemoryAppend(first, self.log_end_offset - 1, -1)

    def append_as_follower(self, records: Sequence[Record]) -> None:
        if not records:
            return
        if records[0][0] != self.log_end_offset:
            raise KafkaStorageError(
                f"follower append at {records[0][0]} but log end offset is {self.log_end_offset}"
            )
        for offset, epoch, value in records:
            if self.latest_epoch() is None or epoch > self.latest_epoch():  # type: ignore[operator]
                self.assign_epoch(epoch, offset)
            self.records.append((epoch, value))

    def records_from(self, from_offset: int, max_offset: int | None = None, max_records: int = 1 << 30) -> list[Record]:
        end = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        end = min(end, from_offset + max_records)
        base = self.log_start_offset
        return [(o, *self.records[o - base]) for o in range(max(from_offset, base), end)]

    def read(
        self, from_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> MemorySlice:
        """A fetch read: each record counts as one byte (and is its own batch)."""
        if from_offset < self.log_start_offset or from_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {from_offset} is outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        n = max(max_bytes, 1 if min_one_batch else 0)
        return MemorySlice(self.records_from(from_offset, max_offset, n))

    def get(self, offset: int) -> tuple[int, object] | None:
        i = offset - self.log_start_offset
        return self.records[i] if 0 <= i < len(self.records) else None

    # -- truncation, flush, crash --------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        offset = max(offset, self.log_start_offset)
        if offset < self.log_end_offset:
            del self.records[offset - self.log_start_offset :]
        while self.epochs and self.epochs[-1][1] >= offset:
            self.epochs.pop()
        self.flushed_offset = min(self.flushed_offset, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.records.clear()
        self.epochs.clear()
        self.log_start_offset = offset
        self.flushed_offset = offset

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """Retention / DeleteRecords / a follower following its leader's log start: the
        log now starts at `offset` (<= LEO). The epoch covering it is moved to start
        there, as Kafka's truncateFromStart does."""
        offset = min(max(offset, self.log_start_offset), self.log_end_offset)
        del self.records[: offset - self.log_start_offset]
        self.log_start_offset = offset
        covering = [e for e in self.epochs if e[1] <= offset]
        if covering:
            self.epochs = [(covering[-1][0], offset)] + [e for e in self.epochs if e[1] > offset]
        self.flushed_offset = max(self.flushed_offset, offset)

    def flush(self) -> None:
        self.flushed_offset = self.log_end_offset

    def flush_pending(self, end_offset: int) -> bool:
        return False  # the simulation flushes explicitly (flush, crash)

    def crash(self, lose_unflushed: bool) -> None:
        """Simulate a process crash; with lose_unflushed, a power loss too."""
        if lose_unflushed and self.flushed_offset < self.log_end_offset:
            self.truncate_to(self.flushed_offset)
        self.flushed_offset = self.log_end_offset
