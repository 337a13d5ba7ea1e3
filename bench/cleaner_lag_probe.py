"""How long a thread waiting on a 1 ms timer (as an idle event loop) is delayed while a
cleaner thread cleans a log in the same process, by the cleaner thread's priority:

    python bench/cleaner_lag_probe.py [rounds] [--mib 512]

Per round and mode (no cleaning; cleaner at nice 0; nice 19; SCHED_IDLE), one JSON line:
the oversleep of the 1 ms sleeps (p50/p99/max, ms) and the latency of 150-byte write()s
to a file in the same directory. The log (keys drawn from 1,000,000, 100-byte values, 64
MiB segments) is cleaned again each time and never swapped. Separates what the cleaner
itself costs a waiting thread (GIL, CPU) from what the rest of a host does to a broker.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafkarepl.storage import Log, LogConfig  # noqa: E402
from kafkarepl.storage.cleaner import STAGING_DIR, MapBuffer, clean  # noqa: E402
from tests.batches import build_batch  # noqa: E402

T0 = 1_700_000_000_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", type=int, nargs="?", default=4)
    ap.add_argument("--mib", type=int, default=512)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="lag_probe_"))
    lg = Log.open(d / "t-0", LogConfig(cleanup_policy="compact", segment_bytes=64 << 20))
    rng = random.Random(7)
    value = os.urandom(100)
    while lg.size_in_bytes < (args.mib << 20):
        keys = [b"key-%07d" % rng.randrange(1_000_000) for _ in range(5000)]
        lg.append_as_leader(build_batch([value] * 5000, keys=keys, timestamp=T0), 0, T0)
    lg.roll()
    os.sync()
    buf = MapBuffer(128 << 20)
    sys.setswitchinterval(0.001)  # as the broker sets it while cleaner threads exist

    def cleaning(mode: str) -> None:
        tid = threading.get_native_id()
        if mode == "idle":
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        elif mode == "nice19":
            os.setpriority(os.PRIO_PROCESS, tid, 19)
        fd, end, _ = lg.cleanable_range(0, lg.log_end_offset, T0)
        plan = lg.cleaning_plan(fd, end, T0)
        try:
            clean(plan, None, None, 128 << 20, 0.9, buf)
        finally:
            plan.close()
            shutil.rmtree(lg.dir / STAGING_DIR, ignore_errors=True)

    def probe(stop: threading.Event, out: dict) -> None:
        lags, writes = [], []
        wfd = os.open(d / "probe.log", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        rec = os.urandom(150)
        while not stop.is_set():
            t = time.perf_counter()
            time.sleep(0.001)
            lags.append((time.perf_counter() - t - 0.001) * 1000)
            t = time.perf_counter()
            os.write(wfd, rec)
            writes.append((time.perf_counter() - t) * 1000)
        os.close(wfd)
        out["lags"], out["writes"] = sorted(lags), sorted(writes)

    def run(mode: str) -> dict:
        stop, out = threading.Event(), {}
        th = threading.Thread(target=probe, args=(stop, out))
        th.start()
        t = time.perf_counter()
        if mode == "none":
            time.sleep(1.0)
        else:
            c = threading.Thread(target=cleaning, args=(mode,))
            c.start()
            c.join()
        seconds = time.perf_counter() - t
        stop.set()
        th.join()
        lags, writes = out["lags"], out["writes"]
        return {"mode": mode, "s": round(seconds, 2), "n": len(lags), "sleep_p50": round(lags[len(lags) // 2], 3),
                "sleep_p99": round(lags[int(len(lags) * 0.99)], 2), "sleep_max": round(lags[-1], 2),
                "write_p99": round(writes[int(len(writes) * 0.99)], 3), "write_max": round(writes[-1], 2),
                "load1": round(os.getloadavg()[0], 2)}

    try:
        for _ in range(args.rounds):
            for mode in ("none", "nice0", "nice19", "idle"):
                print(json.dumps(run(mode)), flush=True)
    finally:
        lg.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
