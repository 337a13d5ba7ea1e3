"""asyncio helpers the layers share.

Not asyncio.wait_for: before Python 3.12 it returns normally when its task is cancelled in
the loop turn the awaited thing completes (gh-86296), and the cancellation is lost. A
replica fetcher's request answered as the fetcher was stopped went on fetching while its
stop waited for it forever (a CI run's broker shutdown hung that way, its stacks dumped by
server/stall_dump.py). asyncio.timeout (3.11+) keeps the caller's cancellation; on 3.10,
asyncio.wait, which never swallows it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Until `event` is set (True) or `timeout` seconds pass (False). asyncio.timeout is
    also the cheapest way per wake-up (bench/RESULTS.md)."""
    if event.is_set():
        return True
    try:
        await with_timeout(event.wait(), timeout)
        return True
    except asyncio.TimeoutError:
        return False


async def with_timeout(aw: Awaitable[T], timeout: float | None) -> T:
    """`aw`'s result, or TimeoutError (asyncio.TimeoutError) after `timeout` seconds, `aw`
    then cancelled: asyncio.wait_for that keeps the caller's cancellation (module
    docstring)."""
    return await _with_timeout(aw, timeout)


async def _with_timeout_in_timeout(aw: Awaitable[T], timeout: float | None) -> T:
    async with asyncio.timeout(timeout):  # type: ignore[attr-defined,unused-ignore]
        return await aw


async def _with_timeout_in_wait(aw: Awaitable[T], timeout: float | None) -> T:
    fut = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait((fut,), timeout=timeout)
    except BaseException:
        fut.cancel()
        raise
    if not done:
        fut.cancel()
        raise asyncio.TimeoutError
    return fut.result()


_with_timeout = _with_timeout_in_timeout if sys.version_info >= (3, 11) else _with_timeout_in_wait


class Pacer:
    """For a loop on the event loop whose length a client sets (the partitions of one
    request): `if pacer.due(): await asyncio.sleep(0)` lets every other task run once
    every `every` steps, so one large request does not stall the broker."""

    __slots__ = ("every", "_left")

    def __init__(self, every: int = 1000) -> None:
        self.every = every
        self._left = every

    def due(self) -> bool:
        self._left -= 1
        if self._left > 0:
            return False
        self._left = self.every
        return True


def more_partitions_than(topics: list[dict], limit: int, key: str = "partitions") -> bool:
    """Whether a request body's topics name more than `limit` partitions (entries of
    each topic's `key` list): a request whose loops are paced."""
    n = 0
    for topic in topics:
        n += len(topic[key] or ())
        if n > limit:
            return True
    return False


async def paced(items: Iterable[T], every: int = 1000) -> AsyncIterator[T]:
    """`items`, letting every other task run once every `every` of them: Pacer for a
    loop (or a comprehension turned into one) over what a client sent."""
    pace = Pacer(every)
    for item in items:
        if pace.due():
            await asyncio.sleep(0)
        yield item
