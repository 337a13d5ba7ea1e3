"""A coordinator's write to its internal topic: the replica append's outcome as the
coordinator's client must see it (Kafka's GroupMetadataManager/TransactionStateManager)."""

from __future__ import annotations

import asyncio

from kafkarepl.coordinator.records import build_batch
from kafkarepl.errors import ErrorCode
from kafkarepl.replication import PartitionOrder, TopicPartition
from kafkarepl.server.coordinator_log import COORDINATOR_APPEND_ERRORS, append_as_coordinator

from .test_replica_manager import manager

TP = TopicPartition("__transaction_state", 0)


def append(rm, tp: TopicPartition = TP, errors=COORDINATOR_APPEND_ERRORS) -> ErrorCode:
    batch = memoryview(build_batch([(b"k", b"v")], 1_000))
    return asyncio.run(append_as_coordinator(rm, tp, batch, 5_000, errors))


def test_an_append_the_isr_holds_answers_none_and_is_in_the_log() -> None:
    rm, storage, _o, _c = manager()
    rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 1, 1, (1,), (1,), 1)], {})
    assert append(rm) is ErrorCode.NONE
    assert storage.logs[TP].log_end_offset > 0  # appended (the simulation's log counts its own way)


def test_a_broker_not_leading_the_partition_is_not_the_coordinator() -> None:
    rm, _s, _o, _c = manager()
    assert append(rm) is ErrorCode.NOT_COORDINATOR  # no replica here at all
    rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 2, 1, (2, 1), (2, 1), 1)], {})
    assert append(rm) is ErrorCode.NOT_COORDINATOR  # a follower


def test_too_small_an_isr_is_retriable_for_the_client() -> None:
    rm, _s, _o, _c = manager()
    rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 1, 1, (1,), (1, 2), 1)],
                                 {TP.topic: {"min.insync.replicas": "2"}})
    assert append(rm) is ErrorCode.COORDINATOR_NOT_AVAILABLE  # NOT_ENOUGH_REPLICAS


def test_codes_are_translated_as_kafka_and_unknown_ones_are_unknown_server_errors() -> None:
    m = COORDINATOR_APPEND_ERRORS
    # Kafka's TransactionStateManager: a missing partition is retriable, not an unknown error
    assert m[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert m[ErrorCode.NOT_LEADER_OR_FOLLOWER] is ErrorCode.NOT_COORDINATOR
    assert m[ErrorCode.KAFKA_STORAGE_ERROR] is ErrorCode.NOT_COORDINATOR
    assert ErrorCode.MESSAGE_TOO_LARGE not in m  # UNKNOWN_SERVER_ERROR for the transaction log
    rm, _s, _o, _c = manager()
    rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 1, 1, (1,), (1, 2), 1)],
                                 {TP.topic: {"min.insync.replicas": "2"}})
    assert append(rm, errors={}) is ErrorCode.UNKNOWN_SERVER_ERROR
