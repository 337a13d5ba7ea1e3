"""Consumers reading from the replica in their rack (KIP-392) with real clients: brokers
with `broker.rack` and the rack-aware `replica.selector.class`, librdkafka and Java
consumers with `client.rack`. Where a consumer's fetches went is read twice: from the client (its
statistics name the broker each partition is fetched from) and from the brokers (the
per-topic bytes served to consumers, which exclude replication)."""

from __future__ import annotations

import json
import time

import pytest

from kafkarepl.server.config import RACK_AWARE_SELECTOR
from tests import java_tools
from tests.integration.test_metrics import scrape

pytestmark = pytest.mark.integration

TOPIC = "near"
BYTES_OUT = f'kafka_server_brokertopicmetrics_bytesout_total{{topic="{TOPIC}"}}'


def _racked_cluster(cluster_factory, **props: str):
    c = cluster_factory(3, start=False, **props)
    for b in c.brokers.values():
        b.config.write_text(b.config.read_text() + f"broker.rack=rack-{b.broker_id}\n")
    ports = c.serve_metrics()
    c.start()
    c.create_topic(TOPIC, assignment={0: [1, 2, 3]})  # broker 1 leads
    c.wait_for_leaders(TOPIC, 1, isr=3)
    return c, ports


def _produce(c, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    for v in values:
        p.produce(TOPIC, value=v)
    assert p.flush(60) == 0 and not errors, errors[:3]


class _RackConsumer:
    """A librdkafka consumer in rack-3 reading partition 0 from the start, keeping the
    broker its statistics say the partition is fetched from."""

    def __init__(self, c, rack: str = "rack-3") -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.fetched_from: int | None = None
        self.leader: int | None = None
        self.cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "near-readers",
                              "enable.auto.commit": False, "client.rack": rack,
                              "statistics.interval.ms": 200, "stats_cb": self._stats,
                              "topic.metadata.refresh.interval.ms": 1000})
        self.cons.assign([TopicPartition(TOPIC, 0, 0)])

    def _stats(self, text: str) -> None:
        part = json.loads(text).get("topics", {}).get(TOPIC, {}).get("partitions", {}).get("0")
        if part is not None:
            self.fetched_from, self.leader = part["broker"], part["leader"]

    def read(self, n: int, timeout: float = 60, settle: bool = False) -> list[bytes]:
        """n records (settle: and whatever else comes within the timeout)."""
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < n or settle:
            if time.monotonic() >= deadline:
                assert settle, f"{len(got)} of {n} records after {timeout}s"
                break
            got += [m.value() for m in self.cons.consume(500, 0.5) if m.error() is None]
        return got

    def wait_fetching_from(self, broker: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.fetched_from != broker:
            assert time.monotonic() < deadline, (self.fetched_from, self.leader)
            self.cons.poll(0.2)


def test_a_consumer_reads_from_the_replica_in_its_rack_and_from_the_leader_once_that_one_dies(
        cluster_factory) -> None:
    """The leader (rack-1) answers a rack-3 consumer's first fetch with no records and
    broker 3 as its preferred read replica (in sync, holding the offset); the consumer then
    reads everything from broker 3, which serves consumers up to its high watermark. When
    broker 3 is killed the consumer goes back to the leader and misses nothing."""
    c, ports = _racked_cluster(cluster_factory, replica_selector_class=RACK_AWARE_SELECTOR)
    first = [b"r%05d" % i for i in range(2000)]
    _produce(c, first)
    reader = _RackConsumer(c)
    try:
        assert reader.read(len(first)) == first
        reader.wait_fetching_from(3)
        assert reader.leader == 1
        served = {b: scrape(port).get(BYTES_OUT, 0.0) for b, port in ports.items()}
        assert served[3] >= sum(len(v) for v in first), served  # every record from broker 3
        assert served[1] == 0 and served[2] == 0, served  # the leader only redirected
        # Kafka's Java consumer, in rack-3 too: the same redirect, the same records
        read = java_tools.run("read-all", c.bootstrap, TOPIC, "rack-3").split()
        assert [r.split(":")[2].encode() for r in read] == first
        now = {b: scrape(port).get(BYTES_OUT, 0.0) for b, port in ports.items()}
        assert now[3] >= served[3] + sum(len(v) for v in first) and now[1] == now[2] == 0, now
        # Transactions read from the follower: its last stable offset and aborted
        # transactions answer the read_committed consumer (librdkafka's default).
        assert java_tools.run("transactions", c.bootstrap, TOPIC) == "done"  # 3 committed, 2 aborted, 1
        assert reader.read(4) == [b"java-0", b"java-1", b"java-2", b"java-5"]
        assert reader.read(0, timeout=2, settle=True) == []
        assert scrape(ports[1]).get(BYTES_OUT, 0.0) == 0 and reader.fetched_from == 3

        c.kill(3)
        more = [b"s%05d" % i for i in range(500)]
        _produce(c, more)  # acks=all: once broker 3 is out of the ISR
        assert reader.read(len(more)) == more
        reader.wait_fetching_from(1)
        assert scrape(ports[1]).get(BYTES_OUT, 0.0) >= sum(len(v) for v in more)
    finally:
        reader.cons.close()


def test_without_the_rack_aware_selector_consumers_read_from_the_leader(cluster_factory) -> None:
    """Kafka's default replica.selector.class (none): a consumer's client.rack changes
    nothing, every record comes from the leader although an in-sync replica shares the
    consumer's rack."""
    c, ports = _racked_cluster(cluster_factory)
    values = [b"r%05d" % i for i in range(1000)]
    _produce(c, values)
    reader = _RackConsumer(c)
    try:
        assert reader.read(len(values)) == values
        reader.wait_fetching_from(1)
        served = {b: scrape(port).get(BYTES_OUT, 0.0) for b, port in ports.items()}
        assert served[1] >= sum(len(v) for v in values) and served[2] == served[3] == 0, served
    finally:
        reader.cons.close()
