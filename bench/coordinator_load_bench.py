"""Group coordinator load time as offset commits accumulate, before and after the log
cleaner compacts __consumer_offsets (issue 12). Prints one JSON line per figure.

    python bench/coordinator_load_bench.py [--commits 250000,500000,1000000]

For each count N: one __consumer_offsets partition (cleanup.policy=compact, Kafka's
offsets.topic.segment.bytes of 100 MiB) gets N offset records as the coordinator writes
them: 100 groups of 10 partitions each, every group committing all 10 offsets in one
batch, round after round. The log is then rolled (segment.bytes or segment.ms would roll
it; the active segment is never cleaned, in Kafka either). "load" is what a broker does
when it becomes the partition's leader before serving its groups: read the log
(GroupCoordinatorService._read_offsets_log) and replay it (GroupCoordinator.load);
median of 3, page cache warm. Measured before cleaning and after one cleaning
(storage.cleaner.clean + Log.replace_segments, as the broker's cleaner runs them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafkarepl.coordinator.coordinator import GroupCoordinator  # noqa: E402
from kafkarepl.coordinator.group import GroupConfig  # noqa: E402
from kafkarepl.coordinator.offsets import OffsetAndMetadata, encode_key, encode_value  # noqa: E402
from kafkarepl.coordinator.records import build_batch  # noqa: E402
from kafkarepl.server.group_coordinator import GroupCoordinatorService  # noqa: E402
from kafkarepl.storage import Log, LogConfig  # noqa: E402
from kafkarepl.storage.cleaner import clean  # noqa: E402

GROUPS, PARTITIONS = 100, 10
T0 = 1_700_000_000_000


def write_commits(lg: Log, n: int) -> None:
    keys = {(g, p): encode_key(f"group-{g}", "events", p) for g in range(GROUPS) for p in range(PARTITIONS)}
    written, rnd = 0, 0
    while written < n:
        for g in range(GROUPS):
            now = T0 + rnd * 100
            recs = [(keys[(g, p)], encode_value(OffsetAndMetadata(rnd * 1000 + p, 0, "", now)))
                    for p in range(PARTITIONS)]
            lg.append_as_leader(build_batch(recs, now), 0, now)
            written += PARTITIONS
            if written >= n:
                break
        rnd += 1


def load_seconds(lg: Log) -> tuple[float, int]:
    times, applied = [], 0
    for _ in range(3):
        core = GroupCoordinator(GroupConfig(), 1)
        t0 = time.perf_counter()
        records, _open = asyncio.run(GroupCoordinatorService._read_offsets_log(SimpleNamespace(log=lg)))
        applied = core.load(0, records)
        times.append(time.perf_counter() - t0)
        assert len(core.groups) == GROUPS
    return sorted(times)[1], applied


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", default="250000,500000,1000000")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="coord-load-"))
    try:
        for n in (int(x) for x in args.commits.split(",")):
            d = root / f"__consumer_offsets-{n}"
            lg = Log.open(d, LogConfig(cleanup_policy="compact", segment_bytes=100 << 20))
            try:
                write_commits(lg, n)
                lg.roll()
                before, applied_before = load_seconds(lg)
                bytes_before = lg.size_in_bytes
                fd, end, _ = lg.cleanable_range(0, lg.log_end_offset, T0 + 10**9)
                plan = lg.cleaning_plan(fd, end, T0 + 10**9)
                try:
                    assert lg.replace_segments(plan, clean(plan))
                finally:
                    plan.close()
                after, applied_after = load_seconds(lg)
                print(json.dumps({"bench": "coordinator-load", "commits": n, "before_s": round(before, 3),
                                  "records_before": applied_before, "bytes_before": bytes_before,
                                  "after_s": round(after, 4), "records_after": applied_after,
                                  "bytes_after": lg.size_in_bytes, "ratio": round(after / before, 4),
                                  "load1": os.getloadavg()[0]}), flush=True)
            finally:
                lg.close()
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
