"""Idempotent producer state: per producer id, its epoch and its last 5 batches.

Kafka keeps the sequence ranges of each producer's last five batches so a retried batch
(the producer never saw the ack) is answered with the original offsets instead of being
written twice, and a gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER. Leaders and
followers both maintain the table (followers without validation) and it is rebuilt from
the log on recovery, so deduplication survives a leader change and a crash.

A clean shutdown saves the table to `producer-state-checkpoint` (xxh64-protected text);
it is trusted only when its offset equals the reopened log's end offset.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkarepl import _core
from kafkarepl.errors import (
    CheckpointCorruptError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from kafkarepl.storage.records import CONTROL_MASK, NO_SEQUENCE, last_sequence

log = logging.getLogger("kafkarepl.storage")

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms default
NO_PRODUCER_EPOCH = -1
SNAPSHOT_NAME = "producer-state-checkpoint"


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp as written


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                  self.last_timestamp)

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

    def __len__(self) -> int:
        return len(self.producers)

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare(self, batches: Iterable, first_offset: int | None = None,
                validate: bool = True, log_append_time: int | None = None,
                ) -> tuple[dict[int, ProducerStateEntry], BatchMetadata | None]:
        """Check `batches` (BatchInfo-like) against the table without changing it.

        Offsets: consecutive from `first_offset` when given (the leader, before assigning
        them), else each batch's own base_offset. Returns (pending, duplicate): commit
        `pending` after the write succeeded; a non-None duplicate means one of the batches
        was already written (its original metadata) and nothing must be written.
        With validate=False (replication, recovery) sequence/epoch rules are not enforced.
        log_append_time: the timestamp the batches will carry (LogAppendTime topics).
        Raises InvalidProducerEpochError / OutOfOrderSequenceError.
        """
        pending: dict[int, ProducerStateEntry] = {}
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
            if control or b.base_sequence == NO_SEQUENCE:
                # Markers and sequence-less batches only move the epoch forward.
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
                    return {}, dup
                self._check(entry, epoch, first_seq)
            if epoch != entry.producer_epoch:
                entry.producer_epoch = epoch
                entry.batches.clear()
            ts = b.max_timestamp if log_append_time is None else log_append_time
            entry.batches.append(BatchMetadata(first_seq, last_seq, base, last, ts))
            entry.last_timestamp = max(entry.last_timestamp, ts)
            pending[pid] = entry
        return pending, None

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

    def commit(self, pending: dict[int, ProducerStateEntry]) -> None:
        self.producers.update(pending)

    def check_and_update(self, batches: Iterable, first_offset: int | None = None,
                         validate: bool = True) -> BatchMetadata | None:
        """prepare + commit; returns the duplicate's metadata (then nothing changed)."""
        pending, dup = self.prepare(batches, first_offset, validate)
        if dup is None:
            self.commit(pending)
        return dup

    def has_batches_from(self, end_offset: int) -> bool:
        """Whether any retained batch lies at or after `end_offset` (state must then be
        rebuilt from the log after a truncation)."""
        return any(b.last_offset >= end_offset for e in self.producers.values() for b in e.batches)

    def clear(self) -> None:
        self.producers.clear()

    def expire(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Forget producers whose newest batch timestamp is older than expiration_ms (so
        the table does not grow forever); returns how many were removed."""
        doomed = [pid for pid, e in self.producers.items()
                  if now_ms - e.last_timestamp > expiration_ms]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    # -- snapshot ------------------------------------------------------------------
    def write_snapshot(self, path: Path, offset: int) -> None:
        lines = ["0", str(offset), str(len(self.producers))]
        for e in self.producers.values():
            bs = ",".join(f"{b.first_seq}:{b.last_seq}:{b.first_offset}:{b.last_offset}:"
                          f"{b.timestamp}" for b in e.batches) or "-"
            lines.append(f"{e.producer_id} {e.producer_epoch} {e.last_timestamp} {bs}")
        _core.checkpoint_write(str(path), ("\n".join(lines) + "\n").encode())

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
            if lines[0] != "0":
                raise ValueError("unknown version")
            offset, count = int(lines[1]), int(lines[2])
            table = cls()
            for ln in lines[3:]:
                pid_s, epoch_s, ts_s, bs = ln.split()
                e = ProducerStateEntry(int(pid_s), int(epoch_s), last_timestamp=int(ts_s))
                if bs != "-":
                    for item in bs.split(","):
                        e.batches.append(BatchMetadata(*map(int, item.split(":"))))
                table.producers[e.producer_id] = e
            if count != len(table.producers):
                raise ValueError(f"expected {count} producers")
        except (ValueError, IndexError, TypeError, UnicodeDecodeError) as exc:
            log.error("%s: malformed producer snapshot (%s); rebuilding from the log",
                      path, exc)
            return None
        return table, offset
