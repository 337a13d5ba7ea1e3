"""CreateTopics v5+ answers what was created: partitions and replication factor with the
broker defaults resolved, and the topic's configs (never null: Kafka's Java admin client,
hence kafka-topics.sh, Kafka Streams and Kafka Connect, read them; issue 11)."""

from __future__ import annotations

import pytest

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"


def create(port: int, name: str, partitions: int, rf: int, configs: dict[str, str], version: int,
           validate_only: bool = False) -> dict:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout_ms": 10000, "validate_only": validate_only}
    [t] = wire.call(HOST, port, ApiKey.CREATE_TOPICS, version, body, timeout=15)["topics"]
    return t


@pytest.mark.parametrize("version", [5, 7])
def test_create_topics_answers_configs_and_resolved_counts(cluster_factory, version: int) -> None:
    c = cluster_factory(1, num_partitions=4)
    port = c.brokers[1].port
    t = create(port, f"defaults-v{version}", -1, -1, {"min.insync.replicas": "1", "retention.ms": "60000"}, version)
    assert t["error_code"] == 0, t
    assert (t["num_partitions"], t["replication_factor"]) == (4, 1)
    configs = {e["name"]: e for e in t["configs"]}
    assert configs["retention.ms"]["value"] == "60000" and configs["retention.ms"]["config_source"] == 1
    assert configs["segment.bytes"]["config_source"] == 5  # broker default
    assert all(e["is_sensitive"] is False for e in t["configs"])
    same = create(port, f"defaults-v{version}", 1, 1, {}, version)
    assert same["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS and same["configs"] == []
    dry = create(port, f"dry-v{version}", 3, 1, {}, version, validate_only=True)
    assert dry["error_code"] == 0 and dry["num_partitions"] == 3 and dry["configs"]
