"""Incremental fetch sessions (KIP-227) between real brokers and on the wire.

The replica fetchers use sessions by default; these tests check the leader's answers to
a follower speaking the protocol by hand, and that replication through sessions (and
without them, max.incremental.fetch.session.cache.slots=0) loses nothing across a
follower's crash and restart."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.batches import decode
from tests.integration.chaos import (
    all_logs,
    partition_info,
    produce_raw,
    verify_replicas_identical,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 12


def fetch(port: int, replica_id: int, session_id: int, epoch: int, parts: dict[int, int],
          forgotten: list[int] = (), max_wait_ms: int = 100, timeout: float = 10) -> dict:
    """One Fetch v12 as replica `replica_id`: parts = {partition: fetch offset}."""
    body = {
        "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": "fs", "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": off, "last_fetched_epoch": -1,
             "log_start_offset": 0, "partition_max_bytes": 1 << 20} for p, off in sorted(parts.items())]}]
        if parts else [],
        "forgotten_topics_data": [{"topic": "fs", "partitions": list(forgotten)}] if forgotten else [],
        "rack_id": "",
    }
    return wire.call("127.0.0.1", port, ApiKey.FETCH, 12, body, timeout=timeout)


def answered(resp: dict) -> dict[int, dict]:
    return {p["partition_index"]: p for t in resp["responses"] for p in t["partitions"]}


def records(p: dict) -> list:
    return decode(p["records"]) if p["records"] else []


def test_the_leader_answers_a_session_with_news_only(cluster_factory):
    """Broker 1 leads every partition; broker 2 is stopped and this test fetches in its
    place (replica id 2), as its replica fetcher would."""
    c = cluster_factory(2, min_insync_replicas=1, replica_lag_time_max_ms=30000)
    body = {"topics": [{"name": "fs", "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": p, "broker_ids": [1, 2]} for p in range(PARTITIONS)],
                        "configs": []}], "timeout_ms": 30000, "validate_only": False}
    assert wire.call("127.0.0.1", c.brokers[1].port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
    c.wait_for_leaders("fs", PARTITIONS, isr=2)
    c.stop(2)
    wait_until(lambda: all(p["isr_nodes"] == [1] for p in partition_info(c, "fs").values()), 20,
               "broker 2 out of every ISR")
    port = c.brokers[1].port

    # Epoch 0: a new session; the full answer has every partition.
    r = fetch(port, 2, 0, 0, {p: 0 for p in range(PARTITIONS)})
    assert r["error_code"] == 0 and r["session_id"] > 0, r
    sid = r["session_id"]
    assert sorted(answered(r)) == list(range(PARTITIONS))

    # Nothing changed: an empty answer (after max_wait).
    r = fetch(port, 2, sid, 1, {})
    assert r["error_code"] == 0 and r["session_id"] == sid and answered(r) == {}

    # Records on partition 5 only: only partition 5 is answered, with them.
    assert produce_raw(port, "fs", 5, acks=1, values=[b"a", b"b", b"c"])["error_code"] == 0
    r = fetch(port, 2, sid, 2, {})
    got = answered(r)
    assert sorted(got) == [5] and [rec[3] for rec in records(got[5])] == [b"a", b"b", b"c"], r

    # The follower took them (offset 3 on 5): no records again while nothing is
    # appended (the requests carry no partition at all).
    r = fetch(port, 2, sid, 3, {5: 3})
    assert all(not records(p) for p in answered(r).values())
    epoch = 4
    for _ in range(3):
        r = fetch(port, 2, sid, epoch, {})
        epoch += 1
        assert all(not records(p) for p in answered(r).values()), r

    # A parked Fetch wakes on an append to any partition of its session (here 9): it
    # answers long before its 30 s max_wait (the socket gives up after 20 s).
    out: dict = {}

    def parked():
        out["r"] = fetch(port, 2, sid, epoch, {}, max_wait_ms=30000, timeout=20)

    t = threading.Thread(target=parked)
    t.start()
    time.sleep(0.5)
    assert produce_raw(port, "fs", 9, acks=1, values=[b"x"])["error_code"] == 0
    t.join(25)
    assert "r" in out, "the parked session fetch did not wake on the append"
    got = answered(out["r"])
    assert [rec[3] for rec in records(got[9])] == [b"x"]
    epoch += 1

    # Forgotten partitions are not answered any more, even with news.
    r = fetch(port, 2, sid, epoch, {}, forgotten=[7])
    epoch += 1
    assert produce_raw(port, "fs", 7, acks=1, values=[b"y"])["error_code"] == 0
    r = fetch(port, 2, sid, epoch, {})
    epoch += 1
    assert 7 not in answered(r)

    # Errors: a wrong epoch, an unknown session, someone else's session.
    assert fetch(port, 2, sid, epoch + 5, {})["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert fetch(port, 2, sid + 1, 1, {})["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(port, 3, sid, epoch, {})["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # The session survives a bad request: the right epoch still works.
    assert fetch(port, 2, sid, epoch, {})["error_code"] == 0
    # A consumer (replica id -1) never gets a session.
    assert fetch(port, -1, 0, 0, {0: 0})["session_id"] == 0


@pytest.mark.parametrize("slots", ["1000", "0"], ids=["sessions", "no-sessions"])
def test_replication_through_sessions_loses_nothing_across_a_follower_crash(cluster_factory, slots):
    c = cluster_factory(3, min_insync_replicas=2, max_incremental_fetch_session_cache_slots=slots)
    c.create_topic("rs", partitions=30, rf=3)
    acked: list[bytes] = []
    errors: list = []

    def produce(n: int, start: int) -> None:
        p = Producer({"bootstrap.servers": c.alive_bootstrap(), "acks": "all", "linger.ms": 2,
                      "message.timeout.ms": 30000})
        for i in range(start, start + n):
            v = b"%06d" % i
            p.produce("rs", v, partition=i % 30,
                      on_delivery=lambda err, msg, v=v: errors.append(err) if err else acked.append(v))
            p.poll(0)
        p.flush(60)

    produce(900, 0)
    victim = 2 if c.leader_of("rs", 0) != 2 else 3
    c.kill(victim)
    produce(900, 900)
    c.restart(victim)
    wait_until(lambda: all(len(p["isr_nodes"]) == 3 for p in partition_info(c, "rs").values()), 60,
               "every ISR full again")
    produce(900, 1800)
    assert not errors and len(acked) == 2700, (errors[:3], all_logs(c))
    verify_replicas_identical(c, "rs", 30)
    logs = "".join(b.log.read_text(errors="replace") for b in c.brokers.values())
    if slots == "0":
        assert "fetch session" not in logs.replace("declined a fetch session", "")
        assert "declined a fetch session" in logs
    else:
        assert "fetch session" in logs and "declined a fetch session" not in logs
