"""Hostile clients on a SASL listener: unknown mechanisms, SaslAuthenticate before the
handshake (closed unanswered, as Kafka's), garbage and oversized tokens for PLAIN and
SCRAM, a SCRAM exchange that answers the server's challenge with a forged proof, a second
login on a connection whose session does not expire. Each gets Kafka's error code or a
closed connection (a failed login only after `connection.failed.authentication.delay.ms`),
the broker stays up, a real client still logs in, and nothing is logged as an internal
error. Re-authentication (KIP-368) starts at most once a second per connection, as
Kafka's."""

from __future__ import annotations

import base64
import os
import random
import socket
import struct
import threading
import time

import pytest

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey, decode_response, encode_request
from tests.integration.test_malformed import CLOSED, read_frame
from tests.integration.test_sasl import JAAS, conf, roundtrip, start_sasl_cluster, wait_ready

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
SECONDS = 4.0


class Raw:
    """One connection, requests sent one at a time; None when the broker closed it."""

    def __init__(self, port: int) -> None:
        self.s = socket.create_connection((HOST, port), timeout=5)
        self.cid = 0

    def call(self, key: int, version: int, body: dict) -> dict | None:
        self.cid += 1
        try:
            self.s.sendall(encode_request(key, version, self.cid, "hostile", body))
            frame = read_frame(self.s)
        except OSError:
            return None
        if frame == CLOSED:
            return None
        assert isinstance(frame, bytes)
        cid, resp = decode_response(key, version, memoryview(frame))
        assert cid == self.cid
        return resp

    def close(self) -> None:
        self.s.close()


def handshake(r: Raw, mechanism: str) -> dict | None:
    return r.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})


def authenticate(r: Raw, token: bytes) -> dict | None:
    return r.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})


def _attacks(port: int, rng: random.Random, seen: dict[str, set]) -> None:
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        kind = rng.choice(["mechanism", "early_auth", "plain_garbage", "scram_garbage", "forged_proof",
                           "huge_token", "second_handshake"])
        r = Raw(port)
        try:
            if kind == "mechanism":
                resp = handshake(r, rng.choice(["GSSAPI", "OAUTHBEARER", "", "x" * 1000, "plain"]))
                out = None if resp is None else resp["error_code"]
            elif kind == "early_auth":  # no handshake first: closed unanswered, as Kafka's
                resp = authenticate(r, b"\x00alice\x00alice-secret")
                out = None if resp is None else resp["error_code"]
            elif kind == "plain_garbage":
                handshake(r, "PLAIN")
                resp = authenticate(r, os.urandom(rng.randrange(0, 300)))
                out = None if resp is None else resp["error_code"]
            elif kind == "scram_garbage":
                handshake(r, "SCRAM-SHA-256")
                resp = authenticate(r, os.urandom(rng.randrange(0, 300)))
                out = None if resp is None else resp["error_code"]
            elif kind == "forged_proof":
                handshake(r, "SCRAM-SHA-512")
                first = authenticate(r, b"n,,n=carol,r=" + base64.b64encode(os.urandom(18)))
                assert first is not None and first["error_code"] == 0, first
                nonce = dict(p.split(b"=", 1) for p in first["auth_bytes"].split(b","))[b"r"]
                proof = base64.b64encode(os.urandom(64))
                resp = authenticate(r, b"c=biws,r=" + nonce + b",p=" + proof)
                out = None if resp is None else resp["error_code"]
            elif kind == "huge_token":
                handshake(r, "PLAIN")
                resp = authenticate(r, b"\x00admin\x00" + b"p" * (1 << 20))
                out = None if resp is None else resp["error_code"]
            else:
                handshake(r, "PLAIN")
                ok = authenticate(r, b"\x00alice\x00alice-secret")
                assert ok is not None and ok["error_code"] == 0, ok
                # No re-authentication without connections.max.reauth.ms: refused as by
                # Kafka's request handlers, and the connection goes on serving.
                resp = handshake(r, "PLAIN")
                again = authenticate(r, b"\x00alice\x00alice-secret")
                out = None if resp is None or again is None else (resp["error_code"], again["error_code"])
                assert r.call(ApiKey.METADATA, 9, {"topics": []}) is not None
        finally:
            r.close()
        seen.setdefault(kind, set()).add(out)


def test_hostile_sasl_clients_get_errors_and_the_broker_keeps_serving(cluster_factory, tmp_path) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    c, _ca = start_sasl_cluster(cluster_factory, tmp_path, 1)
    wait_ready(c, None, "t", 1)
    port = c.brokers[1].port
    admin = AdminClient(conf(c, "admin", "admin-secret"))
    up = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret")
    admin.alter_user_scram_credentials([up])["carol"].result(20)
    seen: dict[str, set] = {}
    threads = [threading.Thread(target=_attacks, args=(port, random.Random(i), seen)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)

    failed = ErrorCode.SASL_AUTHENTICATION_FAILED
    assert seen.get("mechanism") == {ErrorCode.UNSUPPORTED_SASL_MECHANISM}, seen
    assert seen.get("early_auth") == {None}, seen
    assert seen.get("plain_garbage", set()) <= {failed, None} and seen.get("plain_garbage"), seen
    assert seen.get("scram_garbage", set()) <= {failed, None} and seen.get("scram_garbage"), seen
    assert seen.get("forged_proof") == {failed}, seen
    assert seen.get("huge_token", set()) <= {failed, None} and seen.get("huge_token"), seen
    assert seen.get("second_handshake") == {(ErrorCode.ILLEGAL_SASL_STATE, ErrorCode.ILLEGAL_SASL_STATE)}, seen

    assert c.brokers[1].alive
    assert roundtrip(c, "after-sasl-attacks", conf(c, "alice", "alice-secret"), b"still serving")
    log = c.brokers[1].log.read_text(errors="replace")
    assert "internal error" not in log and "Traceback" not in log, c.tail(1)


def test_reauthentication_once_a_second_and_frames_before_login_bounded(cluster_factory, tmp_path) -> None:
    c = cluster_factory(1, start=False)
    b = c.brokers[1]
    b.config.write_text(b.config.read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
                        + "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\n"
                        + f"sasl.jaas.config={JAAS}\nconnections.max.reauth.ms=60000\n")
    b.start()
    wait_ready(c, None, "t", 1)
    r = Raw(b.port)
    login = b"\x00alice\x00alice-secret"
    assert handshake(r, "PLAIN")["error_code"] == 0  # type: ignore[index]
    first = authenticate(r, login)
    assert first is not None and first["error_code"] == 0 and 0 < first["session_lifetime_ms"] <= 60000, first
    assert handshake(r, "PLAIN")["error_code"] == 0  # type: ignore[index]  # a re-authentication
    assert authenticate(r, login)["error_code"] == 0  # type: ignore[index]
    # Another within the second: refused as Kafka's, the session goes on.
    assert handshake(r, "PLAIN")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE  # type: ignore[index]
    assert r.call(ApiKey.METADATA, 9, {"topics": []}) is not None
    time.sleep(1.1)
    assert handshake(r, "PLAIN")["error_code"] == 0  # type: ignore[index]
    assert authenticate(r, login)["error_code"] == 0  # type: ignore[index]
    r.close()
    # Before a login a SASL listener reads no frame over sasl.server.max.receive.size
    # (512 KiB, Kafka's): the connection closes on the size alone. Under it, answered.
    with socket.create_connection((HOST, b.port), timeout=5) as s:
        s.sendall(struct.pack(">i", 600_000) + b"\x00" * 64)
        assert s.recv(1024) == b""
    r = Raw(b.port)
    handshake(r, "PLAIN")
    resp = authenticate(r, b"\x00alice\x00" + b"p" * 400_000)
    assert resp is not None and resp["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED, resp
    r.close()
    # Once logged in, socket.request.max.bytes (100 MiB) again.
    r = Raw(b.port)
    handshake(r, "PLAIN")
    assert authenticate(r, login)["error_code"] == 0  # type: ignore[index]
    names = [f"no-such-topic-{i:040d}" for i in range(12_000)]  # ~700 KB
    md = r.call(ApiKey.METADATA, 9, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False,
                                     "include_cluster_authorized_operations": False,
                                     "include_topic_authorized_operations": False})
    assert md is not None and len(md["topics"]) == len(names), md and len(md["topics"])
    r.close()
