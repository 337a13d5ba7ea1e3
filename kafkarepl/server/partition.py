"""One partition on this broker: its Log, its replication state, and the asyncio waiters.

The replication decisions (HW, ISR, epochs, commit of acks=all, follower truncation)
are made by the sans-I/O `kafkarepl.replication` core; this class feeds it events from
the network and the log, and owns the asyncio objects the core must not know about.
`StorageReplicaLog` adapts storage.Log to the core's ReplicaLog protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    EpochEndOffset,
    FollowerFetcher,
    IsrChange,
    PartitionConfig,
    PartitionState,
    ReplicationMetrics,
    epoch_end_offset,
)

if TYPE_CHECKING:
    from kafkarepl.storage import Log
    from kafkarepl.storage.config import LogConfig

log = logging.getLogger(__name__)


class StorageReplicaLog:
    """storage.Log seen through the replication core's ReplicaLog protocol."""

    def __init__(self, log_: Log) -> None:
        self.log = log_

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def latest_epoch(self) -> int | None:
        return self.log.leader_epoch_cache.latest_epoch

    def epoch_entries(self) -> Sequence[tuple[int, int]]:
        return self.log.leader_epoch_cache.epochs()

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        return epoch_end_offset(self.epoch_entries(), epoch, self.log.log_end_offset)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.log.leader_epoch_cache.assign(epoch, start_offset)

    def append_as_follower(self, records: Any) -> None:
        self.log.append_as_follower(records)

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            self.log.truncate_to(offset)
        # Also when nothing is cut: a trailing empty epoch entry must go (see ReplicaLog).
        self.log.leader_epoch_cache.truncate_from_end(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        self.log.maybe_increment_log_start_offset(offset)


def partition_config(cfg: LogConfig, broker_cfg: Any) -> PartitionConfig:
    return PartitionConfig(
        min_insync_replicas=cfg.min_insync_replicas,
        replica_lag_time_max_ms=broker_cfg.replica_lag_time_max_ms,
        unclean_leader_election_enable=cfg.unclean_leader_election_enable,
        replica_fetch_backoff_ms=broker_cfg.replica_fetch_backoff_ms,
    )


class Partition:
    def __init__(
        self,
        topic: str,
        partition: int,
        local_id: int,
        log_: Log,
        config: PartitionConfig,
        metrics: ReplicationMetrics,
        initial_hw: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.local_id = local_id
        self.log = log_
        self.state = PartitionState(
            local_id, StorageReplicaLog(log_), config, high_watermark=initial_hw, metrics=metrics
        )
        # Woken on every LEO or HW change: delayed fetches park on it.
        self._changed: asyncio.Future | None = None

    # -- views -----------------------------------------------------------------------
    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader

    @property
    def leader_id(self) -> int:
        return -1 if self.state.leader_id is None else self.state.leader_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self.state.partition_epoch

    @property
    def isr(self) -> frozenset[int]:
        return self.state.isr

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.state.replicas

    @property
    def high_watermark(self) -> int:
        return self.state.high_watermark

    @property
    def min_insync_replicas(self) -> int:
        return self.state.config.min_insync_replicas

    @property
    def fetcher(self) -> FollowerFetcher | None:
        return self.state.fetcher

    # -- role changes ------------------------------------------------------------------
    def become_leader(
        self, epoch: int, isr: list[int], replicas: list[int], partition_epoch: int, now: int
    ) -> bool:
        unclean = self.local_id not in isr
        started = self.state.become_leader(epoch, isr, replicas, partition_epoch, now, unclean=unclean)
        if started:
            if unclean:
                log.warning(
                    "%s-%d: UNCLEAN leader election: broker %d was not in the ISR %s; "
                    "records acknowledged by the old leader may be lost",
                    self.topic, self.partition, self.local_id, isr,
                )
            log.info("%s-%d: leader in epoch %d, LEO %d, HW %d, ISR %s", self.topic, self.partition,
                     epoch, self.log.log_end_offset, self.high_watermark, sorted(isr))
        return started

    def become_follower(
        self, leader: int, epoch: int, isr: list[int], replicas: list[int], partition_epoch: int, now: int
    ) -> FollowerFetcher | None:
        fetcher = self.state.become_follower(leader, epoch, isr, replicas, partition_epoch, now)
        if fetcher is not None:
            log.info("%s-%d: follower of %d in epoch %d, LEO %d", self.topic, self.partition, leader,
                     epoch, self.log.log_end_offset)
        return fetcher

    def resign(self) -> None:
        self.state.stop_replica()

    def reconfigure(self, config: PartitionConfig, log_config: LogConfig | None = None) -> None:
        self.state.config = config
        if log_config is not None:
            self.log.reconfigure(log_config)

    # -- leader events -------------------------------------------------------------------
    def on_leader_append(self, now: int) -> None:
        self.state.on_leader_append(now)

    def produce_outcome(self, required_offset: int, epoch: int) -> ErrorCode | None:
        return self.state.produce_status(required_offset, epoch)

    def maybe_shrink_isr(self, now: int) -> IsrChange | None:
        return self.state.maybe_shrink_isr(now)

    def select_read_replica(self, client_rack: str, racks: Mapping[int, str | None], fetch_offset: int) -> int | None:
        return self.state.preferred_read_replica(client_rack, racks, fetch_offset)

    # -- delayed fetch wake-ups ------------------------------------------------------------
    def changed(self) -> asyncio.Future:
        """A future resolved at the next LEO/HW/role change (DelayedFetch waits on it)."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        return self._changed

    def notify_changed(self) -> None:
        fut = self._changed
        if fut is not None and not fut.done():
            fut.set_result(None)
