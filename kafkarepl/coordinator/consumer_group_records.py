"""KIP-848 consumer groups as `__consumer_offsets` records, in Kafka's own schemas, so a
coordinator that takes a partition over resumes the groups with their members, epochs and
assignments (Kafka's GroupMetadataManager replays the same records) instead of making
every member rejoin.

One record per group and per member, so a heartbeat writes only what it changed:
- ConsumerGroupMetadata (key version 3): the group epoch;
- ConsumerGroupMemberMetadata (5): a member's identity, subscription, timeouts, assignor;
- ConsumerGroupTargetAssignmentMetadata (6): the assignment epoch;
- ConsumerGroupTargetAssignmentMember (7): a member's target partitions;
- ConsumerGroupCurrentMemberAssignment (8): a member's epochs, state and partitions (a
  static member that left with epoch -2 is written at epoch -2, its epoch as the previous).
A tombstone (null value) deletes a record; compaction keeps each key's last one. Keys are
the key version then the fields at version 0; values are flexible version 0. Declared in
kafkarepl/protocol/coordinator_schemas.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkarepl.protocol.coordinator_schemas import (
    OFFSETS_TOPIC_RECORDS,
    RecordSchema,
    record_version,
)

GROUP_EPOCH, MEMBER_METADATA, ASSIGNMENT_EPOCH, TARGET_ASSIGNMENT, CURRENT_ASSIGNMENT = 3, 5, 6, 7, 8
GROUP_KINDS = (GROUP_EPOCH, ASSIGNMENT_EPOCH)
MEMBER_KINDS = (MEMBER_METADATA, TARGET_ASSIGNMENT, CURRENT_ASSIGNMENT)
VALUE_VERSION = 0

_KEYS = {k: RecordSchema(OFFSETS_TOPIC_RECORDS[k][1], range(k, k + 1)) for k in GROUP_KINDS + MEMBER_KINDS}
_VALUES = {k: RecordSchema(OFFSETS_TOPIC_RECORDS[k][2], OFFSETS_TOPIC_RECORDS[k][3], OFFSETS_TOPIC_RECORDS[k][4])
           for k in GROUP_KINDS + MEMBER_KINDS}

Assignment = Mapping[uuid.UUID, frozenset[int]]
Record = tuple[bytes, bytes | None]


def encode_key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    body: dict[str, Any] = {"group_id": group_id}
    if kind in MEMBER_KINDS:
        body["member_id"] = member_id
    return _KEYS[kind].write(kind, body)


def encode(kind: int, group_id: str, member_id: str | None, value: dict[str, Any] | None) -> Record:
    """One record: `value` holds the value's fields (snake_case), None for a tombstone."""
    return encode_key(kind, group_id, member_id), None if value is None else _VALUES[kind].write(VALUE_VERSION, value)


def topic_partitions(a: Assignment) -> list[dict[str, Any]]:
    return [{"topic_id": tid, "partitions": sorted(ps)} for tid, ps in sorted(a.items())]


def assignment_of(tps: list[dict[str, Any]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t["topic_id"]: frozenset(t["partitions"]) for t in tps if t["partitions"]}


@dataclass
class LoadedConsumerGroup:
    """A group's records as replayed from the log (each key's last value wins)."""

    group_epoch: int | None = None  # None: no ConsumerGroupMetadata (deleted or never written)
    assignment_epoch: int = 0
    members: dict[str, dict[str, Any]] = field(default_factory=dict)  # member id -> metadata value
    targets: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    currents: dict[str, dict[str, Any]] = field(default_factory=dict)  # member id -> current value


def replay(groups: dict[str, LoadedConsumerGroup], key: bytes, value: bytes | None) -> bool:
    """Apply one record to `groups` if it is one of KIP-848's (True), else False. Raises
    ValueError when it is one but malformed."""
    kind = record_version(key)
    if kind not in _KEYS:
        return False
    _, k = _KEYS[kind].read(key, exact=False)
    v = None if value is None else _VALUES[kind].read(value, exact=False, newer_as_latest=True)[1]
    g = groups.setdefault(k["group_id"], LoadedConsumerGroup())
    if kind == GROUP_EPOCH:
        g.group_epoch = None if v is None else v["epoch"]
    elif kind == ASSIGNMENT_EPOCH:
        g.assignment_epoch = 0 if v is None else v["assignment_epoch"]
    else:
        table: dict[str, Any] = (g.members if kind == MEMBER_METADATA
                                 else g.targets if kind == TARGET_ASSIGNMENT else g.currents)
        mid = k["member_id"]
        if v is None:
            table.pop(mid, None)
        else:
            table[mid] = assignment_of(v["topic_partitions"]) if kind == TARGET_ASSIGNMENT else v
    return True
