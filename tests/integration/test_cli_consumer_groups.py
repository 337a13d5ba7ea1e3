"""`kafkarepl consumer-groups` (kafka-consumer-groups.sh's options and formats) as the real
entry point against a real cluster and a confluent-kafka consumer group (issue 11)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from tests.integration.test_cli_admin import cli

pytestmark = pytest.mark.integration


def groups(c, *args: str) -> tuple[int, list[list[str]]]:
    r = cli("consumer-groups", "--bootstrap-server", c.alive_bootstrap(), *args)
    return r.returncode, [line.split() for line in r.stdout.splitlines() if line.strip()]


def test_list_describe_reset_and_delete(cluster_factory) -> None:
    c = cluster_factory(3, offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=0)
    c.create_topic("cg", 2, 3)
    p = Producer({"bootstrap.servers": c.bootstrap})
    for i in range(10):
        p.produce("cg", value=b"%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "app", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "client.id": "app-client"})
    cons.subscribe(["cg"])
    seen = 0
    while seen < 10:
        seen += sum(1 for m in cons.consume(10, timeout=2) if m.error() is None)
    cons.commit(asynchronous=False)

    rc, rows = groups(c, "--list")
    assert rc == 0 and ["app"] in rows, rows
    rc, rows = groups(c, "--describe", "--group", "app")
    assert rc == 0 and rows[0][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert sorted((r[2], r[3], r[4], r[5], r[8]) for r in rows[1:]) == [
        ("0", "5", "5", "0", "app-client"), ("1", "5", "5", "0", "app-client")], rows
    # Resetting needs an inactive group, as in Kafka.
    rc, _ = groups(c, "--reset-offsets", "--group", "app", "--topic", "cg", "--to-earliest", "--execute")
    assert rc == 1
    cons.close()
    rc, rows = groups(c, "--reset-offsets", "--group", "app", "--topic", "cg:1", "--to-offset", "2")
    assert rc == 0 and rows[1] == ["app", "cg", "1", "2"], rows  # dry run: nothing committed
    rc, rows = groups(c, "--reset-offsets", "--group", "app", "--topic", "cg", "--to-earliest", "--execute")
    assert rc == 0 and sorted(r[3] for r in rows[1:]) == ["0", "0"], rows
    rc, rows = groups(c, "--describe", "--group", "app")
    assert rc == 0 and ["Consumer", "group", "'app'", "has", "no", "active", "members."] in rows
    table = rows[rows.index(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                             "CONSUMER-ID", "HOST", "CLIENT-ID"]) + 1:]
    assert sorted((r[2], r[3], r[5]) for r in table) == [("0", "0", "5"), ("1", "0", "5")], rows
    rc, rows = groups(c, "--delete", "--group", "app")
    assert rc == 0 and "successful." in rows[0][-1], rows
    rc, rows = groups(c, "--list")
    assert ["app"] not in rows
