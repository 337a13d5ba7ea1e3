"""Every declared API, every version, both directions: encode -> decode -> same body,
and re-encoding the decoded body gives the same bytes."""

from __future__ import annotations

import random
import uuid

import pytest

from kafkarepl.protocol import (
    API,
    ApiKey,
    FileRange,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkarepl.protocol.samples import body_mismatch, sample_body
from kafkarepl.protocol.schema import in_range

CASES = [(spec.key, v) for spec in API.values()
         for v in range(spec.min_version, spec.max_version + 1)]


@pytest.mark.parametrize("api_key,version", CASES)
def test_request_roundtrip(api_key: ApiKey, version: int) -> None:
    spec = API[api_key]
    flexible = spec.is_flexible(version)
    rng = random.Random(f"req-{api_key}-{version}")
    for i in range(8):
        body = sample_body(spec.request, version, flexible, rng)
        client_id = None if i == 1 else f"client-{i}"
        wire = encode_request(api_key, version, 1000 + i, client_id, body)
        assert int.from_bytes(wire[:4], "big") == len(wire) - 4
        req = decode_request(memoryview(wire)[4:])
        assert (req.api_key, req.api_version, req.correlation_id) == (api_key, version, 1000 + i)
        if api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
            assert req.client_id is None  # request header v0 has no client id
        else:
            assert req.client_id == client_id
        assert body_mismatch(spec.request, body, req.body) is None
        assert encode_request(api_key, version, 1000 + i, client_id, req.body) == wire


@pytest.mark.parametrize("api_key,version", CASES)
def test_response_roundtrip(api_key: ApiKey, version: int) -> None:
    spec = API[api_key]
    flexible = spec.is_flexible(version)
    rng = random.Random(f"resp-{api_key}-{version}")
    for i in range(8):
        body = sample_body(spec.response, version, flexible, rng)
        if api_key == ApiKey.API_VERSIONS:
            body["error_code"] = 0  # an error switches the body to v0 (tested separately)
        parts = encode_response(api_key, version, 7 + i, body)
        assert len(parts) == 1 and isinstance(parts[0], bytes)
        wire = parts[0]
        assert int.from_bytes(wire[:4], "big") == len(wire) - 4
        cid, got = decode_response(api_key, version, memoryview(wire)[4:])
        assert cid == 7 + i
        assert body_mismatch(spec.response, body, got) is None
        assert encode_response(api_key, version, 7 + i, got) == parts


def test_every_requested_range_is_declared() -> None:
    wanted = {
        ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12), ApiKey.PRODUCE: (3, 9),
        ApiKey.FETCH: (4, 12), ApiKey.LIST_OFFSETS: (1, 7), ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
        ApiKey.CREATE_TOPICS: (0, 7), ApiKey.DELETE_TOPICS: (0, 6),
        ApiKey.CREATE_PARTITIONS: (0, 3), ApiKey.DESCRIBE_CONFIGS: (0, 4),
        ApiKey.ALTER_CONFIGS: (0, 2), ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.INIT_PRODUCER_ID: (0, 4), ApiKey.DESCRIBE_CLUSTER: (0, 1),
        ApiKey.ELECT_LEADERS: (0, 2), ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0), ApiKey.FIND_COORDINATOR: (0, 4),
        ApiKey.LEADER_AND_ISR: (0, 6), ApiKey.STOP_REPLICA: (0, 3),
        ApiKey.UPDATE_METADATA: (0, 7), ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
        ApiKey.ALTER_PARTITION: (0, 3), ApiKey.OFFSET_COMMIT: (0, 9), ApiKey.OFFSET_FETCH: (0, 9),
        ApiKey.JOIN_GROUP: (0, 7), ApiKey.HEARTBEAT: (0, 4), ApiKey.LEAVE_GROUP: (0, 4),
        ApiKey.SYNC_GROUP: (0, 5), ApiKey.DESCRIBE_GROUPS: (0, 5), ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DESCRIBE_ACLS: (1, 3), ApiKey.CREATE_ACLS: (1, 3), ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.DELETE_GROUPS: (0, 2), ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.DELETE_RECORDS: (0, 2), ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2), ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0), ApiKey.WRITE_TXN_MARKERS: (0, 1),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4), ApiKey.ADD_OFFSETS_TO_TXN: (0, 3), ApiKey.END_TXN: (0, 3),
        ApiKey.TXN_OFFSET_COMMIT: (0, 3), ApiKey.DESCRIBE_TRANSACTIONS: (0, 0), ApiKey.LIST_TRANSACTIONS: (0, 1),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1), ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
        ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1), ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
        ApiKey.CREATE_DELEGATION_TOKEN: (1, 3), ApiKey.RENEW_DELEGATION_TOKEN: (1, 2),
        ApiKey.EXPIRE_DELEGATION_TOKEN: (1, 2), ApiKey.DESCRIBE_DELEGATION_TOKEN: (1, 3),
    }
    assert {k: (API[k].min_version, API[k].max_version) for k in API} == wanted


def test_missing_fields_take_defaults_and_absent_fields_are_filled() -> None:
    wire = encode_request(ApiKey.FETCH, 4, 1, "c", {"topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5}]}]})
    body = decode_request(memoryview(wire)[4:]).body
    assert body["max_bytes"] == 0x7FFFFFFF and body["replica_id"] == -1
    # fields of later versions are present with their defaults
    assert body["rack_id"] == "" and body["session_epoch"] == -1
    assert body["forgotten_topics_data"] == []
    part = body["topics"][0]["partitions"][0]
    assert part == {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 5,
                    "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 0}


def test_known_tagged_fields_are_sent_only_when_not_default() -> None:
    part = {"partition_index": 0, "records": b""}
    plain = b"".join(encode_response(ApiKey.FETCH, 12, 1, {"responses": [
        {"topic": "t", "partitions": [dict(part)]}]}))
    tagged = b"".join(encode_response(ApiKey.FETCH, 12, 1, {"responses": [
        {"topic": "t", "partitions": [dict(part, diverging_epoch={"epoch": 3, "end_offset": 9})]}]}))
    assert len(tagged) > len(plain)
    _, body = decode_response(ApiKey.FETCH, 12, memoryview(tagged)[4:])
    p = body["responses"][0]["partitions"][0]
    assert p["diverging_epoch"] == {"epoch": 3, "end_offset": 9}
    assert p["current_leader"] == {"leader_id": -1, "leader_epoch": -1}


def test_unknown_tagged_fields_are_skipped() -> None:
    wire = bytearray(encode_request(ApiKey.API_VERSIONS, 3, 4, "c", {
        "client_software_name": "x", "client_software_version": "1"}))
    assert wire[-1] == 0  # empty tagged section of the body
    wire[-1:] = bytes([2, 7, 3, 1, 2, 3, 90, 0])  # two unknown tags: 7 (3 bytes), 90 (0 bytes)
    wire[:4] = (len(wire) - 4).to_bytes(4, "big")
    req = decode_request(memoryview(wire)[4:])
    assert req.body == {"client_software_name": "x", "client_software_version": "1"}


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    wire = b"".join(encode_response(ApiKey.API_VERSIONS, 3, 0x01020304, {"api_keys": []}))
    # size, correlation id, then straight to the body: error_code int16 (no header tags)
    assert wire[4:8] == b"\x01\x02\x03\x04" and wire[8:10] == b"\x00\x00"
    wire = b"".join(encode_response(ApiKey.METADATA, 9, 0x01020304, {}))
    assert wire[8] == 0  # Metadata v9 response header v1: an empty tagged section


def test_request_header_v2_client_id_is_not_compact() -> None:
    wire = encode_request(ApiKey.METADATA, 9, 1, "abc", {})
    assert wire[12:17] == b"\x00\x03abc"


def test_file_range_is_its_own_part_and_bytes_are_coalesced() -> None:
    parts = encode_response(ApiKey.FETCH, 11, 5, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "records": FileRange(9, 100, 4096)},
        {"partition_index": 1, "records": b"abc"},
        {"partition_index": 2, "records": FileRange(9, 8192, 10)},
    ]}]})
    # v11: the records field is the last byte of the response, so it ends the list
    assert [type(p) for p in parts] == [bytes, FileRange, bytes, FileRange]
    assert parts[1] == FileRange(9, 100, 4096)
    size = sum(len(p) for p in parts) - 4
    assert int.from_bytes(parts[0][:4], "big") == size
    # the length prefix of a records field immediately precedes its FileRange
    assert parts[0][-4:] == (4096).to_bytes(4, "big")
    assert parts[2].endswith((10).to_bytes(4, "big"))
    flexible = encode_response(ApiKey.FETCH, 12, 5, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "records": FileRange(9, 100, 4096)}]}]})
    assert [type(p) for p in flexible] == [bytes, FileRange, bytes]
    assert flexible[2] == b"\x00\x00\x00"  # partition, topic and response tag sections


def test_uuid_accepts_bytes_and_decodes_to_uuid() -> None:
    tid = uuid.uuid4()
    wire = encode_request(ApiKey.METADATA, 10, 1, "c", {"topics": [
        {"topic_id": tid.bytes, "name": None}]})
    body = decode_request(memoryview(wire)[4:]).body
    assert body["topics"] == [{"topic_id": tid, "name": None}]


def test_tagged_fields_defaults_are_declared_with_kafka_names() -> None:
    fetch_req = {f.key: f for f in API[ApiKey.FETCH].request}
    assert fetch_req["cluster_id"].tag == 0 and in_range(12, fetch_req["cluster_id"].tagged)
    keys = {f.key for f in API[ApiKey.API_VERSIONS].response}
    assert {"api_keys", "throttle_time_ms", "zk_migration_ready"} <= keys
    topics = next(f for f in API[ApiKey.METADATA].response if f.key == "topics")
    meta = {f.key for f in topics.type.item.fields}
    assert {"topic_id", "is_internal", "partitions"} <= meta


def test_encode_errors_name_the_field() -> None:
    from kafkarepl.protocol.codec import EncodeError

    with pytest.raises(EncodeError, match="partition_index=None"):
        encode_response(ApiKey.FETCH, 11, 1, {"responses": [{"topic": "t", "partitions": [
            {"partition_index": None}]}]})
    with pytest.raises(EncodeError, match="error_code=40000"):
        encode_response(ApiKey.METADATA, 1, 1, {"topics": [{"name": "t", "error_code": 40000}]})
    with pytest.raises(EncodeError, match="Name is not nullable"):
        encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": [{"name": None}]})
    with pytest.raises(EncodeError, match="Topic: expected str"):
        encode_request(ApiKey.FETCH, 4, 1, "c", {"topics": [{"topic": b"raw"}]})


@pytest.mark.parametrize("name,key", [
    ("TopicData", "topic_data"), ("PartitionIndex", "partition_index"),
    ("ProducerId", "producer_id"), ("ClusterId", "cluster_id"), ("IsrNodes", "isr_nodes"),
    ("ApiKeys", "api_keys"), ("V0Host", "v0_host"), ("timeoutMs", "timeout_ms"),
    ("ZkMigrationReady", "zk_migration_ready"), ("HTTPServer", "http_server"),
])
def test_snake_case_keys(name: str, key: str) -> None:
    from kafkarepl.protocol.schema import snake_case

    assert snake_case(name) == key
