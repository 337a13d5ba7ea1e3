"""What a broker is waiting on when its shutdown takes too long: the stacks of its
threads and of its asyncio tasks, logged, so a stop that hangs (and is then killed) can be
diagnosed from its log alone."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import threading
import traceback

log = logging.getLogger(__name__)


def thread_stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"thread {names.get(ident, ident)}:\n{''.join(traceback.format_stack(frame))}")
    return "\n".join(out)


def task_stacks(loop: asyncio.AbstractEventLoop) -> str:
    """On the loop's thread only."""
    out = []
    for task in asyncio.all_tasks(loop):
        buf = io.StringIO()
        task.print_stack(file=buf)
        out.append(buf.getvalue())
    return "\n".join(out)


class StallWatchdog:
    """Arms a timer on its own thread: if not disarmed within `after_s`, logs every
    thread's stack at once (a loop blocked in a call shows there) and asks the loop to log
    its tasks' stacks (an await that never ends shows there)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, after_s: float, what: str) -> None:
        self.loop, self.what = loop, what
        self._timer = threading.Timer(after_s, self._fire, args=(after_s,))
        self._timer.daemon = True

    def __enter__(self) -> StallWatchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _fire(self, after_s: float) -> None:
        log.warning("%s has taken more than %.0f s; threads:\n%s", self.what, after_s, thread_stacks())
        try:
            self.loop.call_soon_threadsafe(
                lambda: log.warning("%s: asyncio tasks:\n%s", self.what, task_stacks(self.loop)))
        except RuntimeError:  # the loop is closed
            pass
