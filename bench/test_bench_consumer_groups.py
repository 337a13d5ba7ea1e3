"""What KIP-848 consumer groups cost the coordinator's event loop (run:
pytest bench/test_bench_consumer_groups.py --benchmark-enable).

  heartbeat_steady  one heartbeat of a stable member (what every member pays every
                    group.consumer.heartbeat.interval.ms), in a group of MEMBERS members
                    subscribed to TOPICS topics of 10 partitions, with the check of what
                    records it changed (none)
  classic_heartbeat one Heartbeat of a stable classic member in that group (a group
                    converted online, mid-migration), with the records check
  join              a member joining that group: a new group epoch and target assignment
                    (the uniform assignor over every partition), its first answer and
                    the records of what changed (then it leaves: the same again)
  produce_decode    decoding a Produce v9 request of 16 KiB, the same run's baseline: the
                    least work the broker does for a produce request
"""

from __future__ import annotations

import uuid

import pytest

from bench.baselines import produce_decode
from kafkarepl.coordinator.consumer_group import (
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerMember,
    HeartbeatRequest,
    TopicsView,
)
from kafkarepl.errors import ErrorCode

SIZES = {"small": (10, 10), "large": (1000, 2000)}  # (members, topics)


def _group(members: int, topics: int) -> tuple[ConsumerGroup, TopicsView, list[str]]:
    names = [f"t{i}" for i in range(topics)]
    view = TopicsView(1, {n: (uuid.uuid4(), 10) for n in names})
    g = ConsumerGroup("bench", ConsumerGroupConfig())
    subscription = frozenset(names)
    for i in range(members):  # all in at once: one assignment, not one per join
        g.members[f"m{i}"] = ConsumerMember(f"m{i}", None, None, "bench", "/127.0.0.1", 30000,
                                            subscribed_names=subscription)
    g._subscriptions[subscription] = subscription
    g._refresh(view, force=True)
    for i in range(members):  # each known member's first heartbeat: its partitions
        res = g.heartbeat(HeartbeatRequest(f"m{i}", 0, rebalance_timeout_ms=30000, subscribed_topic_names=names,
                                           owned={}, version=1), view, 0)
        assert res.assignment is not None
    g.pending_records()
    assert g.state == "Stable"
    return g, view, names


@pytest.mark.parametrize("size", list(SIZES))
def test_heartbeat_steady(benchmark, size: str) -> None:
    g, view, _ = _group(*SIZES[size])
    m = g.members["m0"]
    req = HeartbeatRequest("m0", m.epoch, version=1)

    def beat() -> None:
        g.heartbeat(req, view, 1)
        assert not g.pending_records()

    benchmark(beat)


@pytest.mark.parametrize("size", list(SIZES))
def test_classic_heartbeat_steady(benchmark, size: str) -> None:
    g, view, _ = _group(*SIZES[size])
    m = g.members["m0"]
    m.classic = ClassicMetadata(45000, (("range", b"\0\0"),))
    g.pending_records()  # its metadata record, once

    def beat() -> None:
        assert g.classic_heartbeat("m0", None, m.epoch, 1) is ErrorCode.NONE
        assert not g.pending_records()

    benchmark(beat)


@pytest.mark.parametrize("size", list(SIZES))
def test_join(benchmark, size: str) -> None:
    g, view, names = _group(*SIZES[size])
    joins = iter(range(10**9))

    def join() -> None:
        mid = f"new{next(joins)}"
        g.heartbeat(HeartbeatRequest(mid, 0, rebalance_timeout_ms=30000, subscribed_topic_names=names, owned={},
                                     version=1), view, 1)
        assert g.pending_records()
        g.remove(mid, view)  # the group back to its size for the next round
        assert g.pending_records()

    benchmark.pedantic(join, rounds=5 if size == "large" else 50, iterations=1)


def test_produce_decode(benchmark) -> None:
    benchmark(produce_decode(1))
