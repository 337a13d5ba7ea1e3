"""Requests and responses on the wire: headers + bodies, for every declared API/version.

Request header v0 (api_key, api_version, correlation_id) is used only by
ControlledShutdown v0; v1 adds client_id (nullable int16-length string, never compact);
v2 (flexible versions) adds a tagged-field section. Response header v0 is the
correlation_id; v1 (flexible versions) adds tagged fields, except ApiVersions whose
response always uses header v0 so that any client can read the supported ranges.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from ..errors import InvalidRequestError, KafkaError, UnsupportedVersionError
from .codec import (
    EMPTY_TAGS,
    DecodeError,
    FileRange,
    compile_decoder,
    compile_encoder,
    entry_budget_left,
    read_uvarint,
)
from .codec import entry_budget as set_entry_budget
from .messages import APIS
from .schema import ApiKey, ApiSpec

API: dict[int, ApiSpec] = {spec.key: spec for spec in APIS}

_HEADER_FIXED = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_DECODE_FAILURES = (DecodeError, struct.error, IndexError, ValueError)


class Request(NamedTuple):
    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict
    header_size: int  # bytes of the frame taken by the request header
    size: int = 0  # bytes of the whole frame (client quotas count them)
    entries: int = 0  # array entries of the body, when decoded under an entry budget


class MalformedResponseError(KafkaError):
    """A broker's response could not be decoded (client side)."""


def invalid_request(message: str, correlation_id: int | None = None) -> InvalidRequestError:
    err = InvalidRequestError(message)
    err.correlation_id = correlation_id
    return err


def unsupported_version(api_key: int, api_version: int,
                        correlation_id: int | None) -> UnsupportedVersionError:
    spec = API.get(api_key)
    what = (f"{spec.name} v{api_version} (supported {spec.min_version}-{spec.max_version})"
            if spec else f"unknown API key {api_key}")
    err = UnsupportedVersionError(f"unsupported request: {what}")
    err.api_key = api_key
    err.api_version = api_version
    err.correlation_id = correlation_id
    return err


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if API[api_key].is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if API[api_key].is_flexible(api_version) else 0


def supported_api_versions() -> list[dict[str, int]]:
    """The ApiVersions response's api_keys entries for every declared API."""
    return [{"api_key": int(s.key), "min_version": s.min_version, "max_version": s.max_version}
            for s in sorted(API.values(), key=lambda s: s.key)]


_body_decoders: dict[tuple[int, int, bool], Any] = {}
_body_encoders: dict[tuple[int, int, bool], Any] = {}


def body_decoder(api_key: int, api_version: int, request: bool) -> Any:
    """The compiled decoder of one (API, version, direction); built on first use."""
    key = (api_key, api_version, request)
    dec = _body_decoders.get(key)
    if dec is None:
        spec = API[api_key]
        dec = compile_decoder(spec.request if request else spec.response, api_version,
                              spec.is_flexible(api_version))
        _body_decoders[key] = dec
    return dec


def body_encoder(api_key: int, api_version: int, request: bool) -> Any:
    key = (api_key, api_version, request)
    enc = _body_encoders.get(key)
    if enc is None:
        spec = API[api_key]
        enc = compile_encoder(spec.request if request else spec.response, api_version,
                              spec.is_flexible(api_version))
        _body_encoders[key] = enc
    return enc


def _skip_tags(mv: memoryview, pos: int) -> int:
    n, pos = read_uvarint(mv, pos)
    for _ in range(n):
        _, pos = read_uvarint(mv, pos)
        size, pos = read_uvarint(mv, pos)
        pos += size
        if pos > len(mv):
            raise DecodeError("header tagged field points past the frame")
    return pos


# The int arrays of the controller's requests are replica lists, which stay ints; in the
# others they name partitions, each of which becomes an entry of the answer (codec).
_FIXED_SHIFT = {ApiKey.LEADER_AND_ISR: 4, ApiKey.UPDATE_METADATA: 4, ApiKey.STOP_REPLICA: 4}


def decode_request(frame: memoryview | bytes | bytearray, entry_budget: int | None = None) -> Request:
    """Decode one request frame (the bytes after the 4-byte size prefix). With an
    `entry_budget`, EntryBudgetExceeded once its arrays hold more entries than that, and
    the request's `entries` says how many it holds."""
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(mv) < _HEADER_FIXED.size:
        raise invalid_request(f"request of {len(mv)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(mv, 0)
    spec = API.get(api_key)
    if spec is None or not spec.supports(api_version):
        raise unsupported_version(api_key, api_version, correlation_id)
    try:
        pos = _HEADER_FIXED.size
        client_id = None
        if api_key != ApiKey.CONTROLLED_SHUTDOWN or api_version != 0:
            n = _I16.unpack_from(mv, pos)[0]
            pos += 2
            if n >= 0:
                if pos + n > len(mv):
                    raise DecodeError("client_id points past the frame")
                client_id = str(mv[pos:pos + n], "utf-8")
                pos += n
            elif n != -1:
                raise DecodeError(f"client_id: invalid length {n}")
        flexible = spec.is_flexible(api_version)
        if flexible:
            pos = _skip_tags(mv, pos)
        header_size = pos
        decode = body_decoder(api_key, api_version, True)
        entries = 0
        if entry_budget is None:  # the thread's budget is None outside a budgeted decode
            body, _ = decode(mv, pos)
        else:
            set_entry_budget(entry_budget, _FIXED_SHIFT.get(api_key, 0))
            try:
                body, _ = decode(mv, pos)
                entries = entry_budget - (entry_budget_left() or 0)
            finally:
                set_entry_budget(None)
    except _DECODE_FAILURES as e:
        raise invalid_request(f"malformed {spec.name} v{api_version} request: {_describe(e)}",
                              correlation_id) from None
    return Request(spec.key, api_version, correlation_id, client_id, body, header_size, len(mv), entries)


def _describe(e: Exception) -> str:
    if isinstance(e, IndexError | struct.error):
        return "truncated"
    return str(e) or type(e).__name__


def encode_response(api_key: int, api_version: int, correlation_id: int,
                    body: dict[str, Any]) -> list[bytes | FileRange]:
    """Size prefix + response header + body, as few bytes objects as possible: one per
    stretch between FileRange items (which the server sends with sendfile).

    An ApiVersions response with a non-zero error_code is encoded as v0, whatever the
    request's version: clients parse it as v0 to learn the supported ranges."""
    if api_key == ApiKey.API_VERSIONS and body.get("error_code", 0) != 0:
        api_version = 0
    parts: list = [b"", _I32.pack(correlation_id)]  # parts[0] becomes the size prefix
    if response_header_version(api_key, api_version) == 1:
        parts.append(EMPTY_TAGS)
    body_encoder(api_key, api_version, False)(parts, body)
    parts[0] = _I32.pack(sum(map(len, parts)))  # FileRange's len is its size
    try:
        return [b"".join(parts)]  # the common case: no FileRange
    except TypeError:
        return _split_at_file_ranges(parts)


def _split_at_file_ranges(parts: list) -> list[bytes | FileRange]:
    out: list[bytes | FileRange] = []
    run: list = []
    for p in parts:
        if type(p) is FileRange:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(p)
        else:
            run.append(p)
    if run:
        out.append(b"".join(run))
    return out


def encode_request(api_key: int, api_version: int, correlation_id: int,
                   client_id: str | None, body: dict[str, Any]) -> bytes:
    """Size prefix + request header + body as one bytes object."""
    spec = API.get(api_key)
    if spec is None or not spec.supports(api_version):
        raise unsupported_version(api_key, api_version, correlation_id)
    parts: list = [b"", _HEADER_FIXED.pack(api_key, api_version, correlation_id)]
    header_version = request_header_version(api_key, api_version)
    if header_version >= 1:
        if client_id is None:
            parts.append(_I16.pack(-1))
        else:
            raw = client_id.encode()
            parts.append(_I16.pack(len(raw)))
            parts.append(raw)
    if header_version == 2:
        parts.append(EMPTY_TAGS)
    body_encoder(api_key, api_version, True)(parts, body)
    parts[0] = _I32.pack(sum(map(len, parts)))
    try:
        return b"".join(parts)
    except TypeError:
        raise ValueError("FileRange is only allowed in responses") from None


def decode_response(api_key: int, api_version: int,
                    frame: memoryview | bytes | bytearray) -> tuple[int, dict]:
    """Decode one response frame (after the size prefix) -> (correlation_id, body).
    An ApiVersions response with an error is decoded as v0 (see encode_response)."""
    spec = API[api_key]
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        correlation_id = _I32.unpack_from(mv, 0)[0]
        pos = 4
        if api_key == ApiKey.API_VERSIONS and _I16.unpack_from(mv, pos)[0] != 0:
            api_version = 0
        if response_header_version(api_key, api_version) == 1:
            pos = _skip_tags(mv, pos)
        body, _ = body_decoder(api_key, api_version, False)(mv, pos)
    except _DECODE_FAILURES as e:
        raise MalformedResponseError(
            f"malformed {spec.name} v{api_version} response: {_describe(e)}") from None
    return correlation_id, body


def peek_correlation_id(frame: memoryview | bytes) -> int:
    """The correlation id of a response frame (its first 4 bytes)."""
    if len(frame) < 4:
        raise MalformedResponseError("response shorter than its header")
    return _I32.unpack_from(frame, 0)[0]
