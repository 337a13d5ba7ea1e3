"""segment.jitter.ms (Kafka's topic config; broker default log.roll.jitter.ms): each
segment of a topic rolls a random share of the jitter before segment.ms, so partitions
created together do not all roll at once. A real producer writes one record every 50 ms to
a topic with the jitter and to one without; the rolls are read from the segment files."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.integration

SEGMENT_MS = 2000
EVERY_S = 0.05


def _segment_bases(cluster, topic: str) -> list[int]:
    [broker_id] = cluster.brokers
    return sorted(int(p.stem) for p in (cluster.root / f"broker-{broker_id}" / "logs" / f"{topic}-0").glob("*.log"))


def test_segments_roll_early_by_their_jitter_share(cluster_factory) -> None:
    c = cluster_factory(1)
    c.create_topic("plain", 1, 1, configs={"segment.ms": str(SEGMENT_MS)})
    c.create_topic("jittered", 1, 1, configs={"segment.ms": str(SEGMENT_MS), "segment.jitter.ms": str(SEGMENT_MS)})
    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    deadline = time.monotonic() + 4.5 * SEGMENT_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        for topic in ("plain", "jittered"):
            p.produce(topic, value=b"%d" % sent)
        sent += 1
        p.poll(0)
        time.sleep(EVERY_S)
    assert p.flush(30) == 0 and not errors, errors
    full = SEGMENT_MS / 1000 / EVERY_S  # records per segment.ms: ~40 at most (sleeps run long)
    plain = _segment_bases(c, "plain")
    jittered = _segment_bases(c, "jittered")
    # Without jitter every segment spans segment.ms (~40 records, fewer only as the sleeps
    # overrun); with it, each roll comes uniformly in (0, segment.ms]: a span under 0.7 of
    # it in 4+ rolls fails to appear with probability below 0.3^4 (< 1%).
    plain_spans = [b - a for a, b in zip(plain, plain[1:], strict=False)]
    jittered_spans = [b - a for a, b in zip(jittered, jittered[1:], strict=False)]
    assert len(plain) >= 3 and min(plain_spans) >= 0.8 * full * 0.9, (plain, sent)
    assert len(jittered) >= 5 and min(jittered_spans) < 0.7 * full * 0.9, (jittered, sent)
