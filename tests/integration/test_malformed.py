"""Malformed input on raw sockets against a real broker process, and pipelining.

For every kind of bad input the broker answers with an error or closes THAT connection;
afterwards the process is alive, a new connection gets Metadata, and the records
written before are still readable. Pipelined requests are answered in request order."""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from kafkarepl import _core
from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey, decode_response, encode_request
from tests.batches import build_batch
from tests.fixtures.cluster import TestCluster
from tests.integration.test_recovery import fetch_records, log_end_offset, produce

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
REQUEST_MAX = 200_000
TOPIC = "keep"
CLOSED = "closed"


@pytest.fixture
def broker(cluster_factory) -> TestCluster:
    c = cluster_factory(1, socket_request_max_bytes=REQUEST_MAX)
    c.create_topic(TOPIC, 1, 1)
    port = c.brokers[1].port
    for i in range(3):
        assert produce(port, TOPIC, bytes(build_batch([f"before-{i}".encode()])))["error_code"] == 0
    return c


def written_before() -> list[tuple[int, bytes]]:
    return [(i, f"before-{i}".encode()) for i in range(3)]


def assert_unharmed(c: TestCluster) -> None:
    """The broker process lives, a fresh connection is served, nothing written is lost."""
    b = c.brokers[1]
    assert b.alive, f"broker died:\n{c.tail(1)}"
    md = c.metadata([TOPIC])
    assert md["topics"][0]["error_code"] == 0
    assert md["topics"][0]["partitions"][0]["leader_id"] == 1
    assert [(o, v) for o, _t, _k, v in fetch_records(b.port, TOPIC)] == written_before()
    assert log_end_offset(b.port, TOPIC) == 3


def connect(c: TestCluster) -> socket.socket:
    s = socket.create_connection((HOST, c.brokers[1].port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_frame(s: socket.socket) -> bytes | str:
    """One response frame (after the size prefix), or CLOSED when the broker hung up."""
    head = recv_exact(s, 4)
    if head is None:
        return CLOSED
    (size,) = struct.unpack(">i", head)
    body = recv_exact(s, size)
    return CLOSED if body is None else body


def raw_request(api_key: int, version: int, cid: int, body: bytes = b"", client_id: bytes = b"raw") -> bytes:
    """A request frame with a v1 header, for keys/versions our encoder refuses to write."""
    payload = struct.pack(">hhih", api_key, version, cid, len(client_id)) + client_id + body
    return struct.pack(">i", len(payload)) + payload


def error_or_closed(s: socket.socket, cid: int, api_key: int, version: int) -> None:
    """The broker either closed the connection or answered this correlation id with an
    error (Kafka closes the connection for most of these)."""
    got = read_frame(s)
    if got == CLOSED:
        return
    assert struct.unpack(">i", got[:4])[0] == cid, "response to a request we did not send"
    (code,) = struct.unpack(">h", got[4:6])
    assert code != 0, f"malformed {api_key} v{version} request answered with success"


# ---------------------------------------------------------------- bad input ----
def test_garbage_bytes(broker: TestCluster) -> None:
    with connect(broker) as s:
        s.sendall(b"\xde\xad\xbe\xef" * 64)  # size prefix negative
        assert read_frame(s) == CLOSED
    with connect(broker) as s:
        junk = os.urandom(300)
        s.sendall(struct.pack(">i", len(junk)) + junk)  # a plausible size, random header/body
        read_frame(s)  # an error answer or a close are both fine; a hang (socket timeout) is not
    with connect(broker) as s:
        # A valid header (Metadata v9) followed by garbage where the body should be: the
        # topics count is an endless varint.
        body = b"\xff" * 200
        s.sendall(struct.pack(">i", 8 + 2 + 1 + len(body)) + struct.pack(">hhih", 3, 9, 77, 1) + b"x\x00" + body)
        error_or_closed(s, 77, 3, 9)
    assert_unharmed(broker)


def test_truncated_frame_then_close(broker: TestCluster) -> None:
    good = encode_request(ApiKey.METADATA, 9, 5, "t", {"topics": None, "allow_auto_topic_creation": False,
                                                       "include_topic_authorized_operations": False})
    for cut in (2, 4, 7, len(good) - 1):
        s = connect(broker)
        s.sendall(good[:cut])
        s.close()
    # Half a frame, then a half-closed socket waiting for an answer that cannot come.
    with connect(broker) as s:
        s.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x09")
        s.shutdown(socket.SHUT_WR)
        assert read_frame(s) == CLOSED
    assert_unharmed(broker)


def test_size_over_socket_request_max_bytes(broker: TestCluster) -> None:
    with connect(broker) as s:
        s.sendall(struct.pack(">i", REQUEST_MAX + 1) + b"\x00\x00\x00\x07")
        assert read_frame(s) == CLOSED, "a frame over socket.request.max.bytes must close the connection"
    with connect(broker) as s:
        s.sendall(struct.pack(">i", 0x7FFFFFFF))
        assert read_frame(s) == CLOSED
    # A Produce that is well-formed but larger than the limit, actually sent in full.
    big = bytes(build_batch(1, value_size=REQUEST_MAX))
    with connect(broker) as s:
        req = encode_request(ApiKey.PRODUCE, 7, 9, "t", {
            "transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": big}]}]})
        try:
            s.sendall(req)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending: also correct
        else:
            assert read_frame(s) == CLOSED
    assert_unharmed(broker)


def test_unknown_api_key(broker: TestCluster) -> None:
    for key in (999, 32767, -1):
        with connect(broker) as s:
            s.sendall(raw_request(key, 0, 41))
            error_or_closed(s, 41, key, 0)
    assert_unharmed(broker)


def test_unsupported_version_of_a_normal_api(broker: TestCluster) -> None:
    with connect(broker) as s:
        s.sendall(raw_request(ApiKey.METADATA, 99, 42, b"\x00\x00\x00\x00"))
        error_or_closed(s, 42, ApiKey.METADATA, 99)
    with connect(broker) as s:
        s.sendall(raw_request(ApiKey.PRODUCE, 0, 43, b"\x00\x01\x00\x00\x00\x10\x00\x00\x00\x00"))
        error_or_closed(s, 43, ApiKey.PRODUCE, 0)  # Produce v0 is below our minimum
    assert_unharmed(broker)


def test_api_versions_v99_answers_35_with_ranges_in_v0(broker: TestCluster) -> None:
    with connect(broker) as s:
        # v99 request: header v2 (flexible), so an empty tagged-field section follows client_id.
        s.sendall(raw_request(ApiKey.API_VERSIONS, 99, 44, b"\x00" + b"\x05probe\x021\x00"))
        got = read_frame(s)
        assert got != CLOSED, "ApiVersions at an unknown version must be answered, not closed"
        cid, body = decode_response(ApiKey.API_VERSIONS, 0, got)
        assert cid == 44
        assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION == 35
        ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert ranges[ApiKey.API_VERSIONS][0] == 0
        assert ranges[ApiKey.PRODUCE][0] <= 7 <= ranges[ApiKey.PRODUCE][1]
        assert ranges[ApiKey.FETCH][0] <= 11 <= ranges[ApiKey.FETCH][1]
        assert ranges[ApiKey.METADATA][1] >= 4
        # The client retries on the same connection at a version listed: served.
        s.sendall(encode_request(ApiKey.API_VERSIONS, 3, 45, "probe",
                                 {"client_software_name": "probe", "client_software_version": "1"}))
        got = read_frame(s)
        assert got != CLOSED
        cid, body = decode_response(ApiKey.API_VERSIONS, 3, got)
        assert (cid, body["error_code"]) == (45, 0)
    assert_unharmed(broker)


def test_length_field_past_the_frame(broker: TestCluster) -> None:
    port = broker.brokers[1].port
    # client_id length says 500, the frame ends after 3 bytes of it.
    with connect(broker) as s:
        payload = struct.pack(">hhih", 3, 9, 50, 500) + b"abc"
        s.sendall(struct.pack(">i", len(payload)) + payload)
        error_or_closed(s, 50, 3, 9)
    # Produce whose records (bytes) length runs past the end of the frame.
    batch = bytes(build_batch([b"never"]))
    req = bytearray(encode_request(ApiKey.PRODUCE, 7, 51, "t", {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}))
    at = len(req) - len(batch) - 4
    assert struct.unpack_from(">i", req, at)[0] == len(batch)
    struct.pack_into(">i", req, at, len(batch) + 10_000)
    with connect(broker) as s:
        s.sendall(req)
        error_or_closed(s, 51, ApiKey.PRODUCE, 7)
    # A topic array count far beyond what the frame holds.
    with connect(broker) as s:
        payload = struct.pack(">hhih", 3, 4, 52, 1) + b"x" + struct.pack(">i", 1_000_000_000)
        s.sendall(struct.pack(">i", len(payload)) + payload)
        error_or_closed(s, 52, 3, 4)
    # A well-framed Produce whose record batch claims more bytes than the records field has.
    bad = bytearray(batch)
    struct.pack_into(">i", bad, 8, len(batch) + 1000)
    r = produce(port, TOPIC, bytes(bad))
    assert r["error_code"] in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), r
    assert_unharmed(broker)


def produce_v9(port: int, topic: str, records: bytes) -> dict:
    """One partition's answer to a Produce v9 (record_errors and error_message exist)."""
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    [t] = wire.call(HOST, port, ApiKey.PRODUCE, 9, body, timeout=15)["responses"]
    [p] = t["partition_responses"]
    return p


def flag_log_append_time(batch: bytearray) -> bytes:
    """A producer's batch claiming LogAppendTime (attributes bit 3), CRC redone."""
    out = bytearray(batch)
    struct.pack_into(">h", out, 21, struct.unpack_from(">h", out, 21)[0] | 0x08)
    struct.pack_into(">I", out, 17, _core.crc32c(out[21:]))
    return bytes(out)


def test_produce_batches_refused_as_kafka_refuses_them(broker: TestCluster) -> None:
    """Kafka answers INVALID_RECORD (no message) to a partition whose records hold more
    than one batch (KafkaApis' ProduceRequest.validateRecords; LogValidator's "Compressed
    outer record has more than one batch") or a batch whose baseOffset is not 0
    (analyzeAndValidateRecords); kafkarepl wrote them with error 0 before. A batch
    flagged LogAppendTime is refused with INVALID_TIMESTAMP in a LogAppendTime topic and
    stored as CreateTime in a CreateTime one (LogValidator.validateTimestamp)."""
    port = broker.brokers[1].port
    for codec in ("none", "gzip"):
        two = bytes(build_batch([b"x1", b"x2"], compression=codec) + build_batch([b"x3"], compression=codec))
        r = produce_v9(port, TOPIC, two)
        assert (r["error_code"], r["error_message"], r["base_offset"]) == (ErrorCode.INVALID_RECORD, None, -1), r
    moved = bytearray(build_batch([b"moved"]))
    struct.pack_into(">q", moved, 0, 5)
    r = produce_v9(port, TOPIC, bytes(moved))
    assert r["error_code"] == ErrorCode.INVALID_RECORD, r
    assert_unharmed(broker)

    broker.create_topic("lat", 1, 1, configs={"message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)
    flagged = flag_log_append_time(build_batch([b"a", b"b"], timestamp=[now - 5, now]))
    r = produce_v9(port, "lat", flagged)
    assert r["error_code"] == ErrorCode.INVALID_TIMESTAMP, r
    assert r["error_message"] == "One or more records have been rejected due to invalid timestamp"
    assert [e["batch_index"] for e in r["record_errors"]] == [0, 1]
    assert r["record_errors"][0]["batch_index_error_message"].endswith(
        "Producer should not set timestamp type to LogAppendTime.")
    assert log_end_offset(port, "lat") == 0

    broker.create_topic("ct", 1, 1)
    r = produce_v9(port, "ct", flagged)
    assert (r["error_code"], r["log_append_time_ms"]) == (0, -1), r
    # stored as CreateTime: the records read with their own timestamps, not the batch's max
    assert [(o, t, v) for o, t, _k, v in fetch_records(port, "ct")] == [(0, now - 5, b"a"), (1, now, b"b")]


# ---------------------------------------------------------------- pipelining ----
def test_pipelined_requests_answered_in_order(broker: TestCluster) -> None:
    port = broker.brokers[1].port
    md_body = {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
               "include_topic_authorized_operations": False}
    fetch_at_end = {"replica_id": -1, "max_wait_ms": 1500, "min_bytes": 1, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": "other", "partitions": [{
                        "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                    "forgotten_topics_data": [], "rack_id": ""}
    broker.create_topic("other", 1, 1)

    def produce_body(acks: int, value: bytes) -> dict:
        return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0,
                                                                   "records": bytes(build_batch([value]))}]}]}

    # (api, version, correlation id, body); the acks=0 produce gets no response.
    reqs = [
        (ApiKey.FETCH, 11, 100, fetch_at_end),  # parks up to 1.5 s: later answers must wait for it
        (ApiKey.API_VERSIONS, 3, 101, {"client_software_name": "p", "client_software_version": "1"}),
        (ApiKey.METADATA, 9, 102, md_body),
        (ApiKey.PRODUCE, 7, 103, produce_body(1, b"pipelined-1")),
        (ApiKey.PRODUCE, 7, 104, produce_body(0, b"pipelined-2")),
        (ApiKey.METADATA, 4, 105, md_body),
        (ApiKey.PRODUCE, 7, 106, produce_body(1, b"pipelined-3")),
    ]
    with connect(broker) as s:
        s.sendall(b"".join(encode_request(k, v, cid, "pipe", body) for k, v, cid, body in reqs))
        answered = [r for r in reqs if not (r[0] == ApiKey.PRODUCE and r[3]["acks"] == 0)]
        got = []
        for key, version, _cid, _body in answered:
            frame = read_frame(s)
            assert frame != CLOSED, f"connection closed after {len(got)} responses"
            got.append(decode_response(key, version, frame))
    assert [cid for cid, _ in got] == [r[2] for r in answered]
    fetch_resp, apiv, md1, p1, md2, p3 = (body for _cid, body in got)
    assert fetch_resp["responses"][0]["partitions"][0]["error_code"] == 0
    assert apiv["error_code"] == 0 and apiv["api_keys"]
    assert md1["topics"][0]["name"] == TOPIC and md2["topics"][0]["name"] == TOPIC
    r1 = p1["responses"][0]["partition_responses"][0]
    r3 = p3["responses"][0]["partition_responses"][0]
    assert (r1["error_code"], r1["base_offset"]) == (0, 3)
    assert (r3["error_code"], r3["base_offset"]) == (0, 5)  # the acks=0 one took offset 4
    values = [v for _o, _t, _k, v in fetch_records(port, TOPIC)]
    assert values[3:] == [b"pipelined-1", b"pipelined-2", b"pipelined-3"]
