"""Kafka's dynamic producer state configs on a real broker (kafka-configs.sh --alter
--entity-type brokers --entity-default): transaction.partition.verification.enable
(KIP-890's check of a transactional batch with its coordinator) and
producer.id.expiration.ms (KIP-854: idle producer ids are forgotten), each taking effect
without a restart."""

from __future__ import annotations

import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch
from tests.integration.chaos import wait_until

pytestmark = pytest.mark.integration
HOST = "127.0.0.1"


def alter_default(port: int, name: str, value: str) -> int:
    body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": name, "config_operation": 0, "value": value}]}], "validate_only": False}
    return wire.call(HOST, port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]["error_code"]


def produce(port: int, pid: int, transactional: bool) -> int:
    batch = build_batch([b"v"], producer_id=pid, producer_epoch=0, base_sequence=0,
                        transactional=transactional, timestamp=int(time.time() * 1000))
    body = {"transactional_id": "tx" if transactional else None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "ps", "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    resp = wire.call(HOST, port, ApiKey.PRODUCE, 7, body, timeout=15)
    return resp["responses"][0]["partition_responses"][0]["error_code"]


def producers(port: int) -> set[int]:
    r = wire.call(HOST, port, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "ps", "partition_indexes": [0]}]})
    [p] = r["topics"][0]["partitions"]
    assert p["error_code"] == 0, p
    return {s["producer_id"] for s in p["active_producers"]}


def test_producer_state_configs_change_at_run_time(cluster_factory) -> None:
    c = cluster_factory(1, producer_id_expiration_check_interval_ms=200)
    c.create_topic("ps", 1, 1)
    port = c.brokers[1].port
    txn_pid, idem_pid = (wire.call(HOST, port, ApiKey.INIT_PRODUCER_ID, 2, {
        "transactional_id": None, "transaction_timeout_ms": 60000})["producer_id"] for _ in range(2))

    # A transactional batch its coordinator never heard of is refused while the check is on.
    assert produce(port, txn_pid, transactional=True) != 0
    assert alter_default(port, "transaction.partition.verification.enable", "maybe") != 0
    assert alter_default(port, "transaction.partition.verification.enable", "false") == 0
    wait_until(lambda: produce(port, txn_pid, transactional=True) == 0, 15, "the check turned off")
    markers = {"markers": [{"producer_id": txn_pid, "producer_epoch": 0, "transaction_result": False,
                            "topics": [{"name": "ps", "partition_indexes": [0]}], "coordinator_epoch": 0}]}
    r = wire.call(HOST, port, ApiKey.WRITE_TXN_MARKERS, 1, markers)
    assert r["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0
    assert produce(port, idem_pid, transactional=False) == 0

    # Kept for the default day, checked every 200 ms here; forgotten once idle 1 s.
    time.sleep(1)
    assert producers(port) == {txn_pid, idem_pid}
    assert alter_default(port, "producer.id.expiration.ms", "0") != 0
    assert alter_default(port, "producer.id.expiration.ms", "1000") == 0
    wait_until(lambda: not producers(port), 15, "idle producer ids expired")
