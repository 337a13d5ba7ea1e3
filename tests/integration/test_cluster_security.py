"""`kafkarepl cluster up --security`: a local cluster with TLS and SCRAM and ACLs on, as a
new user runs it: the Kafka-style client files it writes work with kafkarepl's tools and
kcat, a plaintext client gets nothing, a new SCRAM user needs an ACL, and delegation
tokens work."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from tests.fixtures.cluster import free_port

pytestmark = pytest.mark.integration


def kr(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkarepl", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _base_port() -> int:
    while True:  # three consecutive free ports
        base = free_port()
        try:
            for p in range(base, base + 3):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue


def test_secured_local_cluster(zk_chroot, tmp_path) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    data, base = tmp_path / "secure", _base_port()
    bootstrap = f"127.0.0.1:{base}"
    r = kr("cluster", "up", "--brokers", "3", "--security", "--zookeeper", zk_chroot, "--base-port", str(base),
           "--data-dir", str(data))
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        client_props = data / "security" / "client.properties"
        rdkafka_props = data / "security" / "librdkafka.properties"
        assert str(client_props) in r.stdout and str(rdkafka_props) in r.stdout
        assert "SASL_SSL" in (data / "broker-1" / "server.properties").read_text()

        r = kr("topics", "--bootstrap-server", bootstrap, "--command-config", str(client_props), "--create",
               "--topic", "secure", "--partitions", "1", "--replication-factor", "3")
        assert r.returncode == 0, r.stdout + r.stderr
        r = kr("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "open", "--partitions", "1",
               "--replication-factor", "1")
        assert r.returncode != 0  # no plaintext way in
        # kafka-broker-api-versions.sh and kafka-cluster.sh over TLS + SCRAM
        r = kr("broker-api-versions", "--bootstrap-server", bootstrap, "--command-config", str(client_props))
        assert r.returncode == 0 and r.stdout.count(" -> (\n\tProduce(0): ") == 3, r.stdout + r.stderr
        r = kr("cluster", "cluster-id", "-b", bootstrap, "-c", str(client_props))
        assert r.returncode == 0 and r.stdout.startswith("Cluster ID: "), r.stdout + r.stderr

        p = subprocess.run(["kcat", "-F", str(rdkafka_props), "-b", bootstrap, "-P", "-t", "secure", "-p", "0"],
                           input="over tls and scram\n", capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        p = subprocess.run(["kcat", "-F", str(rdkafka_props), "-b", bootstrap, "-C", "-t", "secure", "-p", "0",
                            "-o", "beginning", "-e", "-q"], capture_output=True, text=True, timeout=30)
        assert p.stdout.strip() == "over tls and scram", p.stderr

        # A new SCRAM user: authenticated, but refused the topic until an ACL allows it.
        props = dict(line.split("=", 1) for line in rdkafka_props.read_text().splitlines() if "=" in line)
        admin = AdminClient({**props, "bootstrap.servers": bootstrap})
        up = UserScramCredentialUpsertion("eve", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"eve-pw")
        admin.alter_user_scram_credentials([up])["eve"].result(20)
        eve = {**props, "bootstrap.servers": bootstrap, "sasl.username": "eve", "sasl.password": "eve-pw"}

        def eve_produces() -> KafkaError | None:
            results: list = []
            prod = Producer({**eve, "message.timeout.ms": 5000})
            prod.produce("secure", value=b"eve", on_delivery=lambda err, _m: results.append(err))
            prod.flush(15)
            return results[0] if results else KafkaError(KafkaError._MSG_TIMED_OUT)

        err = eve_produces()
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        r = kr("acls", "--bootstrap-server", bootstrap, "--command-config", str(client_props), "--add",
               "--allow-principal", "User:eve", "--operation", "Write", "--operation", "Describe", "--topic", "secure")
        assert r.returncode == 0, r.stdout + r.stderr
        deadline = time.monotonic() + 15
        while (err := eve_produces()) is not None:
            assert time.monotonic() < deadline, err
            time.sleep(0.5)
        # Delegation tokens are on: eve gets one and a client logs in with it, as eve.
        eve_props = tmp_path / "eve.properties"
        eve_props.write_text(client_props.read_text().replace('username="admin"', 'username="eve"').replace(
            f'password="{props["sasl.password"]}"', 'password="eve-pw"'))
        r = kr("delegation-tokens", "--bootstrap-server", bootstrap, "--command-config", str(eve_props), "--create",
               "--max-life-time-period", "-1")
        assert r.returncode == 0, r.stdout + r.stderr
        token_id, mac = r.stdout.strip().splitlines()[-1].split()[:2]
        token_props = tmp_path / "token.properties"
        token_props.write_text(eve_props.read_text().replace('username="eve"', f'username="{token_id}"').replace(
            'password="eve-pw"', f'password="{mac}" tokenauth="true"'))
        r = kr("topics", "--bootstrap-server", bootstrap, "--command-config", str(token_props), "--list")
        assert r.returncode == 0 and r.stdout.split() == ["secure"], r.stdout + r.stderr
        r = kr("cluster", "status", "--data-dir", str(data))
        assert r.returncode == 0 and "controller: broker -1" not in r.stdout, r.stdout + r.stderr
    finally:
        kr("cluster", "down", "--data-dir", str(data))
