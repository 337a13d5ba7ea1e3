"""wait_event: an event wait with a timeout that never loses its caller's cancellation."""

from __future__ import annotations

import asyncio

import pytest

from kafkarepl import aio
from kafkarepl.aio import wait_event


@pytest.mark.parametrize("impl", ["_wait_in_timeout", "_wait_in_wait"])
def test_set_timeout_and_cancelled_as_the_event_comes(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways: asyncio.timeout (3.11+) and the asyncio.wait fallback (3.10), which CI's
    3.11 would never run otherwise."""
    monkeypatch.setattr(aio, "_wait", getattr(aio, impl))

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
