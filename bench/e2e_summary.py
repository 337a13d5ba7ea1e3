#!/usr/bin/env python3
"""Medians of the JSON lines bench/run_e2e.sh wrote, with the ratios the issues ask for.

    python bench/e2e_summary.py /tmp/e2e-*.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys


def load(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        with open(path) as f:
            rows.extend(json.loads(line) for line in f if line.startswith("{"))
    return rows


def med(rows: list[dict], key: str):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def span(rows: list[dict], key: str) -> str:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return f"{med(rows, key)} (min {min(vals)}, max {max(vals)}, n={len(vals)})" if vals else "-"


def main(paths: list[str]) -> None:
    rows = load(paths)
    prod1 = [r for r in rows if r["bench"] == "produce" and r["acks"] == "1" and r["size"] == 100]
    prod3 = [r for r in rows if r["bench"] == "produce" and r["acks"] == "all"]
    cons = [r for r in rows if r["bench"] == "consume" and r["topic"].startswith("r1-")]
    cons_kcat = [r for r in rows
                 if r["bench"] == "consume-kcat" and r["topic"].startswith("r1-")]
    gib = [r for r in rows if r["bench"] == "consume" and r["topic"] == "gib"]
    gib_kcat = [r for r in rows if r["bench"] == "consume-kcat" and r["topic"] == "gib"]
    lat = [r for r in rows if r["bench"] == "latency" and r["topic"] == "lat"]
    fresh = [r for r in rows if r["bench"] == "latency" and r["topic"] == "lat-fresh"]
    for name, rs in [("produce RF=1 acks=1", prod1), ("produce RF=3 acks=all", prod3)]:
        print(f"{name}: rec/s {span(rs, 'rec_per_s')}; p50 {med(rs, 'p50_ms')} ms, "
              f"p99 {med(rs, 'p99_ms')} ms; client CPU {span(rs, 'client_cpu_s')}; "
              f"broker CPU {span(rs, 'broker_cpu_s')}; ratio {span(rs, 'broker_vs_client_cpu')}")
    # RF3 acks=all vs RF1 acks=1, paired within each run
    pairs = [round(b["rec_per_s"] / a["rec_per_s"], 3) for a, b in zip(prod1, prod3, strict=False)]
    if pairs:
        print(f"RF3 acks=all / RF1 acks=1 per run: {pairs}, median {statistics.median(pairs)}")
    print(f"consume 1M: rec/s {span(cons, 'rec_per_s')}; MB/s {span(cons, 'mb_per_s')}; "
          f"client CPU {span(cons, 'client_cpu_s')}; broker CPU {span(cons, 'broker_cpu_s')}")
    print(f"consume 1M with kcat: rec/s {span(cons_kcat, 'rec_per_s')}")
    print(f"latency: p50 {span(lat, 'p50_ms')}; p99 {span(lat, 'p99_ms')}; "
          f"p99.9 {span(lat, 'p99.9_ms')}")
    print(f"latency, fresh cluster: p50 {span(fresh, 'p50_ms')}; p99 {span(fresh, 'p99_ms')}; "
          f"p99.9 {span(fresh, 'p99.9_ms')}")
    for name in ("failover-kill9", "failover-clean"):
        rs = [r for r in rows if r["bench"] == name]
        print(f"{name}: gap s {span(rs, 'longest_ack_gap_s')}; x session "
              f"{span(rs, 'gap_vs_session_timeout')}; p0 exit->first ack "
              f"{span(rs, 'p0_exit_to_first_ack_s')}; lost {[r['lost'] for r in rs]}; "
              f"errors {[r['errors'] for r in rs]}; dups {[r['duplicates'] for r in rs]}")
    for r in rows:
        if r["bench"] in ("failover-kill9", "failover-clean", "controller-failover", "idle",
                          "cluster-up", "bare-sendfile"):
            print(json.dumps(r))
    sf = [r for r in rows if r["bench"] == "bare-sendfile"]
    if sf:
        print(f"bare sendfile of the 1 GiB topic: MB/s {span(sf, 'mb_per_s')}")
    for name, rs in [("confluent-kafka", gib), ("kcat", gib_kcat)]:
        if not (rs and sf):
            continue
        # run_e2e.sh interleaves consume, consume-kcat and one bare round: pair them in order
        ratios = [round(c["mb_per_s"] / s["mb_per_s"], 3) for c, s in zip(rs, sf, strict=False)]
        print(f"1 GiB consume, {name}: MB/s {span(rs, 'mb_per_s')}; vs bare sendfile per run "
              f"{ratios}, median {statistics.median(ratios)}x")
    print("load1 during runs:", [r["load1"] for r in rows])


if __name__ == "__main__":
    main(sys.argv[1:])
