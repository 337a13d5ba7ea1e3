"""Issue 5 with real processes: an idempotent acks=all producer (RF=3, min ISR 2) keeps
running while a follower is killed, a follower is frozen past replica.lag.time.max.ms,
and every broker is restarted in turn. Afterwards every acknowledged record is present
exactly once and in order, and the replicas' logs are identical up to HW."""

from __future__ import annotations

import time

import pytest

from tests.integration.chaos import (
    ChaosProducer,
    partition_info,
    verify_acked,
    verify_replicas_identical,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "chaos"
PARTS = 2


def non_leader(c) -> int:
    """A broker leading no partition and, where possible, not the controller either (a
    frozen controller holds up every AlterPartition until its session expires)."""
    leaders = {info["leader_id"] for info in partition_info(c, TOPIC).values()}
    controller = c.metadata([])["controller_id"]
    followers = [b for b in c.brokers if b not in leaders]
    return next((b for b in followers if b != controller), followers[0])


def finish(c, prod: ChaosProducer, parts: int = PARTS) -> None:
    stats = prod.stop()
    assert not [e for e in stats.errors if "still in flight" in e], stats.errors[-5:]
    c.wait_for_leaders(TOPIC, parts, isr=3, timeout=30)
    verify_acked(c.alive_bootstrap(), TOPIC, parts, stats.acked)
    verify_replicas_identical(c, TOPIC, parts)


def test_kill_follower_writes_go_on_and_it_catches_up(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic(TOPIC, partitions=PARTS, rf=3)
    with ChaosProducer(c.bootstrap, TOPIC, PARTS, rate=300) as prod:
        prod.wait_acks(100)
        victim = non_leader(c)
        c.kill(victim)
        wait_until(lambda: all(victim not in i["isr_nodes"] for i in partition_info(c, TOPIC).values()),
                   15, f"{victim} out of the ISR")
        prod.wait_acks(300)  # ISR of 2 = min ISR: acks=all goes on
        c.restart(victim)
        c.wait_for_leaders(TOPIC, PARTS, isr=3, timeout=30)
        prod.wait_acks(100)
        finish(c, prod)


def test_paused_follower_shrinks_isr_then_rejoins(cluster_factory):
    # Session timeout well above the lag time: the ISR shrink here is the leader's
    # time-based rule (seed 004), not the controller seeing a dead broker.
    c = cluster_factory(3, min_insync_replicas=2, zookeeper_session_timeout_ms=15000,
                        replica_lag_time_max_ms=2000)
    parts = 1  # one leader: two followers to choose from, one of them not the controller
    c.create_topic(TOPIC, partitions=parts, rf=3)
    victim = non_leader(c)
    assert victim != c.metadata([])["controller_id"]
    with ChaosProducer(c.bootstrap, TOPIC, parts, rate=300) as prod:
        prod.wait_acks(100)
        c.pause(victim)
        t0 = time.monotonic()
        wait_until(lambda: all(victim not in i["isr_nodes"] for i in partition_info(c, TOPIC).values()),
                   12, f"frozen follower {victim} dropped from the ISR")
        shrunk_after = time.monotonic() - t0
        assert shrunk_after >= 1.5, f"ISR shrank after {shrunk_after:.2f}s, before replica.lag.time.max.ms"
        prod.wait_acks(300)  # writes go on with ISR {leader, other follower}
        # Still frozen, still registered (session alive): it is only out of sync.
        assert victim in {b["node_id"] for b in c.metadata([])["brokers"]}
        c.resume(victim)
        c.wait_for_leaders(TOPIC, parts, isr=3, timeout=30)
        prod.wait_acks(100)
        finish(c, prod, parts)


def test_rolling_restart_while_producing(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic(TOPIC, partitions=PARTS, rf=3)
    with ChaosProducer(c.bootstrap, TOPIC, PARTS, rate=300) as prod:
        prod.wait_acks(100)
        for b in list(c.brokers):
            rc = c.stop(b)
            assert rc is not None
            prod.wait_acks(50, timeout=30)
            c.restart(b)
            c.wait_for_leaders(TOPIC, PARTS, isr=3, timeout=30)
            prod.wait_acks(50, timeout=30)
        finish(c, prod)
