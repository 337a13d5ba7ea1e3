"""Committed offsets as `__consumer_offsets` records, in Kafka's own schemas (declared in
kafkarepl/protocol/coordinator_schemas.py).

Key: OffsetCommitKey v1 (group, topic, partition). Value: OffsetCommitValue v3 (offset,
leader epoch, metadata, commit timestamp), what Kafka writes; v0-v2 (older Kafka) are read
too. A null value (tombstone) deletes the offset. Keys of version 2 (group metadata) are
not offsets: kafkarepl/coordinator/group_records.py.

Group -> partition is Kafka's: abs(java String.hashCode(group_id)) % partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkarepl.protocol.coordinator_schemas import (
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    RecordSchema,
    UnknownVersionError,
)

OFFSETS_TOPIC = "__consumer_offsets"
KEY_VERSION = 1  # OffsetCommitKey: 0 and 1 are offsets, 2 group metadata
VALUE_VERSION = 3
_KEY = RecordSchema(OFFSET_COMMIT_KEY, range(0, 2))
_VALUE = RecordSchema(OFFSET_COMMIT_VALUE, range(0, VALUE_VERSION + 1))


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % partitions (Utils.abs maps MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


def encode_key(group_id: str, topic: str, partition: int) -> bytes:
    return _KEY.write(KEY_VERSION, {"group": group_id, "topic": topic, "partition": partition})


def encode_value(o: OffsetAndMetadata) -> bytes:
    return _VALUE.write(VALUE_VERSION, {"offset": o.offset, "leader_epoch": o.leader_epoch,
                                        "metadata": o.metadata or "", "commit_timestamp": o.commit_timestamp_ms})


def decode_key(key: bytes) -> OffsetKey | None:
    """The offset key, or None for another record kind (group metadata, unknown);
    ValueError when malformed."""
    try:
        _, k = _KEY.read(key, exact=False)
    except UnknownVersionError:
        return None
    return OffsetKey(k["group"], k["topic"], k["partition"])


def decode_value(value: bytes | None) -> OffsetAndMetadata | None:
    """None for a tombstone; ValueError for an unknown version or a malformed value."""
    if value is None:
        return None
    _, v = _VALUE.read(value, exact=False)
    return OffsetAndMetadata(v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"])
