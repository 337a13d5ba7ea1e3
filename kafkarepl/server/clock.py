"""The broker's clock: monotonic for durations and deadlines, wall for timestamps."""

from __future__ import annotations

import time


class SystemClock:
    def monotonic_ms(self) -> int:
        return int(time.monotonic() * 1000)

    def wall_ms(self) -> int:
        return int(time.time() * 1000)
