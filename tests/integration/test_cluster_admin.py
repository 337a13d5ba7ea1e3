"""Cluster-wide admin paths with real broker processes: topic delete while a replica's
broker is down, preferred leader election after a restart, 1,000 partitions."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.integration.chaos import (
    all_logs,
    partition_dir,
    partition_info,
    produce_raw,
    wait_until,
)

pytestmark = pytest.mark.integration

SESSION_S = 3.0


def topic_dirs(c, broker_id: int, topic: str) -> list[str]:
    logs = c.root / f"broker-{broker_id}" / "logs"
    if not logs.exists():
        return []
    return sorted(d.name for d in logs.iterdir() if d.is_dir() and d.name.startswith(f"{topic}-"))


def zk_children(c, path: str) -> list[str] | None:
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=10)
    try:
        return zk.get_children(path) if zk.exists(path) else None
    finally:
        zk.stop()
        zk.close()


def test_topic_delete_while_replica_down_completes_when_it_returns(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=1)
    c.create_topic("del", partitions=2, rf=3)
    for p in range(2):
        r = produce_raw(c.brokers[c.leader_of("del", p)].port, "del", p, acks=-1)
        assert r["error_code"] == 0
    down = 3
    assert partition_dir(c, down, "del", 0).exists()
    c.kill(down)
    live = next(b for b in c.brokers.values() if b.alive)
    resp = wire.call("127.0.0.1", live.port, ApiKey.DELETE_TOPICS, 4,
                     {"topic_names": ["del"], "timeout_ms": 30000}, timeout=35)
    assert resp["responses"][0]["error_code"] in (0, ErrorCode.REQUEST_TIMED_OUT), resp
    # Gone for clients and from the live brokers' disks.
    wait_until(lambda: c.metadata(["del"])["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
               15, "del unknown to clients")
    for b in (1, 2):
        wait_until(lambda b=b: topic_dirs(c, b, "del") == [], 15, f"broker {b} removed del's logs")
    # The dead replica still has its files; the delete is not complete yet.
    assert topic_dirs(c, down, "del") == ["del-0", "del-1"]
    assert "del" in (zk_children(c, "/admin/delete_topics") or []), "delete marked complete with a replica down"
    c.restart(down)
    wait_until(lambda: topic_dirs(c, down, "del") == [], 20,
               f"broker {down} removes del's logs when it returns:\n{all_logs(c)}")
    wait_until(lambda: "del" not in (zk_children(c, "/admin/delete_topics") or []), 20, "delete complete in ZooKeeper")
    assert "del" not in (zk_children(c, "/brokers/topics") or [])
    # Leftover '-delete' directories are gone too.
    logs = c.root / f"broker-{down}" / "logs"
    wait_until(lambda: not [d for d in logs.iterdir() if d.name.startswith("del-")], 15, "no leftovers")
    # The name can be used again, from an empty log.
    c.create_topic("del", partitions=1, rf=3)
    r = produce_raw(c.brokers[c.leader_of("del", 0)].port, "del", 0, acks=-1)
    assert r["error_code"] == 0 and r["base_offset"] == 0, r


def test_preferred_leader_election_restores_balance(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("pref", partitions=6, rf=3)
    info = partition_info(c, "pref")
    assert all(i["leader_id"] == i["replica_nodes"][0] for i in info.values()), info
    assert {i["leader_id"] for i in info.values()} == {1, 2, 3}
    c.stop(2)
    c.restart(2)
    c.wait_for_leaders("pref", 6, isr=3, timeout=30)
    info = partition_info(c, "pref")
    off = [p for p, i in info.items() if i["leader_id"] != i["replica_nodes"][0]]
    assert off, f"no imbalance after restarting broker 2: {info}"
    assert all(i["leader_id"] != 2 for i in info.values())
    body = {"election_type": 0, "topic_partitions": [{"topic": "pref", "partitions": list(range(6))}],
            "timeout_ms": 30000}
    resp = wire.call("127.0.0.1", c.brokers[1].port, ApiKey.ELECT_LEADERS, 1, body, timeout=35)
    assert resp["error_code"] == 0, resp
    results = {r["partition_id"]: r["error_code"] for t in resp["replica_election_results"]
               for r in t["partition_result"]}
    assert sorted(results) == list(range(6)), resp
    for p, code in results.items():
        want = (0,) if p in off else (0, ErrorCode.ELECTION_NOT_NEEDED)
        assert code in want, (p, code, resp)
    info = wait_until(lambda: (i := partition_info(c, "pref")) and all(
        x["leader_id"] == x["replica_nodes"][0] for x in i.values()) and i, 15, "preferred leaders")
    assert {i["leader_id"] for i in info.values()} == {1, 2, 3}
    # The preferred leader really leads: it accepts acks=all writes.
    for p in off:
        r = produce_raw(c.brokers[info[p]["leader_id"]].port, "pref", p, acks=-1)
        assert r["error_code"] == 0, (p, r)


@pytest.mark.slow
def test_thousand_partitions_create_describe_kill_all_led_again(cluster_factory):
    n = 1000
    c = cluster_factory(3)
    t0 = time.monotonic()
    c.create_topic("big", partitions=n, rf=2, timeout=120)
    created = time.monotonic() - t0
    info = partition_info(c, "big")
    assert sorted(info) == list(range(n))
    assert all(i["leader_id"] in (1, 2, 3) and len(i["isr_nodes"]) == 2 for i in info.values())
    leaders = [i["leader_id"] for i in info.values()]
    assert all(abs(leaders.count(b) - n / 3) <= 1 for b in (1, 2, 3)), "leaders unbalanced"
    victim = 2
    c.kill(victim)
    t1 = time.monotonic()

    def all_led():
        i = partition_info(c, "big")
        return len(i) == n and all(x["leader_id"] in (1, 3) for x in i.values())

    wait_until(all_led, 60, f"all {n} partitions led by survivors", interval=0.5)
    failover = time.monotonic() - t1
    print(f"create {created:.1f}s, failover {failover:.1f}s")
    # Every live broker agrees.
    for b in (1, 3):
        i = partition_info(c, "big", via=b)
        assert all(x["leader_id"] in (1, 3) and victim not in x["isr_nodes"] for x in i.values())
