"""A listener's certificate rotated without a restart (KIP-226, Kafka's "Updating SSL
Keystore of an Existing Listener"): `kafkarepl configs --entity-type brokers --alter
--add-config listener.name.<l>.ssl.keystore.location=...`, as with kafka-configs.sh. New
connections get the new certificate and open ones keep working; a certificate for
another name is refused; a JKS keystore's password is stored encoded in ZooKeeper, and
the broker restarts with the rotated keystore."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys

import pytest

from kafkarepl.protocol import ApiKey, encode_request
from kafkarepl.tls_certs import make_ca, make_cert
from tests.fixtures.cluster import free_port
from tests.integration.chaos import produce_raw, wait_until
from tests.integration.test_cli_configs import configs, ok

pytestmark = pytest.mark.integration


def _serial(port: int, ctx: ssl.SSLContext) -> int:
    from cryptography import x509

    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        return x509.load_der_x509_certificate(s.getpeercert(binary_form=True)).serial_number


def _cert_serial(pem) -> int:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem.read_bytes()).serial_number


def _answers(s: ssl.SSLSocket) -> bool:
    s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 7, "rotation", {}))
    return len(s.recv(4)) == 4


def test_rotating_a_listeners_keystore(cluster_factory, tmp_path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from kazoo.client import KazooClient

    keytool = shutil.which("keytool")
    if keytool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("keytool (the JDK's) is not installed")
        pytest.skip("keytool (the JDK's) is not installed")
    ca, ca_key, ca_cert = make_ca(tmp_path)
    first, second, third, other = (tmp_path / d for d in ("first", "second", "third", "other"))
    for d in (first, second, third, other):
        d.mkdir()
    old = make_cert(first, "broker1", ca_key, ca_cert)
    new = make_cert(second, "broker1", ca_key, ca_cert)  # same name, new key
    intruder = make_cert(other, "someone-else", ca_key, ca_cert)
    c = cluster_factory(1, start=False)
    b = c.brokers[1]
    tls_port = free_port()
    b.config.write_text(b.config.read_text().replace(
        f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
        f"listeners=PLAINTEXT://127.0.0.1:{b.port},EXTERNAL://127.0.0.1:{tls_port}")
        + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:SSL\ninter.broker.listener.name=PLAINTEXT\n"
        f"ssl.keystore.location={old}\npassword.encoder.secret=encoder-secret\n")
    c.start()
    trust = ssl.create_default_context(cafile=str(ca))
    assert _serial(tls_port, trust) == _cert_serial(old)
    with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as raw, \
            trust.wrap_socket(raw, server_hostname="127.0.0.1") as held:
        assert _answers(held)
        alter = ("--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config")
        assert ok(c.bootstrap, *alter, f"listener.name.external.ssl.keystore.location={new}") == [
            "Completed updating config for broker 1."]
        wait_until(lambda: _serial(tls_port, trust) == _cert_serial(new), 15, "new connections get the new certificate")
        assert _answers(held)  # the connection opened before keeps working

    # Another name's certificate is refused, with the reason; the listener keeps its own.
    r = configs(c.bootstrap, *alter, f"listener.name.external.ssl.keystore.location={intruder}")
    assert r.returncode != 0 and "another subject" in r.stdout + r.stderr, (r.stdout, r.stderr)
    # ... and so is a keystore at the cluster-wide default
    r = configs(c.bootstrap, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                f"listener.name.external.ssl.keystore.location={new}")
    assert r.returncode != 0 and "only per broker" in r.stdout + r.stderr, (r.stdout, r.stderr)
    assert _serial(tls_port, trust) == _cert_serial(new)

    # A JKS keystore (the broker's name, a third key) under passwords.
    third_pem = make_cert(third, "broker1", ca_key, ca_cert)
    key = serialization.load_pem_private_key(third_pem.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(third_pem.read_bytes())
    (third / "k.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker1", key, cert, [ca_cert], serialization.BestAvailableEncryption(b"jks-store-pw")))
    subprocess.run([keytool, "-importkeystore", "-srckeystore", "k.p12", "-srcstoretype", "PKCS12",
                    "-srcstorepass", "jks-store-pw", "-destkeystore", "k.jks", "-deststoretype", "JKS",
                    "-deststorepass", "jks-store-pw", "-destkeypass", "jks-store-pw", "-noprompt"],
                   cwd=third, check=True, capture_output=True, timeout=120)
    assert ok(c.bootstrap, *alter, f"listener.name.external.ssl.keystore.location={third / 'k.jks'},"
              "listener.name.external.ssl.keystore.type=JKS,"
              "listener.name.external.ssl.keystore.password=jks-store-pw")
    wait_until(lambda: _serial(tls_port, trust) == cert.serial_number, 15, "the JKS keystore is in use")
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=15)
    try:
        stored, _ = zk.get("/config/brokers/1")
    finally:
        zk.stop()
    assert b"jks-store-pw" not in stored and b"encryptedPassword" in stored
    described = "\n".join(ok(c.bootstrap, "--entity-type", "brokers", "--entity-name", "1", "--describe"))
    assert "listener.name.external.ssl.keystore.password=null" in described and "jks-store-pw" not in described

    # A restart starts the listener with the rotated keystore (its password decoded).
    c.restart(1)
    assert _serial(tls_port, trust) == cert.serial_number


def test_a_broker_with_an_unreadable_keystore_stops_with_the_reason(cluster_factory, tmp_path) -> None:
    """A wrong keystore password is an operator's mistake: the broker says so and exits
    2, as for any bad setting, rather than serving without the listener or crashing."""
    keytool = shutil.which("keytool")
    if keytool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("keytool (the JDK's) is not installed")
        pytest.skip("keytool (the JDK's) is not installed")
    subprocess.run([keytool, "-genkeypair", "-alias", "b", "-keyalg", "EC", "-groupname", "secp256r1",
                    "-dname", "CN=broker1", "-validity", "2", "-storetype", "JKS", "-keystore", "b.jks",
                    "-storepass", "right-pw"], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    c = cluster_factory(1, start=False)
    b = c.brokers[1]
    b.config.write_text(b.config.read_text().replace("PLAINTEXT://", "SSL://")
                        + f"ssl.keystore.location={tmp_path / 'b.jks'}\nssl.keystore.password=wrong-pw\n")
    b.start()
    assert b.wait(60) == 2
    out = b.log.read_text()
    assert "listener SSL: the JKS store's password is wrong" in out and "Traceback" not in out, out


def test_rotating_the_certificate_authority_of_the_inter_broker_listener(cluster_factory, tmp_path) -> None:
    """A CA rotation on a mutual-TLS inter-broker listener, step by step as an operator
    does it with kafka-configs: both CAs trusted, new certificates, the old CA dropped.
    The brokers replicate throughout; a truststore that would not trust the broker's own
    certificate is refused; a broker restarted at the end reconnects both ways with the
    new CA only (so the running broker's own connections took the new key and trust)."""
    two = tmp_path / "ca2"
    two.mkdir()
    ca1, key1, cert1 = make_ca(tmp_path)
    ca2, key2, cert2 = make_ca(two, name="second-ca")
    (tmp_path / "both.pem").write_bytes(ca1.read_bytes() + ca2.read_bytes())
    c = cluster_factory(2, start=False)
    internal = {}
    for b in c.brokers.values():
        internal[b.broker_id] = free_port()
        d = tmp_path / f"b{b.broker_id}"
        d.mkdir()
        cert = make_cert(d, f"broker{b.broker_id}", key1, cert1)
        b.config.write_text(b.config.read_text().replace(
            f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
            f"listeners=PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{internal[b.broker_id]}")
            + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL\ninter.broker.listener.name=INTERNAL\n"
            f"ssl.keystore.location={cert}\nssl.truststore.location={ca1}\nssl.client.auth=required\n")
    c.start()
    c.create_topic("ca", 2, assignment={0: [1, 2], 1: [2, 1]}, configs={"min.insync.replicas": "2"})

    def set_(broker: int, **settings: str) -> subprocess.CompletedProcess:
        value = ",".join(f"listener.name.internal.ssl.{k.replace('_', '.')}={v}" for k, v in settings.items())
        return configs(c.bootstrap, "--entity-type", "brokers", "--entity-name", str(broker), "--alter",
                       "--add-config", value)

    def replicating() -> None:
        c.wait_for_leaders("ca", 2, isr=2, timeout=30)

    for i in c.brokers:  # 1: trust both CAs
        assert set_(i, truststore_location=tmp_path / "both.pem").returncode == 0
    replicating()
    for i in c.brokers:  # 2: certificates of the new CA, same names
        d = tmp_path / f"b{i}-new"
        d.mkdir()
        r = set_(i, keystore_location=make_cert(d, f"broker{i}", key2, cert2))
        assert r.returncode == 0, (r.stdout, r.stderr)
    replicating()
    # A truststore without the broker's own CA: its brokers could not reach each other
    r = set_(1, truststore_location=ca1)
    assert r.returncode != 0 and "do not complete a TLS handshake" in r.stdout + r.stderr, (r.stdout, r.stderr)
    for i in c.brokers:  # 3: the old CA dropped
        assert set_(i, truststore_location=ca2).returncode == 0
    replicating()
    c.restart(2)  # it starts with its dynamic stores: it fetches from broker 1 with the new CA's
    replicating()
    # Broker 2 leads partition 1 again: broker 1 must fetch from it over a new connection,
    # with the key and trust it took while running (an acks=all write waits for that fetch).
    r = subprocess.run([sys.executable, "-m", "kafkarepl", "leader-election", "--bootstrap-server", c.bootstrap,
                        "--election-type", "PREFERRED", "--all-topic-partitions"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (r.stdout, r.stderr)
    wait_until(lambda: c.leader_of("ca", 1) == 2, 15, "broker 2 leads partition 1")
    wait_until(lambda: produce_raw(c.brokers[2].port, "ca", 1, timeout_ms=3000)["error_code"] == 0, 20,
               "an acks=all write to partition 1 is replicated to broker 1")
    trust_old = ssl.create_default_context(cafile=str(ca1))
    with pytest.raises(ssl.SSLError):
        _serial(internal[1], trust_old)
