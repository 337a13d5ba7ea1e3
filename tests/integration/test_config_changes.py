"""A topic config change reaches every broker live, through the /config/changes
notifications, not only the broker that handled the request (issue 11)."""

from __future__ import annotations

import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch
from tests.integration.test_recovery import produce

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
