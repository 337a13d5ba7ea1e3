"""FollowerFetcher: truncation by leader epoch (KIP-101/279), fetching, errors."""

from __future__ import annotations

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    EpochEndOffset,
    EpochRequest,
    FetcherState,
    FetchRequest,
    FetchResponse,
    FollowerFetcher,
    MemoryLog,
    PartitionConfig,
    PartitionState,
)

BACKOFF = 100


def follower(records: list[tuple[int, int, object]], hw: int = 0) -> tuple[PartitionState, FollowerFetcher]:
    log = MemoryLog()
    log.append_as_follower(records)
    p = PartitionState(1, log, PartitionConfig(replica_fetch_backoff_ms=BACKOFF), high_watermark=hw)
    f = p.become_follower(0, 9, [0, 1], [0, 1], 1, 0)
    assert f is not None
    return p, f


def epochs(*spans: tuple[int, int, int]) -> list[tuple[int, int, object]]:
    """(epoch, first, end) spans -> records."""
    return [(o, e, f"e{e}o{o}") for e, first, end in spans for o in range(first, end)]


def test_empty_log_fetches_at_once() -> None:
    _, f = follower([])
    req = f.next_request(0)
    assert isinstance(req, FetchRequest) and req.fetch_offset == 0 and req.last_fetched_epoch == -1
    assert f.next_request(0) is None  # one request in flight


def test_truncation_repeats_until_epochs_agree() -> None:
    """KIP-279: the follower has epochs 1, 2, 4; the leader has 1, 3, 5 (it never saw 2 or 4)."""
    p, f = follower(epochs((1, 0, 5), (2, 5, 8), (4, 8, 12)), hw=4)
    leader_log = MemoryLog()
    leader_log.append_as_follower(epochs((1, 0, 6), (3, 6, 9), (5, 9, 11)))
    rounds = 0
    while f.state is FetcherState.TRUNCATING:
        req = f.next_request(0)
        assert isinstance(req, EpochRequest) and req.current_leader_epoch == 9
        f.on_epoch_end_offset(req, ErrorCode.NONE, leader_log.end_offset_for_epoch(req.leader_epoch), 0)
        rounds += 1
    assert rounds == 2  # asked for 4 -> (3, 9): drop epoch 4; asked for 2 -> (1, 6): cut at 5
    assert p.log.log_end_offset == 5 and p.log.epoch_entries() == [(1, 0)]
    assert p.metrics.truncations_below_hw == 0


def test_never_truncates_to_hw() -> None:
    """KIP-101 scenario 1: HW 1 but the leader's epoch 0 ends at 2: keep m2."""
    p, f = follower(epochs((0, 0, 2)), hw=1)
    req = f.next_request(0)
    assert isinstance(req, EpochRequest) and req.leader_epoch == 0
    out = f.on_epoch_end_offset(req, ErrorCode.NONE, EpochEndOffset(0, 2), 0)
    assert out.truncated_to is None and p.log.log_end_offset == 2
    assert f.state is FetcherState.FETCHING


def test_fetch_appends_verbatim_and_takes_min_hw() -> None:
    p, f = follower(epochs((3, 0, 2)))
    req = f.next_request(0)
    f.on_epoch_end_offset(req, ErrorCode.NONE, EpochEndOffset(3, 4), 0)  # type: ignore[arg-type]
    req = f.next_request(0)
    assert isinstance(req, FetchRequest) and (req.fetch_offset, req.last_fetched_epoch) == (2, 3)
    out = f.on_fetch_response(req, FetchResponse(high_watermark=10, records=epochs((3, 2, 3), (9, 3, 4))), 0)
    assert out.appended and out.hw_changed
    assert p.high_watermark == 4  # min(leader HW 10, own LEO 4)
    assert p.log.epoch_entries() == [(3, 0), (9, 3)]


def test_stale_answers_are_ignored() -> None:
    p, f = follower([])
    old = f.next_request(0)
    f.on_request_failed(old, 0)  # type: ignore[arg-type]
    assert f.next_request(BACKOFF - 1) is None  # backing off
    new = f.next_request(BACKOFF)
    out = f.on_fetch_response(old, FetchResponse(high_watermark=1, records=[(0, 9, "x")]), BACKOFF)  # type: ignore[arg-type]
    assert out.stale and p.log.log_end_offset == 0
    assert not f.on_fetch_response(new, FetchResponse(high_watermark=0), BACKOFF).stale  # type: ignore[arg-type]
    # A fetcher replaced by a newer LeaderAndIsr answers nothing.
    req = f.next_request(BACKOFF)
    p.become_follower(2, 10, [2, 1], [1, 2], 2, 0)
    assert f.on_fetch_response(req, FetchResponse(), BACKOFF).stale  # type: ignore[arg-type]


def test_diverging_epoch_in_fetch_response() -> None:
    p, f = follower(epochs((1, 0, 4), (2, 4, 6)), hw=3)
    f.state = FetcherState.FETCHING  # as after an earlier truncation
    req = f.next_request(0)
    assert isinstance(req, FetchRequest) and req.last_fetched_epoch == 2
    out = f.on_fetch_response(req, FetchResponse(high_watermark=3, diverging_epoch=EpochEndOffset(1, 5)), 0)
    # Both know epoch 1; ours ends at 4, the leader's at 5: keep [0, 4), drop epoch 2.
    assert out.truncated_to == 4 and f.state is FetcherState.FETCHING
    assert p.log.epoch_entries() == [(1, 0)]
    assert p.high_watermark == 3


def test_errors_back_off_and_out_of_range() -> None:
    p, f = follower(epochs((1, 0, 3)))
    f.state = FetcherState.FETCHING
    req = f.next_request(0)
    out = f.on_fetch_response(req, FetchResponse(ErrorCode.FENCED_LEADER_EPOCH), 0)  # type: ignore[arg-type]
    assert out.error is ErrorCode.FENCED_LEADER_EPOCH and f.next_request(BACKOFF - 1) is None
    req = f.next_request(BACKOFF)
    f.on_fetch_response(req, FetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=0), BACKOFF)  # type: ignore[arg-type]
    assert f.state is FetcherState.TRUNCATING  # maybe ahead of the leader: settle by epoch
    req = f.next_request(BACKOFF)
    f.on_epoch_end_offset(req, ErrorCode.NONE, EpochEndOffset(1, 3), BACKOFF)  # type: ignore[arg-type]
    req = f.next_request(BACKOFF)
    out = f.on_fetch_response(req, FetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=50), BACKOFF)  # type: ignore[arg-type]
    assert out.truncated_to == 50  # the leader deleted what we need: start at its log start
    assert p.log.log_start_offset == p.log.log_end_offset == p.high_watermark == 50


def test_truncation_below_hw_is_counted() -> None:
    """Only an unclean election can make a follower cut committed data."""
    p, f = follower(epochs((1, 0, 6)), hw=6)
    req = f.next_request(0)
    f.on_epoch_end_offset(req, ErrorCode.NONE, EpochEndOffset(1, 2), 0)  # type: ignore[arg-type]
    assert p.log.log_end_offset == 2 and p.high_watermark == 2
    assert p.metrics.truncations_below_hw == 1


def test_leader_unreachable_epoch_answer_retries() -> None:
    _, f = follower(epochs((1, 0, 2)))
    req = f.next_request(0)
    out = f.on_epoch_end_offset(req, ErrorCode.NOT_LEADER_OR_FOLLOWER, EpochEndOffset(-1, -1), 0)  # type: ignore[arg-type]
    assert out.error is ErrorCode.NOT_LEADER_OR_FOLLOWER and f.state is FetcherState.TRUNCATING
    assert isinstance(f.next_request(BACKOFF), EpochRequest)


def test_follower_follows_the_leader_log_start() -> None:
    """Kafka's maybeIncrementLogStartOffset: what the leader deleted goes here too, so
    records epochs can no longer check against the leader are never served later."""
    p, f = follower(epochs((1, 0, 6)), hw=6)
    f.state = FetcherState.FETCHING
    req = f.next_request(0)
    f.on_fetch_response(req, FetchResponse(high_watermark=6, log_start_offset=4), 0)  # type: ignore[arg-type]
    assert p.log.log_start_offset == 4 and p.log.epoch_entries() == [(1, 4)]


def test_ahead_of_the_leader_with_no_epoch_restarts_at_its_log_start() -> None:
    p, f = follower([])
    p.log.truncate_fully_and_start_at(8)  # retention emptied us at 8; the leader lost 5..8
    req = f.next_request(0)
    out = f.on_fetch_response(req, FetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=0), 0)  # type: ignore[arg-type]
    assert out.truncated_to == 0 and p.log.log_start_offset == p.log.log_end_offset == 0
    assert isinstance(f.next_request(0), FetchRequest)
