"""Kafka's schemas of the coordinators' log records (`__consumer_offsets`,
`__transaction_state`) and of the consumer protocol's subscription and assignment, declared
as data the way messages.py declares the APIs: the coordinators write and read their
records from these declarations (kafkarepl/coordinator/offsets.py, group_records.py,
txn_log.py), and dump-log shows them as Kafka's generated JSON converters do
(--offsets-decoder, --transaction-log-decoder).

Every record's key and value start with an int16 version; the key's version says which
record it is (OffsetCommit: 0-1, GroupMetadata: 2, KIP-848's consumer groups: 3 and 5-8,
TransactionLog: 0 in its own topic). The versions declared are those kafkarepl and Kafka
4.0's coordinators write: the older records' non-flexible ones, KIP-848's flexible v0 values
(their keys are not flexible).
"""

from __future__ import annotations

import base64
import functools
import struct
from collections.abc import Callable
from typing import Any

from .codec import DecodeError, compile_decoder, compile_encoder
from .schema import BYTES, INT8, INT16, INT32, INT64, STRING, UUID, in_range
from .schema import Array as A
from .schema import Field as F
from .schema import Struct as S

Fields = tuple[F, ...]

OFFSET_COMMIT_KEY: Fields = (
    F('Group', STRING, '0+'),
    F('Topic', STRING, '0+'),
    F('Partition', INT32, '0+'),
)
OFFSET_COMMIT_VALUE: Fields = (
    F('Offset', INT64, '0+'),
    F('LeaderEpoch', INT32, '3+', default=-1),
    F('Metadata', STRING, '0+'),
    F('CommitTimestamp', INT64, '0+'),
    F('ExpireTimestamp', INT64, '1', default=-1),
)
GROUP_METADATA_KEY: Fields = (F('Group', STRING, '0+'),)
GROUP_METADATA_VALUE: Fields = (
    F('ProtocolType', STRING, '0+'),
    F('Generation', INT32, '0+'),
    F('Protocol', STRING, '0+', nullable='0+'),
    F('Leader', STRING, '0+', nullable='0+'),
    F('CurrentStateTimestamp', INT64, '2+', default=-1),
    F('Members', A(S(
        F('MemberId', STRING, '0+'),
        F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
        F('ClientId', STRING, '0+'),
        F('ClientHost', STRING, '0+'),
        F('RebalanceTimeout', INT32, '1+', default=-1),
        F('SessionTimeout', INT32, '0+'),
        F('Subscription', BYTES, '0+'),
        F('Assignment', BYTES, '0+'),
    )), '0+'),
)
TRANSACTION_LOG_KEY: Fields = (F('TransactionalId', STRING, '0+'),)
TRANSACTION_LOG_VALUE: Fields = (
    F('ProducerId', INT64, '0+'),
    F('ProducerEpoch', INT16, '0+'),
    F('TransactionTimeoutMs', INT32, '0+'),
    F('TransactionStatus', INT8, '0+'),
    F('TransactionPartitions', A(S(
        F('Topic', STRING, '0+'),
        F('PartitionIds', A(INT32), '0+'),
    )), '0+', nullable='0+'),
    F('TransactionLastUpdateTimestampMs', INT64, '0+'),
    F('TransactionStartTimestampMs', INT64, '0+'),
)
# KIP-848 (ConsumerGroupHeartbeat) groups: one record per group and per member, so a
# heartbeat writes only what it changed. Keys hold the group id (and member id).
CONSUMER_GROUP_KEY: Fields = (F('GroupId', STRING, '0+'),)
CONSUMER_GROUP_MEMBER_KEY: Fields = (F('GroupId', STRING, '0+'), F('MemberId', STRING, '0+'))
CONSUMER_GROUP_METADATA_VALUE: Fields = (
    F('Epoch', INT32, '0+'),
    F('MetadataHash', INT64, '0+', tagged='0+', tag=0, default=0),
)
_CLASSIC_PROTOCOL = S(F('Name', STRING, '0+'), F('Metadata', BYTES, '0+'))
CONSUMER_GROUP_MEMBER_METADATA_VALUE: Fields = (
    F('InstanceId', STRING, '0+', nullable='0+'),
    F('RackId', STRING, '0+', nullable='0+'),
    F('ClientId', STRING, '0+'),
    F('ClientHost', STRING, '0+'),
    F('SubscribedTopicNames', A(STRING), '0+'),
    F('SubscribedTopicRegex', STRING, '0+', nullable='0+'),
    F('RebalanceTimeoutMs', INT32, '0+', default=-1),
    F('ServerAssignor', STRING, '0+', nullable='0+'),
    F('ClassicMemberMetadata', S(F('SessionTimeoutMs', INT32, '0+'), F('SupportedProtocols', A(_CLASSIC_PROTOCOL), '0+')),
      '0+',
      nullable='0+', tagged='0+', tag=0, default=None),
)
_TOPIC_PARTITIONS = A(S(F('TopicId', UUID, '0+'), F('Partitions', A(INT32), '0+')))
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Fields = (F('AssignmentEpoch', INT32, '0+'),)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Fields = (F('TopicPartitions', _TOPIC_PARTITIONS, '0+'),)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Fields = (
    F('MemberEpoch', INT32, '0+'),
    F('PreviousMemberEpoch', INT32, '0+'),
    F('State', INT8, '0+'),
    F('AssignedPartitions', _TOPIC_PARTITIONS, '0+'),
    F('PartitionsPendingRevocation', _TOPIC_PARTITIONS, '0+'),
)
CONSUMER_PROTOCOL_SUBSCRIPTION: Fields = (
    F('Topics', A(STRING), '0+'),
    F('UserData', BYTES, '0+', nullable='0+', default=None),
    F('OwnedPartitions', A(S(
        F('Topic', STRING, '1+'),
        F('Partitions', A(INT32), '1+'),
    )), '1+'),
    F('GenerationId', INT32, '2+', default=-1),
    F('RackId', STRING, '3+', nullable='3+', default=None),
)
CONSUMER_PROTOCOL_ASSIGNMENT: Fields = (
    F('AssignedPartitions', A(S(
        F('Topic', STRING, '0+'),
        F('Partitions', A(INT32), '0+'),
    )), '0+'),
    F('UserData', BYTES, '0+', nullable='0+', default=None),
)

NO_VERSIONS = range(0)
# key version -> (record type, key fields, value fields, the value versions declared, those
# of them that are flexible)
OFFSETS_TOPIC_RECORDS: dict[int, tuple[str, Fields, Fields, range, range]] = {
    0: ("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE, range(0, 4), NO_VERSIONS),
    1: ("OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE, range(0, 4), NO_VERSIONS),
    2: ("GroupMetadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE, range(0, 4), NO_VERSIONS),
    3: ("ConsumerGroupMetadata", CONSUMER_GROUP_KEY, CONSUMER_GROUP_METADATA_VALUE, range(0, 1), range(0, 1)),
    5: ("ConsumerGroupMemberMetadata", CONSUMER_GROUP_MEMBER_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE,
        range(0, 1), range(0, 1)),
    6: ("ConsumerGroupTargetAssignmentMetadata", CONSUMER_GROUP_KEY,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE, range(0, 1), range(0, 1)),
    7: ("ConsumerGroupTargetAssignmentMember", CONSUMER_GROUP_MEMBER_KEY,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, range(0, 1), range(0, 1)),
    8: ("ConsumerGroupCurrentMemberAssignment", CONSUMER_GROUP_MEMBER_KEY,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE, range(0, 1), range(0, 1)),
}
TRANSACTION_TOPIC_RECORDS: dict[int, tuple[str, Fields, Fields, range, range]] = {
    0: ("TransactionLog", TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE, range(0, 1), NO_VERSIONS),
}
CONSUMER_PROTOCOL_VERSIONS = range(0, 4)

_VERSION = struct.Struct(">h")


class UnknownVersionError(ValueError):
    """A record or embedded struct of a version not declared here."""


def record_version(data: bytes) -> int:
    """The int16 version a record's key or value starts with; ValueError when shorter."""
    if len(data) < _VERSION.size:
        raise ValueError("shorter than its version")
    return int(_VERSION.unpack_from(data, 0)[0])


class RecordSchema:
    """A record key's or value's fields at the versions declared, their readers and writers
    compiled once (the coordinators read and write their records through these)."""

    def __init__(self, fields: Fields, versions: range, flexible: range = NO_VERSIONS) -> None:
        self.fields, self.versions, self.flexible = fields, versions, flexible
        self._readers = {v: compile_decoder(fields, v, v in flexible) for v in versions}
        self._writers: dict[int, Callable[[list, dict], None]] = {}  # compiled at first use

    def read(self, data: bytes, *, exact: bool = True, newer_as_latest: bool = False) -> tuple[int, dict[str, Any]]:
        """(version, decoded dict) of `data`: an int16 version, then the fields at it.
        Raises UnknownVersionError for an undeclared version, ValueError when malformed.
        exact: bytes left over are an error (else ignored, as Kafka's generated readers
        do); newer_as_latest: a version past those declared is read as the latest (Kafka's
        ConsumerProtocol does so with subscriptions and assignments)."""
        version = record_version(data)
        if newer_as_latest and version > self.versions[-1]:
            version = self.versions[-1]
        reader = self._readers.get(version)
        if reader is None:
            raise UnknownVersionError(f"version {version}")
        try:
            body, pos = reader(memoryview(data), _VERSION.size)
        except (DecodeError, IndexError, struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"malformed at version {version}: {exc}") from None
        if exact and pos != len(data):
            raise ValueError(f"{len(data) - pos} bytes left over at version {version}")
        return version, body

    def write(self, version: int, body: dict[str, Any]) -> bytes:
        """`body` as a record key or value: the int16 version, then the fields at it."""
        writer = self._writers.get(version)
        if writer is None:
            writer = self._writers[version] = compile_encoder(self.fields, version, version in self.flexible)
        out: list[Any] = [_VERSION.pack(version)]
        writer(out, body)
        return b"".join(out)


def read_versioned(data: bytes, fields: Fields, versions: range, flexible: range = NO_VERSIONS,
                   **kw: bool) -> tuple[int, dict[str, Any]]:
    """RecordSchema(fields, versions, flexible).read(data, **kw), for tools reading any
    record kind."""
    return _schema(fields, versions, flexible).read(data, **kw)


@functools.cache
def _schema(fields: Fields, versions: range, flexible: range) -> RecordSchema:
    return RecordSchema(fields, versions, flexible)


def to_json(fields: Fields, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """`body` as Kafka's generated JsonConverter writes it at `version`: the fields of that
    version in declaration order (tagged ones only when not their default), named
    camelCase, bytes in base64, uuids as Kafka prints them."""
    out: dict[str, Any] = {}
    for f in fields:
        if not in_range(version, f.versions):
            continue
        if in_range(version, f.tagged) and body[f.key] == f.default:
            continue  # a tagged field is shown only when set, as Kafka's
        out[f.name[0].lower() + f.name[1:]] = _json_value(f.type, version, body[f.key])
    return out


def _json_value(t: Any, version: int, v: Any) -> Any:
    if v is None:
        return None
    if isinstance(t, A):
        return [_json_value(t.item, version, x) for x in v]
    if isinstance(t, S):
        return to_json(t.fields, version, v)
    if t == BYTES:
        return base64.b64encode(bytes(v)).decode()
    if t == UUID:  # Kafka's Uuid.toString: url-safe base64, unpadded
        return base64.urlsafe_b64encode(v.bytes).decode().rstrip("=")
    return v
