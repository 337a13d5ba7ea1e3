"""Delayed operations (Kafka's purgatory), sans-I/O.

DelayedProduce is the commit queue: an acks=all produce waits until the HW of each of its
partitions passes the offsets it appended. DelayedFetch waits for min.bytes or max.wait. DelayedDeleteRecords waits until every live
replica's log start offset reached the deleted offset.

Operations are watched per partition key; the caller says which key changed
(`check(key, now_ms)` after an append, an HW move, an ISR or leadership change) and only
that key's waiters are examined. Deadlines sit in a heap: `poll(now_ms)` expires them and
`next_deadline()` tells the event loop when to call it next. Completed operations come
back as values (and through the optional on_complete callback); nothing here blocks.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kafkarepl.errors import ErrorCode, KafkaError

from .partition import PartitionState, Role

K = Hashable


class DelayedOperation:
    """Base: `keys` to watch, an absolute deadline, and a one-shot completion."""

    def __init__(self, keys: Iterable[K], deadline_ms: int) -> None:
        self.keys = tuple(keys)
        self.deadline_ms = deadline_ms
        self.completed = False

    def try_complete(self, now_ms: int) -> bool:
        """Set the result and return True when the operation can finish now."""
        raise NotImplementedError

    def try_complete_key(self, key: K, now_ms: int) -> bool:
        """try_complete after a change of `key` only (every change of a partition is
        signalled by its own check): operations over thousands of partitions override it
        to look at that one partition, so n signals cost O(n), not O(n^2)."""
        return self.try_complete(now_ms)

    def on_expire(self) -> None:
        """Set the result for a deadline expiry."""
        raise NotImplementedError


@dataclass(frozen=True)
class ProduceWait:
    partition: PartitionState
    required_offset: int  # last appended offset + 1: needs HW >= this
    leader_term: int  # the leadership term the batch was appended in (PartitionState.leader_term)
    acks_all: bool = True  # False: acks=1, waiting only for the leader's flush (flush.messages)


class DelayedProduce(DelayedOperation):
    """acks=all (and acks=1 behind a flush.messages flush: Log.flush_pending): each
    partition's result is NONE once HW >= required_offset (acks=1: once flushed),
    NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below min.insync.replicas while
    waiting, NOT_LEADER_OR_FOLLOWER if leadership moved, REQUEST_TIMED_OUT at the deadline."""

    def __init__(self, waits: Mapping[Any, ProduceWait], deadline_ms: int, context: object = None) -> None:
        super().__init__(waits.keys(), deadline_ms)
        self.waits = dict(waits)
        self.context = context  # for the caller: the request to answer
        self.results: dict[K, ErrorCode] = {}

    def try_complete(self, now_ms: int) -> bool:
        for key, w in self.waits.items():
            if key not in self.results:
                status = w.partition.produce_status(w.required_offset, w.leader_term, w.acks_all)
                if status is not None:
                    self.results[key] = status
        return len(self.results) == len(self.waits)

    def try_complete_key(self, key: K, now_ms: int) -> bool:
        w = self.waits.get(key)
        if w is not None and key not in self.results:
            status = w.partition.produce_status(w.required_offset, w.leader_term, w.acks_all)
            if status is not None:
                self.results[key] = status
        return len(self.results) == len(self.waits)

    def on_expire(self) -> None:
        for key in self.waits:
            self.results.setdefault(key, ErrorCode.REQUEST_TIMED_OUT)


@dataclass(frozen=True)
class FetchWait:
    partition: PartitionState
    fetch_offset: int
    leader_epoch: int  # the partition's epoch when the fetch arrived
    from_follower: bool  # replica fetch reads to LEO, consumer fetch to HW
    read_committed: bool = False  # a read_committed consumer reads to the LSO
    throttled: bool = False  # a follower over its replication quota: its bytes do not count


# (key, wait) -> bytes readable in [wait.fetch_offset, upper bound); the server asks its
# storage (e.g. Log.read(...).size); tests count records.
AvailableBytes = Callable[[K, FetchWait], int]


# A fetch over at most this many partitions is re-examined in full on every signal (as
# cheap as one key's bookkeeping at that size); larger ones keep per-partition sums.
SMALL_FETCH = 16


class DelayedFetch(DelayedOperation):
    """Completes when the readable bytes over all partitions reach min_bytes, when a
    partition changes leader epoch or role, when a fetch offset is past the end (the log
    was truncated: the caller answers with the error), or at the deadline (max.wait)."""

    def __init__(
        self,
        waits: Mapping[Any, FetchWait],
        min_bytes: int,
        deadline_ms: int,
        available_bytes: AvailableBytes,
        context: object = None,
    ) -> None:
        super().__init__(waits.keys(), deadline_ms)
        self.waits = dict(waits)
        self.min_bytes = min_bytes
        self.available_bytes = available_bytes
        self.context = context
        self.expired = False
        # Per partition: readable bytes, or -1 when nothing is readable (None: not looked
        # at yet). A check of one key updates its entry and the sums.
        self._bytes: dict[K, int] | None = None
        self._total = 0
        self._readable = 0  # partitions with something to read

    def _look(self, key: K, w: FetchWait) -> int | None:
        """Readable bytes of one partition, -1 for none, None: complete now."""
        p = w.partition
        if (p.leader_epoch != w.leader_epoch or p.role is Role.NONE
                or (w.from_follower and p.role is not Role.LEADER)):
            return None  # stopped here (e.g. its log dir failed) or moved on: answered now
        end = p.fetch_upper_bound(w.from_follower, w.read_committed)
        if w.fetch_offset > end:
            return None
        try:
            return self.available_bytes(key, w) if w.fetch_offset < end else -1
        except KafkaError:
            return None  # a disk error (Kafka's DelayedFetch): the completing read answers it

    def _account(self, key: K, n: int) -> None:
        assert self._bytes is not None
        old = self._bytes.get(key)
        if old is not None and old >= 0:
            self._total -= old
            self._readable -= 1
        self._bytes[key] = n
        if n >= 0:
            self._total += n
            self._readable += 1

    def _satisfied(self) -> bool:
        return self._readable > 0 and self._total >= self.min_bytes

    def try_complete(self, now_ms: int) -> bool:
        if len(self.waits) <= SMALL_FETCH:  # a plain sum; try_complete_key rescans it
            total = 0
            for key, w in self.waits.items():
                n = self._look(key, w)
                if n is None:
                    return True
                if n >= 0:  # something readable (-1: nothing)
                    total += n
                    if total >= self.min_bytes:
                        return True
            return False
        self._bytes, self._total, self._readable = {}, 0, 0
        for key, w in self.waits.items():
            n = self._look(key, w)
            if n is None:
                return True
            self._account(key, n)
            if self._satisfied():
                return True
        return False

    def try_complete_key(self, key: K, now_ms: int) -> bool:
        w = self.waits.get(key)
        if self._bytes is None or w is None:
            return self.try_complete(now_ms)
        n = self._look(key, w)
        if n is None:
            return True
        self._account(key, n)
        return self._satisfied()

    def on_expire(self) -> None:
        self.expired = True


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords: each partition completes once its low watermark (the lowest log
    start offset of its live replicas) reached the requested offset; NOT_LEADER_OR_FOLLOWER
    if leadership moved; REQUEST_TIMED_OUT at the deadline (Kafka's DelayedDeleteRecords)."""

    def __init__(self, targets: Mapping[Any, tuple[PartitionState, int]], deadline_ms: int,
                 context: object = None) -> None:
        super().__init__(targets.keys(), deadline_ms)
        self.targets = dict(targets)
        self.context = context
        self.results: dict[K, tuple[ErrorCode, int]] = {}

    def try_complete(self, now_ms: int) -> bool:
        for key, (p, offset) in self.targets.items():
            if key in self.results:
                continue
            if p.role is not Role.LEADER:
                self.results[key] = (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
                continue
            low = p.low_watermark(now_ms)
            if low >= offset:
                self.results[key] = (ErrorCode.NONE, low)
        return len(self.results) == len(self.targets)

    def on_expire(self) -> None:
        for key in self.targets:
            self.results.setdefault(key, (ErrorCode.REQUEST_TIMED_OUT, -1))


Op = TypeVar("Op", bound=DelayedOperation)


@dataclass
class Purgatory(Generic[Op]):
    on_complete: Callable[[Op], None] | None = None
    _watchers: dict[K, list[Op]] = field(default_factory=dict)
    _deadlines: list[tuple[int, int, Op]] = field(default_factory=list)
    _seq: itertools.count = field(default_factory=itertools.count)
    _pending: int = 0
    _stale: int = 0  # completed ops possibly still listed under some key

    def __len__(self) -> int:
        return self._pending

    def try_complete_else_watch(self, op: Op, now_ms: int) -> bool:
        """Complete op now if possible (returns True, no callback: answer directly);
        otherwise watch its keys until an event or its deadline."""
        if op.try_complete(now_ms):
            op.completed = True
            return True
        if op.deadline_ms <= now_ms:
            op.on_expire()
            op.completed = True
            return True
        for key in op.keys:
            self._watchers.setdefault(key, []).append(op)
        heapq.heappush(self._deadlines, (op.deadline_ms, next(self._seq), op))
        self._pending += 1
        return False

    def check(self, key: K, now_ms: int) -> list[Op]:
        """Something changed for key: complete what can complete. O(waiters on key)."""
        ops = self._watchers.pop(key, None)
        if not ops:
            return []
        done: list[Op] = []
        keep: list[Op] = []
        try:
            for op in ops:
                if op.completed:
                    continue
                if op.try_complete_key(key, now_ms):
                    self._finish(op)
                    done.append(op)
                else:
                    keep.append(op)
        except BaseException:
            # The ops not examined yet and the one that raised stay watched (and under
            # their deadlines), never dropped unanswered.
            kept = set(map(id, keep))
            keep.extend(op for op in ops if not op.completed and id(op) not in kept)
            self._watchers.setdefault(key, []).extend(keep)
            raise
        if keep:  # merge: an on_complete callback may have watched new ops on key
            self._watchers.setdefault(key, []).extend(keep)
        if done:
            self._purge_if_sparse()
        return done

    def check_all(self, keys: Iterable[K], now_ms: int) -> list[Op]:
        done: list[Op] = []
        for key in keys:
            done.extend(self.check(key, now_ms))
        return done

    def poll(self, now_ms: int) -> list[Op]:
        """Expire operations whose deadline has passed."""
        expired: list[Op] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, _, op = heapq.heappop(self._deadlines)
            if op.completed:
                continue
            # A last look: it may have become completable without an event for its key.
            if not op.try_complete(now_ms):
                op.on_expire()
            self._finish(op)
            expired.append(op)
        self._purge_if_sparse()
        return expired

    def next_deadline(self) -> int | None:
        while self._deadlines and self._deadlines[0][2].completed:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def _finish(self, op: Op) -> None:
        op.completed = True
        self._pending -= 1
        self._stale += len(op.keys)
        if self.on_complete is not None:
            self.on_complete(op)

    def _purge_if_sparse(self) -> None:
        # Completed ops linger in other keys' watcher lists until those keys are checked;
        # sweep when they dominate so memory stays O(pending).
        if len(self._deadlines) > 2 * self._pending + 64:
            self._deadlines = [e for e in self._deadlines if not e[2].completed]
            heapq.heapify(self._deadlines)
        if self._stale > 2 * self._pending + 64:
            self._stale = 0
            for key in list(self._watchers):
                live = [op for op in self._watchers[key] if not op.completed]
                if live:
                    self._watchers[key] = live
                else:
                    del self._watchers[key]
