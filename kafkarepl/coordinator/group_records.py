"""A group's membership as a `__consumer_offsets` record, in Kafka's own schemas, so a
coordinator that takes a partition over resumes its groups where the last one left
them (Kafka's GroupMetadataManager.storeGroup / loadGroup) instead of making every
member rejoin.

Key: GroupMetadataKey (version 2, the group id); a null value (tombstone) says the group
is gone. Value: GroupMetadataValue v3 (what Kafka writes; v0-v2 are read too), declared in
kafkarepl/protocol/coordinator_schemas.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkarepl.protocol.coordinator_schemas import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    RecordSchema,
    UnknownVersionError,
)

GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
_KEY = RecordSchema(GROUP_METADATA_KEY, range(GROUP_KEY_VERSION, GROUP_KEY_VERSION + 1))
_VALUE = RecordSchema(GROUP_METADATA_VALUE, range(0, GROUP_VALUE_VERSION + 1))


@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's protocol
    assignment: bytes


@dataclass(frozen=True)
class GroupSnapshot:
    """What a new coordinator needs of a group: its generation, protocol, leader and
    members with their assignments. state_timestamp_ms: when the group entered its
    state (Kafka's currentStateTimestamp; wall clock, -1 unknown)."""

    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[MemberSnapshot, ...]


def encode_group_key(group_id: str) -> bytes:
    return _KEY.write(GROUP_KEY_VERSION, {"group": group_id})


def decode_group_key(key: bytes) -> str | None:
    """The group id of a group metadata key, or None for another record kind."""
    try:
        _, k = _KEY.read(key, exact=False)
    except UnknownVersionError:
        return None
    return str(k["group"])


def encode_group_value(g: GroupSnapshot) -> bytes:
    return _VALUE.write(GROUP_VALUE_VERSION, {
        "protocol_type": g.protocol_type, "generation": g.generation_id, "protocol": g.protocol_name,
        "leader": g.leader_id, "current_state_timestamp": g.state_timestamp_ms,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                     "subscription": m.subscription, "assignment": m.assignment} for m in g.members]})


def decode_group_value(value: bytes | None) -> GroupSnapshot | None:
    """None for a tombstone; ValueError for a version or layout this does not know."""
    if value is None:
        return None
    version, v = _VALUE.read(value, exact=False)
    members = tuple(
        MemberSnapshot(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                       # v0 had one timeout for both (Kafka's loader does the same)
                       m["rebalance_timeout"] if version >= 1 else m["session_timeout"],
                       m["session_timeout"], m["subscription"], m["assignment"])
        for m in v["members"])
    return GroupSnapshot(v["protocol_type"], v["generation"], v["protocol"], v["leader"],
                         v["current_state_timestamp"], members)
