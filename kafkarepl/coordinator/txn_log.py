"""Transaction metadata and its `__transaction_state` records, in Kafka's own schemas.

Key (TransactionLogKey v0): int16 version 0, string transactional id.
Value (TransactionLogValue v0): int16 version 0, int64 producer id, int16 producer epoch,
int32 transaction timeout ms, int8 state, nullable array of (string topic, int32 array of
partitions), int64 last update timestamp, int64 start timestamp. A null value (tombstone)
removes the transactional id (transactional.id.expiration.ms).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

TXN_TOPIC = "__transaction_state"

_I16 = struct.Struct(">h")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, state
_I32 = struct.Struct(">i")
_I64x2 = struct.Struct(">qq")


class TxnState(IntEnum):
    """Kafka's TransactionState ids (the int8 of the log value)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:  # DescribeTransactions / ListTransactions names
        return {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}[int(self)]


STATE_BY_NAME = {s.display: s for s in TxnState}


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = -1  # the epoch before the last bump (KIP-360 retries)
    pending: bool = False  # a state write is in flight: concurrent requests wait

    def copy(self) -> TxnMetadata:
        return TxnMetadata(self.transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms,
                           self.state, set(self.partitions), self.start_ms, self.last_update_ms,
                           self.last_producer_epoch)


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def decode_key(data: bytes) -> str | None:
    if len(data) < 4 or _I16.unpack_from(data, 0)[0] != 0:
        return None
    n = _I16.unpack_from(data, 2)[0]
    if n < 0 or 4 + n > len(data):
        return None
    return data[4 : 4 + n].decode()


def encode_value(m: TxnMetadata) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(0, m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state)))
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    out += _I32.pack(len(by_topic))
    for t, ps in by_topic.items():
        out += _string(t) + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in ps)
    out += _I64x2.pack(m.last_update_ms, m.start_ms)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    """Raises ValueError (struct.error) for a malformed or unknown-version value."""
    version, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(data, 0)
    if version not in (0, 1):
        raise ValueError(f"unknown transaction log value version {version}")
    pos = _VALUE_HEAD.size
    if version == 1:  # flexible: compact arrays and strings (uvarint n+1), tagged fields
        raise ValueError("transaction log value v1 is not read by this version")
    (n,) = _I32.unpack_from(data, pos)
    pos += 4
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(n, 0)):
        (tl,) = _I16.unpack_from(data, pos)
        topic = data[pos + 2 : pos + 2 + tl].decode()
        pos += 2 + tl
        (k,) = _I32.unpack_from(data, pos)
        pos += 4
        for _ in range(k):
            partitions.add((topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
    last_update, start = _I64x2.unpack_from(data, pos)
    return TxnMetadata(transactional_id, pid, epoch, timeout, TxnState(state), partitions, start, last_update)
