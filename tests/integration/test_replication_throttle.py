"""Replication throttles (kafka-reassign-partitions.sh --throttle) measurably limit a
reassignment's catch-up, and --verify clears them once it is done; --cancel clears them
too, and --preserve-throttles keeps them, as Kafka's tool."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.chaos import wait_until
from tests.integration.test_cli_admin import reassign

pytestmark = pytest.mark.integration

MB = 1_000_000


def replica_bytes(c, broker: int, topic: str) -> int:
    d = c.root / f"broker-{broker}" / "logs" / f"{topic}-0"
    return sum(p.stat().st_size for p in Path(d).glob("*.log")) if d.exists() else 0


def test_throttled_reassignment_catches_up_at_the_rate_then_unthrottled(cluster_factory, tmp_path) -> None:
    from confluent_kafka import Producer

    c = cluster_factory(3)
    c.create_topic("thr", 1, 2)
    current = c.metadata(["thr"])["topics"][0]["partitions"][0]["replica_nodes"]
    [new] = [b for b in c.brokers if b not in current]
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "compression.type": "none"})
    value = bytes(range(256)) * 40  # 10 KB, incompressible enough
    for _ in range(2000):  # ~20 MB
        p.produce("thr", value=value, partition=0)
        p.poll(0)
    assert p.flush(30) == 0
    total = replica_bytes(c, current[0], "thr")
    assert total > 15 * MB
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "thr", "partition": 0, "replicas": [*current, new]}]}))
    r = reassign(c, "--reassignment-json-file", str(plan), "--execute", "--throttle", str(MB))
    assert r.returncode == 0, r.stderr
    assert "The inter-broker throttle limit was set to 1000000 B/s" in r.stdout
    t0 = time.monotonic()
    time.sleep(4.0)
    copied, elapsed = replica_bytes(c, new, "thr"), time.monotonic() - t0
    # 1 MB/s over the window, plus at most a fetch or two of slack (replica.fetch.max.bytes).
    assert 0 < copied <= MB * elapsed + 2.5 * MB, (copied, elapsed)
    v = reassign(c, "--reassignment-json-file", str(plan), "--verify")
    assert v.returncode == 0, v.stderr  # as Kafka's tool: a report, 0 while in progress
    assert "still in progress" in v.stdout and "Clearing" not in v.stdout
    # Remove the rates (as --verify does at the end): the rest arrives at full speed.
    import asyncio

    from kafkarepl.client.cluster import ClusterClient

    async def unthrottle() -> None:
        async with ClusterClient(c.bootstrap) as admin:
            await admin.metadata()
            for b in c.brokers:
                await admin.incremental_alter_configs({(4, str(b)): [
                    ("leader.replication.throttled.rate", 1, None), ("follower.replication.throttled.rate", 1, None)]})

    asyncio.run(unthrottle())
    wait_until(lambda: replica_bytes(c, new, "thr") >= total, 20, "the new replica caught up once unthrottled")
    wait_until(lambda: "is completed." in reassign(c, "--reassignment-json-file", str(plan), "--verify").stdout, 20,
               "the reassignment complete")
    v = reassign(c, "--reassignment-json-file", str(plan), "--verify")
    assert "Clearing broker-level throttles on brokers 1,2,3" in v.stdout
    assert "Clearing topic-level throttles on topic thr" in v.stdout


def _throttles(c) -> tuple[dict[int, str | None], str | None]:
    """Each broker's leader.replication.throttled.rate, the topic's leader replica list (None: unset)."""
    import asyncio

    from kafkarepl.client.cluster import ClusterClient

    async def read() -> tuple[dict[int, str | None], str | None]:
        async with ClusterClient(c.bootstrap) as admin:
            await admin.metadata()
            rates: dict[int, str | None] = {}
            for b in c.brokers:
                [res] = (await admin.describe_configs([(4, str(b))], ["leader.replication.throttled.rate"]))["results"]
                rates[b] = next((e["value"] for e in res["configs"]), None)
            [res] = (await admin.describe_configs([(2, "thr")], ["leader.replication.throttled.replicas"]))["results"]
            # Unset: listed empty with source DEFAULT_CONFIG (5).
            return rates, next((e["value"] for e in res["configs"] if e["config_source"] != 5), None)

    return asyncio.run(read())


def _gauge(port: int, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def test_cancel_clears_the_throttles_unless_preserved(cluster_factory, tmp_path) -> None:
    from confluent_kafka import Producer


    c = cluster_factory(3, start=False)
    ports = c.serve_metrics()
    c.start()
    c.create_topic("thr", 1, 2)
    current = c.metadata(["thr"])["topics"][0]["partitions"][0]["replica_nodes"]
    [new] = [b for b in c.brokers if b not in current]
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 20})
    # 3 MB: more than one fetch carries (replica.fetch.max.bytes, 1 MiB). The first fetch
    # may copy a whole MiB before either throttle has counted a byte (as in Kafka, a quota
    # holds back only once exceeded); at 1,000 B/s the rest cannot follow during the test.
    for _ in range(300):
        p.produce("thr", value=bytes(10_000), partition=0)
    assert p.flush(30) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "thr", "partition": 0, "replicas": [*current, new]}]}))
    r = reassign(c, "--reassignment-json-file", str(plan), "--execute", "--throttle", "1000")
    assert r.returncode == 0, r.stderr
    rates, replicas = _throttles(c)
    assert set(rates.values()) == {"1000"} and replicas
    leader = c.leader_of("thr")
    # The byte-rate gauges show the throttled copying, on the leader and the new replica.
    wait_until(lambda: _gauge(ports[leader], "kafka_server_leaderreplication_byte_rate") > 0
               and _gauge(ports[new], "kafka_server_followerreplication_byte_rate") > 0, 15, "throttled bytes")
    r = reassign(c, "--reassignment-json-file", str(plan), "--cancel", "--preserve-throttles")
    assert r.returncode == 0 and "Successfully cancelled" in r.stdout and "Clearing" not in r.stdout, r.stdout
    assert _throttles(c) == (rates, replicas)
    r = reassign(c, "--reassignment-json-file", str(plan), "--cancel")  # nothing active: cleared all the same
    assert r.returncode == 0 and "None of the specified partition moves are active" in r.stdout, r.stdout
    assert "Clearing topic-level throttles on topic thr" in r.stdout
    assert _throttles(c) == (dict.fromkeys(c.brokers), None)
