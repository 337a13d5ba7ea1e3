"""storage.Log: append/read round trips, offsets, validation, roll, retention, truncation.

Batches come from kafka-python's builder and are decoded back with its reader, so the
bytes the log stores and serves are checked against an independent implementation.
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
import types

import pytest

from kafkarepl import _core
from kafkarepl.errors import (
    CorruptBatchError,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
)
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.records import ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_MASK
from tests.batches import CODECS, build_batch, concat, decode

T0 = 1_700_000_000_000


def read_bytes(log: Log, offset: int, max_bytes: int = 1 << 30, max_offset=None) -> bytes:
    s = log.read(offset, max_bytes, max_offset)
    return os.pread(s.fd, s.size, s.position) if s.size else b""


def offsets(data: bytes) -> list[int]:
    return [r[0] for r in decode(data)]


@pytest.fixture
def open_log(tmp_path):
    logs = []

    def _open(config: LogConfig | None = None, name: str = "topic-0", **kw) -> Log:
        lg = Log.open(tmp_path / name, config or LogConfig(), **kw)
        logs.append(lg)
        return lg

    yield _open
    for lg in logs:
        lg.close()


@pytest.mark.parametrize("codec", list(CODECS))
def test_every_codec_round_trips_byte_for_byte(open_log, codec):
    log = open_log()
    sent = []
    for i in range(5):
        batch = build_batch(i + 1, compression=codec, timestamp=T0 + i, value_size=200)
        info = log.append_as_leader(batch, leader_epoch=3, now_ms=T0)
        sent.append(batch)  # assign_offsets rewrote baseOffset/epoch in place
        assert info.record_count == i + 1
    assert log.log_end_offset == 15
    stored = read_bytes(log, 0)
    assert stored == bytes(concat(sent))
    records = decode(stored)
    assert [r[0] for r in records] == list(range(15))
    assert records[0][3] == b"A" * 200 and records[14][2] == b"k4"
    for b in _core.validate_batches(stored):
        assert b.partition_leader_epoch == 3
        assert b.attributes & 7 == CODECS[codec]


def test_append_info_and_offsets(open_log):
    log = open_log()
    a = log.append_as_leader(build_batch(3, timestamp=[T0, T0 + 5, T0 + 2]), 0, T0)
    assert a == (0, 2, T0 + 5, -1, 3, a.size, False)
    # Two batches in one buffer get consecutive offsets, written with one write.
    b = log.append_as_leader(concat([build_batch(2), build_batch(4)]), 0, T0)
    assert (b.first_offset, b.last_offset, b.record_count) == (3, 8, 6)
    assert offsets(read_bytes(log, 0)) == list(range(9))
    assert offsets(read_bytes(log, 5)) == list(range(5, 9))  # batch holding 5 starts at 5


def test_read_returns_whole_batch_holding_offset(open_log):
    log = open_log()
    log.append_as_leader(build_batch(4), 0, T0)
    log.append_as_leader(build_batch(4), 0, T0)
    s = log.read(6, 1 << 20)
    assert s.first_offset == 4
    assert offsets(read_bytes(log, 6)) == [4, 5, 6, 7]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_flipped_byte_under_crc_is_rejected_with_position(open_log, codec):
    log = open_log()
    good = build_batch(3, compression=codec)
    buf = concat([build_batch(1), good])
    first_len = len(build_batch(1))
    for i in range(ATTRIBUTES_OFFSET, len(good)):
        bad = bytearray(buf)
        bad[first_len + i] ^= 0x40
        with pytest.raises(CorruptBatchError) as ei:
            log.append_as_leader(bad, 0, T0)
        assert ei.value.position == first_len
        assert str(first_len) in str(ei.value)
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_wrong_magic_and_torn_buffers_are_rejected(open_log):
    log = open_log()
    bad = build_batch(2)
    bad[16] = 1
    with pytest.raises(CorruptBatchError, match="magic"):
        log.append_as_leader(bad, 0, T0)
    with pytest.raises(CorruptBatchError):
        log.append_as_leader(build_batch(2)[:-1], 0, T0)
    with pytest.raises(CorruptBatchError):
        log.append_as_leader(build_batch(2) + b"\x00" * 5, 0, T0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytearray(), 0, T0)
    assert log.log_end_offset == 0


def test_message_too_large(open_log):
    log = open_log(LogConfig(max_message_bytes=200))
    log.append_as_leader(build_batch(1), 0, T0)
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(build_batch(1, value_size=300), 0, T0)
    assert log.log_end_offset == 1


def test_log_append_time_restamps_and_recomputes_crc(open_log):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(build_batch(3, compression="lz4", timestamp=5), 0, T0 + 99)
    assert info.log_append_time == T0 + 99 and info.max_timestamp == T0 + 99
    stored = read_bytes(log, 0)
    (b,) = _core.validate_batches(stored)  # CRC re-computed: validates
    assert b.max_timestamp == T0 + 99 and b.attributes & TIMESTAMP_TYPE_MASK
    decode(stored)  # kafka-python checks the CRC too


def test_create_time_leaves_crc_alone(open_log):
    log = open_log()
    batch = build_batch(2, timestamp=5)
    crc = struct.unpack_from(">I", batch, 17)[0]
    log.append_as_leader(batch, 7, T0)
    assert struct.unpack_from(">I", read_bytes(log, 0), 17)[0] == crc


def test_read_limits(open_log):
    log = open_log()
    sizes = []
    for _ in range(10):
        sizes.append(log.append_as_leader(build_batch(2), 0, T0).size)
    # max_offset (HW) is an exclusive bound on whole batches
    assert offsets(read_bytes(log, 0, max_offset=6)) == list(range(6))
    assert log.read(6, 1000, max_offset=6).size == 0
    assert log.read(5, 1000, max_offset=5).size == 0  # batch 4..5 straddles the HW
    # max_bytes keeps whole batches
    s = log.read(0, sizes[0] * 3 + 5)
    assert s.size == sizes[0] * 3
    # a first batch larger than max_bytes is still returned whole (min_one_batch)
    assert log.read(0, 10).size == sizes[0]
    assert log.read(0, 10, min_one_batch=False).size == 0
    # at LEO: empty; outside [start, LEO]: OFFSET_OUT_OF_RANGE
    assert log.read(20, 100).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_roll_by_segment_bytes_and_read_across_segments(open_log):
    log = open_log(LogConfig(segment_bytes=500, index_interval_bytes=64))
    for i in range(40):
        log.append_as_leader(build_batch(i % 3 + 1), 0, T0)
    segs = log.segments
    assert len(segs) > 5
    assert all(s.size <= 500 for s in segs)
    assert [s.base_offset for s in segs[1:]] == [s.next_offset for s in segs[:-1]]
    total = log.log_end_offset
    got = []
    off = 0
    while off < total:
        data = read_bytes(log, off, 300)
        assert data, off
        got += offsets(data)
        off = got[-1] + 1
    assert got == list(range(total))
    for off in range(total):  # every offset resolves to the batch holding it
        first = offsets(read_bytes(log, off, 1))[0]
        assert first <= off < first + 3


def test_read_at_segment_end_moves_to_next_segment(open_log):
    log = open_log()
    log.append_as_leader(build_batch(2), 0, T0)
    log.roll()
    log.append_as_leader(build_batch(2), 0, T0)
    s = log.read(2, 1000)
    assert s.fd == log.active_segment.fd and s.position == 0
    assert offsets(read_bytes(log, 2)) == [2, 3]


def test_a_roll_shrinks_the_rolled_indexes_on_the_janitors_thread(open_log, monkeypatch):
    # The preallocated .index/.timeindex shrink (ftruncate: blocks freed, under a busy
    # journal 1-3 ms) is the janitor's job, not the loop's; the rolled segment's indexes
    # serve lookups at once, and a truncation back into it grows its files again only
    # after that shrink.
    from kafkarepl.storage.janitor import JANITOR

    held = threading.Event()
    monkeypatch.setattr(JANITOR, "_submit", _gated_submit(JANITOR._submit, held))
    log = open_log(LogConfig(index_interval_bytes=1))
    for _ in range(5):
        log.append_as_leader(build_batch(2), 0, T0)
    first = log.active_segment
    log.roll()
    index_path = first.log_path.with_suffix(".index")
    assert index_path.stat().st_size == LogConfig().segment_index_bytes // 8 * 8  # not shrunk yet
    assert first.offset_index.lookup(5)[0] == 5 and offsets(read_bytes(log, 4)) == [4, 5, 6, 7, 8, 9]
    held.set()
    assert JANITOR.wait(10)
    assert index_path.stat().st_size == first.offset_index.n_entries * 8 == 4 * 8  # a batch each but the first
    assert first.log_path.with_suffix(".timeindex").stat().st_size == 12  # its max timestamp's entry

    # rolled again and truncated back into the rolled segment before the janitor ran
    held.clear()
    second = log.active_segment
    for _ in range(3):
        log.append_as_leader(build_batch(1), 0, T0)
    log.roll()
    threading.Timer(0.3, held.set).start()
    t0 = time.monotonic()
    log.truncate_to(12)  # the segment is active again: its indexes grow once the shrink is done
    assert log.active_segment is second and time.monotonic() - t0 >= 0.25
    assert second.log_path.with_suffix(".index").stat().st_size == LogConfig().segment_index_bytes // 8 * 8
    log.append_as_leader(build_batch(3), 0, T0)
    assert offsets(read_bytes(log, 10)) == [10, 11, 12, 13, 14]
    assert second.offset_index.lookup(14)[0] == 14


def test_a_crash_before_the_deferred_shrink_rebuilds_the_untrimmed_index(open_log, tmp_path, monkeypatch):
    # The rolled index still at its preallocated size with zeros after its entries (the
    # janitor had not run): a restart's sanity check refuses it and rebuilds it from the log.
    from kafkarepl.storage.janitor import JANITOR

    held = threading.Event()
    monkeypatch.setattr(JANITOR, "_submit", _gated_submit(JANITOR._submit, held))
    log = open_log(LogConfig(index_interval_bytes=1))
    for _ in range(5):
        log.append_as_leader(build_batch(2), 0, T0)
    log.roll()
    log.append_as_leader(build_batch(2), 0, T0)
    log.flush()
    crashed = tmp_path / "crashed" / "topic-0"
    shutil.copytree(log.dir, crashed)  # the files as a kill -9 leaves them
    held.set()
    assert (crashed / "00000000000000000000.index").stat().st_size > 4 * 8
    reopened = open_log(LogConfig(index_interval_bytes=1), name="crashed/topic-0", recovery_point=12)
    first = reopened.segments[0]
    assert first.offset_index.n_entries == 4 and first.offset_index.lookup(7)[0] == 7
    assert offsets(read_bytes(reopened, 6)) == [6, 7, 8, 9] and reopened.log_end_offset == 12


def _gated_submit(submit, gate: threading.Event):
    """The janitor's submit, each job waiting for `gate` first."""
    def gated(job):
        def run():
            gate.wait(10)
            job()
        submit(run)
    return gated


def test_roll_by_segment_ms(open_log):
    log = open_log(LogConfig(segment_ms=1000))
    log.append_as_leader(build_batch(1), 0, T0)
    log.append_as_leader(build_batch(1), 0, T0 + 500)
    assert len(log.segments) == 1
    log.append_as_leader(build_batch(1), 0, T0 + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_segment_jitter_rolls_each_segment_up_to_its_share_early(open_log, monkeypatch):
    # Kafka's segment.jitter.ms: each new segment draws a share in [0, min(jitter, segment.ms))
    # and rolls once segment.ms minus that share has passed.
    draws: list[int] = []

    def randrange(n: int) -> int:
        draws.append(n)
        return 300 if len(draws) == 1 else 0
    monkeypatch.setattr("kafkarepl.storage.log.random", types.SimpleNamespace(randrange=randrange))
    log = open_log(LogConfig(segment_ms=1000, segment_jitter_ms=5000))
    log.append_as_leader(build_batch(1), 0, T0)
    log.append_as_leader(build_batch(1), 0, T0 + 700)  # 1000 - 300: not yet
    assert len(log.segments) == 1
    log.append_as_leader(build_batch(1), 0, T0 + 701)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.append_as_leader(build_batch(1), 0, T0 + 1701)  # the new segment drew 0: segment.ms
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert draws == [1000, 1000]  # bounded by segment.ms, one draw per segment


def test_segment_jitter_is_drawn_below_the_smaller_bound() -> None:
    assert LogConfig(segment_jitter_ms=0).random_segment_jitter(lambda n: 1 / 0) == 0
    assert LogConfig(segment_ms=1000, segment_jitter_ms=10).random_segment_jitter(lambda n: n - 1) == 9
    with pytest.raises(KafkaError, match="segment.jitter.ms"):
        LogConfig(segment_jitter_ms=-1)


def test_offset_for_timestamp(open_log):
    log = open_log(LogConfig(segment_bytes=400, index_interval_bytes=50))
    for i in range(30):
        log.append_as_leader(build_batch(2, timestamp=[T0 + 10 * i, T0 + 10 * i + 5]), 0, T0)
    assert len(log.segments) > 3
    assert log.offset_for_timestamp(0) == (0, T0 + 5)
    assert log.offset_for_timestamp(T0 + 5) == (0, T0 + 5)
    assert log.offset_for_timestamp(T0 + 6) == (2, T0 + 15)
    assert log.offset_for_timestamp(T0 + 150) == (30, T0 + 155)
    assert log.offset_for_timestamp(T0 + 295) == (58, T0 + 295)
    assert log.offset_for_timestamp(T0 + 296) is None
    # non-monotonic timestamps: the first batch reaching the target wins
    log.append_as_leader(build_batch(1, timestamp=T0 + 1000), 0, T0)
    log.append_as_leader(build_batch(1, timestamp=T0), 0, T0)
    assert log.offset_for_timestamp(T0 + 296) == (60, T0 + 1000)


def test_retention_by_bytes_and_time(open_log):
    log = open_log(LogConfig(segment_bytes=300, retention_bytes=700, retention_ms=-1))
    for i in range(20):
        log.append_as_leader(build_batch(1, timestamp=T0 + i), 0, T0)
    n_before = len(log.segments)
    deleted = log.delete_old_segments(T0)
    assert deleted > 0 and len(log.segments) == n_before - deleted
    assert log.size_in_bytes <= 700 + 300
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert offsets(read_bytes(log, log.log_start_offset))[0] == log.log_start_offset

    log2 = open_log(LogConfig(segment_bytes=300, retention_ms=1000), name="t-1")
    for i in range(10):
        log2.append_as_leader(build_batch(1, timestamp=T0 + 100 * i), 0, T0)
    assert log2.delete_old_segments(T0 + 100) == 0
    deleted = log2.delete_old_segments(T0 + 1000 + 450)  # segments with max ts < T0+450
    assert deleted >= 1
    assert all(s.largest_timestamp >= T0 + 450 for s in log2.segments[:-1])
    # the active segment is never deleted
    n = len(log2.segments)
    assert log2.delete_old_segments(T0 + 10**9) == n - 1
    assert len(log2.segments) == 1 and log2.log_end_offset == 10


def test_truncate_to(open_log):
    log = open_log(LogConfig(segment_bytes=400, index_interval_bytes=50))
    for _ in range(30):
        log.append_as_leader(build_batch(2), 1, T0)
    log.truncate_to(31)  # inside batch 30..31: the whole batch goes
    assert log.log_end_offset == 30
    assert offsets(read_bytes(log, 0)) == list(range(0, log.segments[0].next_offset))
    log.truncate_to(20)
    assert log.log_end_offset == 20
    assert log.segments[-1].next_offset == 20
    info = log.append_as_leader(build_batch(3), 2, T0)
    assert info.first_offset == 20
    got = []
    off = 0
    while off < log.log_end_offset:
        got += offsets(read_bytes(log, off))
        off = got[-1] + 1
    assert got == list(range(23))
    assert log.leader_epoch_cache.epochs() == [(1, 0), (2, 20)]
    log.truncate_to(100)  # beyond LEO: nothing happens
    assert log.log_end_offset == 23


def test_truncate_fully_and_start_at(open_log):
    log = open_log()
    log.append_as_leader(build_batch(5), 1, T0)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.leader_epoch_cache.epochs() == []
    assert len(log.segments) == 1 and log.segments[0].base_offset == 1000
    assert log.append_as_leader(build_batch(1), 2, T0).first_offset == 1000
    with pytest.raises(OffsetOutOfRangeError):
        log.read(999, 100)


def test_follower_append(open_log):
    leader = open_log(name="l-0")
    follower = open_log(name="f-0")
    for epoch in (1, 1, 4):
        leader.append_as_leader(build_batch(3), epoch, T0)
    data = read_bytes(leader, 0)
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 8)
    assert read_bytes(follower, 0) == data
    assert follower.leader_epoch_cache.epochs() == [(1, 0), (4, 6)]
    with pytest.raises(KafkaStorageError, match="log end offset is 9"):
        follower.append_as_follower(data)
    flipped = bytearray(read_bytes(leader, 6))
    flipped[-1] ^= 1
    follower.truncate_to(6)
    with pytest.raises(CorruptBatchError):
        follower.append_as_follower(flipped)


def test_reopen_keeps_everything(tmp_path):
    cfg = LogConfig(segment_bytes=500, index_interval_bytes=64)
    log = Log.open(tmp_path / "t-3", cfg)
    for i in range(30):
        log.append_as_leader(build_batch(2, timestamp=T0 + i), i // 10, T0)
    before = read_bytes(log, 0)
    entries = [s.offset_index.entries().tolist() for s in log.segments]
    log.flush()
    log.close()
    for clean in (True, False):
        log = Log.open(tmp_path / "t-3", cfg, clean_shutdown=clean)
        assert log.log_end_offset == 60
        assert read_bytes(log, 0) == before
        assert [s.offset_index.entries().tolist() for s in log.segments] == entries
        assert log.leader_epoch_cache.epochs() == [(0, 0), (1, 20), (2, 40)]
        assert log.offset_for_timestamp(T0 + 29) == (58, T0 + 29)
        log.close()
    # index files are trimmed to their entries on close
    for s_entries, idx in zip(entries, sorted(tmp_path.glob("t-3/*.index")), strict=True):
        assert idx.stat().st_size == 8 * len(s_entries)


def test_flush_off_thread_while_appending(open_log):
    log = open_log(LogConfig(segment_bytes=300))
    for _ in range(5):
        log.append_as_leader(build_batch(1), 0, T0)
    pending = log.begin_flush()
    worker = threading.Thread(target=pending.run)
    worker.start()
    for _ in range(5):  # appends, rolls and retention go on meanwhile
        log.append_as_leader(build_batch(1), 0, T0)
    log.truncate_to(7)
    worker.join()
    log.complete_flush(pending)
    assert log.recovery_point == 5
    log.flush()
    assert log.recovery_point == log.log_end_offset == 7


def test_full_indexes_roll_and_keep_the_final_time_entry(tmp_path):
    cfg = LogConfig(segment_index_bytes=36, index_interval_bytes=0)  # 4 offset, 3 time slots
    log = Log.open(tmp_path / "t-0", cfg)
    # one append that wants more entries than either index holds
    log.append_as_leader(concat([build_batch(1, timestamp=T0 + i) for i in range(8)]), 0, T0)
    seg = log.active_segment
    assert seg.offset_index.n_entries == 4 and seg.time_index.n_entries == 2
    log.append_as_leader(build_batch(1, timestamp=T0 + 100), 0, T0)  # full: rolls first
    assert [s.base_offset for s in log.segments] == [0, 8]
    first = log.segments[0]
    assert first.time_index.entries()[-1].tolist() == (T0 + 7, 7)  # the reserved slot
    log.close()
    log = Log.open(tmp_path / "t-0", cfg, clean_shutdown=True)
    assert log.segments[0].max_timestamp == T0 + 7
    assert log.offset_for_timestamp(T0 + 5) == (5, T0 + 5)
    assert log.offset_for_timestamp(T0 + 50) == (8, T0 + 100)
    log.close()


def test_log_start_offset_moves_forward_only_and_trims_epochs(tmp_path):
    from kafkarepl.storage import Log, LogConfig
    from tests.batches import build_batch

    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200))
    for epoch in (1, 2):
        for _ in range(3):
            log.append_as_leader(bytearray(build_batch([b"v" * 50])), epoch, 1_700_000_000_000)
    assert log.log_end_offset == 6
    assert log.maybe_increment_log_start_offset(4) is True
    assert log.log_start_offset == 4
    assert log.leader_epoch_cache.epochs() == [(2, 4)]
    assert log.maybe_increment_log_start_offset(2) is False  # never backwards
    assert log.maybe_increment_log_start_offset(99) is True  # capped at the LEO
    assert log.log_start_offset == 6
    log.close()


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_janitor_delayed_close_waits_for_its_delay_and_wait_does_not(tmp_path) -> None:
    from kafkarepl.storage.janitor import FileJanitor

    j = FileJanitor()
    late, soon, now = (os.open(tmp_path / n, os.O_CREAT | os.O_RDWR, 0o644) for n in "abc")
    j.close(late, 30.0)
    j.close(soon, 0.1)
    j.close(now)
    doomed = tmp_path / "gone-delete"
    (doomed / "x").mkdir(parents=True)
    j.remove_tree(doomed)
    t0 = time.monotonic()
    assert j.wait(10)  # the immediate jobs only: not the 30 s close
    assert time.monotonic() - t0 < 5
    assert _closed(now) and not doomed.exists()
    assert not _closed(late)
    deadline = time.monotonic() + 10
    while not _closed(soon):  # the 0.1 s close comes due while the 30 s one still waits
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not _closed(late)
    os.close(late)


def test_janitor_close_now_closes_one_owners_delayed_descriptors_only(tmp_path) -> None:
    from kafkarepl.storage.janitor import FileJanitor

    j = FileJanitor()
    a1, a2, b = (os.open(tmp_path / n, os.O_CREAT | os.O_RDWR, 0o644) for n in ("a1", "a2", "b"))
    j.close(a1, 30.0, owner=tmp_path / "d1")
    j.close(b, 30.0, owner=tmp_path / "d2")
    j.close(a2, 30.0, owner=tmp_path / "d1")
    j.close_now(tmp_path / "d1")  # an equal Path is the same owner
    assert j.wait(10)
    assert _closed(a1) and _closed(a2) and not _closed(b)
    j.close_now(tmp_path / "d1")  # nothing left: no-op
    os.close(b)


def test_deleted_segments_descriptors_are_closed_on_the_janitor_thread(tmp_path, monkeypatch) -> None:
    """The last close of a deleted segment frees its page cache inside close() (tens of ms
    per 64 MiB): the retired descriptors go to the janitor thread, to be closed after
    file.delete.delay (readers may still be sending from them), never on the caller's
    (the event loop's) thread."""
    from kafkarepl.storage import log as logmod

    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200, retention_bytes=0))
    try:
        for i in range(10):
            lg.append_as_leader(build_batch([b"v" * 50], timestamp=1_700_000_000_000 + i), 0, 1_700_000_000_000)
        fds = [seg.fd for seg in lg.segments[:-1]]
        assert len(fds) >= 2
        handed: list[tuple[int, float, int]] = []
        real = logmod._closer.close
        monkeypatch.setattr(logmod._closer, "close", lambda fd, delay_s=0.0, owner=None: (
            handed.append((fd, delay_s, threading.get_ident())), real(fd, 0.2)))
        assert lg.delete_old_segments(1_700_000_000_000) == len(fds)
        log_fds = {fd for fd, d, _t in handed if d == 60.0}  # file.delete.delay.ms's default
        assert log_fds == set(fds)  # kept open for readers still sending; indexes' at once
        assert all(d == 0.0 for fd, d, _t in handed if fd not in log_fds)
        assert not any(_closed(fd) for fd in log_fds)
        deadline = time.monotonic() + 10
        while not all(_closed(fd) for fd in log_fds):
            assert time.monotonic() < deadline, "descriptors never closed"
            time.sleep(0.01)
    finally:
        lg.close()


def test_a_deleted_log_keeps_serving_reads_in_flight(tmp_path) -> None:
    """A Fetch answer sending from a segment while its partition is deleted (StopReplica
    with delete) reads the bytes it started with: the descriptors stay open (closed on the
    janitor thread after file.delete.delay), so their numbers cannot be reused meanwhile
    by another file."""
    from kafkarepl.storage.janitor import JANITOR

    lg = Log.open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(build_batch([b"x" * 100], timestamp=1_700_000_000_000), 0, 1_700_000_000_000)
    read = lg.read(0, 1 << 20, lg.log_end_offset)
    assert read is not None and read.size > 0
    before = os.pread(read.fd, read.size, read.position)
    lg.close_for_deletion()
    shutil.rmtree(lg.dir)
    JANITOR.wait(10)
    other = os.open(tmp_path / "other", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        assert other != read.fd and not _closed(read.fd)
        assert os.pread(read.fd, read.size, read.position) == before
    finally:
        os.close(other)
