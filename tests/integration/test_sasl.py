"""SASL listeners (SASL_PLAINTEXT and SASL_SSL) with PLAIN and SCRAM-SHA-256/512: real
clients log in, wrong passwords are refused, SCRAM users are managed with
AlterUserScramCredentials and known to every broker, replication and controller requests
between brokers authenticate too, and nothing is served before authentication."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafkarepl.tls_certs import make_ca, make_cert

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def start_sasl_cluster(cluster_factory, tmp_path, n: int = 3, tls: bool = False):
    c = cluster_factory(n, start=False)
    ca = None
    if tls:
        ca, ca_key, ca_cert = make_ca(tmp_path)
    for b in c.brokers.values():
        text = b.config.read_text().replace("PLAINTEXT://", "SASL_SSL://" if tls else "SASL_PLAINTEXT://")
        text += ("sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
                 "sasl.mechanism.inter.broker.protocol=PLAIN\n" f"sasl.jaas.config={JAAS}\n")
        if tls:
            cert = make_cert(tmp_path, f"broker{b.broker_id}", ca_key, ca_cert)
            text += f"ssl.keystore.location={cert}\nssl.truststore.location={ca}\n"
        b.config.write_text(text)
        b.start()
    return c, ca


def conf(c, user: str, password: str, mechanism: str = "PLAIN", ca=None, **extra) -> dict:
    out = {"bootstrap.servers": c.bootstrap, "security.protocol": "SASL_SSL" if ca else "SASL_PLAINTEXT",
           "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **extra}
    if ca:
        out["ssl.ca.location"] = str(ca)
    return out


def wait_ready(c, ca, topic: str, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf(c, "admin", "admin-secret", ca=ca))
    deadline = time.monotonic() + 60
    while True:
        try:
            if len(admin.list_topics(timeout=5).brokers) == len(c.brokers):
                break
        except Exception:  # noqa: BLE001 - starting
            pass
        assert time.monotonic() < deadline, "SASL cluster not serving"
        time.sleep(0.2)
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:  # the followers fetch through authenticated connections
        t = admin.list_topics(topic, timeout=5).topics[topic]
        if t.partitions and all(len(p.isrs) == rf for p in t.partitions.values()):
            return
        assert time.monotonic() < deadline, "replicas did not join the ISR over SASL"
        time.sleep(0.2)


def roundtrip(c, topic: str, cfg: dict, value: bytes, timeout_ms: int = 5000) -> bool:
    from confluent_kafka import Consumer, Producer

    results: list = []
    p = Producer({**cfg, "message.timeout.ms": timeout_ms, "error_cb": lambda _e: None})
    p.produce(topic, value=value, on_delivery=lambda err, _m: results.append(err))
    p.flush(15)
    if not results or results[0] is not None:
        return False
    cons = Consumer({**cfg, "group.id": f"g-{time.monotonic()}", "auto.offset.reset": "earliest",
                     "error_cb": lambda _e: None})
    cons.subscribe([topic])
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None and m.value() == value:
                return True
        return False
    finally:
        cons.close()


@pytest.mark.parametrize("tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
def test_plain_and_scram_logins_and_inter_broker_sasl(cluster_factory, tmp_path, tls) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    c, ca = start_sasl_cluster(cluster_factory, tmp_path, 3, tls)
    wait_ready(c, ca, "secured", 3)
    assert roundtrip(c, "secured", conf(c, "alice", "alice-secret", ca=ca), b"plain")
    assert not roundtrip(c, "secured", conf(c, "alice", "wrong", ca=ca), b"refused", timeout_ms=1500)
    admin = AdminClient(conf(c, "admin", "admin-secret", ca=ca))
    for mech, name in ((ScramMechanism.SCRAM_SHA_256, "bob"), (ScramMechanism.SCRAM_SHA_512, "carol")):
        up = UserScramCredentialUpsertion(name, ScramCredentialInfo(mech, 4096), f"{name}-secret".encode())
        admin.alter_user_scram_credentials([up])[name].result(20)
    described = {u: f.result(20) for u, f in admin.describe_user_scram_credentials(["bob", "carol"]).items()}
    assert described["bob"].scram_credential_infos[0].iterations == 4096
    time.sleep(1.0)  # every broker reloads the users from its change notification
    assert roundtrip(c, "secured", conf(c, "bob", "bob-secret", "SCRAM-SHA-256", ca=ca), b"scram256")
    assert roundtrip(c, "secured", conf(c, "carol", "carol-secret", "SCRAM-SHA-512", ca=ca), b"scram512")
    assert not roundtrip(c, "secured", conf(c, "bob", "nope", "SCRAM-SHA-256", ca=ca), b"bad", timeout_ms=1500)


def test_describe_configs_never_shows_passwords(cluster_factory, tmp_path) -> None:
    """A broker's DescribeConfigs answers sasl.jaas.config (users' passwords), its
    listener-prefixed form and ssl.key.password as Kafka does: sensitive, value null."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    c = cluster_factory(1, start=False)
    b = next(iter(c.brokers.values()))
    b.config.write_text(b.config.read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
                        + "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\n"
                        + f"sasl.jaas.config={JAAS}\n"
                        + f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n"
                        + "ssl.key.password=key-secret\n")
    b.start()
    wait_ready(c, None, "t", 1)
    admin = AdminClient(conf(c, "admin", "admin-secret"))
    [fut] = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, str(b.broker_id))],
                                   request_timeout=15).values()
    entries = fut.result(20)
    hidden = ("sasl.jaas.config", "listener.name.sasl_plaintext.plain.sasl.jaas.config", "ssl.key.password")
    for name in hidden:
        assert entries[name].is_sensitive and entries[name].value is None, name
    assert not any("secret" in (e.value or "") for e in entries.values())
    shown = entries["sasl.enabled.mechanisms"]
    assert shown.value == "PLAIN" and not shown.is_sensitive


def test_nothing_is_served_before_authentication(cluster_factory, tmp_path) -> None:
    c, _ca = start_sasl_cluster(cluster_factory, tmp_path, 1)
    wait_ready(c, None, "t", 1)
    port = next(iter(c.brokers.values())).port
    # A Metadata v1 request (no topics) without SASL: the connection is closed, no answer.
    body = struct.pack(">hhih", 3, 1, 7, -1) + struct.pack(">i", -1)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        s.settimeout(5)
        assert s.recv(1024) == b""


def _metric(port: int, name: str) -> int:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines() if line.startswith(name + "{"))


def test_reauthentication_within_connections_max_reauth_ms(cluster_factory, tmp_path) -> None:
    """KIP-368 with connections.max.reauth.ms=2000: librdkafka and the brokers' own
    connections (replica fetchers, controller requests) log in again on the same
    connection before their session ends and keep working; a connection that does not
    is closed at its next request; a re-login as another principal is refused."""
    import asyncio

    from confluent_kafka import Producer

    from kafkarepl.client import BrokerConnection
    from kafkarepl.client.connection import BrokerConnectionError
    from kafkarepl.client.security import ClientSecurity
    from kafkarepl.protocol import ApiKey
    from tests.fixtures.cluster import free_port

    c = cluster_factory(3, start=False)
    metrics = {}
    for b in c.brokers.values():
        metrics[b.broker_id] = free_port()
        text = b.config.read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
        text += ("sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\n"
                 f"sasl.jaas.config={JAAS}\nconnections.max.reauth.ms=2000\nmetrics.port={metrics[b.broker_id]}\n")
        b.config.write_text(text)
        b.start()
    wait_ready(c, None, "reauth", 3)
    cfg = conf(c, "alice", "alice-secret")
    errors: list = []
    delivered: list = []
    p = Producer({**cfg, "error_cb": errors.append, "acks": "all"})
    end = time.monotonic() + 6
    while time.monotonic() < end:  # three sessions long, on the same connections
        p.produce("reauth", value=b"x", on_delivery=lambda err, _m: delivered.append(err))
        p.poll(0.1)
    assert p.flush(15) == 0
    assert delivered and all(e is None for e in delivered), [e for e in delivered if e is not None][:3]
    assert not errors, errors[:3]
    assert roundtrip(c, "reauth", cfg, b"after")
    # Every broker re-authenticated connections: librdkafka's and the other brokers'.
    assert all(_metric(port, "kafka_server_socket_server_metrics_successful_reauthentication_total") > 0
               for port in metrics.values())

    port = next(iter(c.brokers.values())).port

    async def stale_and_impostor() -> None:
        alice = ClientSecurity(None, "PLAIN", "alice", "alice-secret")
        conn = BrokerConnection("127.0.0.1", port, security=alice)
        await conn.connect()
        conn._reauth_at = None  # behave as a client without KIP-368
        await conn.send(ApiKey.METADATA, 1, {"topics": []})
        await asyncio.sleep(2.3)
        with pytest.raises(BrokerConnectionError):
            await conn.send(ApiKey.METADATA, 1, {"topics": []})
        conn.close()
        conn = BrokerConnection("127.0.0.1", port, security=alice)
        await conn.connect()
        r = await conn.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert r["error_code"] == 0
        r = await conn.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00admin\x00admin-secret"})
        assert r["error_code"] == 58  # SASL_AUTHENTICATION_FAILED: another principal
        await asyncio.sleep(0.3)
        with pytest.raises(BrokerConnectionError):
            await conn.send(ApiKey.METADATA, 1, {"topics": []})
        conn.close()

    asyncio.run(stale_and_impostor())
    # Only that stale connection outlived its session: no broker's own connection did.
    expired = sum(b.log.read_text().count("SASL session expired") for b in c.brokers.values())
    assert expired == 1, expired
