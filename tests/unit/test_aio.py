"""wait_event: an event wait with a timeout that never loses its caller's cancellation."""

from __future__ import annotations

import asyncio

import pytest

from kafkarepl import aio
from kafkarepl.aio import wait_event


@pytest.mark.parametrize("impl", ["_with_timeout_in_timeout", "_with_timeout_in_wait"])
def test_set_timeout_and_cancelled_as_the_event_comes(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways: asyncio.timeout (3.11+) and the asyncio.wait fallback (3.10), which CI's
    3.11 would never run otherwise."""
    monkeypatch.setattr(aio, "_with_timeout", getattr(aio, impl))

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


@pytest.mark.parametrize("impl", ["_with_timeout_in_timeout", "_with_timeout_in_wait"])
def test_with_timeout_keeps_a_cancellation_that_comes_with_the_result(
        impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request's answer arriving in the loop turn its awaiting task is cancelled (a
    replica fetcher stopped as its Fetch is answered): asyncio.wait_for (< 3.12) returned
    the answer and the fetcher went on, its stop waiting forever."""
    monkeypatch.setattr(aio, "_with_timeout", getattr(aio, impl))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        done.set_result(7)
        assert await aio.with_timeout(done, 1) == 7
        slow = loop.create_future()
        with pytest.raises(asyncio.TimeoutError):
            await aio.with_timeout(slow, 0.01)
        assert slow.cancelled()  # as wait_for: what timed out is cancelled
        for turns in range(3):
            answer = loop.create_future()
            t = asyncio.ensure_future(aio.with_timeout(answer, 10))
            await asyncio.sleep(0)
            answer.set_result("records")
            for _ in range(turns):
                await asyncio.sleep(0)
            if t.cancel():
                with pytest.raises(asyncio.CancelledError):
                    await t
            else:
                assert t.result() == "records"
        waiting = loop.create_future()
        t = asyncio.ensure_future(aio.with_timeout(waiting, 10))
        await asyncio.sleep(0)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert waiting.cancelled()

    asyncio.run(main())


def test_pacer_is_due_every_n_steps():
    from kafkarepl.aio import Pacer

    pace = Pacer(3)
    assert [pace.due() for _ in range(7)] == [False, False, True, False, False, True, False]
