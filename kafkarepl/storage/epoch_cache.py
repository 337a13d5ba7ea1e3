"""Leader epoch cache: which leader epoch started at which offset (KIP-101 / KIP-279).

Backed by the partition's `leader-epoch-checkpoint` in Kafka's text format

    0                  <- version
    2                  <- number of entries
    0 0                <- "epoch startOffset"
    3 1500

followed by the "xxh64 <hex>" trailer line kafkarepl._core.checkpoint_write adds.

A new epoch (assign) is written atomically and durably before anything is appended in
it, as Kafka does: fsynced at once, or, inside deferred_syncs() (a LeaderAndIsr making
thousands of leaders, which holds their appends until then), made durable by one
syncfs per file system off the event loop afterwards (PendingEpochSync). One exception makes creating thousands of
partitions cheap: while no checkpoint file exists, none is written until the log gets
its first records (write_pending, from the log), and that first one is written in place
without fsync. A missing file is never stale: loading rebuilds the cache from the
batches' headers; a crash can otherwise only leave a torn file (the trailer's hash
catches it: rebuilt too) or that first version. Removals (truncations, a rebuild's result) are written in place
without fsync, as Kafka flushes them in the background (KAFKA-15046, KAFKA-16541): an
older file only holds extra entries at or past the log end, which loading truncates
again, and a torn one is rebuilt from the headers.

end_offset_for(requested_epoch, log_end_offset) follows Kafka's
LeaderEpochFileCache.endOffsetFor exactly:
  * requested == UNDEFINED_EPOCH (-1)            -> (-1, -1)
  * requested == latest cached epoch             -> (requested, log_end_offset)
  * no cached epoch above requested (this covers an empty cache and requested > latest)
                                                 -> (-1, -1)
  * requested below every cached epoch           -> (requested, start offset of the first
    cached epoch). Older Kafka answered (-1, -1) here; since Kafka 2.x the follower is
    told to truncate to where the leader's known history begins.
  * otherwise                                    -> (largest cached epoch <= requested,
                                                     start offset of the next higher epoch)
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kafkarepl import _core
from kafkarepl.epochs import EpochEndOffset, end_offset_for
from kafkarepl.errors import CheckpointCorruptError

log = logging.getLogger("kafkarepl.storage")

CHECKPOINT_NAME = "leader-epoch-checkpoint"


def parse_epoch_checkpoint(path: str, payload: bytes) -> list[tuple[int, int]]:
    """Entries of a leader-epoch-checkpoint payload; CheckpointCorruptError if malformed."""
    lines = payload.decode("ascii", "replace").splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CheckpointCorruptError(path, "missing or unknown version line")
    try:
        count = int(lines[1])
        entries = [(int(a), int(b)) for a, b in (ln.split() for ln in lines[2:])]
    except ValueError as exc:
        raise CheckpointCorruptError(path, f"malformed line: {exc}") from None
    if count != len(entries):
        raise CheckpointCorruptError(path, f"expected {count} entries, found {len(entries)}")
    return entries


class PendingEpochSync:
    """New leader epochs written atomically without fsync inside deferred_syncs(): run()
    makes them durable with one syncfs per file system. Blocking (a syncfs writes out every
    dirty page of its file system: seconds with GBs of unflushed log data): off the loop."""

    def __init__(self) -> None:
        self.dirs: set[str] = set()
        # Told of each partition dir whose file system could not be synced (the owner
        # fails its log dir: an epoch not made durable must not be served as if it were).
        self.on_failure: Callable[[str, OSError], None] | None = None

    def run(self) -> None:
        failed = sync_file_systems(self.dirs)
        if self.on_failure is not None:
            for path, exc in failed.items():
                self.on_failure(path, exc)


_deferred: PendingEpochSync | None = None


@contextmanager
def deferred_syncs() -> Iterator[PendingEpochSync]:
    """New epochs assigned inside are written atomically without fsync, their directories
    noted in the PendingEpochSync yielded: nothing may be appended in them until its run()
    has returned (the caller holds their appends). Nests: an inner block yields the
    outer's."""
    global _deferred
    if _deferred is not None:
        yield _deferred
        return
    _deferred = d = PendingEpochSync()
    try:
        yield d
    finally:
        _deferred = None


def sync_file_systems(dirs: set[str]) -> dict[str, OSError]:
    """syncfs once per file system holding one of `dirs`; one that fails does not stop
    the others. Returns the dirs on file systems that failed, with the error."""
    synced: dict[int, OSError | None] = {}
    failed: dict[str, OSError] = {}
    for path in sorted(dirs):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # deleted meanwhile: nothing of it to make durable
        except OSError as exc:
            failed[path] = exc
            continue
        try:
            dev = os.fstat(fd).st_dev
            if dev not in synced:
                try:
                    _core.file_syncfs(fd)
                    synced[dev] = None
                except OSError as exc:
                    synced[dev] = exc
            err = synced[dev]
            if err is not None:
                failed[path] = err
        finally:
            os.close(fd)
    return failed


class LeaderEpochCache:
    def __init__(self, path: Path | None, entries: list[tuple[int, int]] | None = None,
                 on_disk: bool = True) -> None:
        self.path = path
        # Whether some version of the checkpoint may be on disk (see the module docstring).
        self._on_disk = on_disk
        self._pending = False  # changed while none is on disk: write with the first records
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or []:
            self._epochs.append(epoch)
            self._starts.append(start)

    @classmethod
    def load(cls, path: Path) -> tuple[LeaderEpochCache, bool]:
        """(cache, trusted): trusted is False when the file is missing or corrupt, in which
        case the log rebuilds the cache from its batches' partitionLeaderEpoch fields."""
        try:
            entries = parse_epoch_checkpoint(str(path), _core.checkpoint_read(str(path)))
        except FileNotFoundError:
            return cls(path, on_disk=False), False
        except CheckpointCorruptError as exc:
            log.error("%s; rebuilding the leader epoch cache from the log", exc)
            return cls(path), False
        ok = all(b[0] > a[0] and b[1] >= a[1] for a, b in zip(entries, entries[1:], strict=False))
        if not ok or any(e < 0 or s < 0 for e, s in entries):
            log.error("%s: entries not ascending; rebuilding from the log", path)
            return cls(path), False
        return cls(path, entries), True

    # -- queries --------------------------------------------------------------------
    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def epochs(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Kafka's endOffsetFor (see the module docstring for each case)."""
        return end_offset_for(self._epochs, self._starts, requested_epoch, log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset` (None before the first entry)."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else None

    # -- updates --------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed.

        Only an epoch newer than the latest is recorded (epochs in a log only grow).
        Before appending, entries that would no longer be monotonic — those starting at
        or after `start_offset` — are dropped, as Kafka's assign does (a leader that got
        an epoch but appended nothing leaves such an entry behind).
        """
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and epoch <= self._epochs[-1]:
            if epoch < self._epochs[-1]:
                log.warning("%s: ignoring epoch %d at %d: older than latest epoch %d",
                            self.path, epoch, start_offset, self._epochs[-1])
            return False
        keep = bisect.bisect_left(self._starts, start_offset)
        if keep < len(self._starts):
            # Routine when those epochs got no records (they start where this one does:
            # an empty partition changing leaders); a warning when records are replaced.
            replaced = self.epochs()[keep:]
            level = logging.DEBUG if all(s == start_offset for _, s in replaced) else logging.WARNING
            log.log(level, "%s: epoch %d at %d replaces entries %s", self.path, epoch,
                    start_offset, replaced)
            del self._epochs[keep:]
            del self._starts[keep:]
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.flush(sync=self._on_disk)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:]
        del self._starts[keep:]
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop epochs wholly before it and move the
        epoch covering it to start there (Kafka's truncateFromStart)."""
        if start_offset < 0 or not self._starts or self._starts[0] >= start_offset:
            return
        i = bisect.bisect_right(self._starts, start_offset)  # entries[:i] start <= it
        epoch = self._epochs[i - 1]
        del self._epochs[:i]
        del self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self.flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.flush()

    def replace(self, entries: list[tuple[int, int]]) -> None:
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]
        self.flush()

    def write_pending(self) -> None:
        """The log got records: write the first checkpoint if one is due (in place, no
        fsync; see the module docstring)."""
        if self._pending:
            self._pending = False
            self._on_disk = True
            self.flush(sync=False)

    def flush(self, sync: bool = False) -> None:
        """Write the checkpoint; sync: atomically and durably (see the module docstring)."""
        if self.path is None:
            return
        if not self._on_disk:
            self._pending = bool(self._epochs)  # nothing on disk to go stale: later
            return
        lines = ["0", str(len(self._epochs))]
        lines += [f"{e} {s}" for e, s in zip(self._epochs, self._starts, strict=True)]
        payload = ("\n".join(lines) + "\n").encode()
        path = str(self.path)
        if sync and _deferred is not None:
            tmp = path + ".tmp"
            _core.checkpoint_write(tmp, payload, sync=False)
            os.replace(tmp, path)  # atomic; durable once the block's PendingEpochSync ran
            _deferred.dirs.add(os.path.dirname(path))
        else:
            _core.checkpoint_write(path, payload, sync=sync)
        self._on_disk = True

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.epochs()})"
