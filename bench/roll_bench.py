"""Log.roll() on the calling thread (a broker's event loop) while another thread writes
and fsyncs 8 MiB at a time (a busy journal, as under produce load): the rolled segment's
index shrinks on the janitor's thread (as shipped) against inline (as before). Rounds
alternate; prints the percentiles of each.

    python bench/roll_bench.py [--rounds 3] [--rolls 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafkarepl.storage import Log, LogConfig  # noqa: E402
from kafkarepl.storage import segment as segmod  # noqa: E402
from kafkarepl.storage.janitor import JANITOR  # noqa: E402
from tests.batches import build_batch  # noqa: E402


def _busy_journal(stop: threading.Event, d: Path) -> None:
    buf = b"x" * (1 << 20)
    with open(d / "busy", "wb") as f:
        while not stop.is_set():
            for _ in range(8):
                f.write(buf)
            f.flush()
            os.fsync(f.fileno())
            f.seek(0)


def roll_times(deferred: bool, rolls: int) -> list[float]:
    d = Path(tempfile.mkdtemp(dir="/var/tmp"))
    shipped = segmod.LogSegment.make_inactive
    if not deferred:
        segmod.LogSegment.make_inactive = lambda self, shrink_later=False: shipped(self, False)  # type: ignore[method-assign]
    stop = threading.Event()
    writer = threading.Thread(target=_busy_journal, args=(stop, d))
    writer.start()
    try:
        lg = Log.open(d / "t-0", LogConfig())
        out = []
        for _ in range(rolls):
            for _ in range(50):
                now = int(time.time() * 1000)
                lg.append_as_leader(build_batch(100, timestamp=now), 0, now)
            t0 = time.perf_counter()
            lg.roll()
            out.append(time.perf_counter() - t0)
        lg.close()
        JANITOR.wait(30)
        return out
    finally:
        stop.set()
        writer.join()
        segmod.LogSegment.make_inactive = shipped  # type: ignore[method-assign]
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rolls", type=int, default=200)
    args = ap.parse_args()
    res: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.rounds):
        for deferred in (False, True):
            res[deferred] += roll_times(deferred, args.rolls)
    for deferred, xs in res.items():
        xs.sort()

        def q(p: float, xs: list[float] = xs) -> float:
            return xs[int(p * (len(xs) - 1))] * 1000
        print(f"{'deferred' if deferred else 'inline'}: n={len(xs)} p50 {q(.5):.3f} ms p90 {q(.9):.3f} "
              f"p99 {q(.99):.3f} max {xs[-1] * 1000:.3f}")


if __name__ == "__main__":
    main()
