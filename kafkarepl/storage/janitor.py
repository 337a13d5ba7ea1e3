"""One background thread for the storage work whose cost is the kernel freeing blocks and
page cache: the last close of a deleted segment file (17 ms per cached 64 MiB here), the
removal of a deleted partition's directory (~29 ms per 512 MiB), and the shrink of a
rolled segment's index files from their preallocated size (0.7-2.7 ms each under a busy
journal). On the event loop either
stalls every request of the broker; Kafka does both on a scheduler thread too.

Descriptors of deleted files are closed after a delay (the topic's file.delete.delay.ms,
as Kafka deletes a segment's files): a Fetch answer may still be sending from one, and a number
closed under it could be reused by another file meanwhile. Once their owner (a broker's
log directory) has no readers left, at its stop, close_now closes them at once: an
embedded broker stopped in a longer-lived process frees the disk space then, not a minute
later.

A descriptor that Fetch answers may send from (one with an owner) keeps its NUMBER for at
least REUSE_GUARD_S, whatever the delay: a FileRange holds the bare number, and a number
closed while an answer still waits in a connection's queue would be reused by the next
file opened, so that answer would send that file's bytes as the partition's records.
Under a shorter delay (file.delete.delay.ms=0 included) the data is released at the delay
instead: /dev/null is dup2'ed over the descriptor, which frees the file's space at once and
makes a late sendfile fail (EINVAL; pread reads nothing), so the connection is closed, as
Kafka's transferTo fails on a closed channel; the number is closed once the guard is over."""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)
_MAX_WAIT_S = 3600.0
# Kafka's default file.delete.delay.ms: the fixed delay every retired descriptor had here
# before the delay became a topic config.
REUSE_GUARD_S = 60.0


class FileJanitor:
    def __init__(self) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._busy = 0  # jobs queued or running (delayed closes count once due)
        # heap of (due, seq, fd, owner, release): release: only the data goes (module docstring)
        self._delayed: list[tuple[float, int, int, object, bool]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._null = -1  # /dev/null, opened at the first release

    def close(self, fd: int, delay_s: float = 0.0, owner: object = None) -> None:
        """Close a descriptor of a deleted file, `delay_s` from now (or at close_now(owner)).
        With an owner (readers may send from it) the number is kept REUSE_GUARD_S at least,
        only its data released at `delay_s` (module docstring)."""
        guarded = owner is not None and delay_s < REUSE_GUARD_S
        if delay_s <= 0 and not guarded:
            self._submit(functools.partial(_close_quietly, fd))
            return
        with self._cond:
            now = time.monotonic()
            if guarded:
                if delay_s <= 0:
                    self._jobs.append(functools.partial(self._release, fd))
                    self._busy += 1
                else:
                    heapq.heappush(self._delayed, (now + delay_s, next(self._seq), fd, owner, True))
                delay_s = REUSE_GUARD_S
            heapq.heappush(self._delayed, (now + delay_s, next(self._seq), fd, owner, False))
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
            # A release entry has its close entry too: closed once (never a dup2 onto a
            # number already closed, which another file may hold by then).
            closes = [e for e in mine if not e[4]]
            for e in closes:
                self._jobs.append(functools.partial(_close_quietly, e[2]))
            self._busy += len(closes)
            self._start()
            self._cond.notify_all()

    def shrink(self, fd: int, size: int) -> threading.Event:
        """ftruncate `fd` (a descriptor of its own, closed after) to `size`; the event is
        set once done. A failure leaves the file longer than its entries, which the next
        open's sanity check finds (the index is rebuilt from the log)."""
        done = threading.Event()

        def job() -> None:
            try:
                os.ftruncate(fd, size)
            except OSError as exc:
                log.warning("index file shrink to %d bytes failed: %s", size, exc)
            finally:
                _close_quietly(fd)
                done.set()
        self._submit(job)
        return done

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
                    _due, _seq, fd, _owner, release = heapq.heappop(self._delayed)
                    self._jobs.append(functools.partial(self._release if release else _close_quietly, fd))
                    self._busy += 1
                if self._jobs:
                    return self._jobs.popleft()
                # At most an hour at a time: a topic's file.delete.delay.ms may be up to
                # Long.MAX_VALUE, past what a lock's timeout can take (OverflowError).
                self._cond.wait(min(self._delayed[0][0] - now, _MAX_WAIT_S) if self._delayed else None)

    def _release(self, fd: int) -> None:
        """On the janitor's thread: /dev/null over `fd`, the number kept (module docstring)."""
        if self._null < 0:
            self._null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(self._null, fd, inheritable=False)
        except OSError:
            pass

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
