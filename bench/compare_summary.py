#!/usr/bin/env python3
"""Summary of a bench/compare_revisions.sh run: per metric, the median of each revision and
the median of the paired (same round) ratios new/old, with the per-round ratios.

    python bench/compare_summary.py OUT.jsonl [OLD NEW]

OLD and NEW (revision labels as in the "rev" field) are needed only for files written
before the lines carried a "role" (old/new) tag.

Throughput ratios: > 1 is better. Latency and CPU ratios: < 1 is better. The verdict
column is mechanical: "worse" by w = how far the median paired ratio is on the bad side of
1; "noise" = the larger relative spread (max - min) / median of either revision's rounds.
"REGRESSED" when w > 10% AND w > noise AND every round's ratio is on the bad side;
"worse, consistent" when every round is worse and w > 3% but not the above; "better" when
every round is better and the gain beats the noise; otherwise "same (within noise)".
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable

Row = dict
# (label, filter, field, higher is better)
METRICS: list[tuple[str, Callable[[Row], bool], str, bool]] = [
    ("produce 1M x 100 B, RF=1 acks=1 (rec/s)",
     lambda r: r["bench"] == "produce" and r["acks"] == "1", "rec_per_s", True),
    ("produce 1M x 100 B, RF=3 acks=all min ISR 2 (rec/s)",
     lambda r: r["bench"] == "produce" and r["acks"] == "all", "rec_per_s", True),
    ("consume RF=1 topic, Python consumer (rec/s)",
     lambda r: r["bench"] == "consume", "rec_per_s", True),
    ("consume RF=1 topic, kcat (rec/s)",
     lambda r: r["bench"] == "consume-kcat", "rec_per_s", True),
    ("e2e latency 5k msg/s RF=3 acks=all, p50 (ms)",
     lambda r: r["bench"] == "latency", "p50_ms", False),
    ("e2e latency, p99 (ms)", lambda r: r["bench"] == "latency", "p99_ms", False),
    ("e2e latency, p99.9 (ms)", lambda r: r["bench"] == "latency", "p99.9_ms", False),
    ("broker CPU s, RF=1 produce (3 brokers)",
     lambda r: r["bench"] == "produce" and r["acks"] == "1", "broker_cpu_s", False),
    ("broker CPU s, RF=3 produce (3 brokers)",
     lambda r: r["bench"] == "produce" and r["acks"] == "all", "broker_cpu_s", False),
    ("broker CPU / client CPU, RF=1 produce",
     lambda r: r["bench"] == "produce" and r["acks"] == "1", "broker_vs_client_cpu", False),
]


def load(path: str, old: str | None, new: str | None) -> list[Row]:
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    for r in rows:
        if "role" not in r:
            if old is None or new is None:
                sys.exit("lines without a role tag: give OLD and NEW")
            r["role"] = {old: "old", new: "new"}.get(r["rev"])
    return rows


def fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}" if abs(x) >= 1 else f"{x:.3f}"


def spread(vals: list[float]) -> float:
    med = statistics.median(vals)
    return (max(vals) - min(vals)) / med if med else 0.0


def verdict(ratios: list[float], higher: bool, noise: float) -> str:
    med = statistics.median(ratios)
    worse = (1 - med) if higher else (med - 1)
    all_worse = all((x < 1) if higher else (x > 1) for x in ratios)
    all_better = all((x > 1) if higher else (x < 1) for x in ratios)
    if all_worse and worse > 0.10 and worse > noise:
        return f"REGRESSED ({worse:.0%} worse; noise {noise:.0%})"
    if all_worse and worse > 0.03:
        return f"worse, consistent ({worse:.0%} worse; noise {noise:.0%})"
    if all_better and -worse > noise:
        return f"better ({-worse:.0%} better; noise {noise:.0%})"
    how = f"{abs(worse):.0%} {'worse' if worse > 0 else 'better'}"
    return f"same within noise ({how}; noise {noise:.0%})"


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    rows = load(argv[0], *(argv[1:3] if len(argv) >= 3 else (None, None)))
    label = {role: sorted({r["rev"] for r in rows if r["role"] == role}) for role in ("old", "new")}
    old, new = ("/".join(label[k]) or "?" for k in ("old", "new"))
    rounds = sorted({r["round"] for r in rows})
    print(f"{len(rounds)} rounds; old = {old}, new = {new}; "
          "cells: median (min-max over the rounds); ratio: median of per-round new/old")
    print()
    print(f"| metric | old {old} | new {new} | paired ratio new/old (rounds) | verdict |")
    print("|---|---|---|---|---|")
    for name, keep, field, higher in METRICS:
        by = {(r["role"], r["round"]): r[field] for r in rows
              if keep(r) and r.get(field) is not None}
        olds = [v for (role, _), v in sorted(by.items()) if role == "old"]
        news = [v for (role, _), v in sorted(by.items()) if role == "new"]
        ratios = [by[("new", rd)] / by[("old", rd)] for rd in rounds
                  if ("old", rd) in by and ("new", rd) in by and by[("old", rd)]]
        if not (olds and news and ratios):
            continue
        cells = [f"{fmt(statistics.median(v))} ({fmt(min(v))}-{fmt(max(v))})" for v in (olds, news)]
        per_round = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"| {name} | {cells[0]} | {cells[1]} | {statistics.median(ratios):.3f} ({per_round}) "
              f"| {verdict(ratios, higher, max(spread(olds), spread(news)))} |")
    print()
    for role in ("old", "new"):
        loads = [r["load1"] for r in rows if r["role"] == role and "load1" in r]
        if loads:
            print(f"load1 during {role}: {min(loads)}-{max(loads)} (median {statistics.median(loads)})")
    for r in rows:  # every record acked / read, no errors: otherwise the figures are not comparable
        bad = (r["bench"] == "produce" and (r["errors"] or r["acked"] != r["records"])) or (
            r["bench"] in ("consume", "consume-kcat") and r["records"] != r["expected"]) or (
            r["bench"] == "latency" and (r["errors"] or r["received"] != r["sent"]))
        if bad:
            print(f"WARNING incomplete run: {json.dumps(r)}")
    ups = [r for r in rows if r["bench"] == "cluster-up"]
    if ups:
        print(f"brokers verified to run the worktree's code: {sum(bool(r.get('verified')) for r in ups)}"
              f" of {len(ups)} cluster starts")


if __name__ == "__main__":
    main(sys.argv[1:])
