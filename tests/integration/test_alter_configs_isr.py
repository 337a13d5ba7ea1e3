"""A topic config change must not break ISR expiry on any broker (issue 9).

The bug this guards (fixed in 4d3f316): the broker that handled a topic AlterConfigs
handed its partitions a storage LogConfig where the replication core expects a
PartitionConfig; from then on its ISR-expiry timer raised AttributeError every tick and
never dropped a dead follower from the ISR of the partitions it leads.

Everything here goes through a real client (confluent-kafka / librdkafka): every broker
is sent one IncrementalAlterConfigs of the topic (by default librdkafka sends it to the
controller only; the admin client's `broker=` option picks the node, and librdkafka's
protocol log confirms which broker answered each), the change is read back with
DescribeConfigs, and the min.insync.replicas=3 it sets is shown to be enforced by the
running leaders. Then, with replica.lag.time.max.ms far below the ZooKeeper session
timeout, a paused (SIGSTOP) follower must leave the ISR of every partition each other
broker leads by the leaders' time rule, long before its session could expire. The
controller is never paused (an ISR shrink needs its AlterPartition), so the two
non-controllers are paused in turn: the controller's leaders are exercised in both
phases, each other broker's in one, so every broker is shown to drop a paused follower.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.fixtures.cluster import TestCluster

pytestmark = pytest.mark.integration

TOPIC = "alter-isr"
PARTITIONS = 6
LAG_MS = 2000
SESSION_MS = 30000
SHRINK_DEADLINE_S = 5 * LAG_MS / 1000  # a few lag times, far below the session timeout
# What each broker is asked to change (incremental: the earlier changes stay).
ALTERS = {
    1: {"min.insync.replicas": "3", "retention.ms": "3600000"},
    2: {"segment.ms": "600000"},
    3: {"retention.bytes": "1073741824"},
}


def wait_until(cond: Callable[[], bool], timeout: float, what: Callable[[], str]) -> float:
    """Poll until cond() holds; returns the seconds it took."""
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, f"after {timeout}s: {what()}"
        time.sleep(0.1)
    return time.monotonic() - t0


class ProtocolLog(logging.Handler):
    """librdkafka's protocol debug log, read for the responses each broker sent back
    ("127.0.0.1:<port>/<node id>: Received IncrementalAlterConfigsResponse ...")."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "AlterConfigs" in msg:
            self.lines.append(msg)

    def responses_by_node(self, api: str) -> dict[int, int]:
        out: dict[int, int] = {}
        for line in self.lines:
            m = re.search(rf"/(\d+): Received {api}\w*Response", line)
            if m:
                out[int(m.group(1))] = out.get(int(m.group(1)), 0) + 1
        return out


def bootstrap_of(c: TestCluster, brokers: Iterable[int]) -> str:
    return ",".join(f"127.0.0.1:{c.brokers[b].port}" for b in sorted(brokers))


def metadata_client(c: TestCluster, brokers: Iterable[int]) -> AdminClient:
    """A real client for Metadata, to be made while only `brokers` answer: librdkafka
    sends Metadata to a broker whose connection is up, and a connection to a paused
    broker made (or remade) while it is paused never gets past its ApiVersions."""
    return AdminClient({"bootstrap.servers": bootstrap_of(c, brokers)})


def partitions_view(meta: AdminClient) -> dict[int, tuple[int, set[int]]]:
    """partition -> (leader, ISR), from a Metadata request of a real client."""
    md = meta.list_topics(TOPIC, timeout=5)
    t = md.topics[TOPIC]
    assert t.error is None, t.error
    return {p.id: (p.leader, set(p.isrs)) for p in t.partitions.values()}


def isr_full(meta: AdminClient) -> bool:
    return all(len(isr) == 3 for _leader, isr in partitions_view(meta).values())


def produce(bootstrap: str, acks: str, partitions: list[int], retry: bool = True) -> dict[int, KafkaError | None]:
    """One record to each partition; the delivery error (None: written) of each."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "retries": 1000 if retry else 0,
                  "retry.backoff.ms": 100, "request.timeout.ms": 10000, "message.timeout.ms": 15000})
    out: dict[int, KafkaError | None] = {}
    for part in partitions:
        p.produce(TOPIC, value=b"v", partition=part,
                  on_delivery=lambda err, msg: out.__setitem__(msg.partition(), err))
    assert p.flush(20) == 0, "records still in flight"
    return out


def test_paused_follower_leaves_the_isr_on_every_broker_after_alter_configs(cluster_factory) -> None:
    t_start = time.monotonic()
    c: TestCluster = cluster_factory(3, replica_lag_time_max_ms=LAG_MS, zookeeper_session_timeout_ms=SESSION_MS)
    sent = ProtocolLog()
    rdkafka_log = logging.getLogger(f"{__name__}.rdkafka")
    rdkafka_log.addHandler(sent)
    rdkafka_log.setLevel(logging.DEBUG)
    rdkafka_log.propagate = False
    # Used only while every broker runs (it has connections to all of them).
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "debug": "protocol", "logger": rdkafka_log})

    [fut] = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=30, request_timeout=35).values()
    fut.result(timeout=40)
    c.wait_for_leaders(TOPIC, PARTITIONS, isr=3)
    md = admin.list_topics(TOPIC, timeout=10)
    controller = md.controller_id
    assert controller in c.brokers, md.controller_id
    leaders = {p: leader for p, (leader, _isr) in partitions_view(admin).items()}
    assert set(leaders.values()) == set(c.brokers), f"some broker leads no partition: {leaders}"

    # Every broker handles one IncrementalAlterConfigs of the topic (`broker=` picks it).
    for bid, changes in ALTERS.items():
        res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changes.items()])
        [fut] = admin.incremental_alter_configs([res], broker=bid, request_timeout=15).values()
        assert fut.result(timeout=20) is None

    def every_broker_answered() -> bool:
        admin.poll(0)  # serves the log callback
        return all(sent.responses_by_node("IncrementalAlterConfigs").get(b, 0) >= 1 for b in c.brokers)

    # ... as librdkafka's protocol log confirms: each broker answered one.
    wait_until(every_broker_answered, 10, lambda: f"IncrementalAlterConfigs answered per broker: "
               f"{sent.responses_by_node('IncrementalAlterConfigs')}\n{sent.lines}")

    [fut] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, TOPIC)], request_timeout=15).values()
    described = {k: e.value for k, e in fut.result(timeout=20).items()}
    for changes in ALTERS.values():
        for k, v in changes.items():
            assert described.get(k) == v, (k, described.get(k))

    dropped_by: dict[int, set[int]] = {b: set() for b in c.brokers}  # leader -> paused followers it dropped
    shrink_s: dict[int, float] = {}
    paused: set[int] = set()
    try:
        for victim in sorted(b for b in c.brokers if b != controller):
            running = set(c.brokers) - {victim}
            led_by_others = sorted(p for p, leader in leaders.items() if leader != victim)
            c.pause(victim)
            paused.add(victim)
            meta = metadata_client(c, running)
            # A follower holding everything is never out of sync (Kafka's rule): write
            # (acks=1, so min.insync.replicas=3 does not refuse it) to leave it behind.
            assert produce(bootstrap_of(c, running), "1", led_by_others) == dict.fromkeys(led_by_others)

            def dropped(victim: int = victim, parts: list[int] = led_by_others, meta: AdminClient = meta) -> bool:
                view = partitions_view(meta)
                return all(victim not in view[p][1] for p in parts)

            shrink_s[victim] = wait_until(
                dropped, SHRINK_DEADLINE_S,
                lambda victim=victim, meta=meta: f"paused broker {victim} still in an ISR: {partitions_view(meta)}")
            view = partitions_view(meta)
            for p in led_by_others:
                leader, isr = view[p]
                assert leader == leaders[p] and isr == running, (p, view[p])
                dropped_by[leader].add(victim)
            # The leaders did it, not the controller on a session expiry: still registered.
            assert victim in meta.list_topics(timeout=5).brokers

            # min.insync.replicas=3 is in force on every running leader: acks=all refused
            # (after the append if the leader had not yet applied its own ISR change).
            for p, err in produce(bootstrap_of(c, running), "all", led_by_others, retry=False).items():
                assert err is not None and err.code() in (
                    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND), (p, err)

            c.resume(victim)
            paused.discard(victim)
            wait_until(lambda meta=meta: isr_full(meta), 30,
                       lambda meta=meta: f"resumed broker not back in every ISR: {partitions_view(meta)}")
    finally:
        for b in paused:
            c.resume(b)
    meta = metadata_client(c, c.brokers)
    wait_until(lambda: isr_full(meta), 30, lambda: f"ISR not full again: {partitions_view(meta)}")
    assert all(dropped_by.values()), f"some broker never dropped a paused follower: {dropped_by}"
    # Full ISRs again: acks=all writes go through on every partition.
    assert produce(c.bootstrap, "all", sorted(leaders)) == dict.fromkeys(leaders)
    print(f"ISR shrink after pause (s): {shrink_s}; dropped by leader: {dropped_by}; "
          f"total {time.monotonic() - t_start:.1f}s")
