"""TLS listeners (listeners=SSL://..., PEM keystore and truststore): clients produce and
consume over TLS, replication and controller requests between brokers run over it, and a
client that does not speak TLS is refused without harm."""

from __future__ import annotations

import socket
import time

import pytest

from kafkarepl.tls_certs import make_ca, make_cert

pytestmark = pytest.mark.integration


def start_tls_cluster(cluster_factory, tmp_path, n: int = 3, client_auth: str = "none"):
    ca, ca_key, ca_cert = make_ca(tmp_path)
    c = cluster_factory(n, start=False)
    for b in c.brokers.values():
        cert = make_cert(tmp_path, f"broker{b.broker_id}", ca_key, ca_cert)
        text = b.config.read_text().replace("PLAINTEXT://", "SSL://")
        text += (f"ssl.keystore.type=PEM\nssl.keystore.location={cert}\nssl.truststore.type=PEM\n"
                 f"ssl.truststore.location={ca}\nssl.client.auth={client_auth}\n")
        b.config.write_text(text)
        b.start()
    return c, ca, ca_key, ca_cert


def tls_conf(c, ca, **extra) -> dict:
    return {"bootstrap.servers": c.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca), **extra}


def wait_tls_cluster(c, ca, topic: str, partitions: int, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(tls_conf(c, ca))
    deadline = time.monotonic() + 60
    while True:
        try:
            md = admin.list_topics(timeout=5)
            if len(md.brokers) == len(c.brokers):
                break
        except Exception:  # noqa: BLE001 - starting
            pass
        assert time.monotonic() < deadline, "TLS cluster not serving"
        time.sleep(0.2)
    admin.create_topics([NewTopic(topic, partitions, rf, config={"min.insync.replicas": str(min(2, rf))})])[
        topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(topic, timeout=5).topics[topic]
        if t.partitions and all(len(p.isrs) == rf and p.leader >= 0 for p in t.partitions.values()):
            return
        assert time.monotonic() < deadline, "partitions not fully replicated over TLS"
        time.sleep(0.2)


def test_clients_and_replication_over_tls(cluster_factory, tmp_path) -> None:
    from confluent_kafka import Consumer, Producer

    c, ca, _k, _c = start_tls_cluster(cluster_factory, tmp_path)
    wait_tls_cluster(c, ca, "secure", 3, 3)  # the ISRs fill through TLS replica fetchers
    p = Producer(tls_conf(c, ca, acks="all"))
    for i in range(300):
        p.produce("secure", value=b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    cons = Consumer(tls_conf(c, ca, **{"group.id": "tls", "auto.offset.reset": "earliest"}))
    cons.subscribe(["secure"])
    got: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(got) < 300 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            got.add(m.value())
    cons.close()
    assert got == {b"%d" % i for i in range(300)}
    # A plaintext client gets no answer but a closed connection; the broker goes on.
    port = next(iter(c.brokers.values())).port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"\x00\x00\x00\x10" + b"\x00" * 16)
        s.settimeout(5)
        received = b""
        while chunk := s.recv(1024):  # at most a TLS alert, then EOF (a timeout fails)
            received += chunk
        assert len(received) < 64 and b"\x00\x00\x00" not in received[:4]  # no Kafka frame
    p2 = Producer(tls_conf(c, ca, acks="all"))
    p2.produce("secure", value=b"after", partition=0)
    assert p2.flush(30) == 0


def test_required_client_certificates(cluster_factory, tmp_path) -> None:
    from confluent_kafka import Producer

    c, ca, ca_key, ca_cert = start_tls_cluster(cluster_factory, tmp_path, n=1, client_auth="required")
    client = make_cert(tmp_path, "client", ca_key, ca_cert)
    ok = tls_conf(c, ca, **{"ssl.certificate.location": str(client), "ssl.key.location": str(client)})
    p = Producer(ok)
    p.produce("mtls-auto", value=b"x")
    assert p.flush(30) == 0  # topic auto-created; the client presented its certificate
    results: list = []
    anon = Producer(tls_conf(c, ca, **{"message.timeout.ms": 3000, "error_cb": lambda _e: None}))
    anon.produce("mtls-auto", value=b"y", on_delivery=lambda err, _m: results.append(err))
    anon.flush(15)
    assert len(results) == 1 and results[0] is not None  # refused: no client certificate


def test_kcat_kafka_python_and_aiokafka_over_tls(cluster_factory, tmp_path) -> None:
    import asyncio
    import shutil
    import ssl
    import subprocess

    c, ca, _k, _c = start_tls_cluster(cluster_factory, tmp_path, n=1)
    wait_tls_cluster(c, ca, "clients", 1, 1)
    bootstrap = c.bootstrap
    # kcat (librdkafka's command line)
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by tools/setup.sh"
    r = subprocess.run([kcat, "-b", bootstrap, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca}",
                        "-P", "-t", "clients", "-p", "0"], input=b"from-kcat\n", capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # kafka-python
    from kafka import KafkaConsumer, KafkaProducer

    ctx = ssl.create_default_context(cafile=str(ca))
    kp = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx)
    kp.send("clients", b"from-kafka-python", partition=0).get(timeout=30)
    kp.close()

    # aiokafka
    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx)
        await p.start()
        try:
            await p.send_and_wait("clients", b"from-aiokafka", partition=0)
        finally:
            await p.stop()
        cons = AIOKafkaConsumer("clients", bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx,
                                auto_offset_reset="earliest", group_id=None)
        await cons.start()
        try:
            got = await cons.getmany(timeout_ms=10000)
            return [m.value for msgs in got.values() for m in msgs]
        finally:
            await cons.stop()

    values = asyncio.run(aio())
    kc = KafkaConsumer("clients", bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx,
                       auto_offset_reset="earliest", consumer_timeout_ms=10000)
    seen = [m.value for m in kc]
    kc.close()
    for got in (values, seen):
        assert got[:3] == [b"from-kcat", b"from-kafka-python", b"from-aiokafka"], got


def test_certificate_principals_mapped_and_authorized(cluster_factory, tmp_path) -> None:
    """Client certificates name principals as Kafka's default builder does (the subject's
    distinguished name, through ssl.principal.mapping.rules): here CN=Alice maps to
    User:alice, whose ACL lets her write; bob, with no ACL, is refused."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    ca, ca_key, ca_cert = make_ca(tmp_path)
    c = cluster_factory(2, start=False)
    supers = ";".join(f"User:broker{i}" for i in c.brokers) + ";User:admin"
    for b in c.brokers.values():
        cert = make_cert(tmp_path, f"broker{b.broker_id}", ca_key, ca_cert)
        text = b.config.read_text().replace("PLAINTEXT://", "SSL://")
        text += (f"ssl.keystore.location={cert}\nssl.truststore.location={ca}\nssl.client.auth=required\n"
                 "ssl.principal.mapping.rules=RULE:^CN=([^,]*)$/$1/L,DEFAULT\n"
                 f"authorizer.class.name=kafka.security.authorizer.AclAuthorizer\nsuper.users={supers}\n")
        b.config.write_text(text)
        b.start()

    def as_(cn: str) -> dict:
        cert = make_cert(tmp_path, cn, ca_key, ca_cert)
        return tls_conf(c, ca, **{"ssl.certificate.location": str(cert), "ssl.key.location": str(cert)})

    admin = AdminClient(as_("admin"))
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic("mapped", 1, 2)])["mapped"].result(20)
            break
        except Exception as exc:  # noqa: BLE001 - starting
            if "TOPIC_ALREADY_EXISTS" in str(exc):
                break  # an earlier attempt that timed out here was served meanwhile
            assert time.monotonic() < deadline
            time.sleep(0.3)
    binding = [AclBinding(ResourceType.TOPIC, "mapped", ResourcePatternType.LITERAL, "User:alice", "*", op,
                          AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for f in admin.create_acls(binding).values():
        f.result(20)

    def produce(conf: dict) -> KafkaError | None:
        results: list = []
        p = Producer({**conf, "message.timeout.ms": 5000})
        p.produce("mapped", value=b"v", on_delivery=lambda err, _m: results.append(err))
        p.flush(15)
        return results[0] if results else KafkaError(KafkaError._MSG_TIMED_OUT)

    alice, bob = as_("Alice"), as_("bob")
    deadline = time.monotonic() + 15
    while (err := produce(alice)) is not None:
        assert time.monotonic() < deadline, err
        time.sleep(0.3)
    err = produce(bob)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
