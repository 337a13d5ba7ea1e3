"""Purgatory.check's cost per call: a key with 3 waiting ops that do not complete (an
acks=all produce's HW not reached yet), against the Purgatory of another revision.

    python bench/purgatory_check_bench.py [--against REV] [--rounds 15] [--checks 200000]

Alternates the two in one process and prints the median ns per check and the ratio."""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Waiting:
    completed = False
    keys = ("k",)
    deadline_ms = 1 << 62

    def try_complete_key(self, key: str, now_ms: int) -> bool:
        return False

    def try_complete(self, now_ms: int) -> bool:
        return False


def load_revision(rev: str | None):  # type: ignore[no-untyped-def]
    """The purgatory module of `rev` (None: the working tree), loaded the same way for
    both sides (a module's placement alone moved the figure ~10%)."""
    src = "kafkarepl/replication/purgatory.py"
    text = (ROOT / src).read_text() if rev is None else subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{src}"], check=True, capture_output=True, text=True).stdout
    text = text.replace("from .partition import", "from kafkarepl.replication.partition import")
    name = f"purgatory_at_{rev or 'worktree'}"
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def ns_per_check(module, n: int) -> float:  # type: ignore[no-untyped-def]
    p = module.Purgatory()
    p._watchers["k"] = [Waiting() for _ in range(3)]
    t0 = time.perf_counter()
    for _ in range(n):
        p.check("k", 0)
    return (time.perf_counter() - t0) / n * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default="HEAD~1")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--checks", type=int, default=200_000)
    a = ap.parse_args()
    other, current = load_revision(a.against), load_revision(None)
    runs: dict[str, list[float]] = {a.against: [], "current": []}
    for i in range(a.rounds):  # ABBA: neither side always runs first
        order = [(a.against, other), ("current", current)]
        for name, module in order if i % 2 == 0 else order[::-1]:
            runs[name].append(ns_per_check(module, a.checks))
    med = {k: statistics.median(v) for k, v in runs.items()}
    for k, v in med.items():
        print(f"{k}: median {v:.0f} ns per check")
    print(f"current / {a.against}: {med['current'] / med[a.against]:.3f}")


if __name__ == "__main__":
    main()
