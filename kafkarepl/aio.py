"""asyncio helpers the layers share."""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Until `event` is set (True) or `timeout` seconds pass (False).

    Not asyncio.wait_for: before Python 3.12 it returns normally when its task is
    cancelled in the loop turn the event is set (gh-86296), and the cancellation is lost:
    a replica fetcher woken as it was stopped went on fetching while its stop waited for
    it forever. asyncio.wait never swallows the caller's cancellation."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait((waiter,), timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)
