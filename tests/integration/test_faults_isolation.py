"""A broker frozen (SIGSTOP) past the ZooKeeper session timeout: cut off from ZooKeeper
and from its followers at once. As a leader it must not acknowledge an acks=all write
that is later lost; its session expires, it is treated as dead, and on SIGCONT it
rejoins cleanly."""

from __future__ import annotations

import threading
import time

import pytest

from tests.integration.chaos import (
    ChaosProducer,
    all_logs,
    consume_all,
    partition_info,
    produce_raw,
    verify_acked,
    verify_replicas_identical,
    wait_until,
)

pytestmark = pytest.mark.integration

SESSION_S = 3.0


def registered(c) -> set[int]:
    return {b["node_id"] for b in c.metadata([])["brokers"]}


def test_cut_off_leader_cannot_ack_a_write_that_is_lost(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("cut", partitions=1, rf=3)
    old = c.leader_of("cut")
    raw_results: list = []

    def raw_produce_to_old_leader():
        # Sent while it is frozen: the request waits in its socket and is handled after
        # SIGCONT, when it is no longer the leader (or no longer has its ISR).
        try:
            raw_results.append(produce_raw(c.brokers[old].port, "cut", 0, acks=-1, timeout_ms=5000,
                                           values=[b"raw-1", b"raw-2", b"raw-3"], timeout=60))
        except (OSError, ConnectionError) as exc:
            raw_results.append(exc)

    with ChaosProducer(c.bootstrap, "cut", 1, rate=300) as prod:
        prod.wait_acks(100)
        c.pause(old)
        try:
            raw = threading.Thread(target=raw_produce_to_old_leader, daemon=True)
            raw.start()
            new = wait_until(lambda: (lead := c.leader_of("cut")) not in (-1, old) and lead,
                             4 * SESSION_S, f"a new leader instead of the frozen {old}")
            prod.wait_acks(300, timeout=45)  # the producer writes to the new leader
        finally:
            c.resume(old)
        raw.join(60)
        assert raw_results, "the raw Produce to the old leader never finished"
        c.wait_for_leaders("cut", 1, isr=3, timeout=30)
        prod.wait_acks(100)
        stats = prod.stop()
    assert c.leader_of("cut") != old or new != old
    verify_acked(c.bootstrap, "cut", 1, stats.acked)
    logs = consume_all(c.bootstrap, "cut", 1)
    r = raw_results[0]
    print("raw produce to the frozen old leader:", r)
    if isinstance(r, dict) and r["error_code"] == 0:
        # Acknowledged: then it must be in the final log, where it said.
        got = dict(logs[0])
        assert [got.get(r["base_offset"] + i) for i in range(3)] == [b"raw-1", b"raw-2", b"raw-3"], (
            f"old leader {old} acknowledged raw-1..3 at {r['base_offset']} but the final log has "
            f"{[got.get(r['base_offset'] + i) for i in range(3)]}\n{all_logs(c)}")
    verify_replicas_identical(c, "cut", 1)


def test_session_expiry_treated_as_dead_then_rejoins(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("se", partitions=3, rf=3)
    victim = c.leader_of("se", 0)
    led = [p for p, i in partition_info(c, "se").items() if i["leader_id"] == victim]
    c.pause(victim)
    try:
        others = [b for b in c.brokers if b != victim]
        wait_until(lambda: victim not in {b["node_id"] for b in c.metadata([])["brokers"]},
                   4 * SESSION_S, f"frozen broker {victim} unregistered (session expired)")
        info = wait_until(lambda: (i := partition_info(c, "se")) and all(
            i[p]["leader_id"] in others and victim not in i[p]["isr_nodes"] for p in i) and i,
            4 * SESSION_S, f"leadership and ISR moved off {victim}")
        assert all(info[p]["leader_id"] != victim for p in led)
        # Writes go on meanwhile (ISR of 2 = min ISR).
        for p in range(3):
            r = produce_raw(c.brokers[info[p]["leader_id"]].port, "se", p, acks=-1,
                            values=[f"se-{p}-{i}".encode() for i in range(3)])
            assert r["error_code"] == 0, (p, r)
        time.sleep(1.0)  # frozen well past its session
    finally:
        c.resume(victim)
    # It notices the expiry, registers again and is re-synced.
    wait_until(lambda: victim in registered(c), 20, f"{victim} registered again")
    c.wait_for_leaders("se", 3, isr=3, timeout=30)
    md = c.wait_serving(victim, 10, expect_brokers=3)
    assert md["controller_id"] >= 0
    # Its view is current: it knows the new leaders (no stale leadership claim).
    mine = partition_info(c, "se", via=victim)
    theirs = partition_info(c, "se", via=others[0])
    assert {p: i["leader_id"] for p, i in mine.items()} == {p: i["leader_id"] for p, i in theirs.items()}
    with ChaosProducer(c.bootstrap, "se", 3, rate=300) as prod:
        prod.wait_acks(100)
        stats = prod.stop()
    verify_acked(c.bootstrap, "se", 3, stats.acked)
    verify_replicas_identical(c, "se", 3)
