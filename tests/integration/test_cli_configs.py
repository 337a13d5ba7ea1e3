"""`kafkarepl configs` (kafka-configs.sh): topic and broker configs, client quotas and
SCRAM users altered and described against a real cluster, with Kafka's tool's output."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.integration.chaos import wait_until
from tests.integration.test_sasl import conf, roundtrip, start_sasl_cluster, wait_ready

pytestmark = pytest.mark.integration


def configs(bootstrap: str, *args: str, command_config: str | None = None) -> subprocess.CompletedProcess:
    extra = ["--command-config", command_config] if command_config else []
    r = subprocess.run([sys.executable, "-m", "kafkarepl", "configs", "--bootstrap-server", bootstrap, *extra, *args],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def ok(bootstrap: str, *args: str, command_config: str | None = None) -> list[str]:
    r = configs(bootstrap, *args, command_config=command_config)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_topic_and_broker_configs(cluster_factory) -> None:
    c = cluster_factory(2)
    c.create_topic("t", 1, 2)
    b = c.bootstrap
    assert ok(b, "--entity-type", "topics", "--entity-name", "t", "--alter",
              "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]") == [
        "Completed updating config for topic t."]
    assert ok(b, "--entity-type", "topics", "--entity-name", "t", "--describe") == [
        "Dynamic configs for topic t are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete,"
        " DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000,"
        " DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    ok(b, "--topic", "t", "--alter", "--delete-config", "retention.ms")
    lines = ok(b, "--topic", "t", "--describe")
    assert len(lines) == 2 and lines[1].startswith("  cleanup.policy="), lines
    every = ok(b, "--topic", "t", "--describe", "--all")
    assert every[0] == "All configs for topic t are:" and any(x.startswith("  retention.ms=604800000 ") for x in every)
    # a bad value or an unknown topic: Kafka's error, exit 1
    r = configs(b, "--topic", "t", "--alter", "--add-config", "cleanup.policy=forever")
    assert r.returncode == 1 and "cleanup.policy" in r.stderr, r.stderr
    r = configs(b, "--topic", "nope", "--alter", "--add-config", "retention.ms=1")
    assert r.returncode == 1 and r.stderr.startswith("Error:"), r.stderr

    assert ok(b, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
              "log.retention.ms=3600000") == ["Completed updating default config for brokers in the cluster."]
    assert ok(b, "--entity-type", "brokers", "--entity-default", "--describe") == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}"]
    assert ok(b, "--broker", "2", "--alter", "--add-config", "leader.replication.throttled.rate=1000000") == [
        "Completed updating config for broker 2."]
    lines = ok(b, "--entity-type", "brokers", "--describe")
    assert lines[0] == "Dynamic configs for broker 1 are:" and lines[1] == "Dynamic configs for broker 2 are:", lines
    assert lines[2].startswith("  leader.replication.throttled.rate=1000000 sensitive=false "
                               "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000000"), lines
    assert lines[3] == "Default configs for brokers in the cluster are:" and lines[4].startswith("  log.retention.ms=")
    # the topic now takes its retention from the cluster-wide default
    every = ok(b, "--topic", "t", "--describe", "--all")
    assert any(x.startswith("  retention.ms=3600000 ") for x in every), every


def _deleted_segment_files(pid: int, topic_dir: str) -> set[str]:
    """The unlinked .log files of one partition the broker still holds a descriptor of."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if f"/{topic_dir}/" in target and target.endswith(".log (deleted)"):
            held.add(target)
    return held


def _deleted_segment_fds(pid: int, topic_dir: str) -> int:
    return len(_deleted_segment_files(pid, topic_dir))


def test_file_delete_delay_is_the_topics_and_changes_live(cluster_factory) -> None:
    """file.delete.delay.ms governs how long a retired segment's data (an unlinked file's
    descriptor here, Kafka's `.deleted` files) stays for readers: the topic's value over
    the broker's log.segment.delete.delay.ms, changed by IncrementalAlterConfigs for the
    segments retired afterwards; listed with that broker synonym, as Kafka does."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = cluster_factory(1, log_retention_check_interval_ms=200, log_segment_delete_delay_ms=0)
    c.create_topic("fdd", 1, 1, configs={"segment.bytes": "2000", "retention.bytes": "2000",
                                         "file.delete.delay.ms": "600000"})
    b = c.bootstrap
    pid = c.brokers[1].proc.pid
    p = Producer({"bootstrap.servers": b, "linger.ms": 0})
    cons = Consumer({"bootstrap.servers": b, "group.id": "fdd-watch"})

    def produce(n: int) -> None:
        for i in range(n):
            p.produce("fdd", value=b"%04d" % i + b"x" * 400, partition=0)
            assert p.flush(10) == 0

    def low() -> int:
        return cons.get_watermark_offsets(TopicPartition("fdd", 0), timeout=5)[0]

    produce(30)
    wait_until(lambda: low() > 0 and _deleted_segment_fds(pid, "fdd-0") >= 2, 20,
               "retention to retire segments, kept open for the topic's 10 minutes")
    held = _deleted_segment_fds(pid, "fdd-0")
    every = ok(b, "--topic", "fdd", "--describe", "--all")
    assert "  file.delete.delay.ms=600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:file.delete.delay.ms=600000," \
           " STATIC_BROKER_CONFIG:log.segment.delete.delay.ms=0, DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}" \
        in every, every
    assert not any(x.startswith("  message.timestamp.difference.max.ms=") for x in every), every  # as Kafka 4.0

    ok(b, "--topic", "fdd", "--alter", "--add-config", "file.delete.delay.ms=0")
    # The broker applies the change from ZooKeeper's change notification, a moment later;
    # a segment retired meanwhile keeps the delay read then (as in Kafka). Once applied,
    # segments retired are closed at once: the log start moves, nothing more is held.
    seen = _deleted_segment_files(pid, "fdd-0")
    last = [low()]

    def retired_and_released() -> bool:
        produce(6)
        now, names = low(), _deleted_segment_files(pid, "fdd-0")
        moved, grew = now > last[0], bool(names - seen)
        last[0] = now
        seen.update(names)
        return moved and not grew

    wait_until(retired_and_released, 30, "segments retired after the change released at once")
    held = _deleted_segment_fds(pid, "fdd-0")  # those retired before the change wait theirs

    # Without the override the topic takes the broker's (dynamic) default.
    ok(b, "--topic", "fdd", "--alter", "--delete-config", "file.delete.delay.ms")
    assert ok(b, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
              "log.segment.delete.delay.ms=600000") == ["Completed updating default config for brokers in the cluster."]
    wait_until(lambda: any(x.startswith("  file.delete.delay.ms=600000 ")
                           for x in ok(b, "--topic", "fdd", "--describe", "--all")), 10, "the dynamic default")
    wait_until(lambda: produce(4) or _deleted_segment_fds(pid, "fdd-0") > held, 20,
               "segments retired under the dynamic default to be held")
    r = configs(b, "--topic", "fdd", "--alter", "--add-config", "file.delete.delay.ms=-1")
    assert r.returncode == 1 and "file.delete.delay.ms" in r.stderr, r.stderr
    cons.close()


def test_client_quotas(cluster_factory) -> None:
    c = cluster_factory(1)
    b = c.bootstrap
    assert ok(b, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name",
              "app", "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=20000000") == [
        "Completed updating config for user alice."]
    assert ok(b, "--client-defaults", "--alter", "--add-config", "consumer_byte_rate=2048") == [
        "Completed updating default config for clients in the cluster."]
    assert ok(b, "--user", "alice", "--client", "app", "--describe") == [
        "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2.0E7, "
        "producer_byte_rate=1048576.0"]
    assert ok(b, "--entity-type", "clients", "--entity-default", "--describe") == [
        "Quota configs for the default client-id are consumer_byte_rate=2048.0"]
    assert ok(b, "--entity-type", "clients", "--describe") == [
        "Quota configs for the default client-id are consumer_byte_rate=2048.0"]
    ok(b, "--user", "alice", "--client", "app", "--alter", "--delete-config", "consumer_byte_rate")
    assert ok(b, "--user", "alice", "--client", "app", "--describe") == [
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0"]
    assert ok(b, "--entity-type", "ips", "--entity-name", "10.1.2.3", "--alter", "--add-config",
              "connection_creation_rate=10") == ["Completed updating config for ip 10.1.2.3."]
    assert ok(b, "--ip", "10.1.2.3", "--describe") == ["Quota configs for ip '10.1.2.3' are connection_creation_rate=10.0"]
    r = configs(b, "--user", "alice", "--alter", "--add-config", "producer_byte_rate=1.5")
    assert r.returncode == 1 and "LONG" in r.stderr, r.stderr
    r = configs(b, "--user", "alice", "--alter", "--add-config", "retention.ms=5")
    assert r.returncode == 1 and "retention.ms" in r.stderr, r.stderr


def test_scram_users_created_with_the_tool_log_in(cluster_factory, tmp_path) -> None:
    c, ca = start_sasl_cluster(cluster_factory, tmp_path, 1)
    wait_ready(c, ca, "secured", 1)
    admin = tmp_path / "admin.properties"
    admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.username=admin\nsasl.password=admin-secret\n")
    b = c.bootstrap
    assert ok(b, "--user", "bob", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=bob-secret],"
              "SCRAM-SHA-512=[password=bob-secret]", command_config=str(admin)) == [
        "Completed updating config for user bob."]
    assert ok(b, "--user", "bob", "--describe", command_config=str(admin)) == [
        "Quota configs for user-principal 'bob' are",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"]
    wait_until(lambda: roundtrip(c, "secured", conf(c, "bob", "bob-secret", "SCRAM-SHA-256"), b"via-tool"), 20,
               "bob logs in with SCRAM-SHA-256")
    assert not roundtrip(c, "secured", conf(c, "bob", "wrong", "SCRAM-SHA-256"), b"no", timeout_ms=1500)
    # a user quota applies to the SASL principal User:bob, whatever its client id
    ok(b, "--user", "bob", "--alter", "--add-config", "producer_byte_rate=20000", command_config=str(admin))
    assert _throttled(conf(c, "bob", "bob-secret", "SCRAM-SHA-256", **{"client.id": "any"}))
    assert not _throttled(conf(c, "alice", "alice-secret", **{"client.id": "any"}))
    ok(b, "--user", "bob", "--alter", "--delete-config", "SCRAM-SHA-256", command_config=str(admin))
    time.sleep(1.0)
    assert not roundtrip(c, "secured", conf(c, "bob", "bob-secret", "SCRAM-SHA-256"), b"gone", timeout_ms=1500)
    assert roundtrip(c, "secured", conf(c, "bob", "bob-secret", "SCRAM-SHA-512"), b"still")


def _throttled(cfg: dict) -> bool:
    """Whether librdkafka saw a throttle time producing 250 KB (more than the 200 KB a
    20 KB/s quota lets through at once: 10 windows of it)."""
    import json

    from confluent_kafka import Producer

    seen: list[int] = []

    def stats(text: str) -> None:
        seen.extend(b.get("throttle", {}).get("max", 0) for b in json.loads(text)["brokers"].values())

    p = Producer({**cfg, "statistics.interval.ms": 100, "stats_cb": stats, "linger.ms": 5, "batch.size": 65536})
    for _ in range(25):
        p.produce("secured", b"v" * 10_000)
        p.poll(0)
    assert p.flush(60) == 0
    time.sleep(0.5)
    p.poll(0)
    return max(seen, default=0) > 0

