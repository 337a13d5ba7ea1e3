"""Hostile input into decode_request: only our KafkaErrors, never a crash, hang or a big
allocation; and records stay zero-copy views of the frame."""

from __future__ import annotations

import random
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkarepl.errors import ErrorCode, InvalidRequestError, UnsupportedVersionError
from kafkarepl.protocol import (
    API,
    ApiKey,
    MalformedResponseError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkarepl.protocol.samples import sample_body

OUR_ERRORS = (InvalidRequestError, UnsupportedVersionError)


def valid_frames() -> list[bytes]:
    rng = random.Random(42)
    frames = []
    for spec in API.values():
        for v in (spec.min_version, spec.max_version):
            body = sample_body(spec.request, v, spec.is_flexible(v), rng)
            frames.append(encode_request(spec.key, v, 77, "fuzz", body)[4:])
    return frames


FRAMES = valid_frames()


def decode_or_our_error(data: bytes) -> None:
    try:
        decode_request(memoryview(data))
    except OUR_ERRORS:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    decode_or_our_error(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FRAMES), st.data())
def test_mutated_valid_frames(frame: bytes, data: st.DataObject) -> None:
    buf = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(8, max(8, len(buf) - 1)))
        if pos < len(buf):
            buf[pos] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, buf[pos] ^ 1]))
    decode_or_our_error(bytes(buf))


def test_every_truncation_is_invalid_request_with_correlation_id() -> None:
    for frame in FRAMES:
        step = max(1, len(frame) // 60)
        for n in range(0, len(frame), step):
            with pytest.raises(OUR_ERRORS) as info:
                decode_request(memoryview(frame[:n]))
            assert isinstance(info.value, InvalidRequestError)
            assert info.value.correlation_id == (77 if n >= 8 else None)


def test_trailing_garbage_is_ignored() -> None:
    frame = encode_request(ApiKey.METADATA, 1, 5, "c", {"topics": None})[4:]
    assert decode_request(memoryview(frame + b"junk")).body["topics"] is None


def _metadata_v1(topic_count: int, name_len: int) -> bytes:
    header = struct.pack(">hhih", 3, 1, 99, 1) + b"c"
    return header + struct.pack(">ih", topic_count, name_len) + b"abc"


@pytest.mark.parametrize("count,name_len,why", [
    (0x7FFFFFFF, 3, "elements cannot fit"),
    (-2, 3, "invalid array length"),
    (1, 4000, "past the end"),
    (1, -1, "invalid length"),      # Name is not nullable in Metadata v1
    (1, -5, "invalid length"),
])
def test_lying_lengths(count: int, name_len: int, why: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRequestError, match=why) as info:
            decode_request(memoryview(_metadata_v1(count, name_len)))
        assert tracemalloc.get_traced_memory()[1] < 1 << 20  # no allocation from the count
    finally:
        tracemalloc.stop()
    assert info.value.correlation_id == 99
    assert info.value.code == 42


def test_huge_compact_array_count_in_flexible_version() -> None:
    header = struct.pack(">hhih", 3, 12, 5, 1) + b"c" + b"\x00"
    body = b"\xff\xff\xff\xff\x07"  # uvarint 2^31-1
    with pytest.raises(InvalidRequestError, match="cannot fit"):
        decode_request(memoryview(header + body))
    with pytest.raises(InvalidRequestError):  # a varint that never ends
        decode_request(memoryview(header + b"\xff" * 20))


def test_unknown_key_and_unsupported_version_carry_the_header() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(memoryview(struct.pack(">hhi", 1000, 0, 31)))
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (1000, 0, 31)
    for key, version in [(ApiKey.API_VERSIONS, 4), (ApiKey.PRODUCE, 2), (ApiKey.FETCH, 13),
                         (ApiKey.METADATA, -1)]:
        with pytest.raises(UnsupportedVersionError) as info:
            decode_request(memoryview(struct.pack(">hhi", key, version, 8) + b"\x00" * 10))
        assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (
            key, version, 8)
        assert info.value.code == 35


def test_invalid_utf8_is_invalid_request() -> None:
    frame = bytearray(encode_request(ApiKey.METADATA, 1, 5, "c", {"topics": [{"name": "ab"}]})[4:])
    frame[-2:] = b"\xff\xfe"
    with pytest.raises(InvalidRequestError, match="utf-8"):
        decode_request(memoryview(frame))


def _produce_body(n_partitions: int, size: int) -> dict:
    return {"acks": -1, "timeout_ms": 1000, "topic_data": [{"name": "big", "partition_data": [
        {"index": i, "records": bytes([i]) * size} for i in range(n_partitions)]}]}


@pytest.mark.parametrize("version", [3, 9])
def test_produce_records_are_views_into_the_frame(version: int) -> None:
    wire = bytearray(encode_request(ApiKey.PRODUCE, version, 1, "p", _produce_body(10, 1 << 20)))
    frame = memoryview(wire)[4:]
    tracemalloc.start()
    try:
        req = decode_request(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024  # 10 MiB of records decoded without copying them
    parts = req.body["topic_data"][0]["partition_data"]
    for i, p in enumerate(parts):
        assert isinstance(p["records"], memoryview) and p["records"].obj is wire
        assert len(p["records"]) == 1 << 20 and p["records"][0] == i
    parts[3]["records"][0] = 0xAB  # writable: storage assigns offsets in place
    assert wire.count(0xAB) == 1


def test_encode_copies_records_once() -> None:
    body = _produce_body(10, 1 << 20)
    for p in body["topic_data"][0]["partition_data"]:
        p["records"] = memoryview(p["records"])
    tracemalloc.start()
    try:
        wire = encode_request(ApiKey.PRODUCE, 9, 1, "p", body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(wire) > 10 << 20
    assert peak < len(wire) + (512 << 10)  # only the output buffer itself


RESPONSE_CASES = [(spec.key, v) for spec in API.values() for v in (spec.min_version,
                                                                    spec.max_version)]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(RESPONSE_CASES), st.binary(max_size=120))
def test_garbage_responses_raise_malformed_response(case: tuple[int, int], data: bytes) -> None:
    api_key, version = case
    try:
        decode_response(api_key, version, memoryview(data))
    except MalformedResponseError as e:
        assert e.code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_truncated_responses_raise_malformed_response() -> None:
    rng = random.Random(7)
    for api_key, version in RESPONSE_CASES:
        spec = API[api_key]
        body = sample_body(spec.response, version, spec.is_flexible(version), rng)
        if api_key == ApiKey.API_VERSIONS:
            body["error_code"] = 0
        wire = b"".join(encode_response(api_key, version, 1, body))[4:]
        for n in range(0, len(wire), max(1, len(wire) // 20)):
            with pytest.raises(MalformedResponseError):
                decode_response(api_key, version, memoryview(wire[:n]))


def test_an_entry_budget_stops_a_decode_and_is_cleared_after_it() -> None:
    from kafkarepl.protocol.codec import EntryBudgetExceeded

    def produce(partitions: int) -> bytes:
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": i, "records": b"x"} for i in range(partitions)]}]}
        return encode_request(ApiKey.PRODUCE, 7, 1, "c", body)[4:]

    assert len(decode_request(produce(998), 1000).body["topic_data"][0]["partition_data"]) == 998
    with pytest.raises(EntryBudgetExceeded):
        decode_request(produce(1000), 1000)  # 1 topic + 1,000 partitions
    # The budget ends with its decode: the next one, without a budget, reads everything.
    assert len(decode_request(produce(5000)).body["topic_data"][0]["partition_data"]) == 5000
    # Items of fixed-size arrays count too: each may become an entry of the answer.
    def offset_fetch(partitions: int) -> bytes:
        return encode_request(ApiKey.OFFSET_FETCH, 5, 1, "c", {"group_id": "g", "topics": [
            {"name": "t", "partition_indexes": list(range(partitions))}]})[4:]

    assert decode_request(offset_fetch(999), 1000).entries == 1000  # 1 topic + 999 partitions
    with pytest.raises(EntryBudgetExceeded):
        decode_request(offset_fetch(1000), 1000)
    assert decode_request(offset_fetch(999)).entries == 0  # counted only under a budget
    # The controller's replica lists stay ints: a sixteenth each (one C unpack).
    states = [{"topic_name": "t", "partition_index": i, "controller_epoch": 1, "leader": 1, "leader_epoch": 0,
               "isr": list(range(32)), "zk_version": 0, "replicas": list(range(32)), "offline_replicas": []}
              for i in range(100)]
    update = encode_request(ApiKey.UPDATE_METADATA, 5, 1, "c", {
        "controller_id": 1, "controller_epoch": 1, "broker_epoch": 1, "live_brokers": [],
        "topic_states": [{"topic_name": "t", "partition_states": states}]})[4:]
    # 1 topic + 100 partitions + their 6,400 replica and ISR ints (400)
    assert decode_request(update, 1000).entries == 501
