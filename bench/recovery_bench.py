"""Reopening a partition after kill -9: what a roll's flush and snapshot save.

A log of `--gib` GiB in segments of `--segment-mib` MiB, written by an idempotent
producer (its batches are what the producer state is rebuilt from), then dropped without
a clean close, as a killed broker leaves it. Opened three ways, rounds alternating:

  before   the recovery point at 0 and no roll snapshots: what a broker found after a
           kill -9 before rolls flushed (every segment CRC-scanned, the producer state
           replayed from every batch)
  after    the recovery point at the newest segment's base, which the roll to it flushed,
           and the roll snapshots: only the newest segment scanned and replayed
  clean    a clean shutdown's open (no scan), the floor

Cold: the page cache dropped before each open (needs root); warm: not.
Run: .venv/bin/python bench/recovery_bench.py [--gib 2] [--segment-mib 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafkarepl.storage import Log, LogConfig  # noqa: E402
from kafkarepl.storage.log import ROLL_SNAPSHOT_SUFFIX  # noqa: E402
from tests.batches import build_batch  # noqa: E402

MIB = 1 << 20
T0 = 1_700_000_000_000
PID = 4242


def batch(seq: int, n: int = 160) -> bytearray:
    return build_batch(n, producer_id=PID, producer_epoch=0, base_sequence=seq, timestamp=T0, value_size=90)


def build(dir: Path, cfg: LogConfig, gib: float) -> Log:
    lg = Log.open(dir, cfg)
    seq = 0
    while lg.size_in_bytes < gib * 1024 * MIB:
        buf = bytearray()
        for _ in range(64):
            buf += batch(seq)
            seq += 160
        lg.append_as_leader(buf, 0, T0)
    lg.flush()
    return lg


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2)
    ap.add_argument("--segment-mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir under /var/tmp)")
    args = ap.parse_args()
    cfg = LogConfig(segment_bytes=args.segment_mib * MIB)
    root = Path(tempfile.mkdtemp(prefix="recovery-bench-", dir=args.dir or "/var/tmp"))
    try:
        src = root / "t-0"
        lg = build(src, cfg, args.gib)
        bases = [s.base_offset for s in lg.segments]
        leo = lg.log_end_offset
        lg.close()
        print(f"{lg.size_in_bytes / MIB:.0f} MiB, {len(bases)} segments, LEO {leo}", file=sys.stderr)
        state = src / "producer-state-checkpoint"  # the clean close's: only the clean open has it
        clean_state = state.read_bytes()
        state.unlink()
        before = root / "before" / "t-0"  # the same log without roll snapshots
        shutil.copytree(src, before)
        for p in before.glob(f"*{ROLL_SNAPSHOT_SUFFIX}"):
            p.unlink()
        ways = {"before": (before, 0, False), "after": (src, bases[-1], False), "clean": (src, leo, True)}
        cold = os.geteuid() == 0
        times: dict[tuple[str, bool], list[float]] = {}
        for _ in range(args.rounds):
            for is_cold in ([True, False] if cold else [False]):
                for name, (d, rp, clean) in ways.items():
                    if clean:
                        state.write_bytes(clean_state)  # an open takes it (used at most once)
                    if is_cold:
                        drop_caches()
                    t = time.perf_counter()
                    opened = Log.open(d, cfg, recovery_point=rp, clean_shutdown=clean)
                    times.setdefault((name, is_cold), []).append(time.perf_counter() - t)
                    assert opened.log_end_offset == leo
                    assert opened.producer_state.producers[PID].last_seq == leo - 1
                    opened._close_files()  # no clean close: the next open finds the same files
        for is_cold in ([True, False] if cold else [False]):
            med = {n: statistics.median(times[(n, is_cold)]) for n in ways}
            print(f"{'cold' if is_cold else 'warm'}: " + ", ".join(
                f"{n} {med[n]:.3f} s ({min(times[(n, is_cold)]):.3f}-{max(times[(n, is_cold)]):.3f})"
                for n in ways) + f"; after/before {med['after'] / med['before']:.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
