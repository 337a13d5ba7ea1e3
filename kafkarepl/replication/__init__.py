"""Sans-I/O replication core: leader/follower state, ISR, HW, epochs, purgatory.

No sockets, files, asyncio, ZooKeeper or storage imports: the broker drives it with
method calls carrying now_ms and acts on the values it returns.
"""

from .follower import (
    EpochRequest,
    FetcherOutcome,
    FetcherState,
    FetchRequest,
    FetchResponse,
    FollowerFetcher,
)
from .log import UNDEFINED, EpochEndOffset, ReplicaLog, epoch_end_offset
from .memory_log import MemoryLog
from .metrics import ReplicationGauges, ReplicationMetrics, gauges
from .partition import (
    FollowerFetchResult,
    IsrChange,
    PartitionConfig,
    PartitionState,
    RemoteReplica,
    Role,
    select_preferred_read_replica,
)
from .purgatory import (
    DelayedFetch,
    DelayedOperation,
    DelayedProduce,
    FetchWait,
    ProduceWait,
    Purgatory,
)

__all__ = [
    "UNDEFINED",
    "DelayedFetch",
    "DelayedOperation",
    "DelayedProduce",
    "EpochEndOffset",
    "EpochRequest",
    "FetchRequest",
    "FetchResponse",
    "FetchWait",
    "FetcherOutcome",
    "FetcherState",
    "FollowerFetchResult",
    "FollowerFetcher",
    "IsrChange",
    "MemoryLog",
    "PartitionConfig",
    "PartitionState",
    "ProduceWait",
    "Purgatory",
    "RemoteReplica",
    "ReplicaLog",
    "ReplicationGauges",
    "ReplicationMetrics",
    "Role",
    "epoch_end_offset",
    "gauges",
    "select_preferred_read_replica",
]
