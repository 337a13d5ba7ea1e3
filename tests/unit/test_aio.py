"""wait_event: an event wait with a timeout that never loses its caller's cancellation."""

from __future__ import annotations

import asyncio

import pytest

from kafkarepl.aio import wait_event


def test_set_timeout_and_cancelled_as_the_event_comes() -> None:
    async def main() -> None:
        ev = asyncio.Event()
        assert await wait_event(ev, 0.01) is False
        ev.set()
        assert await wait_event(ev, 0.01) is True
        ev.clear()
        for turns in range(3):  # the cancellation arrives 0-2 loop turns after the event
            t = asyncio.ensure_future(wait_event(ev, 10))
            await asyncio.sleep(0)
            ev.set()
            for _ in range(turns):
                await asyncio.sleep(0)
            cancelled = t.cancel()
            if cancelled:
                with pytest.raises(asyncio.CancelledError):
                    await t  # with asyncio.wait_for (Python < 3.12) it returned normally
            else:
                assert t.result() is True
            ev.clear()
        assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]  # no waiter left

    asyncio.run(main())
