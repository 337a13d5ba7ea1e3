"""The follower side of one partition: truncate by leader epoch, then fetch (sans-I/O).

A replica fetcher (one per source broker, owned by the server) asks every partition's
FollowerFetcher for `next_request(now_ms)`, batches them into one OffsetForLeaderEpoch or
Fetch request to the leader, and hands each partition's answer back together with the
request object it answers. One request per partition is in flight at a time; an answer
to anything else is stale and ignored.

  TRUNCATING --OffsetForLeaderEpoch(latest epoch)--> truncate to
      min(leader's end offset, our end offset for that epoch) (KIP-101/KIP-279),
      repeating while our epoch differs from the leader's answer --> FETCHING
  FETCHING --Fetch(LEO, last fetched epoch)--> append the leader's batches verbatim,
      HW = min(leader HW, LEO); a DivergingEpoch answer truncates the same way.

Never truncates to the HW (seed 003's data-loss bug).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from kafkarepl.errors import ErrorCode, KafkaError

from .log import EpochEndOffset

if TYPE_CHECKING:
    from .partition import PartitionState


class FetcherState(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(frozen=True, eq=False)
class EpochRequest:
    """OffsetForLeaderEpoch for one partition (replica_id = this broker)."""

    current_leader_epoch: int
    leader_epoch: int  # the epoch whose end offset we ask for


@dataclass(frozen=True, eq=False)
class FetchRequest:
    """Fetch for one partition (replica_id = this broker)."""

    fetch_offset: int
    last_fetched_epoch: int  # -1 when the log holds no epoch yet
    current_leader_epoch: int
    log_start_offset: int


@dataclass(frozen=True)
class FetchResponse:
    """One partition of the leader's Fetch answer."""

    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: Any = None  # handed to ReplicaLog.append_as_follower as is
    diverging_epoch: EpochEndOffset | None = None


@dataclass(frozen=True)
class FetcherOutcome:
    error: ErrorCode = ErrorCode.NONE
    stale: bool = False  # the answer was for another request: ignored
    appended: bool = False  # LEO moved: wake DelayedFetch waiters
    hw_changed: bool = False  # follower HW moved: wake consumer fetches (KIP-392)
    truncated_to: int | None = None  # LEO after a truncation that removed records


class FollowerFetcher:
    def __init__(self, partition: PartitionState, leader_id: int, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.state = FetcherState.TRUNCATING
        self.in_flight: EpochRequest | FetchRequest | None = None
        self.backoff_until_ms = 0

    @property
    def active(self) -> bool:
        return self.partition.fetcher is self

    def next_request(self, now_ms: int) -> EpochRequest | FetchRequest | None:
        """What to send to the leader now, or None (in flight, backing off, or replaced)."""
        if self.in_flight is not None or now_ms < self.backoff_until_ms or not self.active:
            return None
        log = self.partition.log
        latest = log.latest_epoch()
        req: EpochRequest | FetchRequest
        if self.state is FetcherState.TRUNCATING and latest is not None:
            req = EpochRequest(self.leader_epoch, latest)
        else:
            self.state = FetcherState.FETCHING  # an empty log has nothing to truncate
            req = FetchRequest(
                log.log_end_offset,
                -1 if latest is None else latest,
                self.leader_epoch,
                log.log_start_offset,
            )
        self.in_flight = req
        return req

    def on_request_failed(self, request: EpochRequest | FetchRequest, now_ms: int) -> None:
        """The request or its answer was lost (timeout, disconnect): retry after backoff."""
        if request is self.in_flight:
            self.in_flight = None
            self._back_off(now_ms)

    def on_request_abandoned(self, request: EpochRequest | FetchRequest) -> None:
        """The fetcher dropped the request without an answer coming (e.g. it opened a new
        fetch session): ask again at once, no backoff."""
        if request is self.in_flight:
            self.in_flight = None

    def on_epoch_end_offset(
        self, request: EpochRequest, error: ErrorCode, leader: EpochEndOffset, now_ms: int
    ) -> FetcherOutcome:
        """The leader's OffsetForLeaderEpoch answer for this partition."""
        if not self._accept(request):
            return FetcherOutcome(stale=True)
        leader = EpochEndOffset(*leader)
        if error is not ErrorCode.NONE or leader.undefined:
            self._back_off(now_ms)
            return FetcherOutcome(error=error if error is not ErrorCode.NONE else ErrorCode.UNKNOWN_LEADER_EPOCH)
        return self._truncate_by_epoch(leader)

    def on_fetch_response(
        self, request: FetchRequest, response: FetchResponse, now_ms: int
    ) -> FetcherOutcome:
        """The leader's Fetch answer for this partition."""
        if not self._accept(request):
            return FetcherOutcome(stale=True)
        p, log = self.partition, self.partition.log
        if request.fetch_offset != log.log_end_offset:
            return FetcherOutcome(stale=True)
        error = response.error
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            start = response.log_start_offset
            if start > log.log_end_offset or (log.latest_epoch() is None and start >= 0):
                # The leader deleted what we would need next (retention), or we are ahead
                # of it holding nothing epochs could check: restart at its log start.
                log.truncate_fully_and_start_at(start)
                p.high_watermark = start
                return FetcherOutcome(error=error, truncated_to=start)
            self.state = FetcherState.TRUNCATING  # we may be ahead of it: find out by epoch
            return FetcherOutcome(error=error)
        if error is not ErrorCode.NONE:
            self._back_off(now_ms)  # fenced / unknown epoch / not leader: LeaderAndIsr will come
            return FetcherOutcome(error=error)
        if response.diverging_epoch is not None:
            return self._truncate_by_epoch(EpochEndOffset(*response.diverging_epoch))
        appended = False
        if response.records:
            try:
                log.append_as_follower(response.records)
            except KafkaError as e:
                self._back_off(now_ms)
                self.state = FetcherState.TRUNCATING
                return FetcherOutcome(error=e.code)
            appended = log.log_end_offset != request.fetch_offset
        hw_changed = p.set_follower_high_watermark(response.high_watermark)
        self._follow_log_start(response.log_start_offset)
        return FetcherOutcome(appended=appended, hw_changed=hw_changed)

    # -- internals --------------------------------------------------------------------------

    def _accept(self, request: object) -> bool:
        if request is not self.in_flight or not self.active:
            return False
        self.in_flight = None
        return True

    def _follow_log_start(self, leader_log_start: int) -> None:
        """Below the leader's log start, epochs cannot tell whether our records match the
        ones the leader deleted (KIP-279 answers "up to its first epoch"): drop ours."""
        p, log = self.partition, self.partition.log
        target = min(leader_log_start, p.high_watermark)
        increment = getattr(log, "maybe_increment_log_start_offset", None)
        if increment is not None and target > log.log_start_offset:
            increment(target)

    def _back_off(self, now_ms: int) -> None:
        self.backoff_until_ms = now_ms + self.partition.config.replica_fetch_backoff_ms

    def _truncate_by_epoch(self, leader: EpochEndOffset) -> FetcherOutcome:
        """Kafka's follower truncation rule (AbstractFetcherThread, KIP-279)."""
        log = self.partition.log
        ours = EpochEndOffset(*log.end_offset_for_epoch(leader.epoch))
        if ours.undefined:  # we know no epoch <= the leader's: keep what it has, at most
            target, done = min(leader.end_offset, log.log_end_offset), True
        elif ours.epoch != leader.epoch:
            # Our epochs after ours.epoch are unknown to the leader: drop them, ask again.
            target, done = ours.end_offset, False
        else:
            target, done = min(leader.end_offset, ours.end_offset), True
        self.state = FetcherState.FETCHING if done else FetcherState.TRUNCATING
        return FetcherOutcome(truncated_to=self._truncate(target))

    def _truncate(self, target: int) -> int | None:
        p, log = self.partition, self.partition.log
        before = log.log_end_offset
        log.truncate_to(target)  # always: also drops trailing empty epoch entries
        after = log.log_end_offset  # storage cuts a batch straddling target whole
        if after >= before:
            return None
        if after < p.high_watermark:
            # Committed data is going away: only an unclean election or lost unflushed
            # data on every in-sync replica can cause this.
            p.metrics.truncations_below_hw += 1
            p.high_watermark = max(after, log.log_start_offset)
        return after
