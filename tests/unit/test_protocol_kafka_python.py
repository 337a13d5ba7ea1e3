"""Cross-check against an independent codec: kafka-python 3.x's protocol classes.

Requests: kafka-python encodes -> we decode (the broker's direction), and the reverse.
Responses: we encode -> kafka-python decodes (the client's direction), and the reverse.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import random
import uuid
from typing import Any

import kafka.protocol as kafka_protocol  # a test dependency: must fail loudly if missing
import pytest
from kafka.protocol.api_message import ApiMessage

from kafkarepl.protocol import (
    API,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkarepl.protocol.samples import body_mismatch, sample_body


def _kafka_python_classes() -> dict[int, dict[str, type]]:
    found: dict[int, dict[str, type]] = {}
    for mod_info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if mod_info.name.endswith(("generate_stubs", "parser")):
            continue
        mod = importlib.import_module(mod_info.name)
        for obj in vars(mod).values():
            if (inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and getattr(obj, "_json", None)):
                found.setdefault(obj.API_KEY, {})[obj.type] = obj
    return found


KP = _kafka_python_classes()
CASES = [(k, v) for k, spec in API.items() if k in KP
         for v in range(max(spec.min_version, KP[k]["request"].valid_versions[0]),
                        min(spec.max_version, KP[k]["request"].valid_versions[1]) + 1)]


def test_kafka_python_covers_the_client_facing_apis() -> None:
    covered = {k for k, _ in CASES}
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS,
            ApiKey.LIST_OFFSETS, ApiKey.CREATE_TOPICS, ApiKey.OFFSET_FOR_LEADER_EPOCH,
            ApiKey.INIT_PRODUCER_ID, ApiKey.DESCRIBE_CLUSTER} <= covered
    assert len(CASES) > 120


# kafka-python renames the authorized-operations bitfields (and shows them as sets)
ALIASES = {"topic_authorized_operations": "authorized_operations",
           "cluster_authorized_operations": "authorized_operations"}


def _kp_key(cls: type, key: str) -> str:
    return key if key in cls.fields else ALIASES[key]


def to_kafka_python(cls: type, body: dict, version: int | None = None) -> Any:
    kw = {}
    for key, value in body.items():
        field = cls.fields[_kp_key(cls, key)]
        if value is not None and field.is_struct():
            value = to_kafka_python(field.data_class, value)
        elif value is not None and field.is_struct_array():
            value = [to_kafka_python(field.data_class, v) for v in value]
        if key.endswith("authorized_operations"):  # kafka-python's form: a set of operation bits, or None
            value = None if value == -(1 << 31) else {b for b in range(32) if value >> b & 1}
        kw[field.name] = value
    return cls(version=version, **kw) if version is not None else cls(**kw)


def from_kafka_python(obj: Any, body: dict) -> dict:
    """kafka-python's decoded object, restricted to the keys we sent, as plain data."""
    out = {}
    for key, want in body.items():
        value = getattr(obj, _kp_key(type(obj), key))
        if isinstance(want, dict) and value is not None:
            value = from_kafka_python(value, want)
        elif isinstance(want, list) and want and isinstance(want[0], dict) and value is not None:
            value = [from_kafka_python(v, w) for v, w in zip(value, want, strict=True)]
        elif isinstance(value, memoryview | bytearray):
            value = bytes(value)
        elif isinstance(want, uuid.UUID) and isinstance(value, bytes):
            value = uuid.UUID(bytes=value)
        elif key.endswith("authorized_operations") and value is None:
            value = -(1 << 31)  # kafka-python's None: "authorized operations not requested"
        elif isinstance(value, set):
            bits = sum(1 << b for b in value)
            value = bits - (1 << 32) if bits >= 1 << 31 else bits
        out[key] = value
    return out


def _bodies(fields: tuple, version: int, flexible: bool, seed: str) -> list[dict]:
    rng = random.Random(seed)
    bodies = [sample_body(fields, version, flexible, rng) for _ in range(5)]
    if fields is API[ApiKey.API_VERSIONS].response:
        for b in bodies:  # an error switches the body to v0: tested on its own
            b["error_code"] = 0
    return bodies


@pytest.mark.parametrize("api_key,version", CASES)
def test_requests_from_kafka_python_decode(api_key: int, version: int) -> None:
    spec = API[api_key]
    flexible = spec.is_flexible(version)
    for i, body in enumerate(_bodies(spec.request, version, flexible, f"kpq{api_key}.{version}")):
        msg = to_kafka_python(KP[api_key]["request"], body, version)
        msg.with_header(correlation_id=i + 11, client_id="kp-client")
        wire = bytes(msg.encode(header=True, framed=True))
        assert wire == encode_request(api_key, version, i + 11, "kp-client", body)
        req = decode_request(memoryview(wire)[4:])
        assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (
            api_key, version, i + 11, "kp-client")
        assert body_mismatch(spec.request, body, req.body) is None


@pytest.mark.parametrize("api_key,version", CASES)
def test_responses_decode_in_kafka_python(api_key: int, version: int) -> None:
    spec = API[api_key]
    flexible = spec.is_flexible(version)
    resp_cls = KP[api_key]["response"]
    for i, body in enumerate(_bodies(spec.response, version, flexible, f"kps{api_key}.{version}")):
        wire = b"".join(encode_response(api_key, version, i + 3, body))
        decoded = resp_cls.decode(wire[4:], version=version, header=True)
        assert decoded.header.correlation_id == i + 3
        assert from_kafka_python(decoded, body) == body
        # and the reverse: kafka-python's encoding decodes to the same body here
        msg = to_kafka_python(resp_cls, body, version)
        msg.with_header(correlation_id=i + 3)
        kp_wire = bytes(msg.encode(header=True, framed=True))
        assert kp_wire == wire
        cid, got = decode_response(api_key, version, memoryview(kp_wire)[4:])
        assert cid == i + 3 and body_mismatch(spec.response, body, got) is None


def test_api_versions_error_response_is_v0_for_kafka_python() -> None:
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    wire = b"".join(encode_response(ApiKey.API_VERSIONS, 3, 9, body))
    assert wire == b"".join(encode_response(ApiKey.API_VERSIONS, 0, 9, body))
    decoded = KP[ApiKey.API_VERSIONS]["response"].decode(wire[4:], version=3, header=True)
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 3)]
    cid, got = decode_response(ApiKey.API_VERSIONS, 3, memoryview(wire)[4:])
    assert cid == 9 and got["error_code"] == 35 and got["api_keys"] == body["api_keys"]
