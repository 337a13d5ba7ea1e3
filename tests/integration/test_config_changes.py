"""A topic config change reaches every broker live, through the /config/changes
notifications, not only the broker that handled the request (issue 11)."""

from __future__ import annotations

import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch
from tests.fixtures.cluster import TestCluster
from tests.fixtures.zk_proxy import CuttingProxy
from tests.integration.chaos import wait_until
from tests.integration.test_recovery import produce
from tools.zookeeper import LocalZooKeeper

pytestmark = pytest.mark.integration


def test_min_insync_replicas_change_applies_on_every_leader(cluster_factory) -> None:
    c = cluster_factory(3)
    c.create_topic("live", 6, 3)
    md = c.metadata(["live"])
    leaders = {p["partition_index"]: p["leader_id"] for p in md["topics"][0]["partitions"]}
    assert set(leaders.values()) == {1, 2, 3}, leaders
    # min.insync.replicas above the replication factor: every acks=all write is refused.
    body = {"resources": [{"resource_type": 2, "resource_name": "live", "configs": [
        {"name": "min.insync.replicas", "config_operation": 0, "value": "4"}]}], "validate_only": False}
    [r] = wire.call("127.0.0.1", c.brokers[1].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"]
    assert r["error_code"] == 0, r
    for partition, leader in leaders.items():  # also on brokers 2 and 3, which only got the notification
        deadline = time.monotonic() + 10
        while True:
            # (NOT_ENOUGH_REPLICAS_AFTER_APPEND while the change arrives: appended under
            # the old setting; the next write is refused up front)
            code = produce(c.brokers[leader].port, "live", bytes(build_batch(1)), partition, acks=-1)["error_code"]
            if code == ErrorCode.NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert code == ErrorCode.NOT_ENOUGH_REPLICAS, (partition, leader, code)


def test_a_change_read_cut_off_by_a_zookeeper_blip_still_applies(tmp_path, zookeeper) -> None:
    """Broker 2 loses its ZooKeeper connection as it reads a config change notification
    (for less than the session timeout: no re-registration, no LeaderAndIsr re-reads
    the configs): it reads it again once connected and applies the change."""
    zk = LocalZooKeeper(tmp_path / "zk", tick_ms=200).start()
    # A blip well inside the 3 s session timeout (pings every 1 s; reconnects within 1 s).
    proxy = CuttingProxy(("127.0.0.1", zk.port), b"/kr/config/changes/config_change_", outage_s=0.3)
    c = TestCluster(f"{zk.connect_string}/kr", tmp_path / "cluster", 2, {})
    cfg = c.brokers[2].config
    cfg.write_text(cfg.read_text().replace(zk.connect_string, f"127.0.0.1:{proxy.port}"))
    try:
        c.start()
        c.create_topic("live", 2, 1)
        md = c.metadata(["live"])
        [partition] = [p["partition_index"] for p in md["topics"][0]["partitions"] if p["leader_id"] == 2]
        assert produce(c.brokers[2].port, "live", bytes(build_batch(1)), partition, acks=-1)["error_code"] == 0
        # Through broker 1, whose ZooKeeper connection is direct.
        body = {"resources": [{"resource_type": 2, "resource_name": "live", "configs": [
            {"name": "min.insync.replicas", "config_operation": 0, "value": "2"}]}], "validate_only": False}
        [r] = wire.call("127.0.0.1", c.brokers[1].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"]
        assert r["error_code"] == 0, r
        assert proxy.triggered.wait(10), f"broker 2 never read the notification:\n{c.tail(2)}"
        wait_until(lambda: produce(c.brokers[2].port, "live", bytes(build_batch(1)), partition, acks=-1)[
            "error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS, 20, f"the change applied on broker 2:\n{c.tail(2)}")
        log_text = c.brokers[2].log.read_text(errors="replace")
        assert "config change interrupted" in log_text and "new ZooKeeper session" not in log_text, c.tail(2)
    finally:
        c.shutdown()
        proxy.close()
        zk.stop()


def test_log_retention_hours_in_server_properties_applies(cluster_factory) -> None:
    """`log.retention.hours` (as in Kafka's own server.properties) is the topics'
    retention: records two hours old go with their segments under log.retention.hours=1,
    and DescribeConfigs shows retention.ms from it, as Kafka does."""
    from confluent_kafka import Producer

    from tests.integration.chaos import list_offset

    c = cluster_factory(1, log_retention_hours=1, log_retention_check_interval_ms=200)
    c.create_topic("old", 1, 1, configs={"segment.bytes": "2048"})
    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0, "batch.size": 1000,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    two_hours_ago = int(time.time() * 1000) - 2 * 3_600_000
    for i in range(200):
        p.produce("old", value=b"v%05d" % i, partition=0, timestamp=two_hours_ago)
    assert p.flush(30) == 0 and not errors, errors
    port = c.brokers[1].port
    wait_until(lambda: list_offset(port, "old", 0, -2)[1] > 0, 20, "segments older than an hour deleted")
    describe = {"resources": [{"resource_type": 2, "resource_name": "old", "configuration_keys": ["retention.ms"]}],
                "include_synonyms": True, "include_documentation": False}
    [entry] = wire.call("127.0.0.1", port, ApiKey.DESCRIBE_CONFIGS, 4, describe)["results"][0]["configs"]
    assert (entry["value"], entry["config_source"]) == ("3600000", 4), entry  # STATIC_BROKER_CONFIG
    assert [(s["name"], s["value"]) for s in entry["synonyms"]] == [("log.retention.hours", "1"), ("log.retention.hours", "168")], entry


KAFKA_SERVER_PROPERTIES = """\
# The settings of Kafka's own config/server.properties (ZooKeeper mode), paths and ports
# changed; the ones kafkarepl has no use for (threads, socket buffers) are accepted.
broker.id=0
listeners=PLAINTEXT://127.0.0.1:{port}
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dir={log_dir}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect={zk}
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def test_a_broker_runs_from_kafkas_own_server_properties(tmp_path, zk_chroot) -> None:
    """A server.properties written for Kafka works as it would there: its `log.dir`
    holds the logs and its `log.retention.hours` is the topics' retention."""
    from tests.fixtures.cluster import BrokerProcess, free_port

    port = free_port()
    cfg = tmp_path / "server.properties"
    cfg.write_text(KAFKA_SERVER_PROPERTIES.format(port=port, log_dir=tmp_path / "kafka-logs", zk=zk_chroot))
    b = BrokerProcess(0, port, cfg, tmp_path / "broker.log")
    b.start()
    try:
        wait_until(lambda: wire.metadata("127.0.0.1", port, [], timeout=2)["controller_id"] == 0, 30, "serving")
        body = {"topics": [{"name": "plain", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout_ms": 10000, "validate_only": False}
        assert wire.call("127.0.0.1", port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
        assert produce(port, "plain", bytes(build_batch(1)), 0, acks=-1)["error_code"] == 0
        assert list((tmp_path / "kafka-logs" / "plain-0").glob("*.log"))
        describe = {"resources": [{"resource_type": 2, "resource_name": "plain", "configuration_keys": ["retention.ms"]}],
                    "include_synonyms": True, "include_documentation": False}
        [entry] = wire.call("127.0.0.1", port, ApiKey.DESCRIBE_CONFIGS, 4, describe)["results"][0]["configs"]
        assert (entry["value"], entry["config_source"]) == (str(168 * 3_600_000), 4), entry
    finally:
        b.signal(15)
        b.wait(30)


def test_dynamic_broker_default_of_a_topic_config_applies_on_every_broker(cluster_factory) -> None:
    """kafka-configs.sh --entity-type brokers --entity-default --alter --add-config
    log.retention.ms=...: every broker's topics without their own retention.ms take it at
    once (old segments go), a topic override still wins, DescribeConfigs shows the topic
    value from DYNAMIC_DEFAULT_BROKER_CONFIG, and a bad value is refused."""
    from confluent_kafka import Producer

    from tests.integration.chaos import list_offset

    c = cluster_factory(2, log_retention_check_interval_ms=200)
    c.create_topic("aged", 2, 1, configs={"segment.bytes": "2048"})
    c.create_topic("kept", 2, 1, configs={"segment.bytes": "2048", "retention.ms": str(7 * 86_400_000)})
    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0, "batch.size": 1000,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    two_hours_ago = int(time.time() * 1000) - 2 * 3_600_000
    for topic in ("aged", "kept"):
        for i in range(400):
            p.produce(topic, value=b"v%05d" % i, partition=i % 2, timestamp=two_hours_ago)
    assert p.flush(30) == 0 and not errors, errors
    leaders = {(t["name"], q["partition_index"]): q["leader_id"]
               for t in c.metadata(["aged", "kept"])["topics"] for q in t["partitions"]}
    assert sorted({leaders[("aged", 0)], leaders[("aged", 1)]}) == [1, 2], leaders

    def alter(value: str) -> int:
        body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": value}]}], "validate_only": False}
        return wire.call("127.0.0.1", c.brokers[1].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)[
            "responses"][0]["error_code"]

    assert alter("an hour") == ErrorCode.INVALID_CONFIG
    assert alter("3600000") == 0

    def log_start(topic: str, partition: int) -> int:
        return list_offset(c.brokers[leaders[(topic, partition)]].port, topic, partition, -2)[1]

    wait_until(lambda: log_start("aged", 0) > 0 and log_start("aged", 1) > 0, 20, "old segments gone on both brokers")
    assert (log_start("kept", 0), log_start("kept", 1)) == (0, 0)
    describe = {"resources": [{"resource_type": 2, "resource_name": "aged", "configuration_keys": ["retention.ms"]}],
                "include_synonyms": True, "include_documentation": False}
    [entry] = wire.call("127.0.0.1", c.brokers[2].port, ApiKey.DESCRIBE_CONFIGS, 4, describe)["results"][0]["configs"]
    assert (entry["value"], entry["config_source"]) == ("3600000", 3), entry  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert entry["synonyms"][0] == {"name": "log.retention.ms", "value": "3600000", "source": 3}, entry


def test_dynamic_topic_defaults_that_conflict_together_are_not_applied(cluster_factory) -> None:
    """A per-broker and a cluster-wide dynamic default, each valid alone, conflict together
    (min.compaction.lag.ms above max.compaction.lag.ms): the broker keeps what it had,
    says so, and still starts with them in ZooKeeper."""
    c = cluster_factory(1)

    def alter(entity: str, name: str, value: str) -> int:
        body = {"resources": [{"resource_type": 4, "resource_name": entity, "configs": [
            {"name": name, "config_operation": 0, "value": value}]}], "validate_only": False}
        return wire.call("127.0.0.1", c.brokers[1].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)[
            "responses"][0]["error_code"]

    assert alter("1", "log.cleaner.min.compaction.lag.ms", "2000") == 0
    assert alter("", "log.cleaner.max.compaction.lag.ms", "1000") == 0
    wait_until(lambda: "dynamic topic defaults" in c.tail(1) and "not applied" in c.tail(1), 10, "the refusal")
    c.restart(1)
    c.create_topic("still", 1, 1)


def test_a_topic_config_outside_its_kafka_type_is_refused(cluster_factory) -> None:
    """segment.index.bytes is an INT in Kafka: a larger value is INVALID_CONFIG at
    creation (it was taken, and every append to the partition then failed)."""
    c = cluster_factory(1)
    body = {"topics": [{"name": "huge", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": "segment.index.bytes", "value": "9" * 40}]}],
            "timeout_ms": 10000, "validate_only": False}
    r = wire.call("127.0.0.1", c.brokers[1].port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]
    assert r["error_code"] == ErrorCode.INVALID_CONFIG, r
    # cleanup.policy is a list of compact and delete (anything else turned both off).
    body["topics"][0]["configs"] = [{"name": "cleanup.policy", "value": "forever"}]
    r = wire.call("127.0.0.1", c.brokers[1].port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]
    assert r["error_code"] == ErrorCode.INVALID_CONFIG, r
