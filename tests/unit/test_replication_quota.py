"""Replication throttle logic (server/replication_quota.py) with a fake clock."""

from __future__ import annotations

from kafkarepl.server.replication_quota import (
    LEADER_REPLICAS,
    UNLIMITED,
    RateQuota,
    ReplicationThrottle,
    throttled_partitions,
)


def test_rate_is_bytes_over_the_windows_in_use() -> None:
    now = [10_000]
    q = RateQuota(lambda: now[0])
    q.limit = 1000
    q.record(500)
    assert not q.exceeded()  # 500 B over one window
    q.record(700)
    assert q.exceeded()  # 1200 B/s
    now[0] += 1500
    assert not q.exceeded()  # 1200 B over 1.5 s
    now[0] += 20_000
    assert q.rate() == 0  # old windows dropped
    q.limit = UNLIMITED
    q.record(10**9)
    assert not q.exceeded()


def test_throttled_replicas_name_this_broker_or_all() -> None:
    assert throttled_partitions("0:1,1:2,3:1", 1) == {0, 3}
    assert throttled_partitions("*", 7) is None
    assert throttled_partitions("", 1) == set() and throttled_partitions(None, 1) == set()
    assert throttled_partitions("junk,2:x,4:2", 2) == {4}


def test_in_sync_replicas_are_never_throttled() -> None:
    now = [0]
    t = ReplicationThrottle(1, LEADER_REPLICAS, lambda: now[0])
    t.set_rate("100")
    t.update_topic("t", {LEADER_REPLICAS: "0:1"})
    t.record(1000)
    assert t.should_throttle("t", 0, in_sync=False)
    assert not t.should_throttle("t", 0, in_sync=True)
    assert not t.should_throttle("t", 1, in_sync=False)  # not listed
    t.update_topic("t", {})  # cleared
    assert not t.should_throttle("t", 0, in_sync=False)
    t.update_topic("t", {LEADER_REPLICAS: "0:1"})
    t.set_rate(None)
    assert not t.should_throttle("t", 0, in_sync=False)
