"""Replication throttle logic (server/replication_quota.py) with a fake clock."""

from __future__ import annotations

import pytest

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.replica_storage import LogStorage
from kafkarepl.server.replication_quota import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    UNLIMITED,
    RateQuota,
    ReplicationThrottle,
    config_list,
    throttled_partitions,
    validate_throttled_replicas,
)
from kafkarepl.server.topics import validate_topic_configs


def test_rate_is_bytes_over_the_windows_in_use() -> None:
    now = [10_000]
    q = RateQuota(lambda: now[0])
    q.limit = 1000
    q.record(500)
    assert not q.exceeded()  # 500 B over one window
    q.record(700)
    assert q.exceeded()  # 1200 B/s
    now[0] += 1500
    assert not q.exceeded()  # 1200 B over 1.5 s
    now[0] += 20_000
    assert q.rate() == 0  # old windows dropped
    q.limit = UNLIMITED
    q.record(10**9)
    assert not q.exceeded()


def test_throttled_replicas_name_this_broker_or_all() -> None:
    assert throttled_partitions("0:1,1:2,3:1", 1) == {0, 3}
    assert throttled_partitions("*", 7) is None
    assert throttled_partitions("", 1) == set() and throttled_partitions(None, 1) == set()
    assert throttled_partitions("junk,2:x,4:2", 2) == {4}
    assert throttled_partitions("0:1,", 1) == {0}
    assert throttled_partitions(" 0:1 , 2:1 ,\t3:2", 1) == {0, 2}
    assert throttled_partitions(" * ", 1) is None and throttled_partitions("*,", 1) is None


def test_config_list_parses_as_kafkas_configdef() -> None:
    assert config_list("") == [] and config_list("  ") == []
    assert config_list("0:1,") == ["0:1", ""]
    assert config_list(" a , b,,c ") == ["a", "b", "", "c"]
    assert config_list("a b") == ["a b"]


# Kafka's ThrottledReplicaListValidator over ConfigDef's LIST parsing: each item (trimmed)
# empty or digits:digits, or the items joined "*".
ACCEPTED = ["", " ", "0:1", "0:1,", "0:1,1:2", "0:1, 1:2", " 0:1 ,\t1:2 ", "0:1,,1:2", ",", ",,", "*", " * ",
            "*,", ",*", "10:100,007:3"]
REJECTED = ["junk", "0:x", "0", "0:", ":1", "-1:0", "0:-1", "0:1:2", "0 :1", "0: 1", "*,0:1", "**", "* *", "all",
            "0:1;1:2", "\u0660:1"]


@pytest.mark.parametrize("value", ACCEPTED)
def test_throttled_replica_lists_kafka_accepts(value: str) -> None:
    validate_throttled_replicas(LEADER_REPLICAS, value)
    storage = LogStorage(None, BrokerConfig())  # type: ignore[arg-type]
    validate_topic_configs({LEADER_REPLICAS: value, FOLLOWER_REPLICAS: value}, storage)


@pytest.mark.parametrize("value", REJECTED)
def test_throttled_replica_lists_kafka_rejects(value: str) -> None:
    storage = LogStorage(None, BrokerConfig())  # type: ignore[arg-type]
    for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        with pytest.raises(KafkaError) as e:
            validate_topic_configs({name: value}, storage)
        assert e.value.code == ErrorCode.INVALID_CONFIG
        assert str(e.value).startswith("Invalid value [") and str(e.value).endswith(
            f"for configuration {name}: {name} must be the literal '*' or a list of replicas in the following "
            "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def test_rejection_message_is_kafkas() -> None:
    with pytest.raises(KafkaError) as e:
        validate_throttled_replicas(LEADER_REPLICAS, "0:1, x")
    assert str(e.value) == (
        "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: "
        "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following "
        "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def test_in_sync_replicas_are_never_throttled() -> None:
    now = [0]
    t = ReplicationThrottle(1, LEADER_REPLICAS, lambda: now[0])
    t.set_rate("100")
    t.update_topic("t", {LEADER_REPLICAS: "0:1"})
    t.record(1000)
    assert t.should_throttle("t", 0, in_sync=False)
    assert not t.should_throttle("t", 0, in_sync=True)
    assert not t.should_throttle("t", 1, in_sync=False)  # not listed
    t.update_topic("t", {})  # cleared
    assert not t.should_throttle("t", 0, in_sync=False)
    t.update_topic("t", {LEADER_REPLICAS: "0:1"})
    t.set_rate(None)
    assert not t.should_throttle("t", 0, in_sync=False)
