"""A topic config change must not break ISR expiry on any broker (issue 9).

The bug this guards: the broker that handled a topic AlterConfigs handed its partitions
a storage LogConfig where the replication core expects a PartitionConfig; from then on
its ISR-expiry timer raised every tick and never dropped a dead follower of the
partitions it leads, until the ZooKeeper session of that follower expired.

Here every broker handles an (Incremental)AlterConfigs, the change is checked through a
real client, and then, with replica.lag.time.max.ms far below the ZooKeeper session
timeout, a paused follower must leave the ISR of the partitions each other broker leads
by the leaders' time rule, long before its session could expire.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch
from tests.fixtures.cluster import TestCluster
from tests.integration.test_recovery import produce

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
TOPIC = "cfg"
LAG_MS = 2000
SESSION_MS = 30000
SHRINK_DEADLINE_S = 5 * LAG_MS / 1000  # far below the ZooKeeper session timeout


def isr_by_partition(c: TestCluster, ask: int) -> dict[int, tuple[int, set[int]]]:
    md = wire.metadata(HOST, c.brokers[ask].port, [TOPIC])
    return {p["partition_index"]: (p["leader_id"], set(p["isr_nodes"])) for p in md["topics"][0]["partitions"]}


def alter_on(c: TestCluster, broker_id: int, name: str, value: str) -> None:
    body = {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
        {"name": name, "config_operation": 0, "value": value}]}], "validate_only": False}
    [r] = wire.call(HOST, c.brokers[broker_id].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"]
    assert r["error_code"] == 0, r


def wait_until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_paused_follower_leaves_the_isr_on_every_broker_after_alter_configs(cluster_factory) -> None:
    c = cluster_factory(3, replica_lag_time_max_ms=LAG_MS, zookeeper_session_timeout_ms=SESSION_MS)
    body = {"topics": [{"name": TOPIC, "num_partitions": -1, "replication_factor": -1, "configs": [],
                        "assignments": [{"partition_index": 0, "broker_ids": [1, 2, 3]},
                                        {"partition_index": 1, "broker_ids": [2, 3, 1]},
                                        {"partition_index": 2, "broker_ids": [3, 1, 2]}]}],
            "timeout_ms": 30000, "validate_only": False}
    [t] = wire.call(HOST, c.brokers[1].port, ApiKey.CREATE_TOPICS, 5, body, timeout=35)["topics"]
    assert t["error_code"] == 0, t
    c.wait_for_leaders(TOPIC, 3, isr=3)
    assert {leader for leader, _isr in isr_by_partition(c, 1).values()} == {1, 2, 3}

    # A real admin client alters the topic; every broker also handles one alter itself.
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(timeout=15)
    for bid, (name, value) in zip((1, 2, 3), [("segment.ms", "600000"), ("flush.ms", "900000"),
                                              ("retention.bytes", "1073741824")], strict=True):
        alter_on(c, bid, name, value)
    [got] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, TOPIC)]).values()
    configs = {k: v.value for k, v in got.result(timeout=15).items()}
    assert configs["retention.ms"] == "3600000" and configs["retention.bytes"] == "1073741824", configs

    controller = wire.metadata(HOST, c.brokers[1].port)["controller_id"]
    others = [b for b in (1, 2, 3) if b != controller]
    # Pause each non-controller broker in turn (AlterPartition needs a live controller): the
    # two phases exercise the ISR expiry of every broker as a leader.
    led_and_checked: set[int] = set()
    for paused in others:
        ask = controller
        c.pause(paused)
        try:
            # A follower holding everything is never out of sync (Kafka's rule): write.
            for partition, (leader, _isr) in isr_by_partition(c, ask).items():
                if leader != paused:
                    assert produce(c.brokers[leader].port, TOPIC, bytes(build_batch(2)), partition)["error_code"] == 0
            def dropped(paused: int = paused, ask: int = ask) -> bool:
                return all(paused not in isr for leader, isr in isr_by_partition(c, ask).values()
                           if leader != paused)
            t0 = time.monotonic()
            wait_until(dropped, SHRINK_DEADLINE_S,
                       f"broker {paused} still in an ISR {SHRINK_DEADLINE_S}s after its pause: "
                       f"{isr_by_partition(c, ask)}")
            assert time.monotonic() - t0 < SESSION_MS / 1000  # the leaders did it, not the session
            led_and_checked |= {leader for leader, _ in isr_by_partition(c, ask).values() if leader != paused}
        finally:
            c.resume(paused)
        wait_until(lambda: all(len(isr) == 3 for _l, isr in isr_by_partition(c, controller).values()),
                   30, "the resumed broker did not rejoin every ISR")
    assert led_and_checked == {1, 2, 3}
