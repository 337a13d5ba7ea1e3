"""A blocking one-request-at-a-time Kafka protocol call, for CLI commands and probes."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from kafkarepl.client.security import ClientSecurity
from kafkarepl.errors import KafkaError
from kafkarepl.protocol import ApiKey, decode_response, encode_request


def call(host: str, port: int, api_key: int, version: int, body: dict[str, Any], timeout: float = 5.0,
         security: ClientSecurity | None = None) -> dict[str, Any]:
    """One request; over TLS and/or after a SASL login when `security` says so."""
    if security is not None and (security.ssl_context is not None or security.sasl_mechanism):
        return asyncio.run(_secured_call(host, port, api_key, version, body, timeout, security))
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(encode_request(api_key, version, 1, "kafkarepl-cli", body))
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        frame = _recv_exact(s, size)
    _cid, resp = decode_response(api_key, version, memoryview(frame))
    return resp


async def _secured_call(host: str, port: int, api_key: int, version: int, body: dict[str, Any], timeout: float,
                        security: ClientSecurity) -> dict[str, Any]:
    from kafkarepl.client import BrokerConnection

    conn = BrokerConnection(host, port, "kafkarepl-cli", connect_timeout=timeout, request_timeout=timeout,
                            security=security)
    try:
        await conn.connect(negotiate=False)
        resp = await conn.send(api_key, version, body)
        assert resp is not None
        return resp
    except KafkaError as exc:
        raise ConnectionError(str(exc)) from exc
    finally:
        conn.close()


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def metadata(host: str, port: int, topics: list[str] | None = None, timeout: float = 5.0,
             security: ClientSecurity | None = None) -> dict[str, Any]:
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return call(host, port, ApiKey.METADATA, 12, body, timeout, security)


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
