"""Incremental fetch sessions (KIP-227) for replica fetches, the leader's side.

A follower opens a session with a full Fetch (session epoch 0); the leader remembers each
partition's fetch state and answers with a session id. Later Fetches (epoch 1, 2, ...)
carry only the partitions whose fetch state changed (and forgotten ones), and the answer
only the partitions with something new: records, a moved high watermark or log start
offset, an error. An idle follower's Fetch is then a few bytes each way instead of every
partition: with 10,000 partitions that is most of an idle broker's CPU.

What the leader looks at per incremental Fetch is also only what can have changed, so
the cost follows the traffic, not the partition count:
  * partitions the follower updated in this request;
  * partitions that changed here since last looked at (the replica manager's change
    listener marks them: appends, HW, ISR, role and epoch changes; a parked Fetch wakes
    on such a mark, as a DelayedFetch wakes on its partitions);
  * partitions the follower was behind on when last looked at (their reads may have
    been cut short by the response size limit or a throttle);
  * every partition once per refresh interval, so the follower's fetch times the ISR and
    low watermark logic reads (PartitionState.on_follower_fetch) never grow older than
    that interval; an idle caught-up follower is otherwise never out of sync (its log
    end equals the leader's).
Consumers do not get sessions (they get session id 0, which KIP-227 allows): their
fetches keep the full path.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from kafkarepl.replication import FetchPartitionData, PartitionFetch, TopicPartition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SWEEP_EVERY_MS = 10_000  # a look for sessions idle past evict_after_ms, at most this often


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


@dataclass
class CachedPartition:
    fetch: PartitionFetch  # the follower's latest fetch state
    high_watermark: int = -1  # what the follower was last told
    log_start_offset: int = -1
    last_stable_offset: int = -1

    def changed_by(self, d: FetchPartitionData) -> bool:
        """Whether `d` has news for the follower (and remember it as told)."""
        news = (
            d.size > 0
            or d.error.value != 0
            or d.diverging_epoch is not None
            or d.high_watermark != self.high_watermark
            or d.log_start_offset != self.log_start_offset
            or d.last_stable_offset != self.last_stable_offset
        )
        if news:
            self.high_watermark = d.high_watermark
            self.log_start_offset = d.log_start_offset
            self.last_stable_offset = d.last_stable_offset
        return news


class FetchSession:
    def __init__(self, session_id: int, replica_id: int, now_ms: int, refresh_ms: int) -> None:
        self.id = session_id
        self.replica_id = replica_id
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch the next request must carry
        self.parts: dict[TopicPartition, CachedPartition] = {}
        self.dirty: set[TopicPartition] = set()
        self.lagging: set[TopicPartition] = set()
        self.wakeup = asyncio.Event()
        self.last_used_ms = now_ms
        self.refresh_ms = refresh_ms
        self.refresh_at_ms = now_ms + refresh_ms

    def mark(self, tp: TopicPartition) -> None:
        self.dirty.add(tp)
        self.wakeup.set()

    def to_examine(self, updated: Iterable[TopicPartition], now_ms: int) -> list[TopicPartition]:
        """The partitions to read now (clears the marks taken)."""
        if now_ms >= self.refresh_at_ms:
            self.refresh_at_ms = now_ms + self.refresh_ms
            self.dirty.clear()
            return list(self.parts)
        picked = set(updated) | self.dirty | self.lagging
        self.dirty.clear()
        return [tp for tp in picked if tp in self.parts]


class FetchSessionCache:
    """Sessions by id, least recently used first; at most `max_slots`, and one idle
    longer than `evict_after_ms` makes room (Kafka's max.incremental.fetch.session.cache.slots
    and min.incremental.fetch.session.eviction.ms)."""

    def __init__(self, max_slots: int = 1000, refresh_ms: int = 10_000,
                 evict_after_ms: int = 120_000) -> None:
        self.max_slots = max_slots
        self.refresh_ms = refresh_ms
        self.evict_after_ms = evict_after_ms
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._by_partition: dict[TopicPartition, dict[int, FetchSession]] = {}
        self._ids = itertools.count(random.randrange(1, 1 << 30))
        self._last_sweep_ms = 0

    def __len__(self) -> int:
        return len(self.sessions)

    # -- the replica manager's change listener ------------------------------------------
    def on_partition_changed(self, tp: TopicPartition, _p: object = None) -> None:
        holders = self._by_partition.get(tp)
        if holders:
            for s in holders.values():
                s.mark(tp)

    # -- sessions -----------------------------------------------------------------------
    def sweep(self, now_ms: int) -> None:
        """End the sessions unused for evict_after_ms (a follower that restarted or moved
        opened a new one): they hold every partition's state and get its change marks."""
        self._last_sweep_ms = now_ms
        while self.sessions:
            oldest = next(iter(self.sessions.values()))
            if now_ms - oldest.last_used_ms < self.evict_after_ms:
                return
            self.remove(oldest.id)

    def create(self, replica_id: int, fetches: Iterable[PartitionFetch], now_ms: int) -> FetchSession | None:
        """A new session over `fetches`, or None when every slot is held by a session used
        within evict_after_ms (then the follower fetches without one)."""
        self.sweep(now_ms)
        if len(self.sessions) >= self.max_slots:
            oldest = next(iter(self.sessions.values()))
            if now_ms - oldest.last_used_ms < self.evict_after_ms:
                return None
            self.remove(oldest.id)
        sid = next(self._ids) % 0x7FFFFFFF + 1  # 1 .. 2^31-1; 0 means "no session"
        while sid in self.sessions:
            sid = next(self._ids) % 0x7FFFFFFF + 1
        s = FetchSession(sid, replica_id, now_ms, self.refresh_ms)
        self.sessions[sid] = s
        self.update(s, fetches, ())
        return s

    def get(self, session_id: int, replica_id: int, now_ms: int) -> FetchSession | None:
        if now_ms - self._last_sweep_ms > SWEEP_EVERY_MS:
            self.sweep(now_ms)
        s = self.sessions.get(session_id)
        if s is None or s.replica_id != replica_id:
            return None
        s.last_used_ms = now_ms
        self.sessions.move_to_end(session_id)
        return s

    def remove(self, session_id: int) -> None:
        s = self.sessions.pop(session_id, None)
        if s is None:
            return
        for tp in s.parts:
            holders = self._by_partition.get(tp)
            if holders is not None:
                holders.pop(session_id, None)
                if not holders:
                    del self._by_partition[tp]
        s.wakeup.set()  # a Fetch parked on it answers now

    def update(self, s: FetchSession, fetches: Iterable[PartitionFetch],
               forgotten: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Apply a request's partitions (added or changed) and forgotten ones; returns
        the updated partitions, in request order."""
        for tp in forgotten:
            if s.parts.pop(tp, None) is not None:
                s.dirty.discard(tp)
                s.lagging.discard(tp)
                holders = self._by_partition.get(tp)
                if holders is not None:
                    holders.pop(s.id, None)
                    if not holders:
                        del self._by_partition[tp]
        updated = []
        for f in fetches:
            cached = s.parts.get(f.tp)
            if cached is None:
                s.parts[f.tp] = CachedPartition(f)
                self._by_partition.setdefault(f.tp, {})[s.id] = s
            else:
                cached.fetch = f
            updated.append(f.tp)
        return updated
