"""Hostile clients on a TLS listener: bytes that are not TLS, handshakes cut short,
TLS records with a forged MAC after a finished handshake, and malformed or oversized
Kafka frames inside a good TLS session. Each is answered or closed; the broker stays
up, keeps serving a real TLS client, and logs no internal error."""

from __future__ import annotations

import os
import random
import socket
import ssl
import struct
import threading
import time

import pytest

from kafkarepl.protocol import ApiKey, encode_request
from tests.integration.test_tls import start_tls_cluster, tls_conf

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
SECONDS = 4.0


def _client_hello(ctx: ssl.SSLContext) -> bytes:
    """The first flight of a real TLS handshake, from a memory BIO."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def _attacks(port: int, ctx: ssl.SSLContext, rng: random.Random) -> dict[str, int]:
    hello = _client_hello(ctx)
    done = dict.fromkeys(("not_tls", "cut_hello", "forged_record", "bad_frame", "huge_frame"), 0)

    def tls() -> ssl.SSLSocket:
        return ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5), server_hostname="localhost")

    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        kind = rng.choice(list(done))
        try:
            if kind == "not_tls":
                with socket.create_connection((HOST, port), timeout=5) as s:
                    s.sendall(os.urandom(rng.randrange(1, 4096)))
                    s.recv(1024)
            elif kind == "cut_hello":
                with socket.create_connection((HOST, port), timeout=5) as s:
                    s.sendall(hello[:rng.randrange(1, len(hello))])
            elif kind == "forged_record":
                ss = tls()
                raw = socket.socket(fileno=ss.detach())  # the TCP socket under the session
                with raw:
                    body = os.urandom(rng.randrange(16, 512))
                    raw.sendall(b"\x17\x03\x03" + struct.pack(">H", len(body)) + body)  # application data
                    raw.recv(1024)
            elif kind == "bad_frame":
                with tls() as ss:
                    frame = encode_request(ApiKey.METADATA, 9, 7, "hostile", {"topics": None})
                    cut = bytearray(frame)
                    for _ in range(rng.randrange(1, 8)):
                        cut[rng.randrange(4, len(cut))] = rng.randrange(256)
                    ss.sendall(bytes(cut))
                    ss.recv(65536)
            else:  # a frame announcing 100 MiB, a few bytes of it, then gone
                with tls() as ss:
                    ss.sendall(struct.pack(">i", 100 << 20) + os.urandom(100))
            done[kind] += 1
        except (OSError, ssl.SSLError):
            done[kind] += 1  # refused or closed by the broker: what we want
    return done


def test_hostile_tls_clients_leave_the_broker_serving(cluster_factory, tmp_path) -> None:
    from confluent_kafka import Producer

    c, ca, _ca_key, _ca_cert = start_tls_cluster(cluster_factory, tmp_path, n=1)
    port = c.brokers[1].port
    ctx = ssl.create_default_context(cafile=str(ca))
    results: list[dict[str, int]] = []
    threads = [threading.Thread(target=lambda i=i: results.append(_attacks(port, ctx, random.Random(i))))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 4
    for kind in results[0]:
        assert sum(r[kind] for r in results) > 0, (kind, results)

    assert c.brokers[1].alive
    delivered: list = []
    p = Producer(tls_conf(c, ca))
    p.produce("after-tls-attacks", value=b"still serving", on_delivery=lambda err, _m: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None], delivered
    log = c.brokers[1].log.read_text(errors="replace")
    assert "internal error" not in log and "Traceback" not in log, c.tail(1)
