"""Idempotent producer state: per producer id, its epoch and its last 5 batches.

Kafka keeps the sequence ranges of each producer's last five batches so a retried batch
(the producer never saw the ack) is answered with the original offsets instead of being
written twice, and a gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER. Leaders and
followers both maintain the table (followers without validation) and it is rebuilt from
the log on recovery, so deduplication survives a leader change and a crash.

Transactions: a transactional batch opens its producer's transaction at its first
offset; a COMMIT or ABORT marker (control batch) completes it. The first offset of the
earliest transaction still open, or completed by a marker the HW has not yet passed, is
the first unstable offset; the last stable offset (LSO) is min(that, HW), the limit of
read_committed fetches (Kafka's ProducerStateManager). Aborted transactions come back
from `prepare` with the LSO Kafka records with them in the transaction index.

A clean shutdown saves the table to `producer-state-checkpoint` (xxh64-protected text),
open transactions included; it is trusted only when its offset equals the reopened log's
end offset.
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kafkarepl import _core
from kafkarepl.errors import (
    CheckpointCorruptError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from kafkarepl.storage.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_MASK,
    NO_SEQUENCE,
    TRANSACTIONAL_MASK,
    control_record_type,
    last_sequence,
)

log = logging.getLogger("kafkarepl.storage")

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms default
NO_PRODUCER_EPOCH = -1
SNAPSHOT_NAME = "producer-state-checkpoint"
_RECENT_COMPLETED = 512  # completed transactions kept for the LSO when nobody asks


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp as written


class CompletedTxn(NamedTuple):
    """A transaction a marker completed: [first_offset, last_offset] (the marker's
    offset). last_stable_offset: the first offset of the earliest other transaction still
    open at that point, else last_offset + 1 (what Kafka stores in the .txnindex)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int


class Prepared(NamedTuple):
    """prepare()'s answer: entries to commit, or the duplicate already written; and the
    transactions the batches start and complete."""

    pending: dict
    duplicate: BatchMetadata | None
    started: list  # (producer id, first offset)
    completed: list  # CompletedTxn


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # first offset of its open transaction, or -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                  self.last_timestamp, self.current_txn_first_offset)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == 0x7FFFFFFF)


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, int] = {}  # producer id -> first offset of its open txn
        # (first offset, producer id, marker offset or -1 while open), lazily pruned:
        # an open entry is stale once its transaction completed, a completed one once
        # the HW passed its marker.
        self._unstable: list[tuple[int, int, int]] = []
        self.last_marker_offset = -1

    def __len__(self) -> int:
        return len(self.producers)

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare(self, batches: Iterable, first_offset: int | None = None,
                validate: bool = True, log_append_time: int | None = None,
                buf=None) -> Prepared:
        """Check `batches` (BatchInfo-like) against the table without changing it.

        Offsets: consecutive from `first_offset` when given (the leader, before assigning
        them), else each batch's own base_offset. Commit the answer after the write
        succeeded; a non-None duplicate means one of the batches was already written (its
        original metadata) and nothing must be written. With validate=False
        (replication, recovery) sequence/epoch rules are not enforced.
        log_append_time: the timestamp the batches will carry (LogAppendTime topics).
        buf: the bytes the batches' positions point into, to read markers' types.
        Raises InvalidProducerEpochError / OutOfOrderSequenceError.
        """
        pending: dict[int, ProducerStateEntry] = {}
        started: list[tuple[int, int]] = []
        completed: list[CompletedTxn] = []
        offset = first_offset
        for b in batches:
            base = b.base_offset if offset is None else offset
            last = base + b.last_offset_delta
            if offset is not None:
                offset = last + 1
            pid = b.producer_id
            if pid < 0:
                continue
            entry = pending.get(pid)
            if entry is None:
                current = self.producers.get(pid)
                entry = current.copy() if current else ProducerStateEntry(pid)
            epoch = b.producer_epoch
            control = bool(b.attributes & CONTROL_MASK)
            if control:
                if validate and epoch < entry.producer_epoch:
                    raise InvalidProducerEpochError(
                        f"producer {pid}: marker epoch {epoch} is older than {entry.producer_epoch}")
                entry.producer_epoch = max(entry.producer_epoch, epoch)
                kind = control_record_type(buf, b.position, b.size) if buf is not None else -1
                if kind in (CONTROL_ABORT, CONTROL_COMMIT) and entry.current_txn_first_offset >= 0:
                    completed.append(CompletedTxn(
                        pid, entry.current_txn_first_offset, last, kind == CONTROL_ABORT,
                        self._stable_after(pid, last, pending)))
                    entry.current_txn_first_offset = -1
                pending[pid] = entry
                continue
            if b.attributes & TRANSACTIONAL_MASK and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = base
                started.append((pid, base))
            if b.base_sequence == NO_SEQUENCE:
                # Sequence-less batches only move the epoch forward.
                if validate and epoch < entry.producer_epoch:
                    raise InvalidProducerEpochError(
                        f"producer {pid}: epoch {epoch} is older than {entry.producer_epoch}")
                entry.producer_epoch = max(entry.producer_epoch, epoch)
                pending[pid] = entry
                continue
            first_seq = b.base_sequence
            last_seq = last_sequence(first_seq, b.last_offset_delta)
            if validate:
                dup = entry.find_duplicate(epoch, first_seq, last_seq)
                if dup is not None:
                    return Prepared({}, dup, [], [])
                self._check(entry, epoch, first_seq)
            if epoch != entry.producer_epoch:
                entry.producer_epoch = epoch
                entry.batches.clear()
            ts = b.max_timestamp if log_append_time is None else log_append_time
            entry.batches.append(BatchMetadata(first_seq, last_seq, base, last, ts))
            entry.last_timestamp = max(entry.last_timestamp, ts)
            pending[pid] = entry
        return Prepared(pending, None, started, completed)

    def _stable_after(self, pid: int, marker_offset: int, pending: dict[int, ProducerStateEntry]) -> int:
        """Kafka's lastStableOffset(completedTxn): the first offset of the earliest other
        open transaction at this marker, else the marker's offset + 1."""
        lso = marker_offset + 1
        for other, first in self.ongoing_txns.items():
            if other != pid and other not in pending:
                lso = min(lso, first)
        for other, e in pending.items():
            if other != pid and e.current_txn_first_offset >= 0:
                lso = min(lso, e.current_txn_first_offset)
        return lso

    @staticmethod
    def _check(entry: ProducerStateEntry, epoch: int, first_seq: int) -> None:
        pid = entry.producer_id
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {pid}: epoch {epoch} is older than {entry.producer_epoch}")
        if epoch != entry.producer_epoch:
            # A bumped epoch restarts sequences at 0 (unless we never knew the producer).
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {pid}: new epoch {epoch} must start at sequence 0, "
                    f"got {first_seq}")
            return
        last_seq = entry.last_seq
        # With no batch retained (state lost to retention), accept any sequence (Kafka).
        if entry.batches and not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow "
                f"{last_seq}")

    def commit(self, prepared: Prepared) -> None:
        self.producers.update(prepared.pending)
        for pid, first in prepared.started:
            heapq.heappush(self._unstable, (first, pid, -1))
        for t in prepared.completed:
            heapq.heappush(self._unstable, (t.first_offset, t.producer_id, t.last_offset))
            self.last_marker_offset = max(self.last_marker_offset, t.last_offset)
        for pid, e in prepared.pending.items():
            if e.current_txn_first_offset >= 0:
                self.ongoing_txns[pid] = e.current_txn_first_offset
            else:
                self.ongoing_txns.pop(pid, None)
        if len(self._unstable) > 2 * len(self.ongoing_txns) + 2 * _RECENT_COMPLETED:
            self._prune()

    def _prune(self) -> None:
        """Bound the heap when nobody asks for the LSO (a follower without read_committed
        readers): keep the open transactions and the most recently completed ones (only
        those can still have a marker above the HW)."""
        open_ = [(f, p, -1) for p, f in self.ongoing_txns.items()]
        done = sorted((e for e in self._unstable if e[2] >= 0), key=lambda e: e[2])
        self._unstable = open_ + done[-_RECENT_COMPLETED:]
        heapq.heapify(self._unstable)

    def check_and_update(self, batches: Iterable, first_offset: int | None = None,
                         validate: bool = True, buf=None) -> Prepared:
        """prepare + commit (nothing changes when a duplicate is found)."""
        prepared = self.prepare(batches, first_offset, validate, buf=buf)
        if prepared.duplicate is None:
            self.commit(prepared)
        return prepared

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """First offset of the earliest open transaction, or of one whose marker the
        HW has not passed yet (Kafka keeps those unstable until the marker is
        replicated); None when there is none. LSO = min(this, HW)."""
        heap = self._unstable
        while heap:
            first, pid, marker = heap[0]
            if marker < 0:
                if self.ongoing_txns.get(pid) == first:
                    return first
            elif marker >= high_watermark:
                return first
            heapq.heappop(heap)
        return None

    def has_batches_from(self, end_offset: int) -> bool:
        """Whether any retained batch or marker lies at or after `end_offset` (state
        must then be rebuilt from the log after a truncation)."""
        if self.last_marker_offset >= end_offset or any(
                f >= end_offset for f in self.ongoing_txns.values()):
            return True
        return any(b.last_offset >= end_offset for e in self.producers.values() for b in e.batches)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self._unstable.clear()
        self.last_marker_offset = -1

    def expire(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Forget producers without an open transaction whose newest batch timestamp is
        expiration_ms old or more (Kafka's isProducerExpired), so the table does not grow
        forever; returns how many were removed."""
        doomed = [pid for pid, e in self.producers.items()
                  if now_ms - e.last_timestamp >= expiration_ms and e.current_txn_first_offset < 0]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    # -- snapshot ------------------------------------------------------------------
    def write_snapshot(self, path: Path, offset: int, sync: bool = True) -> None:
        """sync=False: in place, no fsync (the caller syncs the file system before
        trusting it, e.g. before the clean-shutdown marker)."""
        lines = ["1", str(offset), str(len(self.producers))]
        for e in self.producers.values():
            bs = ",".join(f"{b.first_seq}:{b.last_seq}:{b.first_offset}:{b.last_offset}:"
                          f"{b.timestamp}" for b in e.batches) or "-"
            lines.append(f"{e.producer_id} {e.producer_epoch} {e.last_timestamp} {bs} "
                         f"{e.current_txn_first_offset}")
        _core.checkpoint_write(str(path), ("\n".join(lines) + "\n").encode(), sync=sync)

    @classmethod
    def read_snapshot(cls, path: Path) -> tuple[ProducerStateTable, int] | None:
        """(table, offset) or None when missing/corrupt (corruption is logged)."""
        try:
            payload = _core.checkpoint_read(str(path))
        except FileNotFoundError:
            return None
        except CheckpointCorruptError as exc:
            log.error("%s; rebuilding producer state from the log", exc)
            return None
        try:
            lines = payload.decode("ascii").splitlines()
            version = lines[0]
            if version not in ("0", "1"):
                raise ValueError("unknown version")
            offset, count = int(lines[1]), int(lines[2])
            table = cls()
            for ln in lines[3:]:
                fields = ln.split()
                pid_s, epoch_s, ts_s, bs = fields[:4]
                e = ProducerStateEntry(int(pid_s), int(epoch_s), last_timestamp=int(ts_s))
                if version == "1":  # v1: the first offset of its open transaction
                    e.current_txn_first_offset = int(fields[4])
                if bs != "-":
                    for item in bs.split(","):
                        e.batches.append(BatchMetadata(*map(int, item.split(":"))))
                table.producers[e.producer_id] = e
                if e.current_txn_first_offset >= 0:
                    table.ongoing_txns[e.producer_id] = e.current_txn_first_offset
                    heapq.heappush(table._unstable, (e.current_txn_first_offset, e.producer_id, -1))
            if count != len(table.producers):
                raise ValueError(f"expected {count} producers")
        except (ValueError, IndexError, TypeError, UnicodeDecodeError) as exc:
            log.error("%s: malformed producer snapshot (%s); rebuilding from the log",
                      path, exc)
            return None
        return table, offset
