"""The data plane of transactions with real brokers and a real read_committed client:
transactional batches, COMMIT/ABORT markers written by WriteTxnMarkers (what a
transaction coordinator sends), the LSO and the aborted-transaction list a
confluent-kafka read_committed consumer filters with, ListOffsets by isolation level,
and all of it carried over to a new leader."""

from __future__ import annotations

import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch

pytestmark = pytest.mark.integration
HOST = "127.0.0.1"


def _produce_txn(port: int, topic: str, pid: int, seq: int, values: list[bytes]) -> int:
    batch = build_batch(values, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    r = wire.call(HOST, port, ApiKey.PRODUCE, 7, body, timeout=15)["responses"][0]["partition_responses"][0]
    assert r["error_code"] == 0, r
    return r["base_offset"]


def _marker(port: int, topic: str, pid: int, commit: bool) -> int:
    body = {"markers": [{"producer_id": pid, "producer_epoch": 0, "transaction_result": commit,
                         "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]}
    r = wire.call(HOST, port, ApiKey.WRITE_TXN_MARKERS, 1, body, timeout=15)
    return r["markers"][0]["topics"][0]["partitions"][0]["error_code"]


def _latest(port: int, topic: str, isolation: int) -> int:
    body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    [r] = wire.call(HOST, port, ApiKey.LIST_OFFSETS, 5, body, timeout=10)["topics"][0]["partitions"]
    assert r["error_code"] == 0, r
    return r["offset"]


def _consume(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{isolation}-{time.monotonic()}",
                  "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(got) < expect and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    time.sleep(1.0)  # and nothing more arrives
    while (m := c.poll(0.2)) is not None:
        if m.error() is None:
            got.append(m.value())
    c.close()
    return got


def _pids(port: int, n: int) -> list[int]:
    return [wire.call(HOST, port, ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None,
                                                              "transaction_timeout_ms": 60000})["producer_id"]
            for _ in range(n)]


def test_read_committed_consumers_skip_aborted_and_wait_for_open_transactions(cluster_factory) -> None:
    # This test plays the transaction coordinator itself (no AddPartitionsToTxn), so the
    # leaders' KIP-890 check with the coordinator is off.
    c = cluster_factory(3, transaction_partition_verification_enable=False)
    c.create_topic("tx", 1, 3, configs={"min.insync.replicas": 2})
    leader = c.leader_of("tx")
    port = c.brokers[leader].port
    a, b, d = _pids(port, 3)
    _produce_txn(port, "tx", a, 0, [b"a1", b"a2"])       # 0-1 (aborted below)
    _produce_txn(port, "tx", b, 0, [b"b1", b"b2"])       # 2-3 (committed below)
    _produce_txn(port, "tx", a, 2, [b"a3"])              # 4: A's transaction goes on
    assert _latest(port, "tx", 1) == 0 and _latest(port, "tx", 0) == 5  # LSO vs HW
    assert _marker(port, "tx", a, commit=False) == 0     # 5
    assert _marker(port, "tx", b, commit=True) == 0      # 6
    first_open = _produce_txn(port, "tx", d, 0, [b"d1"])  # 7: still open at the end
    assert _latest(port, "tx", 1) == first_open == 7
    # Clients cannot write markers themselves.
    assert _marker_as_client(port, "tx", d) != 0

    bootstrap = c.bootstrap
    assert sorted(_consume(bootstrap, "tx", "read_committed", 2)) == [b"b1", b"b2"]
    assert sorted(_consume(bootstrap, "tx", "read_uncommitted", 6)) == [b"a1", b"a2", b"a3", b"b1", b"b2", b"d1"]

    # The followers built the same transaction state from the replicated batches.
    c.kill(leader)
    deadline = time.monotonic() + 30
    while True:
        try:
            new = c.leader_of("tx")
            if new != leader and new >= 0 and _latest(c.brokers[new].port, "tx", 1) == 7:
                break
        except (OSError, ConnectionError, AssertionError, StopIteration):
            pass
        assert time.monotonic() < deadline, "no new leader with the LSO at the open transaction"
        time.sleep(0.2)
    port = c.brokers[new].port
    assert _marker(port, "tx", d, commit=True) == 0
    assert _latest(port, "tx", 1) == 9
    bootstrap = ",".join(f"{HOST}:{c.brokers[i].port}" for i in c.brokers if i != leader)
    assert sorted(_consume(bootstrap, "tx", "read_committed", 3)) == [b"b1", b"b2", b"d1"]


def _marker_as_client(port: int, topic: str, pid: int) -> int:
    from kafkarepl.coordinator.records import build_marker

    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": bytes(build_marker(pid, 0, True, 0, 0))}]}]}
    r = wire.call(HOST, port, ApiKey.PRODUCE, 7, body, timeout=15)
    return r["responses"][0]["partition_responses"][0]["error_code"]
