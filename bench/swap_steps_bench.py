"""Time of each swap step on the event loop (Log.begin_swap / Log.complete_swap, one
cleaned group each, as server/log_cleaner.py runs them), in process.

    python bench/swap_steps_bench.py [--dir DIR] [--rounds 3]

A compacted log of ~450 MiB in 8 MiB segments (batches of 100 records, 100,000 keys) is
cleaned once per round; each cleaned group's steps are timed alone (perf_counter around
the call). Prints one JSON line per round: groups, median/p90/max per step in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkarepl.storage import Log, LogConfig  # noqa: E402
from kafkarepl.storage.cleaner import clean, new_offset_map  # noqa: E402
from kafkarepl.storage.fsync import fsync_dir  # noqa: E402
from tests.batches import build_batch  # noqa: E402

T0 = 1_700_000_000_000


def one_round(d: Path) -> dict:
    shutil.rmtree(d, ignore_errors=True)
    lg = Log.open(d, LogConfig(cleanup_policy="compact", segment_bytes=8 << 20))
    rnd = random.Random(1)
    value = b"x" * 100
    for _ in range(7 * 8 * 700):
        keys = [b"k%d" % rnd.randrange(100_000) for _ in range(100)]
        lg.append_as_leader(build_batch([value] * 100, keys=keys, timestamp=T0), 0, T0)
    os.sync()
    first_dirty, end, _ = lg.cleanable_range(0, lg.log_end_offset, T0)
    plan = lg.cleaning_plan(first_dirty, end, T0)
    result = clean(plan, new_offset_map(1 << 22, 0.9))
    times: dict[str, list[float]] = {"begin_swap": [], "complete_swap": []}
    try:
        for step in (lg.begin_swap, None, lg.complete_swap):
            if step is None:
                fsync_dir(lg.dir)
                continue
            for g in result.groups:
                t = time.perf_counter()
                assert step(plan, result, [g])
                times[step.__name__].append((time.perf_counter() - t) * 1000)
        fsync_dir(lg.dir)
    finally:
        plan.close()
        result.close()
        lg.close()
    out: dict = {"groups": len(result.groups)}
    for name, ts in times.items():
        ts.sort()
        out[name] = {"median_ms": round(statistics.median(ts), 3),
                     "p90_ms": round(ts[int(len(ts) * 0.9)], 3), "max_ms": round(ts[-1], 3)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="swap-steps-"))
    try:
        for r in range(args.rounds):
            print(json.dumps({"round": r, **one_round(base / "t-0")}), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
