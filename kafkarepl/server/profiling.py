"""Opt-in cProfile of a broker's event-loop thread, for finding control-plane costs.

KAFKAREPL_CPROFILE=<dir> in a broker's environment profiles its main thread (the asyncio
loop: everything but kazoo's and the I/O pool's threads) and writes
<dir>/broker-<pid>-<n>.prof on the n-th SIGUSR2 (n = 1, 2, ...; each holds what ran since
the previous one, profiling goes on) and <dir>/broker-<pid>-exit.prof at a clean stop.
Read with `python -m pstats`. Off by default: it costs CPU; without it SIGUSR2 is ignored.
"""

from __future__ import annotations

import cProfile
import os
import signal


class _Recorder:
    def __init__(self, target: str) -> None:
        self.target = target
        self.prof = cProfile.Profile()
        self.n = 0

    def dump(self, name: str) -> None:
        self.prof.disable()
        self.prof.dump_stats(os.path.join(self.target, f"broker-{os.getpid()}-{name}.prof"))
        self.prof = cProfile.Profile()
        self.prof.enable()

    def on_signal(self, *_: object) -> None:
        self.n += 1
        self.dump(str(self.n))


_recorders: list[_Recorder] = []


def install_from_env() -> None:
    target = os.environ.get("KAFKAREPL_CPROFILE")
    if not target:  # a stray SIGUSR2 (its default action ends the process) does nothing
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        return
    os.makedirs(target, exist_ok=True)
    rec = _Recorder(target)
    signal.signal(signal.SIGUSR2, rec.on_signal)
    _recorders.append(rec)
    rec.prof.enable()


def dump_all() -> None:
    """Write the profile now (before a clean stop's os._exit)."""
    for rec in _recorders:
        rec.dump("exit")
