#!/usr/bin/env python3
"""Per metric: median of each revision and the median of the paired (same round) ratios.

    python bench/compare_summary.py OUT.jsonl OLD NEW
"""

from __future__ import annotations

import json
import statistics
import sys

# (label, bench filter, field, higher is better)
METRICS = [
    ("produce RF=1 acks=1 (rec/s)", lambda r: r["bench"] == "produce" and r["acks"] == "1", "rec_per_s", True),
    ("produce RF=3 acks=all (rec/s)", lambda r: r["bench"] == "produce" and r["acks"] == "all", "rec_per_s", True),
    ("broker CPU / client CPU, RF=1", lambda r: r["bench"] == "produce" and r["acks"] == "1",
     "broker_vs_client_cpu", False),
    ("consume (rec/s)", lambda r: r["bench"] == "consume", "rec_per_s", True),
    ("e2e latency p50 (ms)", lambda r: r["bench"] == "latency", "p50_ms", False),
    ("e2e latency p99 (ms)", lambda r: r["bench"] == "latency", "p99_ms", False),
]


def main(path: str, old: str, new: str) -> None:
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    print(f"| metric | {old} median | {new} median | paired ratio {new}/{old} (per round) |")
    print("|---|---|---|---|")
    for label, keep, field, _higher in METRICS:
        by = {(r["rev"], r["round"]): r.get(field) for r in rows if keep(r) and r.get(field) is not None}
        olds = [v for (rev, _), v in by.items() if rev == old]
        news = [v for (rev, _), v in by.items() if rev == new]
        rounds = sorted({rd for (_, rd) in by})
        ratios = [by[(new, rd)] / by[(old, rd)] for rd in rounds if (old, rd) in by and (new, rd) in by and by[(old, rd)]]
        if not olds or not news:
            continue
        print(f"| {label} | {statistics.median(olds):g} | {statistics.median(news):g} | "
              f"{statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)}) |")


if __name__ == "__main__":
    main(*sys.argv[1:4])
