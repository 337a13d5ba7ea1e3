"""PartitionState: one partition on one broker, as leader or follower (sans-I/O).

The broker feeds it events (LeaderAndIsr, a follower's Fetch, an append, AlterPartition
answers, a timer tick) with the current time; it answers with plain values: error codes,
whether the HW moved, an ISR change to send to the controller. It mutates only the
ReplicaLog it was given (epoch entries on election, truncation on the follower side).

Rules (ARCHITECTURE.md "Replication rules"):
- HW = min LEO over the maximal ISR (committed ISR plus a pending expansion, KIP-497), only
  forward, and only while that ISR has >= min.insync.replicas members (strict min ISR,
  KIP-966), so a lone leader never commits what a later election could lose.
- ISR shrink is time-based only (seed 004): a follower is caught up at a fetch when it
  asks for an offset >= the leader's LEO at its previous fetch (or the current LEO).
- ISR expand: follower LEO >= HW and >= the start offset of the current leader epoch.
- One AlterPartition in flight at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from kafkarepl.errors import ErrorCode

from .log import UNDEFINED, EpochEndOffset, ReplicaLog
from .metrics import ReplicationMetrics

if TYPE_CHECKING:
    from .follower import FollowerFetcher


class Role(Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass
class PartitionConfig:
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    unclean_leader_election_enable: bool = False
    replica_fetch_backoff_ms: int = 1_000


@dataclass
class RemoteReplica:
    """What the leader knows of one follower (from its fetches only)."""

    broker_id: int
    log_end_offset: int = -1  # unknown until its first fetch in this leader epoch
    log_start_offset: int = -1  # as its fetches report it (Fetch v5+); -1: unknown
    last_fetch_leader_leo: int = -1
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0


@dataclass(frozen=True)
class IsrChange:
    """An AlterPartition to send to the controller (conditional on partition_epoch)."""

    leader_id: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True)
class FollowerFetchResult:
    """The leader's view after a follower's fetch. When error is NONE and diverging_epoch
    is None, answer with records from fetch_offset up to log_end_offset."""

    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: EpochEndOffset | None = None
    hw_changed: bool = False
    isr_change: IsrChange | None = None


class PartitionState:
    def __init__(
        self,
        broker_id: int,
        log: ReplicaLog,
        config: PartitionConfig | None = None,
        *,
        high_watermark: int = 0,
        metrics: ReplicationMetrics | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log = log
        self.config = config or PartitionConfig()
        self.metrics = metrics or ReplicationMetrics()
        self.role = Role.NONE
        self.leader_id: int | None = None
        self.leader_epoch = -1
        # Bumped when this broker becomes leader from another role. A leader never truncates
        # its log, so an acks=all produce appended in this term is safe to acknowledge even
        # if the controller bumped the leader epoch meanwhile (an ISR change it made): only
        # losing leadership may have truncated and refilled its offsets.
        self.leader_term = 0
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        self.pending_isr: frozenset[int] | None = None  # AlterPartition in flight ...
        self.pending_change: IsrChange | None = None  # ... and the request itself
        self.remotes: dict[int, RemoteReplica] = {}
        self.leader_epoch_start_offset = -1
        # A checkpointed HW may exceed what survived a crash: never above LEO.
        self.high_watermark = max(log.log_start_offset, min(high_watermark, log.log_end_offset))
        self.fetcher: FollowerFetcher | None = None

    # -- role changes (LeaderAndIsr) ------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def become_leader(
        self,
        leader_epoch: int,
        isr: Iterable[int],
        replicas: Iterable[int],
        partition_epoch: int,
        now_ms: int,
        *,
        unclean: bool = False,
    ) -> bool:
        """Apply LeaderAndIsr naming this broker leader. Returns True when this starts a new
        leader epoch here; False for a stale request or an ISR/replicas update of the
        current epoch (same leader_epoch, newer partition_epoch)."""
        if leader_epoch < self.leader_epoch:
            return False
        if leader_epoch == self.leader_epoch:
            if self.role is Role.LEADER and partition_epoch > self.partition_epoch:
                self._set_assignment(isr, replicas, partition_epoch, now_ms)
                self._maybe_advance_hw()
            return False
        leo = self.log.log_end_offset
        latest = self.log.latest_epoch()
        # Record the new epoch at the LEO before any append (KIP-279, apache/kafka#5678):
        # followers asking for an older epoch then learn where it ended on this leader.
        if latest is None or leader_epoch > latest:
            self.log.assign_epoch(leader_epoch, leo)
        if self.role is not Role.LEADER:
            self.leader_term += 1
        self.role = Role.LEADER
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = leo
        self.fetcher = None
        self.remotes = {}
        self._set_assignment(isr, replicas, partition_epoch, now_ms)
        self.high_watermark = min(self.high_watermark, leo)
        if unclean:
            self.metrics.unclean_elections += 1
        self._maybe_advance_hw()
        return True

    def become_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        isr: Iterable[int],
        replicas: Iterable[int],
        partition_epoch: int,
        now_ms: int,
    ) -> FollowerFetcher | None:
        """Apply LeaderAndIsr naming another broker leader (leader_id -1: none, the
        partition is offline). Returns a new FollowerFetcher (starting with truncation by
        leader epoch, KIP-101) when the leader epoch changed, None for stale or same-epoch
        requests (the current fetcher, if any, goes on) and for an offline partition."""
        from .follower import FollowerFetcher

        if leader_epoch < self.leader_epoch or (
            leader_epoch == self.leader_epoch and self.role is Role.FOLLOWER
        ):
            if leader_epoch == self.leader_epoch and partition_epoch > self.partition_epoch:
                self.isr, self.replicas = frozenset(isr), tuple(replicas)
                self.partition_epoch = partition_epoch
            return None
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr, self.replicas = frozenset(isr), tuple(replicas)
        self.pending_isr = self.pending_change = None
        self.remotes = {}
        self.fetcher = FollowerFetcher(self, leader_id, leader_epoch) if leader_id >= 0 else None
        return self.fetcher

    def stop_replica(self) -> None:
        """StopReplica / partition deleted or reassigned away."""
        self.role = Role.NONE
        self.leader_id = None
        self.fetcher = None
        self.pending_isr = self.pending_change = None
        self.remotes = {}

    def reconfigure(self, config: PartitionConfig) -> bool:
        """New topic settings (min.insync.replicas, ...). Returns True when the HW moved
        (a lower min ISR can let it advance); callers re-check waiting produces either way."""
        self.config = config
        return self._maybe_advance_hw()

    def _set_assignment(
        self, isr: Iterable[int], replicas: Iterable[int], partition_epoch: int, now_ms: int
    ) -> None:
        self.isr = frozenset(isr)
        self.replicas = tuple(replicas)
        self.partition_epoch = partition_epoch
        # A proposal in flight was based on an older partition epoch: the controller
        # will refuse it, so stop counting on it.
        self.pending_isr = self.pending_change = None
        for r in self.replicas:
            if r != self.broker_id and r not in self.remotes:
                # ISR members count as caught up now: a fresh leader must not shrink them
                # before they had a chance to fetch.
                caught_up = now_ms if r in self.isr else 0
                self.remotes[r] = RemoteReplica(r, last_caught_up_time_ms=caught_up)
        for r in [r for r in self.remotes if r not in self.replicas]:
            del self.remotes[r]

    # -- leader: epoch fencing, produce ----------------------------------------------------

    def validate_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: -1 means "not checked"."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def check_produce(self, acks: int, now_ms: int | None = None) -> ErrorCode:
        """Before appending a produce: refuse acks=all with a too small ISR."""
        if acks not in (0, 1, -1):
            return ErrorCode.INVALID_REQUIRED_ACKS
        if self.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if acks == -1 and len(self.isr) < self.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def on_leader_append(self, now_ms: int | None = None) -> bool:
        """After appending as leader. Returns True when the HW moved (complete waiters)."""
        return self._maybe_advance_hw()

    def produce_status(self, required_offset: int, leader_term: int, acks_all: bool = True) -> ErrorCode | None:
        """State of a produce appended in leader_term up to required_offset (its last
        offset + 1): acks=all needs HW >= required_offset; both acks=1 and acks=all need
        the log's flush.messages flush to have reached it (flush_pending). None: keep
        waiting."""
        if self.role is not Role.LEADER or self.leader_term != leader_term:
            # Leadership was lost meanwhile: the offset may have been truncated and
            # re-filled by other records, never ack. (A leader epoch bump alone, e.g. the
            # controller dropping a dead follower from the ISR, keeps the log: the produce
            # still completes, as in Kafka, instead of failing into a retried duplicate.)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.flush_pending(required_offset):
            return None
        if not acks_all:
            return ErrorCode.NONE
        if self.high_watermark >= required_offset:
            return ErrorCode.NONE  # strict min ISR: the HW moved only with >= min ISR copies
        if len(self.isr) < self.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return None

    # -- leader: follower fetches and the HW -------------------------------------------------

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr if self.pending_isr is None else self.isr | self.pending_isr

    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, last_fetched_epoch: int, now_ms: int,
        log_start_offset: int = -1,
    ) -> FollowerFetchResult:
        """A follower's Fetch for this partition (after validate_leader_epoch). Updates its
        LEO and caught-up time, the HW, and may propose an ISR expansion."""
        log = self.log
        leo, start = log.log_end_offset, log.log_start_offset
        if self.role is not Role.LEADER or replica_id not in self.remotes:
            return FollowerFetchResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, self.high_watermark, start, leo)
        if last_fetched_epoch >= 0:  # Fetch v12+ (KIP-320): detect divergence inline
            ours = EpochEndOffset(*log.end_offset_for_epoch(last_fetched_epoch))
            if ours.undefined:  # as Kafka: we cannot tell where that epoch ended
                return FollowerFetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, self.high_watermark, start, leo)
            if ours.end_offset < fetch_offset or ours.epoch < last_fetched_epoch:
                return FollowerFetchResult(
                    ErrorCode.NONE, self.high_watermark, start, leo, diverging_epoch=ours
                )
        if fetch_offset < start or fetch_offset > leo:
            return FollowerFetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, self.high_watermark, start, leo)
        r = self.remotes[replica_id]
        if log_start_offset >= 0:
            r.log_start_offset = log_start_offset
        # Seed 004: caught up if it reached our LEO now, or our LEO as of its previous fetch
        # (then it was caught up at that earlier time).
        if fetch_offset >= leo:
            r.last_caught_up_time_ms = max(r.last_caught_up_time_ms, now_ms)
        elif r.last_fetch_leader_leo >= 0 and fetch_offset >= r.last_fetch_leader_leo:
            r.last_caught_up_time_ms = max(r.last_caught_up_time_ms, r.last_fetch_time_ms)
        r.log_end_offset = fetch_offset
        r.last_fetch_leader_leo = leo
        r.last_fetch_time_ms = now_ms
        hw_changed = self._maybe_advance_hw()
        change = self._maybe_expand_isr(r)
        return FollowerFetchResult(
            ErrorCode.NONE, self.high_watermark, start, leo, hw_changed=hw_changed, isr_change=change
        )

    def low_watermark(self, now_ms: int) -> int:
        """The lowest log start offset over the leader and the followers that fetched
        within replica.lag.time.max.ms (Kafka's lowWatermarkIfLeader counts the live
        replicas; a follower that stopped fetching is not waited for)."""
        low = self.log.log_start_offset
        horizon = now_ms - self.config.replica_lag_time_max_ms
        for r in self.remotes.values():
            if r.log_start_offset >= 0 and r.last_fetch_time_ms >= horizon:
                low = min(low, r.log_start_offset)
        return low

    def _maybe_advance_hw(self) -> bool:
        if self.role is not Role.LEADER:
            return False
        members = self.maximal_isr
        if len(members) < self.config.min_insync_replicas:
            return False  # strict min ISR (KIP-966)
        new_hw = self.log.log_end_offset
        for b in members:
            if b != self.broker_id:
                r = self.remotes.get(b)
                new_hw = min(new_hw, r.log_end_offset if r is not None else -1)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def _maybe_expand_isr(self, r: RemoteReplica) -> IsrChange | None:
        if self.pending_isr is not None or r.broker_id in self.isr:
            return None
        if r.log_end_offset < self.high_watermark or r.log_end_offset < self.leader_epoch_start_offset:
            return None
        return self._propose(self.isr | {r.broker_id})

    def maybe_shrink_isr(self, now_ms: int) -> IsrChange | None:
        """Timer tick on the leader: propose dropping followers that have not been caught up
        for longer than replica.lag.time.max.ms. Time only, never message counts."""
        if self.role is not Role.LEADER or self.pending_isr is not None:
            return None
        lagging = self.out_of_sync_replicas(now_ms)
        return self._propose(self.isr - lagging) if lagging else None

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        leo, max_lag = self.log.log_end_offset, self.config.replica_lag_time_max_ms
        out = set()
        for b in self.isr:
            if b == self.broker_id:
                continue
            r = self.remotes.get(b)
            if r is None:
                out.add(b)
            elif r.log_end_offset != leo and now_ms - r.last_caught_up_time_ms > max_lag:
                out.add(b)
        return frozenset(out)

    def _propose(self, new_isr: frozenset[int]) -> IsrChange:
        self.pending_isr = new_isr
        self.pending_change = IsrChange(
            self.broker_id, self.leader_epoch, tuple(sorted(new_isr)), self.partition_epoch
        )
        return self.pending_change

    def on_isr_change_committed(self, isr: Iterable[int], partition_epoch: int, now_ms: int) -> bool:
        """The controller accepted an AlterPartition (its answer carries the new ISR and
        partition epoch). Returns True when the HW moved. An answer older than what we
        know is ignored; a newer one also retires our proposal (it was based on an older
        partition epoch, so the controller refuses it if it has not already applied it)."""
        if self.role is not Role.LEADER or partition_epoch <= self.partition_epoch:
            return False
        new = frozenset(isr)
        if new - self.isr:
            self.metrics.isr_expands += 1
            for b in new - self.isr:
                r = self.remotes.get(b)
                if r is not None:
                    # It had reached the HW at its last fetch: count that as caught up, or
                    # a member still short of our moving LEO would be dropped at once.
                    r.last_caught_up_time_ms = max(r.last_caught_up_time_ms, r.last_fetch_time_ms)
        if self.isr - new:
            self.metrics.isr_shrinks += 1
        self.isr, self.partition_epoch = new, partition_epoch
        self.pending_isr = self.pending_change = None
        return self._maybe_advance_hw()

    def on_isr_change_failed(self, error: ErrorCode, now_ms: int, change: IsrChange | None = None) -> None:
        """The controller refused `change` (the IsrChange sent), or it could not be sent.
        Only the proposal in flight is retired: a late refusal of an older one must not
        make us forget a newer proposal the controller may still accept (we would advance
        the HW without that member). Always pass `change`; None means "the one in flight"."""
        if change is not None and change != self.pending_change:
            return
        self.pending_isr = self.pending_change = None
        self.metrics.failed_isr_updates += 1

    # -- OffsetForLeaderEpoch, consumer reads, KIP-392 ------------------------------------------

    def end_offset_for_epoch(
        self, requested_epoch: int, current_leader_epoch: int = -1
    ) -> tuple[ErrorCode, EpochEndOffset]:
        """Answer OffsetForLeaderEpoch on the leader (KIP-279 semantics)."""
        if self.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, UNDEFINED
        error = self.validate_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.NONE:
            return error, UNDEFINED
        return ErrorCode.NONE, EpochEndOffset(*self.log.end_offset_for_epoch(requested_epoch))

    def fetch_upper_bound(self, from_follower: bool, read_committed: bool = False) -> int:
        """Exclusive read limit: LEO for replica fetches, HW for consumers (also on
        followers serving KIP-392 reads), the LSO for read_committed consumers."""
        if from_follower:
            return self.log.log_end_offset
        if read_committed:
            return self.last_stable_offset
        return self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        lso = getattr(self.log, "last_stable_offset", None)
        return self.high_watermark if lso is None else int(lso(self.high_watermark))

    def set_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """Follower: HW = min(leader HW, own LEO). Returns True when it changed."""
        new = max(self.log.log_start_offset, min(leader_high_watermark, self.log.log_end_offset))
        changed = new != self.high_watermark
        self.high_watermark = new
        return changed

    def preferred_read_replica(
        self, client_rack: str | None, racks: Mapping[int, str | None], fetch_offset: int
    ) -> int | None:
        """KIP-392 on the leader: a follower to send this consumer to, or None (read here)."""
        if self.role is not Role.LEADER:
            return None
        leos = {b: r.log_end_offset for b, r in self.remotes.items()}
        return select_preferred_read_replica(
            client_rack, self.broker_id, racks, self.isr, leos, fetch_offset
        )

    # -- gauges -------------------------------------------------------------------------------

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.config.min_insync_replicas

    @property
    def is_at_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) == self.config.min_insync_replicas

    @property
    def max_follower_lag(self) -> int:
        leo = self.log.log_end_offset
        lags = [leo - max(r.log_end_offset, self.log.log_start_offset) for r in self.remotes.values()]
        return max(lags, default=0) if self.is_leader else 0


def select_preferred_read_replica(
    client_rack: str | None,
    leader_id: int,
    racks: Mapping[int, str | None],
    isr: Iterable[int],
    follower_leos: Mapping[int, int],
    fetch_offset: int,
) -> int | None:
    """Rack-aware replica selection (KIP-392). Only in-sync followers that already hold
    fetch_offset qualify (KAFKA-14372: never a lagging out-of-ISR one); the leader wins
    when it is in the client's rack. None means "read from the leader"."""
    if not client_rack or racks.get(leader_id) == client_rack:
        return None
    candidates = [
        b
        for b in isr
        if b != leader_id and racks.get(b) == client_rack and follower_leos.get(b, -1) >= fetch_offset
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda b: (follower_leos[b], -b))
