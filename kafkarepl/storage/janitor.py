"""One background thread for the storage work whose cost is the kernel freeing blocks and
page cache: the last close of a deleted segment file (17 ms per cached 64 MiB here) and the
removal of a deleted partition's directory (~29 ms per 512 MiB). On the event loop either
stalls every request of the broker; Kafka does both on a scheduler thread too.

Descriptors of deleted files are closed after a delay (the topic's file.delete.delay.ms,
as Kafka deletes a segment's files): a Fetch answer may still be sending from one, and a number
closed under it could be reused by another file meanwhile. Once their owner (a broker's
log directory) has no readers left, at its stop, close_now closes them at once: an
embedded broker stopped in a longer-lived process frees the disk space then, not a minute
later."""

from __future__ import annotations

import functools
import heapq
import itertools
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

_MAX_WAIT_S = 3600.0


class FileJanitor:
    def __init__(self) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._busy = 0  # jobs queued or running (delayed closes count once due)
        self._delayed: list[tuple[float, int, int, object]] = []  # heap of (due, seq, fd, owner)
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def close(self, fd: int, delay_s: float = 0.0, owner: object = None) -> None:
        """Close a descriptor of a deleted file, `delay_s` from now (or at close_now(owner))."""
        if delay_s <= 0:
            self._submit(functools.partial(_close_quietly, fd))
            return
        with self._cond:
            heapq.heappush(self._delayed, (time.monotonic() + delay_s, next(self._seq), fd, owner))
            self._start()
            self._cond.notify_all()

    def close_now(self, owner: object) -> None:
        """Make the delayed closes of `owner` due now (its readers are gone)."""
        with self._cond:
            mine = [e for e in self._delayed if e[3] == owner]
            if not mine:
                return
            self._delayed = [e for e in self._delayed if e[3] != owner]
            heapq.heapify(self._delayed)
            for e in mine:
                self._jobs.append(functools.partial(_close_quietly, e[2]))
            self._busy += len(mine)
            self._start()
            self._cond.notify_all()

    def remove_tree(self, path: Path) -> None:
        """Remove a directory already renamed out of the way (`-delete`)."""
        self._submit(lambda: shutil.rmtree(path, ignore_errors=True))

    def wait(self, timeout: float | None = None) -> bool:
        """Until every job submitted so far is done (delayed closes not yet due aside);
        False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout)

    def _submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            self._busy += 1
            self._start()
            self._cond.notify_all()

    def _start(self) -> None:  # with self._cond held
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="storage-janitor", daemon=True)
            self._thread.start()

    def _next_job(self) -> Callable[[], None]:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    self._jobs.append(functools.partial(_close_quietly, heapq.heappop(self._delayed)[2]))
                    self._busy += 1
                if self._jobs:
                    return self._jobs.popleft()
                # At most an hour at a time: a topic's file.delete.delay.ms may be up to
                # Long.MAX_VALUE, past what a lock's timeout can take (OverflowError).
                self._cond.wait(min(self._delayed[0][0] - now, _MAX_WAIT_S) if self._delayed else None)

    def _run(self) -> None:
        while True:
            job = self._next_job()
            try:
                job()
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


JANITOR = FileJanitor()  # one per process: its jobs are independent of any one log
