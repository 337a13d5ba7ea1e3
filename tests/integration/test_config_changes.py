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
    proxy = CuttingProxy(("127.0.0.1", zk.port), b"/kr/config/changes/config_change_", outage_s=1.0)
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
