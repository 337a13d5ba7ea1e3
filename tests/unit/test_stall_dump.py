"""A shutdown that hangs logs what it waits on: thread stacks, and asyncio task stacks."""

from __future__ import annotations

import asyncio
import logging

from kafkarepl.server.stall_dump import StallWatchdog


def test_a_stalled_wait_is_logged_with_the_task_that_waits(caplog) -> None:
    async def stuck_somewhere_identifiable() -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        task = asyncio.ensure_future(stuck_somewhere_identifiable())
        with StallWatchdog(asyncio.get_running_loop(), 0.05, "the test's shutdown"):
            await asyncio.sleep(0.3)
        task.cancel()

    with caplog.at_level(logging.WARNING, logger="kafkarepl.server.stall_dump"):
        asyncio.run(main())
    text = caplog.text
    assert "the test's shutdown has taken more than 0 s; threads:" in text
    assert "thread MainThread" in text and "asyncio tasks:" in text
    assert "stuck_somewhere_identifiable" in text


def test_a_quick_one_logs_nothing(caplog) -> None:
    async def main() -> None:
        with StallWatchdog(asyncio.get_running_loop(), 0.5, "quick"):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.6)

    with caplog.at_level(logging.WARNING, logger="kafkarepl.server.stall_dump"):
        asyncio.run(main())
    assert not caplog.records
