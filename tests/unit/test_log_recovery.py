"""Crash recovery: torn tails, garbage, corrupt indexes, recovery point, clean marker."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkarepl import _core
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.janitor import JANITOR
from kafkarepl.storage.segment import LogSegment
from tests.batches import build_batch, decode

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=1200, index_interval_bytes=100)


def crash(log: Log) -> None:
    """Drop a log's file handles the way a killed process does: nothing trimmed,
    flushed or checkpointed (preallocated indexes keep their zero tails)."""
    for seg in log.segments:
        for idx in (seg.offset_index, seg.time_index):
            if idx._mm is not None:
                idx._mm.close()
            if idx._fd >= 0:  # an empty segment has no index files yet
                os.close(idx._fd)
        if seg.fd >= 0:  # an empty segment has no file yet
            os.close(seg.fd)
    # A killed process's janitor dies with it: a roll's index shrink has run or never
    # will. This process's must not run after the reopen below (the new mapping of the
    # longer file would fault past its end, SIGBUS).
    JANITOR.wait(30)


def all_bytes(log: Log) -> bytes:
    out = b""
    off = log.log_start_offset
    while off < log.log_end_offset:
        s = log.read(off, 1 << 30)
        chunk = os.pread(s.fd, s.size, s.position)
        out += chunk
        off = decode(chunk)[-1][0] + 1
    return out


def build_log(dir: Path, n: int = 25, cfg: LogConfig = CFG) -> Log:
    log = Log.open(dir, cfg, clean_shutdown=False)
    for i in range(n):
        log.append_as_leader(build_batch(i % 3 + 1, compression=["none", "lz4"][i % 2],
                                         timestamp=T0 + i), i // 10, T0)
    return log


@pytest.fixture
def crashed(tmp_path):
    log = build_log(tmp_path / "src-0")
    expected = {
        "bytes": all_bytes(log),
        "leo": log.log_end_offset,
        "segments": [(s.base_offset, s.size) for s in log.segments],
        "index": [s.offset_index.entries().tolist() for s in log.segments],
        "epochs": log.leader_epoch_cache.epochs(),
    }
    crash(log)
    return tmp_path / "src-0", expected


def test_unclean_reopen_without_damage_is_identical(crashed, tmp_path):
    src, exp = crashed
    log = Log.open(src, CFG, clean_shutdown=False)
    assert log.log_end_offset == exp["leo"]
    assert all_bytes(log) == exp["bytes"]
    assert [s.offset_index.entries().tolist() for s in log.segments] == exp["index"]
    assert log.recovery_point == 0  # only a flush moves it (as Kafka)
    log.close()


@pytest.mark.parametrize("window", [40, 150, 700])
def test_recovery_reads_in_windows_as_a_whole(crashed, tmp_path, monkeypatch, window):
    """Recovery and the epoch rebuild read segments window by window (reads, not a
    mapping: records.scan_windows). With windows smaller than a batch or cutting
    batches anywhere, the reopened log, its indexes, epochs and torn-tail cut are those
    of one read of the whole file."""
    from kafkarepl.storage import records

    src, exp = crashed
    (src / "leader-epoch-checkpoint").unlink()  # rebuilt from the batch headers
    last_log = sorted(src.glob("*.log"))[-1]
    pos, size, base = _last_batch(last_log)
    monkeypatch.setattr(records, "SCAN_WINDOW", window)
    work = tmp_path / "whole" / "src-0"
    shutil.copytree(src, work)
    log = Log.open(work, CFG, clean_shutdown=False)
    assert log.log_end_offset == exp["leo"] and all_bytes(log) == exp["bytes"]
    assert [s.offset_index.entries().tolist() for s in log.segments] == exp["index"]
    assert log.leader_epoch_cache.epochs() == exp["epochs"]
    log.close()
    work = tmp_path / "torn" / "src-0"
    shutil.copytree(src, work)
    with open(work / last_log.name, "r+b") as f:
        f.truncate(pos + size - 3)
    log = Log.open(work, CFG, clean_shutdown=False)
    assert log.log_end_offset == base and (work / last_log.name).stat().st_size == pos
    assert log.active_segment.offset_index.entries().tolist() == [e for e in exp["index"][-1] if e[1] < pos]
    log.close()


def _last_batch(seg_path: Path) -> tuple[int, int, int]:
    data = seg_path.read_bytes()
    b = _core.validate_batches(data)[-1]
    return b.position, b.size, b.base_offset


def test_cut_at_every_byte_of_last_batch(crashed, tmp_path):
    src, exp = crashed
    last_log = sorted(src.glob("*.log"))[-1]
    pos, size, base = _last_batch(last_log)
    for cut in range(pos, pos + size):
        work = tmp_path / f"cut{cut}" / "src-0"
        shutil.copytree(src, work)
        with open(work / last_log.name, "r+b") as f:
            f.truncate(cut)
        log = Log.open(work, CFG, clean_shutdown=False)
        assert log.log_end_offset == base, cut
        assert (work / last_log.name).stat().st_size == pos
        got = all_bytes(log)
        assert exp["bytes"].startswith(got) and len(exp["bytes"]) - len(got) == size
        idx = log.active_segment.offset_index.entries().tolist()
        assert idx == [e for e in exp["index"][-1] if e[1] < pos]
        # the log keeps working after recovery
        assert log.append_as_leader(build_batch(1), 9, T0).first_offset == base
        log.close()
        shutil.rmtree(work.parent)


@pytest.mark.parametrize("garbage", [
    b"\x00",
    b"\x00" * 11,
    b"\xff" * 61,
    bytes(random.Random(1).randbytes(300)),
    # a plausible header whose length points past the end of the file
    (10**6).to_bytes(8, "big") + (5000).to_bytes(4, "big") + b"\x00" * 4 + b"\x02" + b"\x00" * 60,
    "valid-batch-bad-crc",
])
def test_garbage_appended_is_cut(crashed, tmp_path, garbage):
    src, exp = crashed
    last_log = sorted(src.glob("*.log"))[-1]
    if garbage == "valid-batch-bad-crc":
        b = build_batch(2)
        b[-1] ^= 0xFF
        garbage = bytes(b)
    good_size = last_log.stat().st_size
    with open(last_log, "ab") as f:
        f.write(garbage)
    log = Log.open(src, CFG, clean_shutdown=False)
    assert log.log_end_offset == exp["leo"]
    assert last_log.stat().st_size == good_size
    assert all_bytes(log) == exp["bytes"]
    log.close()


def test_corruption_mid_log_drops_later_segments(crashed):
    src, exp = crashed
    first = sorted(src.glob("*.log"))[0]
    batches = _core.validate_batches(first.read_bytes())
    victim = batches[2]
    with open(first, "r+b") as f:
        f.seek(victim.position + victim.size - 1)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 1]))
    log = Log.open(src, CFG, clean_shutdown=False, recovery_point=0)
    assert log.log_end_offset == victim.base_offset
    assert len(log.segments) == 1
    assert log.leader_epoch_cache.epochs() == [(0, 0)]
    assert sorted(p.name for p in src.glob("*.log")) == [first.name]
    log.close()


def test_recovery_starts_at_recovery_point(crashed):
    src, exp = crashed
    first = sorted(src.glob("*.log"))[0]
    b = _core.validate_batches(first.read_bytes())[1]
    with open(first, "r+b") as f:  # damage below the recovery point goes unnoticed
        f.seek(b.position + b.size - 1)
        f.write(b"\xee")
    last_base = exp["segments"][-1][0]
    log = Log.open(src, CFG, clean_shutdown=False, recovery_point=last_base)
    assert log.log_end_offset == exp["leo"]
    assert len(log.segments) == len(exp["segments"])
    log.close()


def test_clean_shutdown_skips_the_scan(tmp_path):
    log = build_log(tmp_path / "t-0")
    log.flush()
    log.close()
    first = sorted((tmp_path / "t-0").glob("*.log"))[0]
    b = _core.validate_batches(first.read_bytes())[1]
    with open(first, "r+b") as f:
        f.seek(b.position + b.size - 1)
        f.write(b"\xee")
    (tmp_path / ".kafka_cleanshutdown").touch()
    log = Log.open(tmp_path / "t-0", CFG)  # marker found: no CRC scan
    leo = log.log_end_offset
    log.close()
    (tmp_path / ".kafka_cleanshutdown").unlink()
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=0)  # no marker: full scan
    assert log.log_end_offset == b.base_offset < leo
    log.close()


def test_clean_shutdown_with_torn_tail_still_recovers(tmp_path):
    log = build_log(tmp_path / "t-0")
    leo_before_last = log.active_segment
    log.close()
    last_log = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    pos, size, base = _last_batch(last_log)
    with open(last_log, "r+b") as f:
        f.truncate(pos + size // 2)
    log = Log.open(tmp_path / "t-0", CFG, clean_shutdown=True)
    assert log.log_end_offset == base, leo_before_last
    log.close()


@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate", "stale"])
def test_damaged_index_is_rebuilt(tmp_path, damage):
    build_log(tmp_path / "t-0").close()
    log = Log.open(tmp_path / "t-0", CFG, clean_shutdown=True)
    expected = [s.offset_index.entries().tolist() for s in log.segments]
    expected_ts = [s.time_index.entries().tolist() for s in log.segments]
    log.close()
    idx = sorted((tmp_path / "t-0").glob("*.index"))[0]
    tidx = sorted((tmp_path / "t-0").glob("*.timeindex"))[0]
    if damage == "delete":
        idx.unlink()
        tidx.unlink()
    elif damage == "garbage":
        idx.write_bytes(random.Random(2).randbytes(idx.stat().st_size))
    elif damage == "truncate":
        idx.write_bytes(idx.read_bytes()[:-3])
    else:  # the last entry names an offset its batch does not end at
        data = bytearray(idx.read_bytes())
        data[-5] ^= 0x01  # lowest byte of the last entry's relative offset
        idx.write_bytes(bytes(data))
    log = Log.open(tmp_path / "t-0", CFG, clean_shutdown=True)
    assert [s.offset_index.entries().tolist() for s in log.segments] == expected
    assert [s.time_index.entries().tolist() for s in log.segments] == expected_ts
    assert log.log_end_offset == 49
    log.close()


def test_random_bytes_as_segment(tmp_path):
    rnd = random.Random(7)
    for i in range(30):
        d = tmp_path / f"t-{i}"
        d.mkdir()
        (d / f"{0:020d}.log").write_bytes(rnd.randbytes(rnd.randrange(1, 5000)))
        log = Log.open(d, CFG, clean_shutdown=bool(i % 2))
        assert log.log_end_offset == 0
        assert (d / f"{0:020d}.log").stat().st_size == 0
        log.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_damage_keeps_the_valid_prefix(tmp_path_factory, data):
    """Whatever bytes are damaged, recovery keeps exactly the batches before the first
    damaged one (nothing valid before the damage is lost) and the log stays usable."""
    d = tmp_path_factory.mktemp("fuzz") / "t-0"
    log = build_log(d, n=8, cfg=LogConfig(index_interval_bytes=100))
    log.close()
    seg = d / f"{0:020d}.log"
    original = seg.read_bytes()
    batches = _core.validate_batches(original)
    damaged = bytearray(original)
    pos = data.draw(st.integers(0, len(original) - 1))
    mode = data.draw(st.sampled_from(["flip", "cut", "splice"]))
    if mode == "flip":
        damaged[pos] ^= data.draw(st.integers(1, 255))
    elif mode == "cut":
        del damaged[pos:]
    else:
        damaged[pos:pos] = data.draw(st.binary(min_size=1, max_size=80))
    seg.write_bytes(bytes(damaged))
    log = Log.open(d, LogConfig(index_interval_bytes=100), clean_shutdown=False)
    kept = log.active_segment.size
    intact = [b for b in batches if b.position + b.size <= pos]
    assert kept >= (intact[-1].position + intact[-1].size if intact else 0)
    in_batch = pos - max(b.position for b in batches if b.position <= pos)
    # baseOffset (0-7) and partitionLeaderEpoch (12-15) lie outside the CRC: a flip
    # there can go unnoticed (as in Kafka); everything else must cut the log.
    if mode == "flip" and not (in_batch < 8 or 12 <= in_batch < 16):
        assert bytes(damaged[:kept]) == original[:kept]
        assert kept <= pos
    assert kept in [0] + [b.position + b.size for b in batches] or mode == "splice"
    got = all_bytes(log)
    assert len(got) == kept
    decode(got)  # every kept byte is a whole, valid batch
    log.append_as_leader(build_batch(1), 5, T0)
    log.close()


def test_clean_reopen_reads_no_batch_beyond_the_index_tails(tmp_path):
    """A clean reopen trusts indexes and snapshots: no full header scan, no CRC scan."""
    build_log(tmp_path / "t-0").close()
    with mock.patch.object(Log, "_rebuild_from_headers", wraps=None) as rebuild, \
            mock.patch.object(LogSegment, "recover", autospec=True) as recover:
        Log.open(tmp_path / "t-0", CFG, clean_shutdown=True).close()
    assert rebuild.call_count == 0 and recover.call_count == 0


def test_kill_9_mid_append_recovers_a_valid_prefix(tmp_path):
    """A real process appending in a loop is SIGKILLed; the reopened log holds a prefix
    of what it wrote (whole, valid batches, consecutive offsets) and accepts appends."""
    root = Path(__file__).resolve().parents[2]
    script = (
        "import sys\n"
        "from kafkarepl.storage import Log, LogConfig\n"
        "from tests.batches import build_batch\n"
        f"log = Log.open({str(tmp_path / 'k-0')!r}, LogConfig(segment_bytes=20000, "
        "index_interval_bytes=300), clean_shutdown=False)\n"
        "bufs = [build_batch(n % 5 + 1, compression='lz4', value_size=64) for n in range(50)]\n"
        "print('ready', flush=True)\n"
        "i = 0\n"
        "while True:\n"
        "    log.append_as_leader(bytearray(bufs[i % 50]), i // 200, 1_700_000_000_000)\n"
        "    i += 1\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=root, stdout=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(root)))
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    log = Log.open(tmp_path / "k-0", LogConfig(segment_bytes=20000, index_interval_bytes=300),
                   clean_shutdown=False)
    assert log.log_end_offset > 0 and len(log.segments) > 1
    records = decode(all_bytes(log))
    assert [r[0] for r in records] == list(range(log.log_end_offset))
    epochs = log.leader_epoch_cache.epochs()
    assert [e for e, _ in epochs] == list(range(len(epochs)))
    log.append_as_leader(build_batch(1), 99, T0)
    log.close()
