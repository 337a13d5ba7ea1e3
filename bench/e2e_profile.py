#!/usr/bin/env python3
"""Summaries of py-spy recordings of broker processes (where does the time go?).

    # top functions (self and inclusive) from one or more `py-spy record -f raw` files
    python bench/e2e_profile.py top /tmp/prod-*.txt
    # the longest stretches the event loop was busy without returning to epoll, from
    # `py-spy record --idle -r 200 -f speedscope` (stalls that show up as latency spikes)
    python bench/e2e_profile.py stalls --rate 200 /tmp/ss-1234.json

Recording during a bench run, e.g.:
    py-spy record --nonblocking -r 200 -p <broker pid> -d 5 -f raw -o out.txt
"""

from __future__ import annotations

import argparse
import collections
import json

IDLE_LEAF = "Runner.run"  # uvloop's run_forever: the loop waiting in epoll
BOOT = ("<module>", "spawn_main", "_main", "BaseProcess.", "_broker_process", "run_broker",
        "run:", "Runner.run")  # frames under every sample of a broker's main thread


def top(paths: list[str], n: int) -> None:
    self_c: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    total = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                stack, _, count = line.rstrip().rpartition(" ")
                if not stack:
                    continue
                frames = stack.split(";")
                total += int(count)
                self_c[frames[-1]] += int(count)
                for fr in set(frames):
                    incl[fr] += int(count)
    print(f"{total} samples")
    print("-- self")
    for fr, c in self_c.most_common(n):
        print(f"{c / total:6.1%} {fr}")
    print("-- inclusive")
    for fr, c in incl.most_common(n + 10):
        print(f"{c / total:6.1%} {fr}")


def stalls(path: str, rate: int, n: int) -> None:
    with open(path) as f:
        d = json.load(f)
    frames = d["shared"]["frames"]
    prof = next(p for p in d["profiles"] if "MainThread" in p["name"])
    runs: list[tuple[int, int, collections.Counter]] = []
    start, counts = None, collections.Counter()
    for i, sample in enumerate([*prof["samples"], []]):
        names = [f'{frames[k]["name"]}:{frames[k].get("line")}' for k in sample]
        busy = bool(names) and not names[-1].startswith(IDLE_LEAF + ":")
        if busy:
            if start is None:
                start, counts = i, collections.Counter()
            counts.update({fr for fr in names if not fr.startswith(BOOT)})
        elif start is not None:
            runs.append((start, i, counts))
            start = None
    ms = 1000 / rate
    for s, e, c in sorted(runs, key=lambda r: r[0] - r[1])[:n]:
        print(f"busy {(e - s) * ms:.0f} ms from t={s * ms:.0f} ms:")
        for fr, k in c.most_common(8):
            print(f"    {k}/{e - s} {fr}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("top")
    t.add_argument("paths", nargs="+")
    t.add_argument("-n", type=int, default=15)
    s = sub.add_parser("stalls")
    s.add_argument("path")
    s.add_argument("--rate", type=int, default=200)
    s.add_argument("-n", type=int, default=3)
    args = ap.parse_args()
    if args.cmd == "top":
        top(args.paths, args.n)
    else:
        stalls(args.path, args.rate, args.n)


if __name__ == "__main__":
    main()
