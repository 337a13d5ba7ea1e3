"""Log compaction in storage: cleaning keeps every key's latest record at its original
offset, drops superseded and keyless records and old tombstones, merges small segments,
never touches the active segment or open transactions, and every crash point leaves a
log that reopens valid. A hypothesis model checks it against a dict."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.cleaner import STAGING_DIR, CleaningResult, clean, new_offset_map
from tests.batches import build_batch, decode

T0 = 1_700_000_000_000
DAY = 86_400_000


def cfg(**kw) -> LogConfig:
    base = dict(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=100)
    base.update(kw)
    return LogConfig(**base)


def put(lg: Log, key: bytes | None, value: bytes | None, ts: int = T0) -> int:
    return lg.append_as_leader(build_batch([value], keys=[key], timestamp=ts), 0, ts).first_offset


def records(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for seg in lg.segments:
        data = os.pread(seg.fd, seg.size, 0)
        out += [(o, k, v) for o, _ts, k, v in decode(data)]
    return out


def run_cleaning(lg: Log, now_ms: int = T0, hw: int | None = None, first_dirty: int = 0) -> int:
    return cleaning(lg, now_ms, hw, first_dirty).cleaned_up_to


def cleaning(lg: Log, now_ms: int = T0, hw: int | None = None, first_dirty: int = 0) -> CleaningResult:
    hw = lg.log_end_offset if hw is None else hw
    fd, end, _dirty = lg.cleanable_range(first_dirty, hw, now_ms)
    plan = lg.cleaning_plan(fd, end, now_ms)
    try:
        result = clean(plan, new_offset_map(1 << 16, 0.9))
        assert lg.replace_segments(plan, result)
    finally:
        plan.close()
    return result


@pytest.fixture
def log(tmp_path):
    lg = Log.open(tmp_path / "t-0", cfg())
    yield lg
    lg.close()


def test_cleaning_keeps_latest_per_key_at_original_offsets_and_merges_segments(log):
    offsets: dict[bytes, int] = {}
    for i in range(60):
        k = b"k%d" % (i % 4)
        offsets[k] = put(log, k, b"v%d" % i)
    log.reconfigure(cfg(cleanup_policy="delete"))  # written before the topic was compacted
    put(log, None, b"keyless")  # a keyless record is not kept by compaction
    log.reconfigure(cfg())
    active_before = log.active_segment.base_offset
    n_before, size_before = len(log.segments), log.size_in_bytes
    assert run_cleaning(log) == active_before
    got = records(log)
    cleaned = [(o, k, v) for o, k, v in got if o < active_before]
    # One record per key below the active segment; each is the latest there.
    latest_below = {}
    for i in range(60):
        if i < active_before:
            latest_below[b"k%d" % (i % 4)] = i
    assert sorted(o for o, _, _ in cleaned) == sorted(latest_below.values())
    assert all(v == b"v%d" % o for o, _, v in cleaned)
    assert [o for o, _, _ in got if o >= active_before] == list(range(active_before, log.log_end_offset))
    assert log.size_in_bytes < size_before and log.log_end_offset == 61
    # As Kafka, groups are formed from the segments' sizes before cleaning; the next
    # cleaning merges the now small cleaned segments (bounded by segment.bytes).
    assert len(log.segments) == n_before
    run_cleaning(log, first_dirty=active_before)
    assert len(log.segments) == 2 and records(log) == got
    # Reads by offset still work, also inside removed ranges (move to the next batch).
    sl = log.read(0, 1 << 20)
    assert sl.first_offset == min(latest_below.values())


def test_tombstones_live_for_delete_retention_ms(tmp_path):
    lg = Log.open(tmp_path / "t-0", cfg(delete_retention_ms=DAY))
    try:
        put(lg, b"a", b"1")
        put(lg, b"a", None)  # tombstone
        for i in range(30):
            put(lg, b"b", b"x%d" % i)
        run_cleaning(lg, now_ms=T0 + 1000)
        assert (1, b"a", None) in records(lg)  # young: kept
        run_cleaning(lg, now_ms=T0 + 2 * DAY)
        assert not [r for r in records(lg) if r[1] == b"a"]  # old: gone with what it deleted
    finally:
        lg.close()


def test_an_old_tombstone_survives_its_first_cleaning_by_delete_retention_ms_kip534(tmp_path):
    """A tombstone whose own timestamp is long past delete.retention.ms is still kept by the
    first cleaning (a consumer reading behind sees the delete): its batch gets the delete
    horizon, and only a cleaning at or past that horizon removes it, also with no new
    writes in between."""
    lg = Log.open(tmp_path / "t-0", cfg(delete_retention_ms=DAY))
    try:
        old = T0 - 10 * DAY
        put(lg, b"a", b"1", ts=old)
        put(lg, b"a", None, ts=old + 1)  # an old tombstone
        for i in range(30):
            put(lg, b"b", b"x%d" % i, ts=old + 2)
        r = cleaning(lg, now_ms=T0)
        assert (1, old + 1, b"a", None) in decoded(lg)  # kept, with its own timestamp
        assert r.delete_horizon == T0 + DAY
        r = cleaning(lg, now_ms=T0 + DAY - 1, first_dirty=r.cleaned_up_to)
        assert (1, old + 1, b"a", None) in decoded(lg) and r.delete_horizon == T0 + DAY
        r = cleaning(lg, now_ms=T0 + DAY, first_dirty=r.cleaned_up_to)  # nothing new written
        assert not [x for x in decoded(lg) if x[2] == b"a"] and r.delete_horizon is None
    finally:
        lg.close()


def decoded(lg: Log) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    for seg in lg.segments:
        out += decode(os.pread(seg.fd, seg.size, 0))
    return out


def test_open_transactions_and_the_active_segment_are_not_cleaned(log):
    for i in range(30):
        put(log, b"a", b"%d" % i)
    # The LSO (here: a low HW) bounds the cleanable range to whole segments below it.
    fd, end, _ = log.cleanable_range(0, 5, T0)
    assert end <= 5 and end in [s.base_offset for s in log.segments]


def test_a_truncation_during_cleaning_voids_it(log):
    for i in range(40):
        put(log, b"a", b"%d" % i)
    fd, end, _ = log.cleanable_range(0, log.log_end_offset, T0)
    plan = log.cleaning_plan(fd, end, T0)
    try:
        result = clean(plan, new_offset_map(1 << 16, 0.9))
        log.truncate_to(log.log_end_offset - 1)
        assert not log.replace_segments(plan, result)
    finally:
        plan.close()
    assert not (log.dir / STAGING_DIR).exists()
    assert len(records(log)) == 39


@pytest.mark.parametrize("crash_at", ["staged", "swapped", "retired"])
def test_every_crash_point_reopens_to_a_valid_log(tmp_path, crash_at):
    d = tmp_path / "t-0"
    lg = Log.open(d, cfg())
    for i in range(50):
        put(lg, b"k%d" % (i % 3), b"v%d" % i)
    expected_latest = {k: v for _o, k, v in records(lg)}
    fd, end, _ = lg.cleanable_range(0, lg.log_end_offset, T0)
    plan = lg.cleaning_plan(fd, end, T0)
    result = clean(plan, new_offset_map(1 << 16, 0.9))
    plan.close()
    staging = d / STAGING_DIR
    g = result.groups[0]
    if crash_at in ("swapped", "retired"):  # the first steps of replace_segments, by hand
        for name in os.listdir(staging):
            os.replace(staging / name, d / (name + ".swap"))
    if crash_at == "retired":
        for b in g.replaced:
            for suffix in (".log", ".index", ".timeindex"):
                (d / f"{b:020d}{suffix}").unlink(missing_ok=True)
    lg._close_files()  # kill -9: no clean close
    lg = Log.open(d, cfg(), recovery_point=0)
    try:
        got = records(lg)
        offs = [o for o, _, _ in got]
        assert offs == sorted(set(offs)) and lg.log_end_offset == 50  # ascending, no duplicates
        assert {k: v for _o, k, v in got} == expected_latest
        assert not staging.exists() and not list(Path(d).glob("*.swap"))
        if crash_at != "staged":  # the swap was completed: the log is the cleaned one
            assert len(got) < 50
    finally:
        lg.close()


ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from([b"a", b"b", b"c", b"d"]),
              st.one_of(st.none(), st.binary(min_size=1, max_size=30))),
    st.tuples(st.just("clean"), st.integers(0, 3 * DAY), st.none()),
), min_size=1, max_size=80)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_model_latest_values_and_young_tombstones_read_back(tmp_path_factory, program) -> None:
    """Against a dict: every key's latest value reads back at its offset with its
    timestamp; a tombstone stays until a cleaning at or past the delete horizon set by the
    first cleaning that kept it (KIP-534: that cleaning's time + delete.retention.ms), and
    goes at the first cleaning past it; the result names the earliest horizon left."""
    d = tmp_path_factory.mktemp("m") / "t-0"
    lg = Log.open(d, cfg(delete_retention_ms=DAY, segment_bytes=300))
    try:
        latest: dict[bytes, tuple[int, bytes | None, int]] = {}  # key -> (offset, value, ts)
        written: dict[int, tuple[bytes, bytes | None, int]] = {}
        horizon: dict[int, int] = {}  # tombstone offset -> its delete horizon, once set
        gone: set[int] = set()  # tombstones removed
        now = T0
        clean_now = T0
        first_dirty = 0
        for op, a, b in program:
            if op == "put":
                now = max(now, clean_now) + 1000
                off = put(lg, a, b, ts=now)
                latest[a] = (off, b, now)
                written[off] = (a, b, now)
            else:
                clean_now = max(clean_now, now + a)  # the clock never goes back
                result = cleaning(lg, now_ms=clean_now, first_dirty=first_dirty)
                first_dirty = result.cleaned_up_to
                end = result.cleaned_up_to  # the model's cleaning of [log start, end)
                below = {}  # key -> its latest offset below end: what survives there
                for o in sorted(o for o in written if o < end):
                    below[written[o][0]] = o
                for o in [o for o in horizon if o not in gone and below[written[o][0]] != o]:
                    gone.add(o)  # superseded
                for o in below.values():
                    if written[o][1] is None and o not in gone:
                        if o not in horizon:
                            horizon[o] = clean_now + DAY  # first kept: marked
                        elif clean_now >= horizon[o]:
                            gone.add(o)  # past its horizon: removed
                left = [h for o, h in horizon.items() if o not in gone]
                assert result.delete_horizon == min(left, default=None)
                assert sorted(o for o, *_ in decoded(lg) if o < end) == sorted(
                    o for o in below.values() if o not in gone)
                got = decoded(lg)
                offs = [o for o, _, _, _ in got]
                assert offs == sorted(set(offs))
                for o, ts, k, v in got:  # offsets and timestamps never change
                    assert written[o] == (k, v, ts)
                present = set(offs)
                active = lg.active_segment.base_offset
                for o in range(lg.log_start_offset, active):  # a fetch inside a removed range
                    after = [p for p in offs if p >= o]
                    sl = lg.read(o, 1 << 20)
                    data = os.pread(sl.fd, sl.size, sl.position) if sl.size else b""
                    seen = [r[0] for r in decode(data) if r[0] >= o]
                    assert (seen[0] if seen else None) == (after[0] if after else None), o
                for k, (off, v, _ts) in latest.items():
                    if v is not None or off >= active:
                        assert off in present, (k, off, v)
                    elif off in gone:  # an expired tombstone is removed
                        assert off not in present, (k, off, horizon[off], clean_now)
                    else:  # a young one is kept
                        assert off in present, (k, off, horizon.get(off), clean_now)
        assert lg.log_end_offset == len(written)
    finally:
        lg.close()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_cleaned_and_recompressed_with_their_codec(tmp_path, codec):
    lg = Log.open(tmp_path / "t-0", cfg(segment_bytes=700))
    try:
        latest = {}
        for n in range(12):  # batches of 20 records over 5 keys
            keys = [b"k%d" % ((n * 20 + i) % 5) for i in range(20)]
            values = [b"v%d-%d" % (n, i) * 10 for i in range(20)]
            batch = build_batch(values, keys=keys, compression=codec)
            assert batch[22] & 7 != 0  # really compressed
            first = lg.append_as_leader(batch, 0, T0).first_offset
            for i, k in enumerate(keys):
                latest[k] = (first + i, values[i])
        active = lg.active_segment.base_offset
        run_cleaning(lg)
        got = records(lg)  # kafka-python decompresses and checks every CRC
        cleaned = [(o, k, v) for o, k, v in got if o < active]
        assert active > 0 and len(cleaned) < active  # superseded records removed from compressed batches
        for k, (off, v) in latest.items():
            if off < active:
                assert (off, k, v) in got
        for seg in lg.segments[:-1]:  # the cleaned batches kept their codec
            data = os.pread(seg.fd, seg.size, 0)
            pos = 0
            while pos < len(data):
                length = int.from_bytes(data[pos + 8 : pos + 12], "big")
                assert data[pos + 22] & 7 == {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
                pos += 12 + length
        assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
    finally:
        lg.close()


def test_a_truncation_between_the_swap_steps_drops_the_swap_files(tmp_path):
    """The broker fsyncs the directory between begin_swap and complete_swap off the loop;
    a truncation meanwhile must remove the swap files at once, so that neither
    complete_swap nor a crash-then-reopen (which completes swaps) brings back what the
    truncation removed."""
    d = tmp_path / "t-0"
    lg = Log.open(d, cfg())
    for i in range(40):
        put(lg, b"k%d" % (i % 3), b"v%d" % i)
    fd, end, _ = lg.cleanable_range(0, lg.log_end_offset, T0)
    plan = lg.cleaning_plan(fd, end, T0)
    result = clean(plan, new_offset_map(1 << 16, 0.9))
    plan.close()
    assert lg.begin_swap(plan, result) and list(d.glob("*.swap"))
    lg.truncate_to(10)
    assert not list(d.glob("*.swap")) and not (d / STAGING_DIR).exists()
    assert not lg.complete_swap(plan, result)
    lg._close_files()  # kill -9
    lg = Log.open(d, cfg(), recovery_point=0)
    try:
        assert lg.log_end_offset == 10 and [o for o, _, _ in records(lg)] == list(range(10))
    finally:
        lg.close()


def test_swap_steps_with_durable_renames_in_between(log):
    for i in range(40):
        put(log, b"k%d" % (i % 3), b"v%d" % i)
    put_after = log.log_end_offset
    fd, end, _ = log.cleanable_range(0, log.log_end_offset, T0)
    plan = log.cleaning_plan(fd, end, T0)
    result = clean(plan, new_offset_map(1 << 16, 0.9))
    plan.close()
    assert log.begin_swap(plan, result)
    put(log, b"k0", b"late")  # appends between the steps are fine
    assert log.complete_swap(plan, result)
    assert not list(log.dir.glob("*.swap")) and not (log.dir / STAGING_DIR).exists()
    got = records(log)
    assert got[-1] == (put_after, b"k0", b"late") and len(got) < put_after


def test_swap_group_by_group_and_a_truncation_half_way(tmp_path):
    """The broker swaps one group per loop turn: groups completed before a truncation
    stay swapped (each is whole on its own), the others' swap files go, and the log
    reopens to exactly what the truncation left."""
    d = tmp_path / "t-0"
    lg = Log.open(d, cfg())
    for i in range(80):
        put(lg, b"k%d" % (i % 3), b"v%d" % i)
    fd, end, _ = lg.cleanable_range(0, lg.log_end_offset, T0)
    plan = lg.cleaning_plan(fd, end, T0)
    result = clean(plan, new_offset_map(1 << 16, 0.9))
    plan.close()
    assert len(result.groups) >= 3
    for g in result.groups:
        assert lg.begin_swap(plan, result, [g])
    assert lg.complete_swap(plan, result, result.groups[:1])
    first = result.groups[0]
    cut = result.groups[2].base_offset  # inside the groups not swapped yet
    lg.truncate_to(cut)
    assert not list(d.glob("*.swap")) and not (d / STAGING_DIR).exists()
    assert not lg.complete_swap(plan, result, result.groups[1:2])
    got = records(lg)
    assert lg.segments[0].base_offset == first.base_offset and lg.log_end_offset == cut
    lg._close_files()  # kill -9
    lg = Log.open(d, cfg(), recovery_point=0)
    try:
        assert records(lg) == got and lg.log_end_offset == cut
    finally:
        lg.close()


def test_cleaned_segments_opened_off_the_loop_live_at_their_final_paths(tmp_path):
    """The cleaner thread opens each cleaned segment in the staging directory; after the
    swap's renames it serves from the log directory (its paths moved, its descriptors the
    renamed files), and a cleaning discarded by a truncation closes what it opened."""
    d = tmp_path / "t-0"
    lg = Log.open(d, cfg())
    try:
        for i in range(60):
            put(lg, b"k%d" % (i % 3), b"v%d" % i)
        result = cleaning(lg)
        assert result.groups and all(g.segment is None for g in result.groups)  # taken by the swap
        for seg in lg.segments:
            assert {seg.log_path.parent, seg.offset_index.path.parent, seg.time_index.path.parent} == {d}
            assert os.fstat(seg.fd).st_ino == os.stat(seg.log_path).st_ino
        got = records(lg)
        doomed = lg.segments[0]
        paths = [doomed.log_path, doomed.offset_index.path, doomed.time_index.path]
        lg.reconfigure(cfg(retention_bytes=0, cleanup_policy="compact,delete"))
        assert lg.delete_old_segments(T0) >= 1  # a cleaned segment's files go from the log dir
        assert not any(p.exists() for p in paths)
        lg.reconfigure(cfg())
        for i in range(60):
            put(lg, b"k%d" % (i % 3), b"w%d" % i)
        fd, end, _ = lg.cleanable_range(lg.log_start_offset, lg.log_end_offset, T0)
        plan = lg.cleaning_plan(fd, end, T0)
        try:
            result = clean(plan, new_offset_map(1 << 16, 0.9))
            opened = [g.segment for g in result.groups]
            assert opened and all(s is not None and s.fd >= 0 for s in opened)
            lg.truncate_to(lg.log_end_offset - 1)
            assert not lg.replace_segments(plan, result)
            assert all(s is not None and s.fd == -1 for s in opened)
            assert not (d / STAGING_DIR).exists()
        finally:
            plan.close()
        assert got  # read before, and the reopen below reads what is left
    finally:
        lg.close()
    lg = Log.open(d, cfg())
    try:
        assert records(lg)
    finally:
        lg.close()


batch_specs = st.lists(st.tuples(st.integers(1, 12), st.integers(0, 40), st.integers(-5, 5), st.booleans()),
                       min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch_specs, st.sampled_from([1, 40, 100, 700]), st.sampled_from([1000, 3000, 8000]))
def test_cleaned_segments_index_as_a_rebuild_from_their_log_does(tmp_path_factory, specs, interval,
                                                                  segment_bytes) -> None:
    """The cleaner indexes the batches its C loop wrote in C (BatchVec.index_entries);
    the entries must be those LogSegment._index_batches makes when it rebuilds both
    indexes from the same .log (timestamps out of order, compressed batches cleaned in
    Python in between, groups of several segments, every index.interval.bytes)."""
    d = tmp_path_factory.mktemp("idx") / "t-0"
    lg = Log.open(d, cfg(index_interval_bytes=interval, segment_bytes=segment_bytes))
    try:
        for n, (count, vlen, skew, compressed) in enumerate(specs):
            keys = [b"k%d" % ((n * 7 + i) % 150) for i in range(count)]  # most survive
            ts = T0 + 1000 * n + 300 * skew  # max timestamps go back and forth
            batch = build_batch([b"v" * vlen] * count, keys=keys, timestamp=ts,
                                compression="gzip" if compressed else "none")
            lg.append_as_leader(batch, 0, ts)
        lg.roll()
        # cleaned groups of several segments: each one's batches indexed in its own call
        lg.reconfigure(cfg(index_interval_bytes=interval, segment_bytes=4 * segment_bytes))
        cleaning(lg)
        for seg in lg.segments[:-1]:
            got = (seg.offset_index.entries().tolist(), seg.time_index.entries().tolist(),
                   seg.next_offset, seg.max_timestamp, seg.offset_of_max_timestamp)
            seg.recover()
            seg.make_inactive()
            assert got == (seg.offset_index.entries().tolist(), seg.time_index.entries().tolist(),
                           seg.next_offset, seg.max_timestamp, seg.offset_of_max_timestamp)
    finally:
        lg.close()


class _Crash(BaseException):
    """kill -9 in the middle of a swap: file operations done so far stay done."""


def _index_entries(lg: Log) -> dict[int, tuple[list, list]]:
    return {seg.base_offset: (seg.offset_index.entries().tolist(), seg.time_index.entries().tolist())
            for seg in lg.segments}


def test_a_crash_at_any_file_operation_of_a_swap_reopens_with_right_indexes(tmp_path, monkeypatch, caplog):
    """Kill -9 after each rename or unlink of begin_swap, complete_swap and an abort, then
    reopen trusting the indexes (recovery point at the LEO, as after a flush): the records
    are the old or the cleaned log's, and every segment's offset and time indexes are the
    ones a rebuild from its .log gives. No index of an old segment is left under a cleaned
    .log of the same base offset: the loader never counts on a sanity check to find one
    (it may not: a cleaning that removed only what follows an index's last entry)."""
    real_replace, real_unlink = os.replace, Path.unlink
    crash_at = 0
    while True:
        d = tmp_path / f"c{crash_at}" / "t-0"
        lg = Log.open(d, cfg(segment_bytes=400))
        for i in range(24):
            put(lg, b"k%d" % (i % 3), b"v%d" % i, ts=T0 + i)
        before = records(lg)
        expected_latest = {k: v for _o, k, v in before}
        fd, end, _ = lg.cleanable_range(0, lg.log_end_offset, T0)
        plan = lg.cleaning_plan(fd, end, T0)
        result = clean(plan, new_offset_map(1 << 16, 0.9))
        assert len(result.groups) >= 2
        ops = 0

        def counted(real, limit=crash_at):
            def op(*a, **kw):
                nonlocal ops
                if ops == limit:
                    raise _Crash
                ops += 1
                return real(*a, **kw)
            return op

        monkeypatch.setattr(os, "replace", counted(real_replace))
        monkeypatch.setattr(Path, "unlink", counted(real_unlink))
        crashed = False
        try:
            assert lg.begin_swap(plan, result)
            assert lg.complete_swap(plan, result, result.groups[:1])
            lg._abort_swap()  # the other groups' swap files, as a truncation would
        except _Crash:
            crashed = True
        finally:
            monkeypatch.setattr(os, "replace", real_replace)
            monkeypatch.setattr(Path, "unlink", real_unlink)
            plan.close()
            result.close()
        lg._close_files()  # (kill -9: nothing else written)
        caplog.clear()
        lg = Log.open(d, cfg(segment_bytes=400), recovery_point=24)
        try:
            assert not [r for r in caplog.records if "rebuilding" in r.getMessage()], crash_at
            got = records(lg)
            assert [o for o, _, _ in got] == sorted({o for o, _, _ in got}) and lg.log_end_offset == 24
            assert {k: v for _o, k, v in got} == expected_latest
            trusted = _index_entries(lg)
        finally:
            lg.close()
        for p in d.iterdir():  # rebuilt from each .log
            if p.suffix in (".index", ".timeindex"):
                p.unlink()
        lg = Log.open(d, cfg(segment_bytes=400))
        try:
            assert _index_entries(lg) == trusted, f"crash at file operation {crash_at}"
        finally:
            lg.close()
        if not crashed:
            break
        crash_at += 1
    assert crash_at >= 10  # every rename and unlink of the three steps was a crash point
