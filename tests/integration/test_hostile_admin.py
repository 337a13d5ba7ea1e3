"""Hostile or buggy admin and group requests against a real broker: each gets a Kafka
error code at once, the broker stays up, answers others, and keeps its memory (issue 10)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch
from tests.integration.test_recovery import log_end_offset, produce

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
HUGE = 2**31 - 1
RSS_BOUND_KB = 400 * 1024


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def create_topics(port: int, topics: list[tuple[str, int, int]], validate_only: bool = False) -> list[dict]:
    body = {"topics": [{"name": n, "num_partitions": p, "replication_factor": rf, "assignments": [], "configs": []}
                       for n, p, rf in topics],
            "timeout_ms": 5000, "validate_only": validate_only}
    return wire.call(HOST, port, ApiKey.CREATE_TOPICS, 5, body, timeout=10)["topics"]


def answers_metadata_quickly(port: int) -> None:
    t = time.monotonic()
    wire.metadata(HOST, port, timeout=2)
    assert time.monotonic() - t < 2


@pytest.fixture
def broker(cluster_factory):
    c = cluster_factory(1, offsets_topic_num_partitions=1, offsets_topic_replication_factor=1)
    c.create_topic("data", 1, 1)
    return c


def test_huge_partition_counts_are_refused_before_placement(broker) -> None:
    port, pid = broker.brokers[1].port, broker.brokers[1].proc.pid
    for validate_only in (True, False):
        t = time.monotonic()
        [r] = create_topics(port, [("huge", HUGE, 1)], validate_only)
        assert r["error_code"] == ErrorCode.POLICY_VIOLATION, r
        assert time.monotonic() - t < 2
    # 10,000 is the most one request may create, over all its topics, as Kafka 4.0 does.
    rs = create_topics(port, [("a", 6000, 1), ("b", 6000, 1)], validate_only=True)
    assert [r["error_code"] for r in rs] == [ErrorCode.POLICY_VIOLATION] * 2
    [ok] = create_topics(port, [("fine", 3, 1)], validate_only=True)
    assert ok["error_code"] == 0
    body = {"topics": [{"name": "data", "count": HUGE, "assignments": None}], "timeout_ms": 5000,
            "validate_only": False}
    [r] = wire.call(HOST, port, ApiKey.CREATE_PARTITIONS, 1, body, timeout=10)["results"]
    assert r["error_code"] == ErrorCode.POLICY_VIOLATION, r
    answers_metadata_quickly(port)
    assert rss_kb(pid) < RSS_BOUND_KB
    assert "huge" not in wire.metadata(HOST, port)["topics"].__repr__()


@pytest.mark.parametrize("name", ["..", ".", "a/b", "x" * 300, ""])
def test_bad_topic_names_never_reach_zookeeper(broker, name: str) -> None:
    port = broker.brokers[1].port
    describe = {"resources": [{"resource_type": 2, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
    [r] = wire.call(HOST, port, ApiKey.DESCRIBE_CONFIGS, 1, describe)["results"]
    assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION, r
    alter = {"resources": [{"resource_type": 2, "resource_name": name,
                            "configs": [{"name": "retention.ms", "value": "1000"}]}], "validate_only": False}
    [r] = wire.call(HOST, port, ApiKey.ALTER_CONFIGS, 1, alter)["responses"]
    assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION, r
    incremental = {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": False}
    [r] = wire.call(HOST, port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, incremental)["responses"]
    assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION, r
    partitions = {"topics": [{"name": name, "count": 2, "assignments": None}], "timeout_ms": 5000,
                  "validate_only": False}
    [r] = wire.call(HOST, port, ApiKey.CREATE_PARTITIONS, 1, partitions)["results"]
    assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION, r
    [r] = wire.call(HOST, port, ApiKey.DELETE_TOPICS, 4, {"topic_names": [name], "timeout_ms": 1000})["responses"]
    assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION, r
    answers_metadata_quickly(port)


def test_leave_group_for_a_group_not_coordinated_here_is_answered(broker) -> None:
    port = broker.brokers[1].port
    body = {"group_id": "nobody-coordinates-this", "members": [{"member_id": "m-1", "group_instance_id": None}]}
    for _ in range(2):  # the connection and the broker stay usable
        r = wire.call(HOST, port, ApiKey.LEAVE_GROUP, 4, body)
        assert r["error_code"] in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), r
        assert r["members"] == []
    answers_metadata_quickly(port)


def test_clients_cannot_write_to_consumer_offsets(broker) -> None:
    port = broker.brokers[1].port
    find = {"key_type": 0, "coordinator_keys": ["g"]}
    deadline = time.monotonic() + 30
    while True:  # the first FindCoordinator creates __consumer_offsets
        [c] = wire.call(HOST, port, ApiKey.FIND_COORDINATOR, 4, find)["coordinators"]
        if c["error_code"] == 0:
            break
        assert time.monotonic() < deadline, c
        time.sleep(0.2)
    before = log_end_offset(port, "__consumer_offsets")
    r = produce(port, "__consumer_offsets", bytes(build_batch(3)))
    assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION, r
    assert log_end_offset(port, "__consumer_offsets") == before
    # Ordinary topics are unaffected.
    assert produce(port, "data", bytes(build_batch(1)))["error_code"] == 0


def test_controller_requests_for_an_earlier_registration_are_fenced(broker) -> None:
    port = broker.brokers[1].port
    body = {"controller_id": 1, "controller_epoch": 1 << 20, "broker_epoch": 1, "type": 0,
            "topic_states": [], "live_leaders": []}
    r = wire.call(HOST, port, ApiKey.LEADER_AND_ISR, 5, body)
    assert r["error_code"] == ErrorCode.STALE_BROKER_EPOCH, r
    stop = {"controller_id": 1, "controller_epoch": 1 << 20, "broker_epoch": 1, "topic_states": [
        {"topic_name": "data", "partition_states": [{"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}]}
    r = wire.call(HOST, port, ApiKey.STOP_REPLICA, 3, stop)
    assert r["error_code"] == ErrorCode.STALE_BROKER_EPOCH, r
    # Nothing changed: the partition is still led and written here.
    assert produce(port, "data", bytes(build_batch(1)))["error_code"] == 0
