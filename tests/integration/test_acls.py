"""ACLs with Kafka's semantics on a SASL cluster: a principal without ACLs is refused
with Kafka's *_AUTHORIZATION_FAILED codes and sees no topics; `kafkarepl acls` (as
kafka-acls.sh) grants and revokes, and every broker applies the change within seconds;
super users and the brokers themselves are not held back."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.integration.test_sasl import conf

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def start(cluster_factory, n: int = 3):
    c = cluster_factory(n, start=False)
    for b in c.brokers.values():
        text = b.config.read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
        text += (f"sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\nsasl.jaas.config={JAAS}\n"
                 "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\nsuper.users=User:admin\n")
        b.config.write_text(text)
        b.start()
    return c


def acls(c, tmp_path, *args: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "admin.properties"
    cfg.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS}\n")
    return subprocess.run([sys.executable, "-m", "kafkarepl", "acls", "--bootstrap-server", c.bootstrap,
                           "--command-config", str(cfg), *args], capture_output=True, text=True, timeout=60)


def produce(c, user: str, topic: str, partitions: int = 3) -> list:
    from confluent_kafka import Producer

    results: list = []
    p = Producer({**conf(c, user, f"{user}-secret"), "message.timeout.ms": 4000, "error_cb": lambda _e: None})
    for i in range(partitions):
        p.produce(topic, value=b"v", partition=i, on_delivery=lambda err, _m: results.append(err))
    p.flush(10)
    return results


def test_acls_grant_and_revoke_on_every_broker(cluster_factory, tmp_path) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    c = start(cluster_factory)
    admin = AdminClient(conf(c, "admin", "admin-secret"))
    deadline = time.monotonic() + 60
    while True:
        try:
            if len(admin.list_topics(timeout=5).brokers) == 3:
                break
        except Exception:  # noqa: BLE001 - starting
            pass
        assert time.monotonic() < deadline
        time.sleep(0.2)
    admin.create_topics([NewTopic("orders", 3, 3)])["orders"].result(30)  # a super user may
    time.sleep(1.0)
    # alice: no ACLs -> refused, and the topic is not listed for her.
    errs = produce(c, "alice", "orders")
    assert errs and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs), errs
    alice_admin = AdminClient(conf(c, "alice", "alice-secret"))
    assert "orders" not in alice_admin.list_topics(timeout=10).topics
    r = acls(c, tmp_path, "--list")
    assert r.returncode == 0 and r.stdout == "", r.stderr
    r = acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation",
             "Describe", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10  # every partition leader (3 brokers) applies it
    while any(e is not None for e in produce(c, "alice", "orders")):
        assert time.monotonic() < deadline, "the grant did not reach every broker"
        time.sleep(0.3)
    assert "orders" in alice_admin.list_topics(timeout=10).topics
    listed = acls(c, tmp_path, "--list", "--topic", "orders")
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed.stdout
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    # Reading needs READ on the topic and on the group.
    from confluent_kafka import Consumer

    cons = Consumer({**conf(c, "alice", "alice-secret"), "group.id": "alice-g", "auto.offset.reset": "earliest",
                     "error_cb": lambda _e: None})
    cons.subscribe(["orders"])
    seen_error = None
    deadline = time.monotonic() + 15
    while seen_error is None and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is not None:
            seen_error = m.error().code()
    cons.close()
    assert seen_error in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED), seen_error
    # Revoke: refused again.
    r = acls(c, tmp_path, "--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10
    while not all(e is not None for e in produce(c, "alice", "orders")):
        assert time.monotonic() < deadline, "the revoke did not reach every broker"
        time.sleep(0.3)
    # A prefixed DENY beats an ALLOW.
    acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "orders")
    acls(c, tmp_path, "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "ord",
         "--resource-pattern-type", "prefixed")
    time.sleep(1.0)
    assert all(e is not None for e in produce(c, "alice", "orders"))
