"""Log lines a client can cause, capped.

A flood of malformed requests, refused connections or stalled readers would otherwise
write a line each to the broker's log: disk and CPU whose cost the client controls
(a fuzzing client makes ~1,000 of them a second). Per message template, at most `burst`
lines go out in each `window_s`; the rest are counted, and one line says how many were
left out once the window has passed (at the template's next line, `flush`, or the timer
the first left-out line asks `schedule` for at the window's end).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

BURST = 20
WINDOW_S = 10.0


@dataclass
class _Window:
    start: float
    level: int
    logged: int = 0
    suppressed: int = 0


class LogLimiter:
    def __init__(self, logger: logging.Logger, burst: int = BURST, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic,
                 schedule: Callable[[float, Callable[[], None]], object] | None = None) -> None:
        self.logger = logger
        self._schedule = schedule
        self.burst = burst
        self.window_s = window_s
        self._clock = clock
        # Keyed by the template: the code's own constants, so the map stays small.
        self._windows: dict[str, _Window] = {}

    def log(self, level: int, msg: str, *args: object) -> None:
        if not self.logger.isEnabledFor(level):
            return
        now = self._clock()
        w = self._windows.get(msg)
        if w is not None and now - w.start >= self.window_s:
            self._summarize(msg, w)
            w = None
        if w is None:
            w = self._windows[msg] = _Window(now, level)
        if w.logged < self.burst:
            w.logged += 1
            self.logger.log(level, msg, *args)
        else:
            if not w.suppressed and self._schedule is not None:
                self._schedule(w.start + self.window_s - now, functools.partial(self._end, msg, w))
            w.suppressed += 1

    def flush(self) -> None:
        """Report the windows that have passed and forget them."""
        now = self._clock()
        for msg, w in list(self._windows.items()):
            if now - w.start >= self.window_s:
                self._summarize(msg, w)
                del self._windows[msg]

    def _end(self, msg: str, w: _Window) -> None:
        # Timers may fire a hair before their time: this window ends now, whatever the clock says.
        if self._windows.get(msg) is w:
            self._summarize(msg, w)
            del self._windows[msg]

    def _summarize(self, msg: str, w: _Window) -> None:
        if w.suppressed:
            self.logger.log(w.level, "%d more lines like %r left out in %.0f s (at most %d per %.0f s)",
                            w.suppressed, msg, self.window_s, self.burst, self.window_s)
