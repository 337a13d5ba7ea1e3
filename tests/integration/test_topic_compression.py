"""compression.type on a topic with real clients: a producer's lz4 batches are stored,
replicated and served in the topic's zstd (every replica's files hold zstd batches), and
consumers read every record; the broker-wide default applies to topics without one."""

from __future__ import annotations

import time

import pytest

from kafkarepl import _core
from tests import java_tools

pytestmark = pytest.mark.integration


def codecs_on_disk(c, broker: int, topic: str) -> set[int]:
    out: set[int] = set()
    for seg in sorted((c.root / f"broker-{broker}" / "logs" / f"{topic}-0").glob("*.log")):
        out |= {b.attributes & 7 for b in _core.validate_batches(seg.read_bytes())}
    return out


def test_a_topic_stores_its_own_codec(cluster_factory) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = cluster_factory(3)
    c.create_topic("zt", 1, 3, configs={"compression.type": "zstd", "min.insync.replicas": "2"})
    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "compression.type": "lz4", "acks": "all", "linger.ms": 20,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    values = [b"record-%05d-" % i + b"x" * 200 for i in range(3000)]
    for v in values:
        p.produce("zt", value=v, key=v[:12])
    assert p.flush(30) == 0 and not errors, errors
    deadline = time.monotonic() + 20
    while any(codecs_on_disk(c, b, "zt") != {4} for b in (1, 2, 3)):
        assert time.monotonic() < deadline, {b: codecs_on_disk(c, b, "zt") for b in (1, 2, 3)}
        time.sleep(0.2)
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g", "enable.partition.eof": True})
    cons.assign([TopicPartition("zt", 0, 0)])
    got: list[bytes] = []
    while True:
        m = cons.poll(10)
        assert m is not None
        if m.error():
            break  # end of partition
        got.append(m.value())
    cons.close()
    assert got == values
    # Kafka's Java consumer reads the recompressed batches too
    read = java_tools.run("read-all", c.bootstrap, "zt").split(" ")  # "offset:key:value:timestamp" each
    assert [r.split(":")[2] for r in read] == [v.decode() for v in values]


def test_broker_default_compression_type(cluster_factory) -> None:
    from confluent_kafka import Producer

    c = cluster_factory(1, compression_type="gzip")
    c.create_topic("gz", 1, 1)
    p = Producer({"bootstrap.servers": c.bootstrap, "compression.type": "none", "linger.ms": 5})
    for i in range(100):
        p.produce("gz", value=b"v%d" % i)
    assert p.flush(10) == 0
    assert codecs_on_disk(c, 1, "gz") == {1}
