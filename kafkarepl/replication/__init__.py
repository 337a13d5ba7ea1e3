"""Sans-I/O replication core: leader/follower state, ISR, HW, epochs, purgatory.

No sockets, files, asyncio, ZooKeeper or storage imports: the broker drives it with
method calls carrying now_ms and acts on the values it returns. Wiring, per partition:

- LeaderAndIsr: become_leader(...) / become_follower(...) (the latter returns the
  FollowerFetcher to hand to the replica fetcher for leader_id); then check the
  purgatories for the partition so waiters learn about the leadership change.
- Produce: check_produce(acks) -> append with the storage Log at state.leader_epoch ->
  on_leader_append() -> if True, check the purgatories; acks=-1 parks a DelayedProduce
  (ProduceWait(state, last_offset + 1, state.leader_term)).
- Follower Fetch on the leader: validate_leader_epoch(current_leader_epoch) ->
  on_follower_fetch(...) -> send result.isr_change as AlterPartition (retry until
  answered, then on_isr_change_committed / on_isr_change_failed(error, now, change));
  if hw_changed, check the purgatories; answer with diverging_epoch, or with records
  [fetch_offset, fetch_upper_bound(True)).
- Consumer Fetch: read below fetch_upper_bound(False) (the HW, also on followers).
- OffsetForLeaderEpoch: end_offset_for_epoch(requested, current_leader_epoch).
- Timers: maybe_shrink_isr(now) on leaders every replica.lag.time.max.ms / 2;
  Purgatory.poll(now) at next_deadline(); checkpoint high_watermark periodically and
  pass it back as PartitionState(high_watermark=...) on startup.
- Replica fetcher: per partition next_request(now) -> EpochRequest / FetchRequest,
  answered through on_epoch_end_offset / on_fetch_response with the same request
  object; on_request_failed on timeouts and disconnects.
"""

from .follower import (
    EpochRequest,
    FetcherOutcome,
    FetcherState,
    FetchRequest,
    FetchResponse,
    FollowerFetcher,
)
from .log import UNDEFINED, EpochEndOffset, ReplicaLog, SupportsLogStartIncrement, epoch_end_offset
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
from .replica_manager import (
    Clock,
    FetchCallback,
    FetcherControl,
    FetchParams,
    FetchPartitionData,
    IsrChangeResult,
    IsrChangeSender,
    LeaderLog,
    PartitionFetch,
    PartitionOrder,
    PartitionResponse,
    ReplicaManager,
    ReplicaStorage,
    StopOrder,
    TopicPartition,
)
from .topic_stats import BrokerTopicStats

__all__ = [
    "BrokerTopicStats",
    "Clock",
    "FetchCallback",
    "FetcherControl",
    "FetchParams",
    "FetchPartitionData",
    "IsrChangeResult",
    "IsrChangeSender",
    "LeaderLog",
    "PartitionFetch",
    "PartitionOrder",
    "PartitionResponse",
    "ReplicaManager",
    "ReplicaStorage",
    "StopOrder",
    "TopicPartition",
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
    "SupportsLogStartIncrement",
    "Role",
    "epoch_end_offset",
    "gauges",
    "select_preferred_read_replica",
]
