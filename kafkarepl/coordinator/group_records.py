"""A group's membership as a `__consumer_offsets` record, in Kafka's own schemas, so a
coordinator that takes a partition over resumes its groups where the last one left
them (Kafka's GroupMetadataManager.storeGroup / loadGroup) instead of making every
member rejoin.

Key (GroupMetadataKey): int16 version=2, string group. A null value (tombstone) says
the group is gone.
Value (GroupMetadataValue v3, what Kafka writes; v0-v2 are read too): string
protocol_type, int32 generation, nullable string protocol, nullable string leader,
int64 current_state_timestamp (v2+), then int32 count of members: string member_id,
nullable string group_instance_id (v3+), string client_id, string client_host, int32
rebalance_timeout (v1+), int32 session_timeout, bytes subscription, bytes assignment.
Strings are int16 length + UTF-8 (-1: null), bytes int32 length.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkarepl.coordinator.offsets import Reader
from kafkarepl.coordinator.offsets import string_field as _str

GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


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


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def encode_group_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _str(group_id)


def decode_group_key(key: bytes) -> str | None:
    """The group id of a group metadata key, or None for another record kind."""
    r = Reader(key)
    if r.i16() != GROUP_KEY_VERSION:
        return None
    return r.string()


def encode_group_value(g: GroupSnapshot) -> bytes:
    out = [_I16.pack(GROUP_VALUE_VERSION), _str(g.protocol_type), _I32.pack(g.generation_id),
           _str(g.protocol_name), _str(g.leader_id), _I64.pack(g.state_timestamp_ms), _I32.pack(len(g.members))]
    for m in g.members:
        out += [_str(m.member_id), _str(m.group_instance_id), _str(m.client_id), _str(m.client_host),
                _I32.pack(m.rebalance_timeout_ms), _I32.pack(m.session_timeout_ms),
                _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(out)


def decode_group_value(value: bytes | None) -> GroupSnapshot | None:
    """None for a tombstone; ValueError for a version or layout this does not know."""
    if value is None:
        return None
    r = Reader(value)
    version = r.i16()
    if not 0 <= version <= GROUP_VALUE_VERSION:
        raise ValueError(f"unknown group metadata value version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp = r.i64() if version >= 2 else -1
    count = r.i32()
    if count < 0 or count > len(value):
        raise ValueError(f"bad member count {count}")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        if version >= 1:
            rebalance, session = r.i32(), r.i32()
        else:  # v0 had one timeout for both (Kafka's loader does the same)
            session = rebalance = r.i32()
        members.append(MemberSnapshot(member_id, instance, client_id, client_host, rebalance, session,
                                      r.bytes_(), r.bytes_()))
    return GroupSnapshot(protocol_type, generation, protocol, leader, timestamp, tuple(members))
