"""`kafkarepl topics --describe` with kafka-topics.sh's partition filters, run as the real
entry point against a 3-broker cluster with one broker killed (issue 11)."""

from __future__ import annotations

import time

import pytest

from tests.integration.test_cli_admin import cli

pytestmark = pytest.mark.integration


def describe(c, *flags: str) -> list[str]:
    r = cli("topics", "--bootstrap-server", c.alive_bootstrap(), "--describe", *flags)
    assert r.returncode == 0, r.stderr
    return [line.strip() for line in r.stdout.splitlines() if line.strip()]


def test_describe_filters_show_only_the_matching_partitions(cluster_factory) -> None:
    c = cluster_factory(3, replica_lag_time_max_ms=2000)
    c.create_topic("two", 2, 2, configs={"min.insync.replicas": 2})  # RF 2: one loss = under min ISR
    c.create_topic("three", 1, 3, configs={"min.insync.replicas": 2})
    assert describe(c, "--under-replicated-partitions") == []
    assert len(describe(c, "--at-min-isr-partitions")) == 2  # the RF-2 partitions: ISR 2 == 2
    md = c.metadata(["two"])
    p0 = next(p for p in md["topics"][0]["partitions"] if p["partition_index"] == 0)
    victim = next(r for r in p0["replica_nodes"] if r != p0["leader_id"])  # a follower of two-0
    c.kill(victim)
    deadline = time.monotonic() + 40
    while True:
        under = describe(c, "--under-replicated-partitions")
        if len(under) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # Every partition with a replica on the dead broker, and nothing else, no topic header.
    assert under and all(line.startswith("Topic: ") and "Partition: " in line for line in under), under
    assert any("Topic: three\tPartition: 0" in line for line in under), under
    at_min = describe(c, "--at-min-isr-partitions")
    assert any("Topic: three" in line for line in at_min), at_min  # ISR 2 of 3 == min ISR 2
    under_min = describe(c, "--under-min-isr-partitions")
    assert any("Topic: two\tPartition: 0" in line for line in under_min), under_min  # ISR 1 < 2
    assert all("Topic: two" in line for line in under_min), under_min
    assert describe(c, "--unavailable-partitions") == []  # every partition still has a leader
