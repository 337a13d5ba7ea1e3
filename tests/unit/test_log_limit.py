"""LogLimiter: the lines a client can cause, at most `burst` per template and window, the
rest counted and reported once the window has passed."""

from __future__ import annotations

import logging

import pytest

from kafkarepl.server.log_limit import LogLimiter


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def logger(caplog):
    caplog.set_level(logging.INFO, logger="test.log_limit")
    return logging.getLogger("test.log_limit")


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.log_limit"]


def test_burst_then_one_summary_when_the_window_has_passed(logger, caplog) -> None:
    clock = Clock()
    lim = LogLimiter(logger, burst=3, window_s=10, clock=clock)
    for i in range(50):
        lim.log(logging.INFO, "closing connection from %s: %s", "peer", i)
    assert messages(caplog) == [f"closing connection from peer: {i}" for i in range(3)]
    clock.t += 9.9
    lim.flush()  # the window has not passed yet
    assert len(messages(caplog)) == 3
    clock.t += 0.1
    lim.log(logging.INFO, "closing connection from %s: %s", "peer", "next")
    out = messages(caplog)
    assert out[3].startswith("47 more lines like 'closing connection from %s: %s' left out in 10 s"), out
    assert out[4] == "closing connection from peer: next"
    assert caplog.records[-2].levelno == logging.INFO


def test_templates_are_limited_apart_and_flush_reports_at_their_level(logger, caplog) -> None:
    clock = Clock()
    lim = LogLimiter(logger, burst=1, window_s=5, clock=clock)
    for _ in range(4):
        lim.log(logging.WARNING, "max.connections.per.ip=%d reached for %s: refusing", 10, "ip")
        lim.log(logging.INFO, "closing connection from %s: %s", "peer", "x")
    assert len(messages(caplog)) == 2  # one of each
    clock.t += 5
    lim.flush()
    summaries = [r for r in caplog.records if "left out" in r.getMessage()]
    assert sorted((r.levelno, r.getMessage().split()[0]) for r in summaries) == [
        (logging.INFO, "3"), (logging.WARNING, "3")]
    lim.flush()  # reported once, windows forgotten
    assert len([r for r in caplog.records if "left out" in r.getMessage()]) == 2
    lim.log(logging.INFO, "closing connection from %s: %s", "peer", "again")
    assert messages(caplog)[-1] == "closing connection from peer: again"


def test_first_left_out_line_schedules_the_flush_at_the_windows_end(logger, caplog) -> None:
    clock = Clock()
    scheduled: list[tuple[float, object]] = []
    lim = LogLimiter(logger, burst=2, window_s=10, clock=clock,
                     schedule=lambda delay, fn: scheduled.append((delay, fn)))
    lim.log(logging.INFO, "m %d", 1)
    clock.t += 4
    for i in range(5):
        lim.log(logging.INFO, "m %d", i)
    assert [d for d, _ in scheduled] == [6.0]  # once, at the window's end
    clock.t += 6
    clock.t -= 0.001  # timers may fire a hair early: the window ends all the same
    scheduled[0][1]()  # what the event loop would call
    assert messages(caplog)[-1].startswith("4 more lines like 'm %d' left out")


def test_disabled_level_costs_no_window(logger, caplog) -> None:
    lim = LogLimiter(logger, burst=1, window_s=10, clock=Clock())
    for _ in range(3):
        lim.log(logging.DEBUG, "connection from %s ended: %s", "p", "eof")
    assert messages(caplog) == [] and not lim._windows
