"""Seed 004: bursts of large batches on healthy followers cause no ISR shrink (the ISR
rule is time-based, never a message count)."""

from __future__ import annotations

import re
import threading

import pytest
from confluent_kafka import Producer

from kafkarepl.cli import wire
from tests.integration.chaos import all_logs, verify_replicas_identical

pytestmark = pytest.mark.integration

ISR_CHANGE = re.compile(r"(\S+-\d+): ISR \[([\d, ]*)\] -> \[([\d, ]*)\]")


class IsrWatcher(threading.Thread):
    """Polls Metadata from every live broker; remembers the smallest ISR seen."""

    def __init__(self, cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic = cluster, topic
        self.smallest: dict[int, list[int]] = {}
        self.polls = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for b in self.cluster.brokers.values():
                try:
                    md = wire.metadata("127.0.0.1", b.port, [self.topic], timeout=2)
                except (OSError, ConnectionError):
                    continue
                for p in md["topics"][0]["partitions"]:
                    i = p["partition_index"]
                    if i not in self.smallest or len(p["isr_nodes"]) < len(self.smallest[i]):
                        self.smallest[i] = p["isr_nodes"]
                self.polls += 1
            self.done.wait(0.1)


def test_large_bursts_cause_no_isr_shrink(cluster_factory):
    c = cluster_factory(3, min_insync_replicas=2)
    c.create_topic("burst", partitions=2, rf=3)
    watcher = IsrWatcher(c, "burst")
    watcher.start()
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 20, "batch.size": 1_000_000, "message.max.bytes": 1_000_000,
                  "queue.buffering.max.kbytes": 64 * 1024})
    errors: list = []
    acked = [0]

    def on_delivery(err, msg):
        if err is None:
            acked[0] += 1
        else:
            errors.append(err)

    value = b"v" * 100_000
    bursts, per_burst = 8, 50  # 8 bursts of 5 MB
    try:
        for burst in range(bursts):
            for i in range(per_burst):
                p.produce("burst", value, partition=i % 2, on_delivery=on_delivery)
                p.poll(0)
            assert p.flush(60) == 0, f"burst {burst} not acknowledged"
            watcher.done.wait(0.5)  # idle between bursts, followers stay caught up
    finally:
        watcher.done.set()
        watcher.join(5)
    assert not errors, errors[:5]
    assert acked[0] == bursts * per_burst
    assert watcher.polls > 20
    shrunk = {i: isr for i, isr in watcher.smallest.items() if len(isr) < 3}
    assert not shrunk, f"ISR shrank during bursts: {shrunk}\n{all_logs(c)}"
    # No broker even asked for a shrink (transient ones Metadata polling could miss).
    for b in c.brokers:
        for m in ISR_CHANGE.finditer(c.brokers[b].log.read_text(errors="replace")):
            before, after = m.group(2).split(","), m.group(3).split(",")
            assert len(after) >= len(before), f"broker {b} logged an ISR shrink: {m.group(0)}"
    verify_replicas_identical(c, "burst", 2)
