"""Protocol codec speed (run: pytest bench/test_bench_protocol.py --benchmark-enable).

  produce_*   decode of a Produce v9 request: 1 partition x 16 KiB (small, the common
              librdkafka case) and 10 partitions x 1 MiB (records must not be copied, so it
              should cost about the same as the small one)
  fetch_*     encode of a Fetch v11/v12 response, 10 partitions, records as FileRange
              (the sendfile path) and as bytes
  metadata    decode of a Metadata v9 request and encode of a 3-broker, 50-partition response
  kafka_python_* the same Produce decode / Fetch encode with kafka-python's codec, for scale
"""

from __future__ import annotations

import pytest

from kafkarepl.protocol import (
    ApiKey,
    FileRange,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

MIB = 1 << 20


def produce_frame(partitions: int, size: int) -> memoryview:
    body = {"acks": 1, "timeout_ms": 30000, "topic_data": [{"name": "bench", "partition_data": [
        {"index": i, "records": b"\x00" * size} for i in range(partitions)]}]}
    return memoryview(bytearray(encode_request(ApiKey.PRODUCE, 9, 1, "rdkafka", body)))[4:]


def fetch_body(records: object) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "bench", "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 10_000_000,
             "last_stable_offset": 10_000_000, "log_start_offset": 0,
             "aborted_transactions": None, "preferred_read_replica": -1,
             "records": records} for i in range(10)]}]}


@pytest.mark.parametrize("partitions,size", [(1, 16 << 10), (10, MIB)],
                         ids=["1x16KiB", "10x1MiB"])
def test_produce_request_decode(benchmark, partitions: int, size: int) -> None:
    frame = produce_frame(partitions, size)
    req = benchmark(decode_request, frame)
    assert len(req.body["topic_data"][0]["partition_data"]) == partitions


@pytest.mark.parametrize("budget", [None, 1000], ids=["no-budget", "budget"])
def test_small_request_decode_as_the_broker_does(benchmark, budget: int | None) -> None:
    """The broker decodes every frame under an entry budget (counting the entries it
    charges to the request memory pool): its cost against a decode without one."""
    frame = produce_frame(1, 16 << 10)
    req = benchmark(decode_request, frame, budget)
    assert req.entries == (2 if budget else 0)


def test_produce_request_encode_small(benchmark) -> None:
    body = {"acks": 1, "timeout_ms": 30000, "topic_data": [{"name": "bench", "partition_data": [
        {"index": 0, "records": memoryview(b"\x00" * (16 << 10))}]}]}
    wire = benchmark(encode_request, ApiKey.PRODUCE, 9, 1, "c", body)
    assert len(wire) > 16 << 10


@pytest.mark.parametrize("version", [11, 12])
def test_fetch_response_encode_file_ranges(benchmark, version: int) -> None:
    body = fetch_body(FileRange(5, 0, MIB))
    parts = benchmark(encode_response, ApiKey.FETCH, version, 1, body)
    assert sum(isinstance(p, FileRange) for p in parts) == 10


def test_fetch_response_encode_bytes(benchmark) -> None:
    body = fetch_body(b"\x01" * 4096)
    parts = benchmark(encode_response, ApiKey.FETCH, 12, 1, body)
    assert len(parts) == 1


def test_fetch_request_decode(benchmark) -> None:
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 50 * MIB,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": "bench", "partitions": [
                    {"partition": i, "fetch_offset": 1000 * i, "partition_max_bytes": MIB}
                    for i in range(10)]}], "rack_id": ""}
    frame = memoryview(encode_request(ApiKey.FETCH, 12, 1, "c", body))[4:]
    req = benchmark(decode_request, frame)
    assert len(req.body["topics"][0]["partitions"]) == 10


def test_fetch_response_decode(benchmark) -> None:
    wire = b"".join(encode_response(ApiKey.FETCH, 12, 1, fetch_body(b"\x01" * 4096)))
    _, body = benchmark(decode_response, ApiKey.FETCH, 12, memoryview(wire)[4:])
    assert len(body["responses"][0]["partitions"]) == 10


def test_metadata_response_encode(benchmark) -> None:
    body = {"brokers": [{"node_id": i, "host": "localhost", "port": 9092 + i, "rack": None}
                        for i in range(3)], "cluster_id": "c", "controller_id": 0,
            "topics": [{"name": "t", "error_code": 0, "partitions": [
                {"partition_index": p, "leader_id": p % 3, "leader_epoch": 1,
                 "replica_nodes": [0, 1, 2], "isr_nodes": [0, 1, 2], "offline_replicas": []}
                for p in range(50)]}]}
    parts = benchmark(encode_response, ApiKey.METADATA, 9, 1, body)
    assert len(parts) == 1


def test_kafka_python_produce_request_decode(benchmark) -> None:
    from kafka.protocol.producer import ProduceRequest

    frame = bytes(produce_frame(1, 16 << 10))
    req = benchmark(ProduceRequest.decode, frame, version=9, header=True)
    assert req.acks == 1


def test_kafka_python_fetch_response_encode(benchmark) -> None:
    from kafka.protocol.consumer import FetchResponse

    from tests.unit.test_protocol_kafka_python import to_kafka_python

    msg = to_kafka_python(FetchResponse, fetch_body(b"\x01" * 4096), 12)
    msg.with_header(correlation_id=1)
    wire = benchmark(msg.encode, header=True, framed=True)
    assert len(wire) > 40000
