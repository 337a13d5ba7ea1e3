"""Issue 4 with real broker processes, real ZooKeeper and real clients: kill -9 of the
controller's broker and of a leader's broker while producing."""

from __future__ import annotations

import time

import pytest

from kafkarepl.cli import wire
from tests.integration.chaos import (
    ChaosProducer,
    all_logs,
    partition_info,
    produce_raw,
    verify_acked,
    verify_replicas_identical,
    wait_until,
)

pytestmark = pytest.mark.integration

SESSION_S = 3.0  # the fixture's zookeeper.session.timeout.ms


def test_kill_controller_broker_moves_controller_and_its_leaders(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("ctl", partitions=6, rf=3)
    md = c.metadata(["ctl"])
    old_ctl = md["controller_id"]
    before = partition_info(c, "ctl")
    led_by_ctl = [p for p, info in before.items() if info["leader_id"] == old_ctl]
    assert led_by_ctl, f"placement gave controller {old_ctl} no leaders: {before}"

    c.kill(old_ctl)
    survivors = [b for b in c.brokers if b != old_ctl]

    def new_controller():
        ids = set()
        for b in survivors:
            ids.add(wire.metadata("127.0.0.1", c.brokers[b].port, [])["controller_id"])
        return ids.pop() if len(ids) == 1 and ids != {old_ctl} and -1 not in ids else None

    new_ctl = wait_until(new_controller, 4 * SESSION_S, "a new controller known to all survivors")
    assert new_ctl in survivors

    def releaded():
        info = partition_info(c, "ctl")
        return info if all(info[p]["leader_id"] in survivors for p in info) else None

    after = wait_until(releaded, 4 * SESSION_S, f"partitions led by {old_ctl} re-elected")
    # No metadata lost: same topic, same partitions, same replica assignment.
    assert sorted(after) == sorted(before) == list(range(6))
    for p in after:
        assert after[p]["replica_nodes"] == before[p]["replica_nodes"], p
        # The new leader came from the old ISR, and the dead broker left the ISR.
        assert after[p]["leader_id"] in before[p]["isr_nodes"], (p, before[p], after[p])
        assert old_ctl not in after[p]["isr_nodes"], (p, after[p])
    for p in led_by_ctl:
        assert after[p]["leader_epoch"] > before[p]["leader_epoch"], (p, before[p], after[p])
    # The new controller works: it creates a topic.
    c.create_topic("ctl-after", partitions=2, rf=2)


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_kill_leader_while_producing_clients_follow(cluster_factory, client):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("fo", partitions=3, rf=3)
    with ChaosProducer(c.bootstrap, "fo", 3, client=client, rate=200) as prod:
        prod.wait_acks(100, timeout=30)
        victim = c.leader_of("fo", 0)
        old_epoch = partition_info(c, "fo")[0]["leader_epoch"]
        t0 = time.monotonic()
        c.kill(victim)

        def moved():
            info = partition_info(c, "fo")[0]
            return info if info["leader_id"] not in (-1, victim) else None

        info = wait_until(moved, 4 * SESSION_S, f"leadership of fo-0 moved off {victim}")
        moved_after = time.monotonic() - t0
        assert info["leader_epoch"] > old_epoch
        assert moved_after < 2 * SESSION_S + 1, f"leader moved only after {moved_after:.1f}s"
        # The client finds the new leaders by itself and keeps acknowledging.
        prod.wait_acks(300, timeout=30)
        stats = prod.stop()
    assert not [e for e in stats.errors if "still in flight" in e], stats.errors[-5:]
    verify_acked(c.alive_bootstrap(), "fo", 3, stats.acked)
    c.restart(victim)
    c.wait_for_leaders("fo", 3, isr=3, timeout=30)
    verify_replicas_identical(c, "fo", 3)


def test_leader_moves_within_session_timeout_and_accepts_writes(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("t", partitions=1, rf=3)
    victim = c.leader_of("t", 0)
    t0 = time.monotonic()
    c.kill(victim)

    def accepts():
        leader = partition_info(c, "t")[0]["leader_id"]
        if leader in (-1, victim):
            return None
        r = produce_raw(c.brokers[leader].port, "t", 0, acks=-1, timeout_ms=2000)
        return r if r["error_code"] == 0 else None

    r = wait_until(accepts, 4 * SESSION_S, "the new leader accepting acks=all writes")
    elapsed = time.monotonic() - t0
    assert r["base_offset"] >= 0
    # Generous bound (detection is the session timeout; the rest is election + LeaderAndIsr).
    assert elapsed < 2 * SESSION_S + 2, f"{elapsed:.1f}s\n{all_logs(c)}"


def test_a_stop_that_cannot_move_its_leaders_retries_as_configured_then_stops(cluster_factory):
    """controlled.shutdown.max.retries / controlled.shutdown.retry.backoff.ms, as Kafka: the
    only live replica of a replicated partition asks the controller that many times, that
    far apart, then stops anyway (cleanly on its side: exit code 0)."""
    c = cluster_factory(2, controlled_shutdown_max_retries="2", controlled_shutdown_retry_backoff_ms="300")
    c.create_topic("held", assignment={0: [1, 2]})
    c.wait_for_leaders("held", 1, isr=2)
    c.kill(2)
    deadline = time.monotonic() + 30
    while c.metadata(["held"])["topics"][0]["partitions"][0]["isr_nodes"] != [1]:
        assert time.monotonic() < deadline, "broker 2 never left the ISR"
        time.sleep(0.1)
    assert c.stop(1) == 0
    log = c.brokers[1].log.read_text(errors="replace")
    assert ("controlled shutdown attempt 1 of 2 failed (1 partitions still led here); retrying in 300 ms"
            in log), c.tail(1)
    assert "controlled shutdown attempt 2 of 2 failed (1 partitions still led here); giving up" in log
    assert "controlled shutdown failed after 2 attempts: proceeding to an unclean shutdown" in log
