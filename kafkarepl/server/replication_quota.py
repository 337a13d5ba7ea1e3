"""Replication throttles, as Kafka's ReplicationQuotaManager (used by
kafka-reassign-partitions.sh --throttle), sans-I/O with an injected clock.

Two quotas per broker: `leader.replication.throttled.rate` (bytes/s this broker serves to
followers) and `follower.replication.throttled.rate` (bytes/s its replica fetchers take),
dynamic broker configs (per broker or the cluster default; Long.MaxValue: off). They
apply only to the replicas a topic lists in `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` ("partition:brokerId,..." naming this broker,
or "*"), and never to a follower already in the ISR (Kafka's shouldLeaderThrottle /
shouldFollowerThrottle): a throttle slows a reassignment's catch-up, not the ISR. The
bytes of every listed replica count, in sync or not (Kafka's sizeOfThrottledPartitions
and ReplicaFetcherThread), so all replication of those partitions stays within the rate.

The rate is measured over `quota.window.num` (11) windows of `quota.window.size.seconds`
(1 s), as Kafka's quota metrics: while it is above the limit, throttled partitions are
left out of fetch responses (leader) and fetch requests (follower).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from kafkarepl.errors import ErrorCode, KafkaError

UNLIMITED = 2**63 - 1
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


class RateQuota:
    """Bytes per second over `samples` windows of `window_ms`."""

    def __init__(self, clock_ms: Callable[[], int], samples: int = 11, window_ms: int = 1000) -> None:
        self.clock_ms = clock_ms
        self.samples = samples
        self.window_ms = window_ms
        self.limit: float = UNLIMITED
        self._windows: dict[int, int] = {}  # window index -> bytes

    def record(self, nbytes: int) -> None:
        w = self.clock_ms() // self.window_ms
        self._windows[w] = self._windows.get(w, 0) + nbytes
        for old in [k for k in self._windows if k <= w - self.samples]:
            del self._windows[old]

    def rate(self) -> float:
        now = self.clock_ms()
        w = now // self.window_ms
        total = sum(v for k, v in self._windows.items() if k > w - self.samples)
        first = min((k for k in self._windows if k > w - self.samples), default=w)
        # Elapsed time since the oldest window in use (at least one window), as Kafka's
        # Rate does before all samples are filled.
        elapsed_ms = max(now - first * self.window_ms, self.window_ms)
        return total * 1000.0 / elapsed_ms

    def exceeded(self) -> bool:
        return self.limit < UNLIMITED and self.rate() > self.limit


# Java's String.trim() (every char <= U+0020) and ConfigDef's LIST separator
# (`\s*,\s*`, Java's \s being [ \t\n\x0B\f\r]).
_JAVA_TRIM = "".join(map(chr, range(33)))
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_REPLICA_ITEM = re.compile(r"(?:[0-9]+:[0-9]+)?", re.ASCII)


def config_list(value: str) -> list[str]:
    """A LIST config's items as Kafka's ConfigDef.parseType reads a string: the value
    trimmed, empty -> no items, else split on commas and the whitespace around them,
    empty items kept (a trailing comma gives a trailing "")."""
    trimmed = value.strip(_JAVA_TRIM)
    return _LIST_SEPARATOR.split(trimmed) if trimmed else []


def validate_throttled_replicas(name: str, value: str) -> None:
    """Kafka's ThrottledReplicaListValidator: every item (trimmed) is empty or
    partitionId:brokerId in ASCII digits, or the items joined are the literal "*".
    So "0:1," and "0:1, ,1:2" are accepted, as "*" and " * " and "*,"; "0:x", "-1:0",
    "0:1:2", "*,0:1" are not. Raises KafkaError(INVALID_CONFIG) with Kafka's message."""
    items = [i.strip(_JAVA_TRIM) for i in config_list(value)]
    if all(_REPLICA_ITEM.fullmatch(i) for i in items) or "".join(items) == "*":
        return
    raise KafkaError(
        f"Invalid value [{', '.join(config_list(value))}] for configuration {name}: {name} must be the "
        "literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],"
        "[partitionId]:[brokerId],...", ErrorCode.INVALID_CONFIG)


def throttled_partitions(value: str | None, broker_id: int) -> set[int] | None:
    """The partitions of `*.replication.throttled.replicas` that name `broker_id`;
    None for "*" (all of them; the validator's "*" form, "*," included); empty when
    unset or not naming this broker. Whitespace around an item is allowed."""
    if not value:
        return set()
    items = [i.strip(_JAVA_TRIM) for i in config_list(value)]
    if "".join(items) == "*":
        return None
    out: set[int] = set()
    for entry in items:  # values stored before they were validated may hold anything: skipped
        if entry and _REPLICA_ITEM.fullmatch(entry):
            p, b = entry.split(":")
            if int(b) == broker_id:
                out.add(int(p))
    return out


class ReplicationThrottle:
    """One direction's throttle: the quota and which partitions it applies to."""

    def __init__(self, broker_id: int, replicas_config: str, clock_ms: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.replicas_config = replicas_config  # LEADER_REPLICAS or FOLLOWER_REPLICAS
        self.quota = RateQuota(clock_ms)
        self._topics: dict[str, set[int] | None] = {}  # topic -> partitions (None: all)

    def set_rate(self, value: str | int | None) -> None:
        self.quota.limit = UNLIMITED if value is None or value == "" else float(value)

    def update_topic(self, topic: str, overrides: Mapping[str, str]) -> None:
        parts = throttled_partitions(overrides.get(self.replicas_config), self.broker_id)
        if parts is None or parts:
            self._topics[topic] = parts
        else:
            self._topics.pop(topic, None)

    @property
    def active(self) -> bool:
        """A rate is set and some topic names throttled replicas here."""
        return self.quota.limit < UNLIMITED and bool(self._topics)

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._topics:
            return False
        parts = self._topics[topic]
        return parts is None or partition in parts

    def should_throttle(self, topic: str, partition: int, in_sync: bool) -> bool:
        return not in_sync and self.is_throttled(topic, partition) and self.quota.exceeded()

    def record(self, nbytes: int) -> None:
        self.quota.record(nbytes)
