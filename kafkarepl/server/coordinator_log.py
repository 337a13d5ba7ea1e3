"""A coordinator's write to its internal topic (`__consumer_offsets`, `__transaction_state`).

Both coordinators append one batch with acks=all to a partition this broker leads and
answer their client with the outcome, translated as Kafka's GroupMetadataManager and
TransactionStateManager translate a replica append's error: a client of a coordinator
learns "retry here later" (COORDINATOR_NOT_AVAILABLE) or "find the coordinator again"
(NOT_COORDINATOR), never a partition-level code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import PartitionResponse, TopicPartition

if TYPE_CHECKING:
    from kafkarepl.replication import ReplicaManager

COORDINATOR_APPEND_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


async def append_as_coordinator(replicas: ReplicaManager, tp: TopicPartition, batch: memoryview,
                                timeout_ms: int,
                                errors: Mapping[ErrorCode, ErrorCode] = COORDINATOR_APPEND_ERRORS) -> ErrorCode:
    """Append `batch` to `tp` (acks=all) and wait for it: NONE, or the error the
    coordinator's client gets (NOT_COORDINATOR when this broker does not lead `tp`;
    a code `errors` does not know becomes UNKNOWN_SERVER_ERROR, as Kafka's)."""
    return await start_append_as_coordinator(replicas, tp, batch, timeout_ms, errors)


def start_append_as_coordinator(replicas: ReplicaManager, tp: TopicPartition, batch: memoryview,
                                timeout_ms: int,
                                errors: Mapping[ErrorCode, ErrorCode] = COORDINATOR_APPEND_ERRORS,
                                ) -> asyncio.Future[ErrorCode]:
    """append_as_coordinator's append, issued before this returns (so appends issued in
    some order reach the log in that order); the future holds its outcome."""
    fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
    p = replicas.get(tp)
    if p is None or not p.is_leader:
        fut.set_result(ErrorCode.NOT_COORDINATOR)
        return fut

    def done(results: dict[TopicPartition, PartitionResponse]) -> None:
        if not fut.done():
            code = results[tp].error
            fut.set_result(code if code is ErrorCode.NONE else errors.get(code, ErrorCode.UNKNOWN_SERVER_ERROR))

    replicas.append_records(timeout_ms, -1, {tp: batch}, done, internal_topics_allowed=True, client=False)
    return fut
