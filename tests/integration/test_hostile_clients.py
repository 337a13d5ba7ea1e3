"""Hostile and buggy clients against a real broker process (issue 10 items 2-4, 7):
compressed garbage and lies, compression bombs, huge announced frames trickled over many
connections, too many connections from one IP, over-long strings. After each, the broker
is alive, answers Metadata within 2 s and the data written before reads back unchanged."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
import zstandard
from confluent_kafka import Consumer, Producer

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey, decode_response, encode_request
from tests.batches import build_batch
from tests.fixtures.cluster import TestCluster
from tests.integration.chaos import wait_until
from tests.integration.test_recovery import fetch_records, log_end_offset, produce
from tests.unit.test_batch_validation import compress, raw_batch, record, xerial

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
TOPIC = "keep"
METADATA_DEADLINE_S = 2.0
# The RSS bound stated in docs/operations.md for this workload: a dozen connections that
# announce 100 MiB frames and trickle bytes add well under 64 MiB (before the fix: the
# whole announced size per connection, 1.2 GiB).
RSS_GROWTH_BOUND = 64 << 20


@pytest.fixture
def broker(cluster_factory) -> TestCluster:
    c = cluster_factory(1, max_connections_per_ip=40)
    c.create_topic(TOPIC, 1, 1)
    port = c.brokers[1].port
    for i in range(3):
        assert produce(port, TOPIC, bytes(build_batch([f"before-{i}".encode()])))["error_code"] == 0
    return c


def metadata_time(c: TestCluster) -> float:
    t0 = time.monotonic()
    md = wire.call(HOST, c.brokers[1].port, ApiKey.METADATA, 1, {"topics": [{"name": TOPIC}]},
                   timeout=METADATA_DEADLINE_S + 1)
    assert md["topics"][0]["error_code"] == 0
    return time.monotonic() - t0


def assert_unharmed(c: TestCluster) -> None:
    b = c.brokers[1]
    assert b.alive, f"broker died:\n{c.tail(1)}"
    assert metadata_time(c) < METADATA_DEADLINE_S
    assert [(o, v) for o, _t, _k, v in fetch_records(b.port, TOPIC)] == [
        (i, f"before-{i}".encode()) for i in range(3)]
    assert log_end_offset(b.port, TOPIC) == 3


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_garbage_is_corrupt_message(broker, codec):
    port = broker.brokers[1].port
    assert produce(port, TOPIC, bytes(raw_batch(os.urandom(500), 5, codec)))["error_code"] == \
        ErrorCode.CORRUPT_MESSAGE
    not_records = compress(codec, b"\x00" * 2000)
    assert produce(port, TOPIC, bytes(raw_batch(not_records, 5, codec)))["error_code"] == \
        ErrorCode.CORRUPT_MESSAGE
    assert_unharmed(broker)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_batch_claiming_2_31_records_refused(broker, codec):
    batch = bytes(raw_batch(compress(codec, record(0)), 0x7FFFFFFF, codec))
    assert len(batch) < 200
    code = produce(broker.brokers[1].port, TOPIC, batch)["error_code"]
    assert code in (ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE)
    assert_unharmed(broker)


def test_compression_bomb_refused_and_broker_keeps_answering(broker):
    # One record of 1 GiB of zeros: ~40 KiB of zstd, the bomb.
    data = zstandard.ZstdCompressor(level=3).compress(record(0, b"\x00" * (1 << 30)))
    assert len(data) < 100_000
    batch = bytes(raw_batch(data, 1, 4))
    result: dict = {}

    def bomb() -> None:
        result["resp"] = produce(broker.brokers[1].port, TOPIC, batch)

    pid = broker.brokers[1].proc.pid
    before = rss(pid)
    t = threading.Thread(target=bomb)
    t.start()
    time.sleep(0.05)
    assert metadata_time(broker) < METADATA_DEADLINE_S  # while the bomb is handled
    t.join(30)
    assert result["resp"]["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
    assert rss(pid) - before < 128 << 20
    # xerial snappy and ListOffsets by timestamp still work after it
    ok = raw_batch(xerial(b"".join(record(i, b"x" * 100) for i in range(500))), 500, 2,
                   max_ts=1_700_000_000_000)
    assert produce(broker.brokers[1].port, TOPIC, bytes(ok))["error_code"] == 0
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": 1_700_000_000_000}]}]}
    [p] = wire.call(HOST, broker.brokers[1].port, ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"]
    assert p["error_code"] == 0 and p["offset"] == 0
    assert log_end_offset(broker.brokers[1].port, TOPIC) == 503


def test_huge_announced_frames_trickled_keep_rss_bounded(broker):
    b = broker.brokers[1]
    before = rss(b.proc.pid)
    socks = []
    for _ in range(12):
        s = socket.create_connection((HOST, b.port), timeout=10)
        s.sendall(struct.pack(">i", 100 << 20))  # socket.request.max.bytes default 100 MiB
        socks.append(s)
    peak = before
    for _ in range(20):  # trickle
        for s in socks:
            s.sendall(b"\x00" * 1024)
        time.sleep(0.05)
        peak = max(peak, rss(b.proc.pid))
    assert peak - before < RSS_GROWTH_BOUND, (before, peak)
    assert metadata_time(broker) < METADATA_DEADLINE_S
    for s in socks:
        s.close()
    assert_unharmed(broker)


def test_too_many_connections_per_ip_refused(broker):
    b = broker.brokers[1]
    socks = [socket.create_connection((HOST, b.port), timeout=5) for _ in range(40)]
    time.sleep(0.3)
    extra = socket.create_connection((HOST, b.port), timeout=5)
    extra.settimeout(3)
    try:
        assert extra.recv(10) == b""  # closed by the broker at accept
    except ConnectionResetError:
        pass
    extra.close()
    for s in socks[-5:]:  # room for the checks' own connections (each closes before the next)
        s.close()
    time.sleep(0.3)
    assert_unharmed(broker)  # new connections fit again
    for s in socks:
        s.close()


def test_over_long_topic_name_answered_not_internal_error(broker):
    name = "t" * 32_000  # error texts naming it pass the int16 STRING length
    body = {"resources": [{"resource_type": 2, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    resp = wire.call(HOST, broker.brokers[1].port, ApiKey.DESCRIBE_CONFIGS, 1, body, timeout=5)
    [r] = resp["results"]
    assert r["error_code"] != 0
    assert_unharmed(broker)


def test_real_client_compressed_produce_and_consume(broker):
    """What a real client can send still goes through: every codec, librdkafka."""
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                      "linger.ms": 5})
        for i in range(200):
            p.produce(TOPIC, value=f"{codec}-{i}".encode() * 10, key=str(i).encode())
        assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "hostile-check",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 30
    while got < 803 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got += 1
    c.close()
    assert got == 803


def open_many(port: int, source: str, n: int) -> tuple[list[socket.socket], int]:
    """n connections from `source` kept open; how many the broker served (ApiVersions)."""
    from kafkarepl.protocol import encode_request

    socks, served = [], 0
    for _ in range(n):
        s = socket.create_connection((HOST, port), timeout=5, source_address=(source, 0))
        socks.append(s)
        try:
            s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "limit-test", {}))
            served += len(s.recv(4)) == 4
        except (ConnectionResetError, BrokenPipeError):
            pass
    return socks, served


def test_connections_per_ip_overrides(cluster_factory):
    """max.connections.per.ip.overrides (Kafka's "host:count,..."): an address with an
    override gets its own limit, every other address the default one."""
    c = cluster_factory(1, **{"max.connections.per.ip": "5", "max.connections.per.ip.overrides": "127.0.0.2:20"})
    port = c.brokers[1].port
    overridden, served_2 = open_many(port, "127.0.0.2", 15)
    default, served_1 = open_many(port, "127.0.0.1", 15)
    try:
        assert served_2 == 15
        assert served_1 <= 5
    finally:
        for s in overridden + default:
            s.close()


def test_connection_limits_changed_dynamically(cluster_factory):
    """The connection limits are dynamic broker configs, as Kafka's (kafka-configs.sh
    --entity-type brokers --entity-default): set, they apply at once; deleted, the
    server.properties values are back."""
    c = cluster_factory(1)
    port = c.brokers[1].port

    def alter(op: int, configs: dict[str, str]) -> int:
        body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": k, "config_operation": op, "value": v} for k, v in configs.items()]}], "validate_only": False}
        return wire.call(HOST, port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]["error_code"]

    assert alter(0, {"max.connections.per.ip": "0"}) == ErrorCode.INVALID_CONFIG
    assert alter(0, {"max.connections.per.ip.overrides": "127.0.0.2"}) == ErrorCode.INVALID_CONFIG
    def served(source: str) -> int:
        socks, n = open_many(port, source, 10)
        for s in socks:
            s.close()
        time.sleep(0.2)  # the broker sees them closed
        return n

    assert alter(0, {"max.connections.per.ip": "4", "max.connections.per.ip.overrides": "127.0.0.2:30"}) == 0
    # applied through the config change notification, as on every broker
    wait_until(lambda: served("127.0.0.1") <= 4, 20, "max.connections.per.ip applied")
    assert served("127.0.0.2") == 10
    assert alter(1, {"max.connections.per.ip": "", "max.connections.per.ip.overrides": ""}) == 0
    wait_until(lambda: served("127.0.0.1") == 10, 20, "the static limit back")


@contextlib.contextmanager
def _probed(port: int) -> Iterator[list[float]]:
    """ApiVersions answer times, measured all along the block (which starts 0.2 s after the
    probe); on leaving it, none may have waited a quarter of the block's time (0.2 s at
    least)."""
    waits: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            t0 = time.monotonic()
            wire.call(HOST, port, ApiKey.API_VERSIONS, 0, {}, timeout=30)
            waits.append(time.monotonic() - t0)
            time.sleep(0.005)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        yield waits
        took = time.monotonic() - t0
    finally:
        done.set()
        prober.join()
    # Served all along: no probe waited a quarter of the block's time (a request naming
    # 100,000 entries: 3-6%, a CI run once 14%, probably a garbage collection; before the
    # slicing 19-59%, all of it before the codec thread), nor 0.2 s for a short block (a
    # CI run's DescribeProducers of 0.54 s saw one wait of 0.148 s on a loaded host: a
    # full collection of the request's 100,000 answer entries).
    assert len(waits) > 5 and max(waits) < max(took / 4, 0.2), (took, max(waits), len(waits))


# One request naming N partitions (or topics, or groups) of a topic that does not exist,
# and the request's own entry: the client sets N, up to socket.request.max.bytes.
N = 100_000


def _big_bodies() -> dict[str, tuple[int, int, dict]]:
    return {
        "Fetch": (ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "nope", "partitions": [
                {"partition": i, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1024} for i in range(N)]}]}),
        "ListOffsets": (ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "nope", "partitions": [
                {"partition_index": i, "current_leader_epoch": -1, "timestamp": -1} for i in range(N)]}]}),
        "Metadata": (ApiKey.METADATA, 4, {"topics": [{"name": f"nope-{i}"} for i in range(N)],
                                          "allow_auto_topic_creation": False}),
        "Produce": (ApiKey.PRODUCE, 7, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "nope", "partition_data": [{"index": i, "records": b"x" * 10} for i in range(N)]}]}),
        "OffsetForLeaderEpoch": (ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
            {"topic": "nope", "partitions": [
                {"partition": i, "current_leader_epoch": -1, "leader_epoch": 0} for i in range(N)]}]}),
        "DeleteRecords": (ApiKey.DELETE_RECORDS, 1, {"timeout_ms": 1000, "topics": [
            {"name": "nope", "partitions": [{"partition_index": i, "offset": 0} for i in range(N)]}]}),
        "OffsetFetch": (ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": [
            {"name": "nope", "partition_indexes": list(range(N))}]}),
        "DescribeGroups": (ApiKey.DESCRIBE_GROUPS, 3, {"groups": [f"g{i}" for i in range(N)],
                                                       "include_authorized_operations": False}),
        "DeleteGroups": (ApiKey.DELETE_GROUPS, 1, {"groups_names": [f"g{i}" for i in range(N)]}),
        "DescribeProducers": (ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "nope", "partition_indexes": list(range(N))}]}),
        "CreateTopics": (ApiKey.CREATE_TOPICS, 5, {"timeout_ms": 1000, "validate_only": True, "topics": [
            {"name": f"c-{i}", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for i in range(N // 10)]}),
        "AddPartitionsToTxn": (ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [
            {"transactional_id": f"t{i}", "producer_id": 1, "producer_epoch": 0, "verify_only": True,
             "topics": []} for i in range(N)]}),
        "WriteTxnMarkers": (ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [
            {"producer_id": 1, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
             "topics": [{"name": "nope", "partition_indexes": list(range(N))}]}]}),
        "FindCoordinator": (ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [
            f"t{i}" for i in range(N)]}),
        "DescribeTransactions": (ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [
            f"t{i}" for i in range(N)]}),
        "DeleteTopics": (ApiKey.DELETE_TOPICS, 4, {"topic_names": [f"d-{i}" for i in range(N)], "timeout_ms": 1000}),
        "CreatePartitions": (ApiKey.CREATE_PARTITIONS, 1, {"timeout_ms": 1000, "validate_only": False, "topics": [
            {"name": f"p-{i}", "count": 2, "assignments": None} for i in range(N)]}),
        "OffsetCommit": (ApiKey.OFFSET_COMMIT, 6, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": "nope", "partitions": [
                {"partition_index": i, "committed_offset": 0, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for i in range(N)]}]}),
    }


@pytest.mark.parametrize("api", list(_big_bodies()))
def test_request_naming_100k_partitions_does_not_stall_the_broker(broker, api):
    """Work a client sets the size of runs in slices: other clients are served meanwhile
    (decoding and encoding on the codec thread, the handlers' loops yielding). Before, one
    such request held the broker's event loop for all of its 1-3 s: every other client,
    replication and the ZooKeeper session's work waited behind it. The answer is whole."""
    key, version, body = _big_bodies()[api]
    port = broker.brokers[1].port
    with _probed(port):  # served all along
        t0 = time.monotonic()
        resp = wire.call(HOST, port, key, version, body, timeout=120)
        took = time.monotonic() - t0
    entries = {
        "Fetch": lambda r: [p["error_code"] for t in r["responses"] for p in t["partitions"]],
        "ListOffsets": lambda r: [p["error_code"] for t in r["topics"] for p in t["partitions"]],
        "Metadata": lambda r: [t["error_code"] for t in r["topics"]],
        "Produce": lambda r: [p["error_code"] for t in r["responses"] for p in t["partition_responses"]],
        "OffsetForLeaderEpoch": lambda r: [p["error_code"] for t in r["topics"] for p in t["partitions"]],
        "DeleteRecords": lambda r: [p["error_code"] for t in r["topics"] for p in t["partitions"]],
        "OffsetFetch": lambda r: [p["committed_offset"] for t in r["topics"] for p in t["partitions"]],
        "DescribeGroups": lambda r: [g["group_state"] for g in r["groups"]],
        "OffsetCommit": lambda r: [p["error_code"] for t in r["topics"] for p in t["partitions"]],
        "DeleteGroups": lambda r: [g["error_code"] for g in r["results"]],
        "DescribeProducers": lambda r: [p["error_code"] for t in r["topics"] for p in t["partitions"]],
        "CreateTopics": lambda r: [t["error_code"] for t in r["topics"]],
        "AddPartitionsToTxn": lambda r: [t["transactional_id"] for t in r["results_by_transaction"]],
        "WriteTxnMarkers": lambda r: [p["error_code"] for m in r["markers"] for t in m["topics"]
                                      for p in t["partitions"]],
        "FindCoordinator": lambda r: [c["key"] for c in r["coordinators"]],
        "DescribeTransactions": lambda r: [t["transactional_id"] for t in r["transaction_states"]],
        "DeleteTopics": lambda r: [t["error_code"] for t in r["responses"]],
        "CreatePartitions": lambda r: [t["error_code"] for t in r["results"]],
    }[api](resp)
    # within a client's default request.timeout.ms (30 s); DeleteTopics and CreatePartitions
    # looked each name up in ZooKeeper, one by one: 70-80 s
    assert took < 30, (api, took)
    if api in ("AddPartitionsToTxn", "FindCoordinator", "DescribeTransactions"):  # each id answered, in order
        assert entries == [f"t{i}" for i in range(N)]

    expected = {"OffsetFetch": -1, "DescribeGroups": "Dead", "DeleteGroups": ErrorCode.GROUP_ID_NOT_FOUND,
                "CreateTopics": ErrorCode.NONE}.get(api, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if api in ("AddPartitionsToTxn", "FindCoordinator", "DescribeTransactions"):
        expected = entries[0]  # checked above
    if api in ("OffsetCommit", "DeleteGroups"):  # or the coordinator's error: no __consumer_offsets yet
        assert len(set(entries)) == 1 and set(entries) <= {
            expected, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}, set(entries)
        expected = entries[0]
    assert len(entries) == (N // 10 if api == "CreateTopics" else N), (api, len(entries))
    if api not in ("AddPartitionsToTxn", "FindCoordinator", "DescribeTransactions"):
        assert set(entries) == {expected}, (api, set(entries))
    assert_unharmed(broker)


def test_large_fetch_answers_each_partition_once_with_its_records(broker):
    """The paced path of a Fetch of many partitions serves the hosted ones as any Fetch
    (records, HW), the others their error, each partition once as Kafka's fetch map."""
    port = broker.brokers[1].port
    parts = [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
              "partition_max_bytes": 1 << 20}] * 2
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "nope", "partitions": [
                {**parts[0], "partition": i} for i in range(1500)]}, {"topic": TOPIC, "partitions": parts}]}
    resp = wire.call(HOST, port, ApiKey.FETCH, 11, body, timeout=30)
    [nope, keep] = resp["responses"]
    assert (nope["topic"], len(nope["partitions"])) == ("nope", 1500)
    assert {p["error_code"] for p in nope["partitions"]} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    [p0] = keep["partitions"]
    assert (p0["error_code"], p0["high_watermark"]) == (0, 3)
    assert b"before-2" in bytes(p0["records"])


def _commit_body(group: str, topic: str, offsets: list[tuple[int, int]], generation: int = -1) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": ""}
                for p, o in offsets]}]}


def test_commit_and_offset_delete_naming_100k_known_partitions_are_paced(broker):
    """An OffsetCommit of a known topic's partitions, named 100,000 times over, is read,
    checked and turned into records in slices (before, all of it on the loop: 0.2-0.3 s
    here); it is written whole, the last offset named for each partition winning, and a
    small commit pipelined behind it on the same connection is written after it, never
    overtaking it while its slices let other tasks run. An OffsetDelete naming them as
    often is sliced too and writes one tombstone per committed offset."""
    parts, port = 200, broker.brokers[1].port
    broker.create_topic("wide", parts, 1)
    wait_until(lambda: wire.call(HOST, port, ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
               ["error_code"] == 0 and wire.call(HOST, port, ApiKey.OFFSET_COMMIT, 6, _commit_body(
                   "g", "wide", [(0, 0)]))["topics"][0]["partitions"][0]["error_code"] == 0,
               30, "the group's coordinator ready")
    frames = [encode_request(ApiKey.OFFSET_COMMIT, 6, cid, "hostile", body) for cid, body in (
        (1, _commit_body("g", "wide", [(i % parts, i) for i in range(N)])),
        (2, _commit_body("g", "wide", [(0, 7)])))]
    with _probed(port), socket.create_connection((HOST, port), timeout=120) as s:
        s.sendall(b"".join(frames))  # pipelined, as a client's in-flight requests
        with s.makefile("rb") as f:
            answers = [decode_response(ApiKey.OFFSET_COMMIT, 6, memoryview(_read_frame(f)))[1] for _ in frames]
    codes = [p["error_code"] for a in answers for t in a["topics"] for p in t["partitions"]]
    assert set(codes) == {0} and len(codes) == parts + 1, (set(codes), len(codes))

    def committed() -> dict[int, int]:
        fetched = wire.call(HOST, port, ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": [
            {"name": "wide", "partition_indexes": list(range(parts))}]})
        return {p["partition_index"]: p["committed_offset"] for p in fetched["topics"][0]["partitions"]}

    assert committed() == {0: 7, **{p: N - parts + p for p in range(1, parts)}}
    offsets_end = sum(log_end_offset(port, "__consumer_offsets", p) for p in range(50))

    with _probed(port):
        resp = wire.call(HOST, port, ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
            {"name": "wide", "partitions": [{"partition_index": i % parts} for i in range(N)]},
            {"name": TOPIC, "partitions": [{"partition_index": 0}]}]}, timeout=120)
    assert resp["error_code"] == 0
    codes = [p["error_code"] for t in resp["topics"] for p in t["partitions"]]
    assert set(codes) == {0} and len(codes) == N + 1, (set(codes), len(codes))
    assert committed() == dict.fromkeys(range(parts), -1)
    # one tombstone per committed offset; none for the partition without one (Kafka's the same)
    assert sum(log_end_offset(port, "__consumer_offsets", p) for p in range(50)) == offsets_end + parts
    assert_unharmed(broker)


def _read_frame(f) -> bytes:
    size = struct.unpack(">i", f.read(4))[0]
    frame = f.read(size)
    assert len(frame) == size, "connection closed by the broker"
    return frame


def test_requests_of_many_entries_are_bounded_in_memory(broker):
    """A request's entries cost ~1 KiB each once decoded and handled, against 4 bytes on the
    wire for a partition index: one OffsetFetch of 4M partitions (15 MiB) peaked at 3 GiB,
    and concurrent ones added up. Past kafkarepl.max.request.entries (1M) the connection is
    closed before anything is decoded; under it, decoded requests are charged to the
    request memory pool, so concurrent large ones are handled one after another."""
    b = broker.brokers[1]
    pid, port = b.proc.pid, b.port

    def offset_fetch(n: int) -> bytes:
        return encode_request(ApiKey.OFFSET_FETCH, 5, 1, "hostile", {"group_id": "g", "require_stable": False,
                              "topics": [{"name": "nope", "partition_indexes": list(range(1000, 1000 + n))}]})

    base = rss(pid)
    with socket.create_connection((HOST, port), timeout=60) as s:
        s.sendall(offset_fetch(1_200_000))
        assert s.recv(4) == b"", "a request over the limit is not answered: its connection closes"
    assert rss(pid) - base < 100 << 20
    assert "kafkarepl.max.request.entries" in broker.tail(1)

    n = 150_000
    frame = offset_fetch(n)
    peak, done = [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(pid))
            time.sleep(0.005)

    def fetch(answers: list[int]) -> None:
        with socket.create_connection((HOST, port), timeout=120) as s, s.makefile("rb") as f:
            s.sendall(frame)
            answers.append(len(decode_response(ApiKey.OFFSET_FETCH, 5, memoryview(_read_frame(f)))[1]
                               ["topics"][0]["partitions"]))

    watcher = threading.Thread(target=watch)
    watcher.start()
    answers: list[int] = []
    clients = [threading.Thread(target=fetch, args=(answers,)) for _ in range(8)]
    try:
        for t in clients:
            t.start()
        for t in clients:
            t.join()
    finally:
        done.set()
        watcher.join()
    assert answers == [n] * 8
    one = n * 1024  # what one such request is charged: about what it takes
    # here 1.0-1.1 of it (one at a time); before the charge, 2.7 (several at once)
    assert peak[0] - base < 1.8 * one, (peak[0] - base) / one
    assert_unharmed(broker)
