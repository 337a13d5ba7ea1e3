"""Several listeners per broker, as Kafka's `listeners`, `listener.security.protocol.map`
and `inter.broker.listener.name`: clients are told every broker's endpoint on the listener
they connected through (Metadata, FindCoordinator), each listener has its own security,
and the brokers replicate over the inter-broker listener."""

from __future__ import annotations

import subprocess
import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.tls_certs import make_ca, make_cert
from tests import java_tools
from tests.fixtures.cluster import free_port
from tests.integration.test_sasl import JAAS, roundtrip

pytestmark = pytest.mark.integration


def _established_to(port: int) -> int:
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return len([line for line in out.splitlines() if line.strip()])


def _wait_isr(admin, topic: str, isr: int, what: str) -> None:
    """Until every partition of `topic` has `isr` in-sync replicas, as `admin` sees them."""
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(topic, timeout=5).topics[topic]
        if t.partitions and all(len(p.isrs) == isr for p in t.partitions.values()):
            return
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_three_listeners_per_broker(cluster_factory, tmp_path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    ca, ca_key, ca_cert = make_ca(tmp_path)
    c = cluster_factory(3, start=False)
    external: dict[int, int] = {}
    replication: dict[int, int] = {}
    for b in c.brokers.values():
        external[b.broker_id], replication[b.broker_id] = free_port(), free_port()
        cert = make_cert(tmp_path, f"broker{b.broker_id}", ca_key, ca_cert)
        text = b.config.read_text().replace(
            f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
            f"listeners=PLAINTEXT://127.0.0.1:{b.port},EXTERNAL://127.0.0.1:{external[b.broker_id]},"
            f"REPLICATION://127.0.0.1:{replication[b.broker_id]}")
        text += ("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL,REPLICATION:SSL\n"
                 "inter.broker.listener.name=REPLICATION\n"
                 "sasl.enabled.mechanisms=PLAIN\n"
                 f"listener.name.external.plain.sasl.jaas.config={JAAS}\n"
                 f"ssl.keystore.location={cert}\nssl.truststore.location={ca}\n")
        b.config.write_text(text)
    c.start()

    # Metadata through each listener names every broker's endpoint on that listener.
    plain = next(iter(c.brokers.values())).port
    md = wire.metadata("127.0.0.1", plain, [])
    assert {b["node_id"]: b["port"] for b in md["brokers"]} == {i: b.port for i, b in c.brokers.items()}
    ext = {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in external.values()),
           "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca), "sasl.mechanism": "PLAIN",
           "sasl.username": "alice", "sasl.password": "alice-secret"}
    repl = {"bootstrap.servers": f"127.0.0.1:{next(iter(replication.values()))}", "security.protocol": "SSL",
            "ssl.ca.location": str(ca)}
    seen_ext = AdminClient(ext).list_topics(timeout=15).brokers
    assert {i: b.port for i, b in seen_ext.items()} == external
    seen_repl = AdminClient(repl).list_topics(timeout=15).brokers
    assert {i: b.port for i, b in seen_repl.items()} == replication

    # The external listener needs its SASL login; a plaintext client gets nothing there.
    bare = AdminClient({"bootstrap.servers": ext["bootstrap.servers"], "socket.timeout.ms": 2000})
    with pytest.raises(Exception):  # noqa: B017 - librdkafka's transport error
        bare.list_topics(timeout=3)

    # RF=3 over the REPLICATION listener; a client on EXTERNAL produces and consumes
    # (the group coordinator is found on EXTERNAL too).
    admin = AdminClient(ext)
    admin.create_topics([NewTopic("multi", 1, 3, config={"min.insync.replicas": "2"})])["multi"].result(30)
    _wait_isr(admin, "multi", 3, "replicas did not join the ISR over the REPLICATION listener")
    assert roundtrip(c, "multi", ext, b"over three listeners")
    leader = c.leader_of("multi")
    assert _established_to(replication[leader]) >= 2  # the two followers' fetchers


def test_brokers_get_in_on_the_inter_broker_listener_when_clients_hold_max_connections(cluster_factory) -> None:
    """KIP-402: once clients hold max.connections of a broker, a broker connecting on the
    inter-broker listener still gets in: the least recently active client connection is
    closed to make room. Before, the restarted follower's fetcher was refused like any
    client and its replica never rejoined the ISR."""
    import socket

    from kafkarepl.protocol import ApiKey, encode_request
    from tests.integration.chaos import wait_until

    c = cluster_factory(2, start=False)
    for b in c.brokers.values():
        text = b.config.read_text().replace(
            f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
            f"listeners=PLAINTEXT://127.0.0.1:{b.port},REPLICATION://127.0.0.1:{free_port()}")
        text += ("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT\n"
                 "inter.broker.listener.name=REPLICATION\nmax.connections=12\n")
        b.config.write_text(text)
    c.start()
    c.create_topic("guarded", 1, 2)
    leader = c.leader_of("guarded")
    follower = next(i for i in c.brokers if i != leader)

    def isr() -> set[int]:  # asked of the follower: the leader has no connection to spare
        md = wire.metadata("127.0.0.1", c.brokers[follower].port, ["guarded"])
        return set(md["topics"][0]["partitions"][0]["isr_nodes"])

    wait_until(lambda: isr() == {leader, follower}, 30, "both replicas in the ISR")
    c.stop(follower)  # its connections to the leader go; clients take their room
    held: list[socket.socket] = []
    refused = False
    for _ in range(40):  # clients take every connection the leader allows
        s = socket.create_connection(("127.0.0.1", c.brokers[leader].port), timeout=5)
        s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "hog", {}))
        try:
            answered = s.recv(4) != b""
        except OSError:
            answered = False
        if not answered:
            s.close()
            refused = True
            break
        held.append(s)
    try:
        assert refused and held, len(held)
        c.restart(follower)  # its fetcher connects to the leader's REPLICATION listener
        wait_until(lambda: isr() == {leader, follower}, 30, "the restarted follower back in the ISR")
        # the room was made by closing a client connection (the least recently active)
        closed = 0
        for s in held:
            s.setblocking(False)
            try:
                while chunk := s.recv(65536):
                    del chunk
                closed += 1  # EOF
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        assert closed >= 1
    finally:
        for s in held:
            s.close()


def _peer_cn(port: int, ctx) -> str:
    """The common name of the certificate a listener presents (verified by `ctx`)."""
    import socket

    from cryptography import x509
    from cryptography.x509.oid import NameOID

    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        der = s.getpeercert(binary_form=True)
    return str(x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def test_per_listener_ssl_settings_with_keytool_stores(cluster_factory, tmp_path) -> None:
    """`listener.name.<listener>.ssl.*` over the broker's ssl.* (KIP-103), as an operator
    splits clients from replication: clients on EXTERNAL (SSL) and SASL (SASL_SSL) get a
    PEM certificate of a public CA and need no certificate of their own; the brokers
    replicate over INTERNAL with JKS stores made by the JDK's keytool and mutual TLS. The
    broker-wide ssl.client.auth=required applies to INTERNAL, EXTERNAL overrides it, and
    the SASL_SSL listener ignores it (KIP-684: only its own prefixed setting counts)."""
    import os
    import shutil
    import ssl

    from confluent_kafka.admin import AdminClient, NewTopic

    keytool = shutil.which("keytool")
    if keytool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("keytool (the JDK's) is not installed")
        pytest.skip("keytool (the JDK's) is not installed")

    def kt(*args: str) -> None:
        subprocess.run([keytool, *args], cwd=tmp_path, check=True, capture_output=True, timeout=120)

    ca, ca_key, ca_cert = make_ca(tmp_path)
    c = cluster_factory(2, start=False)
    ports = {b.broker_id: (free_port(), free_port(), free_port()) for b in c.brokers.values()}
    for i in c.brokers:  # each broker's internal key pair, self-signed, in its own JKS store
        kt("-genkeypair", "-alias", "internal", "-keyalg", "EC", "-groupname", "secp256r1",
           "-dname", f"CN=broker{i}-internal", "-ext", "SAN=ip:127.0.0.1", "-validity", "2",
           "-storetype", "JKS", "-keystore", f"internal{i}.jks", "-storepass", f"store{i}-pw", "-keypass", "key-pw")
        kt("-exportcert", "-alias", "internal", "-keystore", f"internal{i}.jks", "-storepass", f"store{i}-pw",
           "-file", f"internal{i}.der")
        kt("-importcert", "-noprompt", "-alias", f"broker{i}", "-file", f"internal{i}.der", "-storetype", "JKS",
           "-keystore", "internal-trust.jks", "-storepass", "trust-pw")
    for b in c.brokers.values():
        ext, internal, sasl = ports[b.broker_id]
        cert = make_cert(tmp_path, f"broker{b.broker_id}-external", ca_key, ca_cert)
        text = b.config.read_text().replace(
            f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
            f"listeners=PLAINTEXT://127.0.0.1:{b.port},EXTERNAL://127.0.0.1:{ext},"
            f"INTERNAL://127.0.0.1:{internal},SASL://127.0.0.1:{sasl}")
        jks = tmp_path / f"internal{b.broker_id}.jks"
        text += ("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:SSL,INTERNAL:SSL,SASL:SASL_SSL\n"
                 "inter.broker.listener.name=INTERNAL\n"
                 "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
                 "listener.name.sasl.sasl.enabled.mechanisms=PLAIN\n"  # the listener's own wins
                 f"listener.name.sasl.plain.sasl.jaas.config={JAAS}\n"
                 f"ssl.keystore.location={cert}\n"
                 "ssl.client.auth=required\n"
                 "listener.name.external.ssl.client.auth=none\n"
                 "listener.name.internal.ssl.keystore.type=JKS\n"
                 f"listener.name.internal.ssl.keystore.location={jks}\n"
                 f"listener.name.internal.ssl.keystore.password=store{b.broker_id}-pw\n"
                 "listener.name.internal.ssl.key.password=key-pw\n"
                 f"listener.name.internal.ssl.truststore.location={tmp_path / 'internal-trust.jks'}\n"
                 "listener.name.internal.ssl.truststore.password=trust-pw\n")
        b.config.write_text(text)
    c.start()

    external = ",".join(f"127.0.0.1:{p[0]}" for p in ports.values())
    ext = {"bootstrap.servers": external, "security.protocol": "SSL", "ssl.ca.location": str(ca)}
    admin = AdminClient(ext)
    admin.create_topics([NewTopic("split", 1, 2, config={"min.insync.replicas": "2"})])["split"].result(30)
    # the follower joins the ISR: the brokers' JKS keys pass each other's checks
    _wait_isr(admin, "split", 2, "the follower did not join the ISR over INTERNAL's JKS mutual TLS")
    assert roundtrip(c, "split", ext, b"external, no client certificate")
    sasl = {"bootstrap.servers": ",".join(f"127.0.0.1:{p[2]}" for p in ports.values()),
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca), "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret"}
    assert roundtrip(c, "split", sasl, b"sasl_ssl, no client certificate")

    # Each listener presents its own certificate; INTERNAL's, to a client presenting a
    # key its truststore holds (broker 2's, read from its JKS store).
    from kafkarepl.tls_stores import SslSettings, load_keystore

    public = ssl.create_default_context(cafile=str(ca))
    as_broker2 = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    as_broker2.load_verify_locations(cadata=(tmp_path / "internal1.der").read_bytes())
    load_keystore(as_broker2, SslSettings(keystore_location=str(tmp_path / "internal2.jks"),
                                          keystore_password="store2-pw", key_password="key-pw"))
    ext1, internal1, sasl1 = ports[1]
    assert _peer_cn(ext1, public) == _peer_cn(sasl1, public) == "broker1-external"
    assert _peer_cn(internal1, as_broker2) == "broker1-internal"
    assert _answered(internal1, as_broker2)
    with pytest.raises(ssl.SSLError):  # INTERNAL's certificate is not the public CA's
        _peer_cn(internal1, public)
    # Kafka's Java client with its own JKS stores, as a broker-side tool would use INTERNAL
    java_props = tmp_path / "java-internal.properties"
    java_props.write_text(
        "security.protocol=SSL\nssl.truststore.type=JKS\n"
        f"ssl.truststore.location={tmp_path / 'internal-trust.jks'}\nssl.truststore.password=trust-pw\n"
        f"ssl.keystore.type=JKS\nssl.keystore.location={tmp_path / 'internal2.jks'}\n"
        "ssl.keystore.password=store2-pw\nssl.key.password=key-pw\n")
    out = java_tools.run("produce-with", f"127.0.0.1:{internal1}", "split", str(java_props))
    assert out.startswith("ok "), out
    # INTERNAL wants a client certificate (the broker-wide required) its truststore holds:
    # none, or one of the public CA, gets no answer.
    for client_cert in (None, make_cert(tmp_path, "some-client", ca_key, ca_cert)):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cadata=(tmp_path / "internal1.der").read_bytes())
        if client_cert is not None:
            ctx.load_cert_chain(client_cert)
        assert not _answered(internal1, ctx), client_cert


def _answered(port: int, ctx) -> bool:
    """Whether a listener answers an ApiVersions request over TLS with `ctx` (TLS 1.3
    reports a refused client certificate only after the client's side of the handshake)."""
    import socket
    import ssl

    from kafkarepl.protocol import ApiKey, encode_request

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "tls-probe", {}))
            return len(s.recv(4)) == 4
    except (ssl.SSLError, ConnectionError):
        return False
