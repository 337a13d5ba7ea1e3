"""The leader's fetch session cache (KIP-227): what an incremental Fetch looks at and
answers, session lifetime. The wire side is in tests/integration/test_fetch_sessions.py."""

from __future__ import annotations

import asyncio

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import FetchPartitionData, PartitionFetch, TopicPartition
from kafkarepl.server.fetch_session import FetchSessionCache, next_epoch


def tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


def fetch(p: int, offset: int = 0) -> PartitionFetch:
    return PartitionFetch(tp(p), offset, 1 << 20)


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(0x7FFFFFFF) == 1


def test_incremental_fetch_examines_only_what_can_have_changed() -> None:
    cache = FetchSessionCache(refresh_ms=10_000)
    s = cache.create(2, [fetch(p) for p in range(100)], now_ms=0)
    assert s is not None and s.epoch == 1 and len(s.parts) == 100
    assert s.to_examine([], now_ms=1) == []  # idle: nothing to read
    cache.on_partition_changed(tp(7))  # an append on the leader
    cache.on_partition_changed(TopicPartition("other", 0))  # not in the session
    assert s.wakeup.is_set()
    s.lagging.add(tp(9))  # the follower was behind on 9 at the last read
    updated = cache.update(s, [fetch(3, offset=5)], forgotten=[tp(4)])
    assert updated == [tp(3)] and tp(4) not in s.parts and s.parts[tp(3)].fetch.fetch_offset == 5
    assert sorted(s.to_examine(updated, now_ms=2)) == [tp(3), tp(7), tp(9)]
    assert s.to_examine([], now_ms=3) == [tp(9)]  # marks are taken once
    assert len(s.to_examine([], now_ms=10_000)) == 99  # the periodic refresh reads everything
    cache.on_partition_changed(tp(4))  # forgotten: no longer watched
    assert s.to_examine([], now_ms=10_001) == [tp(9)]


def test_answer_holds_only_news() -> None:
    cache = FetchSessionCache()
    s = cache.create(2, [fetch(0)], now_ms=0)
    assert s is not None
    cached = s.parts[tp(0)]
    d = FetchPartitionData(high_watermark=10, last_stable_offset=10, log_start_offset=0)
    assert cached.changed_by(d)  # first answer: everything is news
    assert not cached.changed_by(FetchPartitionData(high_watermark=10, last_stable_offset=10, log_start_offset=0))
    assert cached.changed_by(FetchPartitionData(high_watermark=11, last_stable_offset=11, log_start_offset=0))
    assert cached.changed_by(FetchPartitionData(high_watermark=11, last_stable_offset=11, log_start_offset=0,
                                                size=100))
    assert cached.changed_by(FetchPartitionData(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, high_watermark=11,
                                                last_stable_offset=11, log_start_offset=0))


def test_sessions_belong_to_their_replica_and_end() -> None:
    cache = FetchSessionCache()
    s = cache.create(2, [fetch(0)], now_ms=0)
    assert s is not None
    assert cache.get(s.id, replica_id=3, now_ms=1) is None
    assert cache.get(s.id, replica_id=2, now_ms=1) is s
    s.wakeup.clear()
    cache.remove(s.id)
    assert s.wakeup.is_set()  # a parked Fetch answers at once
    assert cache.get(s.id, 2, 2) is None and len(cache) == 0
    cache.on_partition_changed(tp(0))  # no session left to mark


def test_slots_are_reused_least_recently_used_first_once_idle() -> None:
    cache = FetchSessionCache(max_slots=2, evict_after_ms=1000)
    a = cache.create(1, [fetch(0)], now_ms=0)
    b = cache.create(2, [fetch(1)], now_ms=0)
    assert a is not None and b is not None
    assert cache.create(3, [fetch(2)], now_ms=500) is None  # both in use: declined
    cache.get(a.id, 1, now_ms=900)  # a used again: b is now the oldest
    c = cache.create(3, [fetch(2)], now_ms=1200)
    assert c is not None and cache.get(b.id, 2, 1200) is None and cache.get(a.id, 1, 1200) is a
    assert len({a.id, c.id}) == 2 and 0 not in (a.id, c.id)


def test_wakeup_is_an_asyncio_event() -> None:
    async def main() -> None:
        cache = FetchSessionCache()
        s = cache.create(2, [fetch(0)], now_ms=0)
        assert s is not None
        s.wakeup.clear()
        waiter = asyncio.ensure_future(s.wakeup.wait())
        await asyncio.sleep(0)
        cache.on_partition_changed(tp(0))
        await asyncio.wait_for(waiter, 1)

    asyncio.run(main())


def test_abandoned_sessions_end_after_the_eviction_time() -> None:
    """A follower that restarted opens a new session: the old one must not keep every
    partition's state (and its change marks) forever."""
    cache = FetchSessionCache(max_slots=1000, evict_after_ms=120_000)
    old = cache.create(2, [fetch(p) for p in range(50)], now_ms=0)
    new = cache.create(2, [fetch(p) for p in range(50)], now_ms=1_000)
    assert old is not None and new is not None and len(cache) == 2
    for t in range(0, 130_000, 5_000):  # the new one is used all along
        assert cache.get(new.id, 2, now_ms=1_000 + t) is new
    assert cache.get(old.id, 2, now_ms=131_000) is None and len(cache) == 1
    old.dirty.clear()
    cache.on_partition_changed(tp(3))
    assert not old.dirty and tp(3) in new.dirty
