#!/usr/bin/env python3
"""Issue 16's table from bench/issue16.sh's JSON lines: kafkarepl's medians (min-max, n)
beside Apache Kafka 4.0's figures, read from the baseline file's second measurement
(../shared/reference/kafka-baseline.md, or --baseline), with the ratio and the issue's
target. Prints a Markdown table for bench/RESULTS.md.

    python bench/issue16_summary.py /tmp/issue16-*.jsonl [--baseline PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_BASELINE = HERE.parent.parent / "shared" / "reference" / "kafka-baseline.md"


# ------------------------------------------------------------------ Kafka's figures


def _number(text: str) -> float:
    """'141k' -> 141000, '1.12M' -> 1120000, '4.9' -> 4.9."""
    m = re.fullmatch(r"([\d.,]+)\s*([kM]?)", text.strip())
    if not m:
        raise ValueError(f"not a number: {text!r}")
    v = float(m.group(1).replace(",", ""))
    return v * {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]


def kafka_figures(path: Path) -> dict[str, float]:
    """The rows of the baseline's "Second measurement" table that issue 16 compares
    against (same machine kind, 2026-11-23). KeyError names what the file lacks."""
    text = path.read_text()
    start = text.index("## Second measurement")
    rows = {}
    for line in text[start:].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and not set(cells[0]) <= set("-: "):
            rows[cells[0]] = cells[1]

    def cell(label_start: str) -> str:
        for k, v in rows.items():
            if k.startswith(label_start):
                return v
        raise KeyError(f"{path}: no row starting {label_start!r}")

    out: dict[str, float] = {}
    out["produce_rf3"] = _number(re.search(r"([\d.]+[kM]?) rec/s", cell("produce RF=3")).group(1))
    out["produce_rf1"] = _number(re.search(r"([\d.]+[kM]?) rec/s", cell("produce RF=1")).group(1))
    out["consume"] = _number(re.search(r"([\d.]+[kM]?) rec/s", cell("consume")).group(1))
    lat = cell("e2e at 5,000")
    out["lat_p50"] = float(re.search(r"p50 ([\d.]+)", lat).group(1))
    out["lat_p99"] = float(re.search(r"p99 ([\d.]+)", lat).group(1))
    out["lat_p999"] = float(re.search(r"p99\.9 ([\d.]+)", lat).group(1))
    fo = cell("kill -9 of a leader")
    out["failover_gap"] = float(re.search(r"longest ack gap ([\d.]+) s", fo).group(1))
    out["failover_dups"] = float(re.search(r"(\d+) duplicates", fo).group(1))
    out["create_3000"] = float(re.search(r"([\d.]+) s", cell("create 3,000 partitions")).group(1))
    idle = cell("idle with 3,000 partitions")
    out["idle_3000_cpu"] = float(re.search(r"~?([\d.]+)% CPU", idle).group(1))
    out["idle_3000_rss"] = float(re.search(r"~?([\d.]+) MiB RSS", idle).group(1))
    out["metadata_3000"] = float(re.search(r"Metadata median ([\d.]+) ms", idle).group(1))
    return out


# ------------------------------------------------------------------ ours


def load(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        with open(path) as f:
            rows.extend(json.loads(line) for line in f if line.startswith("{"))
    return rows


def values(rows: list[dict], bench: str, key: str | Callable[[dict], float | None],
           where: Callable[[dict], bool] = lambda r: True) -> list[float]:
    get = key if callable(key) else (lambda r: r.get(key))
    out = []
    for r in rows:
        if r.get("bench") == bench and where(r):
            v = get(r)
            if v is not None:
                out.append(float(v))
    return out


def fmt(v: float) -> str:
    if v >= 100_000:
        return f"{v / 1000:,.0f}k"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def summarize(rows: list[dict], kafka: dict[str, float]) -> list[str]:
    lines = [
        "| figure | Kafka 4.0 | kafkarepl median (min-max, n) | kafkarepl / Kafka | target | met |",
        "|---|---|---|---|---|---|",
    ]

    def row(name: str, ours: list[float], ref: float | None, unit: str, target: str,
            ok: Callable[[float, float | None], bool] | None) -> None:
        if not ours:
            lines.append(f"| {name} | {fmt(ref) + unit if ref is not None else 'not measured'} | "
                         "not run | | {target} | |".replace("{target}", target))
            return
        med = statistics.median(ours)
        ratio = f"{med / ref:.2f}x" if ref else ""
        met = "" if ok is None else ("yes" if ok(med, ref) else "**no**")
        lines.append(f"| {name} | {fmt(ref) + unit if ref is not None else 'not measured'} | "
                     f"{fmt(med)}{unit} ({fmt(min(ours))}-{fmt(max(ours))}, n={len(ours)}) | "
                     f"{ratio} | {target} | {met} |")

    k = kafka
    row("produce 1M x 100 B RF 3 acks=all min ISR 2 (rec/s)",
        values(rows, "produce", "rec_per_s", lambda r: r["acks"] == "all"), k["produce_rf3"], "",
        "ahead", lambda m, r: m >= r)
    row("produce RF 1 acks=1 (rec/s)", values(rows, "produce", "rec_per_s", lambda r: r["acks"] == "1"),
        k["produce_rf1"], "", "ahead", lambda m, r: m >= r)
    row("consume, one consumer (rec/s)", values(rows, "consume", "rec_per_s"), k["consume"], "", "ahead",
        lambda m, r: m >= r)
    row("e2e latency at 5,000 msg/s: p50 (ms)", values(rows, "latency", "p50_ms"), k["lat_p50"], " ms",
        "<= 1.0x (item 3)", lambda m, r: m <= r)
    row("e2e latency: p99 (ms)", values(rows, "latency", "p99_ms"), k["lat_p99"], " ms", "<= 0.5x (item 3)",
        lambda m, r: m <= 0.5 * r)
    row("e2e latency: p99.9 (ms)", values(rows, "latency", "p99.9_ms"), k["lat_p999"], " ms", "record", None)
    row("kill -9 of a leader at 2,000 msg/s: longest ack gap (s)",
        values(rows, "failover-kill9", "longest_ack_gap_s"), k["failover_gap"], " s", "<= 1.5 s (item 1)",
        lambda m, r: m <= 1.5)
    row("same: duplicated records (non-idempotent producer)", values(rows, "failover-kill9", "duplicates"),
        k["failover_dups"], "", "0 (item 2)", lambda m, r: m == 0)
    row("same: acknowledged records lost", values(rows, "failover-kill9", "lost"), 0.0, "", "0",
        lambda m, r: m == 0)
    for n in (3000, 10000):
        ref = k["create_3000"] if n == 3000 else None
        row(f"create {n:,} partitions RF 3 until all led with full ISR (s)",
            values(rows, "create", "all_led_full_isr_s", lambda r, n=n: r["partitions"] == n), ref, " s",
            "<= 1.5x (item 4)" if ref else "record (no Kafka figure)",
            (lambda m, r: m <= 1.5 * r) if ref else None)
        refm = k["metadata_3000"] if n == 3000 else None
        row(f"full Metadata with {n:,} partitions, median (ms)",
            values(rows, "metadata-full", "median_ms", lambda r, n=n: r["partitions"] == n), refm, " ms",
            "record", None)
        refc = k["idle_3000_cpu"] if n == 3000 else None
        row(f"idle with {n:,} partitions: CPU per broker, max of 3 (%)",
            values(rows, "idle", "cpu_pct_max", lambda r, n=n: r["partitions"] == n), refc, " %",
            "< 10 % (item 4)" if n == 10000 else "record", (lambda m, r: m < 10) if n == 10000 else None)
        refr = k["idle_3000_rss"] if n == 3000 else None
        row(f"idle with {n:,} partitions: RSS per broker, max of 3 (MiB)",
            values(rows, "idle", "rss_mib_max", lambda r, n=n: r["partitions"] == n), refr, " MiB",
            "record", None)
    row("controller kill -9 with 10,000 partitions: until every partition led (s)",
        values(rows, "controller-failover", "all_led_s", lambda r: r["partitions"] == 10000), None, " s",
        "record (no Kafka figure)", None)
    row("same: the killed broker restarted, until back in every ISR (s)",
        values(rows, "controller-failover", "killed_back_in_isr_s", lambda r: r["partitions"] == 10000), None,
        " s", "record", None)
    row("broker restart with 10,000 partitions: controlled shutdown (s)",
        values(rows, "broker-restart", "controlled_shutdown_s", lambda r: r["partitions"] == 10000), None, " s",
        "record (no Kafka figure)", None)
    row("same: start until serving (s)",
        values(rows, "broker-restart", "start_serving_s", lambda r: r["partitions"] == 10000), None, " s",
        "record", None)
    row("same: start until every replica back in the ISR (s)",
        values(rows, "broker-restart", "all_in_isr_s", lambda r: r["partitions"] == 10000), None, " s",
        "record (no Kafka figure)", None)
    loads = [r["load1"] for r in rows if "load1" in r]
    if loads:
        lines.append("")
        lines.append(f"1-minute load average during the runs: median {statistics.median(loads)}, "
                     f"max {max(loads)} (2 cores).")
    return lines


def before_after(rows: list[dict]) -> list[str]:
    """bench/compare_control_plane.sh's lines (tagged "rev": base|head): medians of each
    control-plane figure for both, and head / base."""
    figures = [
        ("create", "all_led_full_isr_s", "create {n:,} partitions RF 3, all led with full ISR (s)"),
        ("metadata-full", "median_ms", "full Metadata with {n:,} partitions (ms)"),
        ("idle", "cpu_pct_max", "idle with {n:,} partitions: CPU per broker, max (%)"),
        ("idle", "rss_mib_max", "idle with {n:,} partitions: RSS per broker, max (MiB)"),
        ("controller-failover", "all_led_s", "controller kill -9, {n:,} partitions: all led (s)"),
        ("controller-failover", "killed_back_in_isr_s", "same: killed broker back in every ISR (s)"),
        ("broker-restart", "controlled_shutdown_s", "broker restart, {n:,} partitions: controlled shutdown (s)"),
        ("broker-restart", "start_serving_s", "same: start until serving (s)"),
        ("broker-restart", "all_in_isr_s", "same: start until back in every ISR (s)"),
        ("fs-probe", "mkdir_ms", "file system before the {n:,}-partition runs: ms per mkdir"),
        ("fs-probe", "create_ms", "file system before the {n:,}-partition runs: ms per file create"),
    ]
    figures += [("latency", "p50_ms", "e2e latency at 5,000 msg/s: p50 (ms)"),
                ("latency", "p99_ms", "e2e latency: p99 (ms)"),
                ("latency", "p99.9_ms", "e2e latency: p99.9 (ms)")]
    lines = ["| figure | before (base) | after (head) | after / before |", "|---|---|---|---|"]
    sizes: list[int | None] = sorted({r["partitions"] for r in rows if "partitions" in r})
    sizes.append(None)  # figures without a partition count

    def cell(v: list[float], missing: int) -> str:
        miss = f"; {missing} not reached in time or failed" if missing else ""
        if not v:
            return ("not reached in time" if missing else "not run") + (f" ({missing} runs)" if missing else "")
        return f"{fmt(statistics.median(v))} ({fmt(min(v))}-{fmt(max(v))}, n={len(v)}{miss})"

    def unmet(bench: str, key: str, rev: str, n: int | None) -> int:
        return sum(1 for r in rows if r.get("bench") == bench and r.get("rev") == rev
                   and r.get("partitions") == n and (r.get(key) is None and (key in r or "error" in r)))

    for bench, key, label in figures:
        for n in sizes:
            b = values(rows, bench, key, lambda r, n=n: r.get("rev") == "base" and r.get("partitions") == n)
            h = values(rows, bench, key, lambda r, n=n: r.get("rev") == "head" and r.get("partitions") == n)
            mb, mh = unmet(bench, key, "base", n), unmet(bench, key, "head", n)
            if not (b or h or mb or mh):
                continue
            ratio = f"{statistics.median(h) / statistics.median(b):.2f}x" if b and h and statistics.median(b) else ""
            lines.append(f"| {label.format(n=n)} | {cell(b, mb)} | {cell(h, mh)} | {ratio} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", nargs="+")
    ap.add_argument("--baseline", default=os.environ.get("KAFKA_BASELINE", str(DEFAULT_BASELINE)))
    args = ap.parse_args(argv)
    rows = load(args.jsonl)
    if any("rev" in r for r in rows):
        print("\n".join(before_after(rows)))
        return
    kafka = kafka_figures(Path(args.baseline))
    print("\n".join(summarize(rows, kafka)))


if __name__ == "__main__":
    main()
