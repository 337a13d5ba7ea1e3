"""Kafka error codes and the exceptions that carry them.

This is the innermost shared vocabulary: storage, replication, protocol and server
all raise or return these codes, so it lives at the package root and imports nothing.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113


# Codes a client may retry after refreshing metadata or backing off.
RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)


class KafkaError(Exception):
    """An error that maps onto one Kafka error code."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or self.code.name)

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE


class CorruptRecordError(KafkaError):
    """Kafka error CORRUPT_MESSAGE."""

    code = ErrorCode.CORRUPT_MESSAGE


class OffsetOutOfRangeError(KafkaError):
    """Kafka error OFFSET_OUT_OF_RANGE."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class MessageTooLargeError(KafkaError):
    """Kafka error MESSAGE_TOO_LARGE."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(KafkaError):
    """Kafka error RECORD_LIST_TOO_LARGE."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidRecordError(KafkaError):
    """Kafka error INVALID_RECORD."""

    code = ErrorCode.INVALID_RECORD


class RecordValidationError(InvalidRecordError):
    """INVALID_RECORD naming the records at fault (Produce v8+ record_errors): a list
    of (batch_index, message), batch_index being the record's index in its batch."""

    def __init__(self, message: str, record_errors: list[tuple[int, str | None]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(KafkaError):
    """Kafka error INVALID_TIMESTAMP, naming the records at fault as RecordValidationError
    (KIP-937's bounds)."""

    code = ErrorCode.INVALID_TIMESTAMP

    def __init__(self, message: str, record_errors: list[tuple[int, str | None]] | None = None) -> None:
        super().__init__(message)
        self.record_errors = record_errors or []


class OutOfOrderSequenceError(KafkaError):
    """Kafka error OUT_OF_ORDER_SEQUENCE_NUMBER."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(KafkaError):
    """Kafka error DUPLICATE_SEQUENCE_NUMBER."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """Kafka error INVALID_PRODUCER_EPOCH."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(KafkaError):
    """Kafka error UNKNOWN_PRODUCER_ID."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


class KafkaStorageError(KafkaError):
    """Kafka error KAFKA_STORAGE_ERROR."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class NotLeaderOrFollowerError(KafkaError):
    """Kafka error NOT_LEADER_OR_FOLLOWER."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class FencedLeaderEpochError(KafkaError):
    """Kafka error FENCED_LEADER_EPOCH."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(KafkaError):
    """Kafka error UNKNOWN_LEADER_EPOCH."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class NotEnoughReplicasError(KafkaError):
    """Kafka error NOT_ENOUGH_REPLICAS."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS


class UnsupportedCompressionTypeError(KafkaError):
    """Kafka error UNSUPPORTED_COMPRESSION_TYPE."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class InvalidRequestError(KafkaError):
    """Kafka error INVALID_REQUEST."""

    code = ErrorCode.INVALID_REQUEST
    correlation_id: int | None = None  # of the request, when known (it is answered)


class UnsupportedVersionError(KafkaError):
    """Kafka error UNSUPPORTED_VERSION."""

    code = ErrorCode.UNSUPPORTED_VERSION
    api_key: int | None = None  # the API asked for, when known (ApiVersions is answered)
    api_version: int | None = None
    correlation_id: int | None = None  # of the request, when known (it is answered)


class CheckpointCorruptError(KafkaStorageError):
    """A checkpoint file is torn or its checksum does not match: never trust its content."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: corrupt checkpoint: {reason}")


class CorruptBatchError(CorruptRecordError):
    """A record batch failed validation at a byte position of a buffer or file."""

    def __init__(self, position: int, reason: str, path: str | None = None) -> None:
        self.position = position
        self.reason = reason
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}corrupt record batch at position {position}: {reason}")


class InvalidBatchError(InvalidRecordError):
    """Well-formed records that break a batch's rules (count, offset deltas, timestamps):
    INVALID_RECORD, as Kafka's InvalidRecordException."""

    def __init__(self, position: int, reason: str) -> None:
        self.position = position
        self.reason = reason
        super().__init__(f"invalid record batch at position {position}: {reason}")
