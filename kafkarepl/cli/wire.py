"""A blocking one-request-at-a-time Kafka protocol call, for CLI commands and probes."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafkarepl.protocol import ApiKey, decode_response, encode_request


def call(host: str, port: int, api_key: int, version: int, body: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(encode_request(api_key, version, 1, "kafkarepl-cli", body))
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        frame = _recv_exact(s, size)
    _cid, resp = decode_response(api_key, version, memoryview(frame))
    return resp


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def metadata(host: str, port: int, topics: list[str] | None = None, timeout: float = 5.0) -> dict[str, Any]:
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return call(host, port, ApiKey.METADATA, 12, body, timeout)


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap server must be HOST:PORT, got {item!r}")
        out.append((host, int(port)))
    return out
