"""min.insync.replicas and unclean leader election with real broker processes."""

from __future__ import annotations

import time

import pytest

from kafkarepl.errors import ErrorCode
from tests.integration.chaos import (
    all_logs,
    list_offset,
    partition_info,
    produce_raw,
    verify_replicas_identical,
    wait_until,
)

pytestmark = pytest.mark.integration


def shrink_to_leader(c, topic: str) -> tuple[int, list[int]]:
    """Kill both followers of partition 0; returns (leader, killed)."""
    info = partition_info(c, topic)[0]
    leader = info["leader_id"]
    followers = [r for r in info["replica_nodes"] if r != leader]
    for f in followers:
        c.kill(f)
    wait_until(lambda: partition_info(c, topic)[0]["isr_nodes"] == [leader], 15,
               f"ISR of {topic}-0 shrunk to the leader {leader}")
    return leader, followers


def test_isr_of_only_the_leader_refuses_acks_all(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("mi", partitions=1, rf=3)
    leader = c.leader_of("mi")
    assert produce_raw(c.brokers[leader].port, "mi", 0, acks=-1)["error_code"] == 0
    leader, _ = shrink_to_leader(c, "mi")
    port = c.brokers[leader].port
    r = produce_raw(port, "mi", 0, acks=-1)
    assert r["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS == 19, (r, all_logs(c))
    # acks=1 does not ask for the ISR: still accepted.
    assert produce_raw(port, "mi", 0, acks=1)["error_code"] == 0


def test_isr_of_only_the_leader_confluent_producer_gets_not_enough_replicas(cluster_factory):
    from confluent_kafka import KafkaError, Producer

    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("mi", partitions=1, rf=3)
    leader, _ = shrink_to_leader(c, "mi")
    errors = []
    p = Producer({"bootstrap.servers": f"127.0.0.1:{c.brokers[leader].port}", "acks": "all",
                  "message.timeout.ms": 10000, "retries": 0})
    p.produce("mi", b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    # No retries: the broker's own error reaches the application.
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors[0]


def test_unclean_election_off_partition_stays_offline_until_isr_member_returns(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=1)
    c.create_topic("uc", partitions=1, rf=3)
    leader, followers = shrink_to_leader(c, "uc")
    # Writes only the last ISR member has.
    assert produce_raw(c.brokers[leader].port, "uc", 0, acks=-1)["error_code"] == 0
    c.kill(leader)
    c.restart(followers[0])  # out of sync: must not become leader
    time.sleep(2.0)
    info = wait_until(lambda: partition_info(c, "uc", via=followers[0])[0], 10, "metadata")
    assert info["leader_id"] == -1, f"out-of-sync replica got leadership: {info}\n{all_logs(c)}"
    # Offline for the whole time it stays this way.
    for _ in range(10):
        assert partition_info(c, "uc", via=followers[0])[0]["leader_id"] == -1
        time.sleep(0.2)
    c.restart(leader)
    info = wait_until(lambda: (i := partition_info(c, "uc")[0])["leader_id"] == leader and i, 15,
                      f"the ISR member {leader} leads again")
    # Nothing the ISR member had was lost.
    c.wait_for_leaders("uc", 1, isr=2, timeout=30)
    assert list_offset(c.brokers[leader].port, "uc", 0) == (0, 3)


def test_unclean_election_topic_override_elects_out_of_sync_replica(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=1)
    c.create_topic("uc", partitions=1, rf=3, configs={"unclean.leader.election.enable": "true"})
    leader, followers = shrink_to_leader(c, "uc")
    assert produce_raw(c.brokers[leader].port, "uc", 0, acks=-1)["error_code"] == 0
    c.kill(leader)
    c.restart(followers[0])
    info = wait_until(lambda: (i := partition_info(c, "uc")[0])["leader_id"] == followers[0] and i, 15,
                      f"out-of-sync replica {followers[0]} elected (unclean allowed)")
    assert info["isr_nodes"] == [followers[0]]
    # It accepts writes as the new leader.
    assert produce_raw(c.brokers[followers[0]].port, "uc", 0, acks=-1)["error_code"] == 0
    # The old leader comes back as a follower and truncates to the new leader's log.
    c.restart(leader)
    c.wait_for_leaders("uc", 1, isr=2, timeout=30)
    verify_replicas_identical(c, "uc", 1)
