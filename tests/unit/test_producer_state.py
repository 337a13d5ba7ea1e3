"""Idempotent producer rules in storage.Log: duplicates, gaps, epochs, wrap, reopen."""

from __future__ import annotations

import os

import pytest

from kafkarepl import _core
from kafkarepl.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.producer_state import ProducerStateTable
from kafkarepl.storage.records import last_sequence
from tests.batches import build_batch, concat

T0 = 1_700_000_000_000
PID = 4242


def pbatch(seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> bytearray:
    return build_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


@pytest.fixture
def log(tmp_path):
    lg = Log.open(tmp_path / "t-0", LogConfig())
    yield lg
    lg.close()


def test_retry_of_any_of_last_five_batches_returns_original_offsets(log):
    infos = [log.append_as_leader(pbatch(2 * i), 0, T0) for i in range(6)]
    size = log.active_segment.size
    for i in range(1, 6):  # the last five are remembered
        dup = log.append_as_leader(pbatch(2 * i), 0, T0)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (infos[i].first_offset, infos[i].last_offset)
    assert log.active_segment.size == size and log.log_end_offset == 12
    with pytest.raises(OutOfOrderSequenceError):  # the sixth-oldest is forgotten
        log.append_as_leader(pbatch(0), 0, T0)


def test_gap_is_out_of_order(log):
    log.append_as_leader(pbatch(0), 0, T0)
    with pytest.raises(OutOfOrderSequenceError, match="does not follow 1"):
        log.append_as_leader(pbatch(3), 0, T0)
    assert log.log_end_offset == 2
    assert not log.append_as_leader(pbatch(2), 0, T0).duplicate


def test_epochs(log):
    log.append_as_leader(pbatch(0, epoch=3), 0, T0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(pbatch(2, epoch=2), 0, T0)
    with pytest.raises(OutOfOrderSequenceError, match="must start at sequence 0"):
        log.append_as_leader(pbatch(5, epoch=4), 0, T0)
    info = log.append_as_leader(pbatch(0, epoch=4), 0, T0)
    assert not info.duplicate and info.first_offset == 2
    # the old epoch's batches no longer count as duplicates
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(pbatch(0, epoch=3), 0, T0)


def test_unknown_producer_may_start_anywhere(log):
    # state may have been lost to retention: Kafka accepts any first sequence
    assert log.append_as_leader(pbatch(77), 0, T0).first_offset == 0
    assert log.append_as_leader(pbatch(79), 0, T0).first_offset == 2


def test_sequence_wraps_at_int32_max(log):
    top = 0x7FFFFFFF
    log.append_as_leader(pbatch(top - 1, n=2), 0, T0)  # sequences top-1, top
    info = log.append_as_leader(pbatch(0, n=3), 0, T0)
    assert info.first_offset == 2
    assert log.append_as_leader(pbatch(0, n=3), 0, T0).duplicate
    assert last_sequence(top - 1, 3) == 1
    # a batch that itself wraps
    lg2 = ProducerStateTable()
    b = build_batch(4, producer_id=1, producer_epoch=0, base_sequence=top - 1)
    (info2,) = _core.validate_batches(b)
    lg2.check_and_update([info2], 0)
    assert lg2.get(1).last_seq == 1  # top-1, top, 0, 1


def test_duplicate_in_multi_batch_buffer_writes_nothing(log):
    log.append_as_leader(pbatch(0), 0, T0)
    buf = concat([build_batch(1), pbatch(0)])
    info = log.append_as_leader(buf, 0, T0)
    assert info.duplicate and info.first_offset == 0
    assert log.log_end_offset == 2


def test_several_producers_and_batches_in_one_buffer(log):
    buf = concat([pbatch(0, pid=1), pbatch(0, pid=2), pbatch(2, pid=1)])
    info = log.append_as_leader(buf, 0, T0)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert log.producer_state.get(1).last_seq == 3
    with pytest.raises(OutOfOrderSequenceError):  # the gap is checked against the buffer
        log.append_as_leader(concat([pbatch(4, pid=1), pbatch(7, pid=1)]), 0, T0)
    assert log.producer_state.get(1).last_seq == 3  # nothing applied on failure


@pytest.mark.parametrize("clean", [True, False])
def test_dedupe_survives_reopen(tmp_path, clean):
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    first = [lg.append_as_leader(pbatch(2 * i), 0, T0) for i in range(8)]
    assert len(lg.segments) > 1
    if clean:
        lg.flush()
        lg.close()
        assert (tmp_path / "t-0" / "producer-state-checkpoint").exists()
    else:
        for seg in lg.segments:  # crash: drop handles, no snapshot
            os.close(seg.fd)
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300), clean_shutdown=clean)
    dup = lg.append_as_leader(pbatch(14), 0, T0)
    assert dup.duplicate and dup.first_offset == first[7].first_offset
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(pbatch(17), 0, T0)
    assert lg.append_as_leader(pbatch(16), 0, T0).first_offset == 16
    lg.close()


def test_stale_snapshot_is_not_trusted(tmp_path):
    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(pbatch(0), 0, T0)
    lg.close()  # snapshot at offset 2
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    lg.append_as_leader(pbatch(2), 0, T0)
    for seg in lg.segments:  # crash after more appends
        os.close(seg.fd)
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=False)
    assert lg.append_as_leader(pbatch(2), 0, T0).duplicate
    lg.close()


def test_follower_keeps_producer_state_for_failover(tmp_path):
    leader = Log.open(tmp_path / "l-0", LogConfig())
    follower = Log.open(tmp_path / "f-0", LogConfig())
    leader.append_as_leader(pbatch(0), 1, T0)
    leader.append_as_leader(pbatch(2), 1, T0)
    s = leader.read(0, 1 << 20)
    follower.append_as_follower(os.pread(s.fd, s.size, s.position))
    # the follower becomes leader; the producer retries its last batch
    dup = follower.append_as_leader(pbatch(2), 2, T0)
    assert dup.duplicate and dup.first_offset == 2
    leader.close()
    follower.close()


def test_truncation_rebuilds_producer_state(log):
    log.append_as_leader(pbatch(0), 0, T0)
    log.append_as_leader(pbatch(2), 0, T0)
    log.truncate_to(2)
    assert log.producer_state.get(PID).last_seq == 1
    assert not log.append_as_leader(pbatch(2), 0, T0).duplicate


def test_duplicate_on_log_append_time_topic_reports_original_append_time(tmp_path):
    lg = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    first = lg.append_as_leader(pbatch(0), 0, T0 + 1)
    dup = lg.append_as_leader(pbatch(0), 0, T0 + 50)
    assert dup.duplicate and dup.log_append_time == first.log_append_time == T0 + 1
    lg.close()


def test_idle_producers_expire(log):
    log.append_as_leader(build_batch(1, producer_id=1, producer_epoch=0, base_sequence=0,
                                     timestamp=T0), 0, T0)
    log.append_as_leader(build_batch(1, producer_id=2, producer_epoch=0, base_sequence=0,
                                     timestamp=T0 + 3_600_000), 0, T0)
    assert log.expire_producers(T0 + 86_399_999) == 0
    assert log.expire_producers(T0 + 86_400_000) == 1  # idle for exactly the day: gone, as Kafka
    assert log.producer_state.get(1) is None and log.producer_state.get(2) is not None
    assert log.expire_producers(T0 + 3_600_000 + 1000, expiration_ms=1000) == 1
    assert log.producer_state.get(2) is None
