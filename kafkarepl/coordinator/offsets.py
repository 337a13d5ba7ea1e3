"""Committed offsets as `__consumer_offsets` records, in Kafka's own schemas.

Key (OffsetCommitKey v1): int16 version=1, string group, string topic, int32 partition.
Value (OffsetCommitValue v3): int16 version=3, int64 offset, int32 leader_epoch,
string metadata, int64 commit_timestamp. A null value (tombstone) deletes the offset.
Strings are int16 length + UTF-8. Values v0-v2 (older Kafka) are read too; keys of
version 2 (group metadata) are not offsets: kafkarepl/coordinator/group_records.py.

Group -> partition is Kafka's: abs(java String.hashCode(group_id)) % partitions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


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


def string_field(s: str | None) -> bytes:
    """A record string: int16 length + UTF-8, -1 for null."""
    if s is None:
        return _I16.pack(-1)
    b = s.encode()
    return _I16.pack(len(b)) + b


def encode_key(group_id: str, topic: str, partition: int) -> bytes:
    return _I16.pack(1) + string_field(group_id) + string_field(topic) + _I32.pack(partition)


def encode_value(o: OffsetAndMetadata) -> bytes:
    return (_I16.pack(3) + _I64.pack(o.offset) + _I32.pack(o.leader_epoch) + string_field(o.metadata or "")
            + _I64.pack(o.commit_timestamp_ms))


class Reader:
    """Kafka's fixed-width record fields, bounds-checked (ValueError past the end)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _unpack(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise ValueError("record shorter than its schema")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("field runs past the record")
        b = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return b

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def string(self) -> str:
        return self.nullable_string() or ""

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._take(n)


def decode_key(key: bytes) -> OffsetKey | None:
    """The offset key, or None for another record kind (group metadata, unknown)."""
    r = Reader(key)
    if r.i16() not in (0, 1):
        return None
    return OffsetKey(r.string(), r.string(), r.i32())


def decode_value(value: bytes | None) -> OffsetAndMetadata | None:
    """None for a tombstone."""
    if value is None:
        return None
    r = Reader(value)
    version = r.i16()
    if version < 0 or version > 3:
        raise ValueError(f"unknown offset value version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    ts = r.i64()
    return OffsetAndMetadata(offset, epoch, metadata, ts)
