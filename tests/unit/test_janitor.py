"""storage/janitor.py: closes and removals off the caller's thread, delayed closes."""

from __future__ import annotations

import os
import time

from kafkarepl.storage.janitor import FileJanitor


def _open(tmp_path, name: str) -> int:
    return os.open(tmp_path / name, os.O_CREAT | os.O_RDWR, 0o644)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_delayed_close_waits_for_its_delay_and_wait_does_not(tmp_path) -> None:
    j = FileJanitor()
    late, soon, now = _open(tmp_path, "a"), _open(tmp_path, "b"), _open(tmp_path, "c")
    j.close(late, 30.0)
    j.close(soon, 0.1)
    j.close(now)
    doomed = tmp_path / "gone-delete"
    (doomed / "x").mkdir(parents=True)
    j.remove_tree(doomed)
    t0 = time.monotonic()
    assert j.wait(10)  # the immediate jobs only: not the 30 s close
    assert time.monotonic() - t0 < 5
    assert _closed(now) and not doomed.exists()
    assert not _closed(late)
    deadline = time.monotonic() + 10
    while not _closed(soon):  # the 0.1 s close comes due while the 30 s one still waits
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not _closed(late)
    os.close(late)
