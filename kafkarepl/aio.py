"""asyncio helpers the layers share."""

from __future__ import annotations

import asyncio
import sys


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Until `event` is set (True) or `timeout` seconds pass (False).

    Not asyncio.wait_for: before Python 3.12 it returns normally when its task is
    cancelled in the loop turn the event is set (gh-86296), and the cancellation is lost:
    a replica fetcher woken as it was stopped went on fetching while its stop waited for
    it forever. asyncio.timeout (3.11+) keeps the caller's cancellation, and is the
    cheapest of the three per wake-up (bench/RESULTS.md); on 3.10, asyncio.wait."""
    if event.is_set():
        return True
    return await _wait(event, timeout)


async def _wait_in_timeout(event: asyncio.Event, timeout: float | None) -> bool:
    try:
        async with asyncio.timeout(timeout):  # type: ignore[attr-defined,unused-ignore]
            await event.wait()
        return True
    except TimeoutError:
        return False


async def _wait_in_wait(event: asyncio.Event, timeout: float | None) -> bool:
    """Python 3.10: asyncio.wait, which never swallows the caller's cancellation."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait((waiter,), timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)


_wait = _wait_in_timeout if sys.version_info >= (3, 11) else _wait_in_wait
