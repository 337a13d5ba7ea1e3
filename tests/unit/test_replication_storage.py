"""The replication core over the real storage.Log (it satisfies ReplicaLog as is).

KIP-101 scenario 2 with real segment files: the replicas must end byte for byte equal.
"""

from __future__ import annotations

from pathlib import Path

from kafkarepl import _core
from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    EpochRequest,
    FetcherState,
    FetchRequest,
    FetchResponse,
    FollowerFetcher,
    PartitionState,
)
from kafkarepl.storage import Log, LogConfig
from tests.batches import build_batch, decode

T0 = 1_700_000_000_000  # the timestamp tests.batches gives records


def log_bytes(log: Log) -> bytes:
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        s = log.read(offset, 1 << 20)
        out += _core.file_pread(s.fd, s.size, s.position)
        offset = decode(out)[-1][0] + 1
    return out


def replicate(leader: PartitionState, follower: PartitionState, fetcher: FollowerFetcher, now: int) -> None:
    """Pump the follower's requests through the leader until it has caught up."""
    for _ in range(20):
        req = fetcher.next_request(now)
        if isinstance(req, EpochRequest):
            err, answer = leader.end_offset_for_epoch(req.leader_epoch, req.current_leader_epoch)
            fetcher.on_epoch_end_offset(req, err, answer, now)
            continue
        assert isinstance(req, FetchRequest)
        res = leader.on_follower_fetch(follower.broker_id, req.fetch_offset, req.last_fetched_epoch, now)
        records = None
        if res.error is ErrorCode.NONE and res.diverging_epoch is None:
            s = leader.log.read(req.fetch_offset, 1 << 20)  # type: ignore[attr-defined]
            records = memoryview(_core.file_pread(s.fd, s.size, s.position)) if s.size else None
        resp = FetchResponse(res.error, res.high_watermark, res.log_start_offset, records, res.diverging_epoch)
        fetcher.on_fetch_response(req, resp, now)
        leo = leader.log.log_end_offset
        if follower.log.log_end_offset == leo and follower.high_watermark == leader.high_watermark == leo:
            return
    raise AssertionError("follower did not catch up")


def test_kip101_scenario2_on_real_logs(tmp_path: Path) -> None:
    cfg = LogConfig()
    a_log = Log.open(tmp_path / "a" / "t-0", cfg)
    b_log = Log.open(tmp_path / "b" / "t-0", cfg)
    a, b = PartitionState(0, a_log), PartitionState(1, b_log)

    # A leads epoch 0 with m1 and m2; B replicates both.
    assert a.become_leader(0, [0, 1], [0, 1], 0, 0)
    fetcher = b.become_follower(0, 0, [0, 1], [0, 1], 0, 0)
    assert fetcher is not None
    a_log.append_as_leader(memoryview(build_batch([b"m1"])), 0, T0)  # the batches' own clock
    a_log.append_as_leader(memoryview(build_batch([b"m2"])), 0, T0)
    a.on_leader_append(0)
    replicate(a, b, fetcher, 1)
    assert log_bytes(a_log) == log_bytes(b_log) and b.high_watermark == 2

    # B loses m2 (unflushed), comes back first, leads epoch 1 and takes m3 at offset 1.
    b_log.truncate_to(1)
    assert b.become_leader(1, [1], [0, 1], 1, 10)
    assert b_log.epoch_entries() == [(0, 0), (1, 1)]
    b_log.append_as_leader(memoryview(build_batch([b"m3"])), 1, T0 + 10)
    b.on_leader_append(10)

    # A returns as follower with HW 2 covering offset 1: epochs, not the HW, decide.
    fetcher = a.become_follower(1, 1, [1], [0, 1], 2, 20)
    assert fetcher is not None and fetcher.state is FetcherState.TRUNCATING
    replicate(b, a, fetcher, 20)
    assert [v for *_x, v in decode(log_bytes(a_log))] == [b"m1", b"m3"]
    assert log_bytes(a_log) == log_bytes(b_log)
    assert a_log.epoch_entries() == b_log.epoch_entries() == [(0, 0), (1, 1)]
    assert a.metrics.truncations_below_hw == 1  # m2 was committed: this loss is visible
    a_log.close()
    b_log.close()
