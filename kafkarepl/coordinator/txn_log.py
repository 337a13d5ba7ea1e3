"""Transaction metadata and its `__transaction_state` records, in Kafka's own schemas.

Key: TransactionLogKey v0 (the transactional id). Value: TransactionLogValue v0 (producer
id and epoch, timeout, state, the partitions by topic, last update and start timestamps),
declared in kafkarepl/protocol/coordinator_schemas.py. A null value (tombstone) removes
the transactional id (transactional.id.expiration.ms).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from kafkarepl.protocol.coordinator_schemas import (
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    RecordSchema,
)

TXN_TOPIC = "__transaction_state"
# v1 of the value (flexible, Kafka 4's transaction version 2 fields) is not read here.
_KEY = RecordSchema(TRANSACTION_LOG_KEY, range(0, 1))
_VALUE = RecordSchema(TRANSACTION_LOG_VALUE, range(0, 1))


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


def encode_key(transactional_id: str) -> bytes:
    return _KEY.write(0, {"transactional_id": transactional_id})


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key of another version or a malformed one."""
    try:
        return str(_KEY.read(data, exact=False)[1]["transactional_id"])
    except ValueError:
        return None


def encode_value(m: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    return _VALUE.write(0, {
        "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
        "transaction_timeout_ms": m.timeout_ms, "transaction_status": int(m.state),
        "transaction_partitions": [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
        "transaction_last_update_timestamp_ms": m.last_update_ms, "transaction_start_timestamp_ms": m.start_ms})


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    """ValueError for a malformed or unknown-version value."""
    _, v = _VALUE.read(data, exact=False)
    partitions = {(tp["topic"], p) for tp in v["transaction_partitions"] or () for p in tp["partition_ids"]}
    return TxnMetadata(transactional_id, v["producer_id"], v["producer_epoch"], v["transaction_timeout_ms"],
                       TxnState(v["transaction_status"]), partitions, v["transaction_start_timestamp_ms"],
                       v["transaction_last_update_timestamp_ms"])
