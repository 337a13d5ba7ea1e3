"""Structure-aware fuzzing of the request decoders and the response encoder (issue 10):
bodies generated from each API's own schema (random but well-typed values at every
version), encoded, then attacked where it hurts: lengths and counts set to extreme
values, cut at field boundaries. Decoding must give the body back or raise one of our
KafkaErrors; encoding must give bytes or an EncodeError; never anything else."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkarepl.errors import InvalidRequestError, UnsupportedVersionError
from kafkarepl.protocol import API, EncodeError, decode_request, encode_request, encode_response
from kafkarepl.protocol.codec import MAX_STRING_BYTES
from kafkarepl.protocol.samples import body_mismatch, sample_body
from kafkarepl.protocol.schema import STRING, Array, Struct

CASES = [(spec.key, v) for spec in API.values() for v in range(spec.min_version, spec.max_version + 1)]
EXTREMES = [b"\x7f\xff", b"\xff\xff", b"\x80\x00", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe",
            b"\x00\x00\x00\x00", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x01"]
OUR_ERRORS = (InvalidRequestError, UnsupportedVersionError)


def request_frame(key: int, version: int, seed: int) -> tuple[bytes, dict]:
    spec = API[key]
    body = sample_body(spec.request, version, spec.is_flexible(version), random.Random(seed))
    return encode_request(key, version, 12345, "fuzz", body)[4:], body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.integers(0, 2**32))
def test_generated_requests_round_trip(case, seed):
    key, version = case
    frame, body = request_frame(key, version, seed)
    req = decode_request(frame)
    assert (req.api_key, req.api_version, req.correlation_id) == (key, version, 12345)
    assert body_mismatch(API[key].request, body, req.body) is None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.integers(0, 2**32), st.data())
def test_generated_requests_with_hostile_lengths(case, seed, data):
    key, version = case
    frame = bytearray(request_frame(key, version, seed)[0])
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(8, max(8, len(frame) - 1)))  # past api key/version/cid
        patch = data.draw(st.sampled_from(EXTREMES))
        frame[pos : pos + len(patch)] = patch
    if data.draw(st.booleans()):
        del frame[data.draw(st.integers(8, len(frame))):]
    try:
        decode_request(bytes(frame))
    except OUR_ERRORS:
        pass


def _long_strings(fields, out: dict, n: int) -> None:
    for f in fields:
        if f.type == STRING and f.key in out:
            out[f.key] = "é" * n
        elif isinstance(f.type, Struct) and isinstance(out.get(f.key), dict):
            _long_strings(f.type.fields, out[f.key], n)
        elif isinstance(f.type, Array) and isinstance(f.type.item, Struct):
            for item in out.get(f.key) or []:
                _long_strings(f.type.item.fields, item, n)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.integers(0, 2**32),
       st.sampled_from([MAX_STRING_BYTES // 2, MAX_STRING_BYTES // 2 + 1, 40_000]))
def test_responses_with_long_strings_encode_or_refuse_cleanly(case, seed, n):
    """Item 7: a string past the int16 length was a struct.error (an internal error)."""
    key, version = case
    spec = API[key]
    body = sample_body(spec.response, version, spec.is_flexible(version), random.Random(seed))
    _long_strings(spec.response, body, n)
    try:
        out = b"".join(c for c in encode_response(key, version, 1, body) if isinstance(c, bytes))
    except EncodeError as exc:
        assert "STRING limit" in str(exc) or "expected" in str(exc)
        return
    assert len(out) > 4


def test_long_error_message_is_truncated_not_fatal():
    from kafkarepl.protocol import decode_response

    body = {"throttle_time_ms": 0, "error_code": 15, "error_message": "x" * 40_000,
            "node_id": -1, "host": "", "port": -1}
    raw = encode_response(10, 1, 9, body)[0]  # FindCoordinator v1: non-flexible strings
    back = decode_response(10, 1, raw[4:])[1]
    assert back["error_code"] == 15 and len(back["error_message"]) == MAX_STRING_BYTES


def test_long_non_message_string_is_an_encode_error():
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": 1,
            "host": "h" * 40_000, "port": 9092}
    try:
        encode_response(10, 1, 9, body)
    except EncodeError as exc:
        assert "Host" in str(exc)
    else:
        raise AssertionError("a 40,000-byte host must not be encoded")
