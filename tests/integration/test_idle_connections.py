"""connections.max.idle.ms with real broker processes and real clients: silent and
half-sent connections are closed, and everything that keeps a connection open across
quiet periods (the controller's channels to the brokers, the brokers' channel to the
controller, the transaction coordinator's marker sends, librdkafka producers, group
consumers whose heartbeats are slower than the limit) reconnects and keeps working."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.integration.chaos import all_logs, partition_info, wait_until

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
IDLE_MS = 1500


def closed_by_broker(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def produce(p: Producer, topic: str, values: list[bytes]) -> None:
    errors: list = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors


def consume(conf: dict, topics: list[str], expected: set[bytes]) -> set[bytes]:
    """Every value read by a group member, until `expected` are all in or 60 s pass."""
    c = Consumer({"group.id": "idle-readers", "auto.offset.reset": "earliest", **conf})
    c.subscribe(topics)
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while not expected <= seen and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return seen


def test_idle_connections_are_closed_and_the_cluster_keeps_working(cluster_factory) -> None:
    c = cluster_factory(3, connections_max_idle_ms=IDLE_MS, min_insync_replicas=2)
    c.create_topic("before", partitions=3, rf=3)
    port = c.brokers[1].port

    silent = socket.create_connection((HOST, port), timeout=15)
    half = socket.create_connection((HOST, port), timeout=15)
    half.sendall(struct.pack(">i", 100) + b"\x00" * 10)  # a frame begun, never finished
    t0 = time.monotonic()
    assert closed_by_broker(silent) and closed_by_broker(half)
    assert time.monotonic() - t0 >= IDLE_MS / 1000 * 0.9
    silent.close()
    half.close()

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True})
    first = [b"b%d" % i for i in range(100)]
    produce(p, "before", first)
    time.sleep(2 * IDLE_MS / 1000)  # every connection idle since is closed by now

    # LeaderAndIsr and UpdateMetadata over the controller's re-opened channels
    c.create_topic("after", partitions=3, rf=3)
    second = [b"a%d" % i for i in range(100)]
    produce(p, "before", second[:50])  # the producer's connections were closed under it
    produce(p, "after", second[50:])
    # The controller found its idle-closed channels closed before using them: no failed
    # send, hence no retry and no liveness probe of a live broker.
    for b in c.brokers:
        assert "retrying" not in c.tail(b, 400), c.tail(b, 400)

    # ISR changes go through the brokers' channel to the controller, idle until now
    time.sleep(2 * IDLE_MS / 1000)
    info = partition_info(c, "before")[0]
    victim = next(r for r in info["replica_nodes"] if r != info["leader_id"])
    c.kill(victim)
    wait_until(lambda: victim not in partition_info(c, "before")[0]["isr_nodes"], 30,
               f"broker {victim} out of the ISR of before-0")
    c.restart(victim)
    c.wait_for_leaders("before", 3, isr=3, timeout=60)

    # Transaction markers: the coordinator's connections to the leaders were idle too
    time.sleep(2 * IDLE_MS / 1000)
    tx = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "idle-tx"})
    tx.init_transactions(30)
    tx.begin_transaction()
    txn = [b"t%d" % i for i in range(20)]
    for v in txn:
        tx.produce("after", v)
    tx.commit_transaction(30)

    # A group member whose heartbeats (3 s) are slower than the idle limit
    time.sleep(2 * IDLE_MS / 1000)
    expected = set(first + second + txn)
    seen = consume({"bootstrap.servers": c.bootstrap, "isolation.level": "read_committed"},
                   ["before", "after"], expected)
    assert seen == expected, (len(seen), len(expected), all_logs(c))
