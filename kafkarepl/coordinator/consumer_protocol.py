"""The consumer's embedded protocol (Kafka's ConsumerProtocol): the subscription a classic
member sends in JoinGroup and the assignment it gets in SyncGroup, as bytes the broker
reads only where it must (offsets of topics no member subscribes to, a group moving
between the classic and the KIP-848 protocols). Declared in protocol/coordinator_schemas.py."""

from __future__ import annotations

from dataclasses import dataclass

from kafkarepl.protocol.coordinator_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CONSUMER_PROTOCOL_VERSIONS,
    RecordSchema,
    record_version,
)

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION = RecordSchema(CONSUMER_PROTOCOL_SUBSCRIPTION, CONSUMER_PROTOCOL_VERSIONS)
ASSIGNMENT = RecordSchema(CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_VERSIONS)


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]  # v1+; empty before (an eager member owns nothing when it joins)
    rack_id: str | None


def read_subscription(data: bytes) -> Subscription:
    """A newer version is read as the latest known, as Kafka's; ValueError when malformed."""
    version = record_version(data)
    _, sub = SUBSCRIPTION.read(bytes(data), exact=False, newer_as_latest=True)
    owned: dict[str, frozenset[int]] = {}
    for tp in sub.get("owned_partitions") or []:
        owned[tp["topic"]] = owned.get(tp["topic"], frozenset()) | frozenset(tp["partitions"])
    return Subscription(version, tuple(sub["topics"]), owned, sub.get("rack_id"))


def read_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """Partitions by topic name (empty bytes: none); ValueError when malformed."""
    if not data:
        return {}
    _, body = ASSIGNMENT.read(bytes(data), exact=False, newer_as_latest=True)
    out: dict[str, frozenset[int]] = {}
    for tp in body["assigned_partitions"]:
        out[tp["topic"]] = out.get(tp["topic"], frozenset()) | frozenset(tp["partitions"])
    return out


def write_assignment(version: int, partitions: dict[str, frozenset[int]]) -> bytes:
    """At the member's subscription version (capped at the latest known), as Kafka's."""
    version = min(max(version, 0), CONSUMER_PROTOCOL_VERSIONS[-1])
    return ASSIGNMENT.write(version, {"assigned_partitions": [
        {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(partitions.items()) if ps], "user_data": None})
