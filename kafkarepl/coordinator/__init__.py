"""Consumer groups (Kafka's classic group protocol) and committed offsets, sans-I/O.

No sockets, asyncio, files or ZooKeeper: kafkarepl/server/group_coordinator.py feeds
it requests, partition leadership and `now_ms`, and delivers what it returns.
"""

from .coordinator import GroupCoordinator, random_member_id
from .group import (
    Group,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResponse,
    Member,
    Outbox,
    Parked,
    StoreRequest,
    SyncResponse,
)
from .group_records import (
    GroupSnapshot,
    MemberSnapshot,
    decode_group_key,
    decode_group_value,
    encode_group_key,
    encode_group_value,
)
from .offsets import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    OffsetKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash,
    partition_for,
)
from .records import build_batch, iter_records

__all__ = [
    "OFFSETS_TOPIC",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupSnapshot",
    "GroupState",
    "JoinRequest",
    "JoinResponse",
    "Member",
    "MemberSnapshot",
    "OffsetAndMetadata",
    "OffsetKey",
    "Outbox",
    "Parked",
    "StoreRequest",
    "SyncResponse",
    "build_batch",
    "decode_group_key",
    "decode_group_value",
    "decode_key",
    "decode_value",
    "encode_group_key",
    "encode_group_value",
    "encode_key",
    "encode_value",
    "iter_records",
    "java_string_hash",
    "partition_for",
    "random_member_id",
]
