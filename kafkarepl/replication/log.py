"""The log interface the replication core needs, and Kafka's epoch end-offset rule.

storage.Log satisfies `ReplicaLog` structurally (no adapter needed); the simulation
tests use `MemoryLog`. The core never reads record bytes: it only needs offsets, leader epochs,
and the ability to append what a leader sent and to truncate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from kafkarepl.epochs import (
    UNDEFINED,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    end_offset_for,
)

__all__ = ["UNDEFINED", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEndOffset", "ReplicaLog", "epoch_end_offset"]


class ReplicaLog(Protocol):
    """What PartitionState and FollowerFetcher need from one partition's log.

    Epoch cache contract (leader-epoch-checkpoint), as Kafka's LeaderEpochFileCache:
    - assign_epoch(epoch, start) appends (epoch, start) when epoch > latest_epoch();
      it first drops entries whose epoch >= epoch or start >= start.
    - truncate_to(offset) drops records >= offset AND epoch entries with start >= offset,
      even when offset >= log_end_offset (a leader that appended nothing before losing
      leadership leaves an empty trailing entry that must go, or epoch truncation loops).
    - append_as_follower(records) adds entries for the epochs of the appended batches.
    """

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def latest_epoch(self) -> int | None: ...

    def epoch_entries(self) -> Sequence[tuple[int, int]]:
        """(epoch, start_offset) pairs, ascending."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end_offset) by the KIP-279 rule over this log's entries and LEO (see
        `epoch_end_offset`); (-1, -1) when undefined."""
        ...

    def assign_epoch(self, epoch: int, start_offset: int) -> None: ...

    def append_as_follower(self, records: Any) -> object:
        """Append batches that already carry the leader's offsets and epochs; must start
        at log_end_offset (else raise a KafkaError)."""
        ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def flush_pending(self, end_offset: int) -> bool:
        """Whether the append ending at `end_offset` waits for its flush (flush.messages)
        before it is acknowledged or fetched past by a follower."""
        ...


class SupportsLogStartIncrement(Protocol):
    """Optional ReplicaLog capability (Kafka's maybeIncrementLogStartOffset): a follower
    moves its log start up to the leader's after each fetch, so records below the
    leader's log start, which epochs can no longer check against the leader, go away
    instead of being served later if this replica leads."""

    def maybe_increment_log_start_offset(self, offset: int) -> None: ...


class SupportsTransactions(Protocol):
    """Optional ReplicaLog capability: transactions (storage.Log has it, the in-memory
    test log does not and then reads as if none were open)."""

    def last_stable_offset(self, high_watermark: int) -> int: ...

    def aborted_transactions(self, fetch_offset: int, upper_bound: int, read: Any = None) -> Sequence[Any]:
        """(producer_id, first_offset, ...) of aborted transactions overlapping the range
        (`read`: the slice being returned, to bound it)."""
        ...


def epoch_end_offset(
    entries: Sequence[tuple[int, int]], requested_epoch: int, log_end_offset: int
) -> EpochEndOffset:
    """Kafka's endOffsetFor (KIP-279) over (epoch, start_offset) pairs: see kafkarepl.epochs."""
    return end_offset_for([e for e, _ in entries], [s for _, s in entries], requested_epoch, log_end_offset)
