"""The cost of one woken event wait with a timeout (the follower fetch sessions' long
poll, the replica fetcher's backoff): kafkarepl.aio.wait_event against asyncio.wait_for,
which it replaced (wait_for loses a cancellation before Python 3.12, gh-86296).

    python bench/event_wait_bench.py [--waits 20000] [--rounds 5]

Each wait is woken by another task one loop turn later (uvloop, as the broker); prints
the median microseconds per woken wait of each, alternating, and the ratio."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import uvloop

from kafkarepl.aio import wait_event

Wait = Callable[[asyncio.Event, float], Awaitable[bool]]


async def wait_for(ev: asyncio.Event, timeout: float) -> bool:
    try:
        await asyncio.wait_for(ev.wait(), timeout)
        return True
    except asyncio.TimeoutError:
        return False


async def per_wait_us(fn: Wait, n: int) -> float:
    ev = asyncio.Event()

    async def setter() -> None:
        while True:
            await asyncio.sleep(0)
            ev.set()

    task = asyncio.ensure_future(setter())
    t0 = time.perf_counter()
    for _ in range(n):
        ev.clear()
        await fn(ev, 1.0)
    elapsed = time.perf_counter() - t0
    task.cancel()
    return elapsed / n * 1e6


async def main(waits: int, rounds: int) -> None:
    out: dict[str, list[float]] = {"asyncio.wait_for": [], "wait_event": []}
    for _ in range(rounds):
        out["asyncio.wait_for"].append(await per_wait_us(wait_for, waits))
        out["wait_event"].append(await per_wait_us(wait_event, waits))
    med = {k: statistics.median(v) for k, v in out.items()}
    for k, v in out.items():
        print(f"{k}: median {med[k]:.2f} us per woken wait ({', '.join(f'{x:.1f}' for x in v)})")
    print(f"wait_event / wait_for: {med['wait_event'] / med['asyncio.wait_for']:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--waits", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    uvloop.install()
    asyncio.run(main(a.waits, a.rounds))
