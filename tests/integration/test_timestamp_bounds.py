"""KIP-937 with real clients: a record whose CreateTime lies too far before or after the
leader's clock is refused with INVALID_TIMESTAMP (Kafka 4.0's default: at most one hour
ahead, KIP-1030); the Java producer fails that record with Kafka's message and the rest
of its batch as Kafka's does; the bounds are topic configs and dynamic broker defaults."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests import java_tools

pytestmark = pytest.mark.integration
HOUR = 3_600_000


def produce(bootstrap: str, topic: str, stamps: list[int]) -> list[int | None]:
    """librdkafka's producer, one record at a time: each record's error code (None: acked)."""
    from confluent_kafka import Producer

    results: list = []
    p = Producer({"bootstrap.servers": bootstrap, "retries": 0, "linger.ms": 0,
                  "on_delivery": lambda err, _m: results.append(None if err is None else err.code())})
    for ts in stamps:
        p.produce(topic, key=b"k", value=b"v", timestamp=ts)
        assert p.flush(10) == 0
    assert len(results) == len(stamps)
    return results


def test_records_outside_the_bounds_are_refused(cluster_factory) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    c = cluster_factory(1)
    c.create_topic("ts", 1, 1, configs={"message.timestamp.before.max.ms": "60000"})
    c.create_topic("lat", 1, 1, configs={"message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)
    bad = KafkaError.INVALID_TIMESTAMP
    assert produce(c.bootstrap, "ts", [now + 2 * HOUR, now - 120_000, now, now + HOUR - 60_000]) == [
        bad, bad, None, None]
    assert produce(c.bootstrap, "lat", [now + 2 * HOUR]) == [None]  # the broker stamps it

    # The Java producer: the record at fault carries Kafka's per-record message, the rest
    # of its batch fails with it.
    future = now + 3 * HOUR
    out = java_tools.run("produce-timestamps", c.bootstrap, "ts", str(now), str(future), str(now))
    first, second, third = out.split(" | ")
    assert second.startswith(f"InvalidTimestampException: Timestamp {future} of message with offset 1 "
                             "is out of range. The timestamp should be within ["), out
    assert first.startswith("KafkaException: ") and third.startswith("KafkaException: "), out
    assert java_tools.run("produce-timestamps", c.bootstrap, "ts", str(now)) == "ok 2"

    # A dynamic cluster-wide default applies to every topic without its own value at once.
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    topic = ConfigResource(ResourceType.TOPIC, "ts")
    entries = admin.describe_configs([topic])[topic].result()
    after = entries["message.timestamp.after.max.ms"]
    assert (after.value, after.is_default) == (str(HOUR), True)
    assert entries["message.timestamp.before.max.ms"].value == "60000"
    r = subprocess.run([sys.executable, "-m", "kafkarepl", "configs", "--bootstrap-server", c.bootstrap,
                        "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                        "log.message.timestamp.after.max.ms=1000"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 15
    while produce(c.bootstrap, "ts", [int(time.time() * 1000) + 60_000]) != [bad]:
        assert time.monotonic() < deadline, "the dynamic default was not applied"
        time.sleep(0.3)
    assert produce(c.bootstrap, "ts", [int(time.time() * 1000)]) == [None]
