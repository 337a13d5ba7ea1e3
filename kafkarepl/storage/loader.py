"""Opening a partition directory: find the segments, recover the unflushed ones, and
rebuild per-log state from batch headers (Kafka's LogLoader).

After an unclean stop every segment from the one holding the recovery point is scanned
with CRC checks and cut at the first torn or invalid batch; everything after that batch
is dropped, since offsets past a hole cannot be trusted. Segments below the recovery
point (or all, after a clean stop) only get index sanity checks and a header walk from
their last index entry.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from kafkarepl.errors import CorruptBatchError
from kafkarepl.storage.epoch_cache import LeaderEpochCache
from kafkarepl.storage.index import IndexCorruptError
from kafkarepl.storage.producer_state import ProducerStateTable
from kafkarepl.storage.records import scan_windows, walk_headers
from kafkarepl.storage.segment import LogSegment

log = logging.getLogger("kafkarepl.storage")

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")


_SWAP_LOG = re.compile(r"^(\d{20})\.log\.swap$")
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def complete_swaps(dir: Path) -> None:
    """Finish a cleaning interrupted by a crash (Kafka's .swap recovery): a
    `<base>.log.swap` is a complete, fsynced cleaned segment replacing every segment with
    a base offset in [base, its next offset): those go, then the swap files take their
    names. Files of a cleaning that had not reached its swap (the staging dir) go."""
    shutil.rmtree(dir / "cleaning", ignore_errors=True)
    for name in sorted(os.listdir(dir)):
        m = _SWAP_LOG.match(name)
        if not m:
            continue
        base = int(m.group(1))
        swap = dir / name
        next_offset = base
        fd = os.open(swap, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            try:
                for h in walk_headers(fd, 0, size):
                    next_offset = h.last_offset + 1
            except CorruptBatchError:
                log.warning("%s: damaged swap file, discarding it", swap)
                next_offset = -1
        finally:
            os.close(fd)
        if next_offset < 0:
            for suffix in _SEGMENT_SUFFIXES:
                (dir / f"{base:020d}{suffix}.swap").unlink(missing_ok=True)
            continue
        for other in os.listdir(dir):
            om = _SEGMENT_NAME.match(other)
            if om and base < int(om.group(1)) < next_offset:
                for suffix in _SEGMENT_SUFFIXES:
                    (dir / f"{om.group(1)}{suffix}").unlink(missing_ok=True)
        for suffix in _SEGMENT_SUFFIXES:
            s = dir / f"{base:020d}{suffix}.swap"
            if s.exists():
                os.replace(s, dir / f"{base:020d}{suffix}")
            else:  # not staged as a swap file before the crash (or none was written):
                # the file of that name is the old segment's, wrong for the cleaned .log;
                # without it the indexes are rebuilt from the .log (scan_directory)
                (dir / f"{base:020d}{suffix}").unlink(missing_ok=True)
        log.info("%s: completed the swap of cleaned segment %d", dir, base)
    for name in os.listdir(dir):
        if name.endswith(".swap"):  # an index swap whose log swap completed, or whose
            # swap was being aborted: the index of that name may be the old segment's
            # under a cleaned .log; both go, to be rebuilt from the .log
            (dir / name).unlink(missing_ok=True)
            (dir / name[: -len(".swap")]).unlink(missing_ok=True)


def scan_directory(dir: Path) -> tuple[list[int], set[int], list[int]]:
    """Remove leftovers (interrupted deletes, temp files, orphan indexes); return the
    segment base offsets, ascending, those whose index files are missing, and the
    offsets of the producer snapshots taken at rolls (`<offset>.snapshot`), ascending."""
    names = set(os.listdir(dir))
    if "cleaning" in names or any(n.endswith(".swap") for n in names):
        complete_swaps(dir)  # a cleaning was interrupted (rare): settle it first
        names = set(os.listdir(dir))
    bases = []
    snapshots = []
    for name in sorted(names):
        if name.endswith((".deleted", ".tmp")):
            (dir / name).unlink(missing_ok=True)
            continue
        m = _SEGMENT_NAME.match(name)
        if m:
            bases.append(int(m.group(1)))
        m = _SNAPSHOT_NAME.match(name)
        if m:
            snapshots.append(int(m.group(1)))
    for name in names:
        for suffix in (".index", ".timeindex", ".txnindex"):
            if name.endswith(suffix) and name[: -len(suffix)] + ".log" not in names:
                log.warning("%s: removing orphan index %s", dir, name)
                (dir / name).unlink(missing_ok=True)
    bases.sort()
    # Index files are created with a segment's first data (index.py): only a non-empty
    # segment without them needs its indexes rebuilt.
    missing = {b for b in bases
               if (f"{b:020d}.index" not in names or f"{b:020d}.timeindex" not in names)
               and os.stat(dir / f"{b:020d}.log").st_size > 0}
    return bases, missing, snapshots


def load_segments(dir: Path, segments: list[LogSegment], first_recovered: int,
                  missing_indexes: set[int], retire: Callable[[LogSegment], object]) -> bool:
    """Load or recover each segment in place (dropping those after a corrupt batch, via
    `retire`); returns whether any segment was recovered."""
    recovered_any = False
    i = 0
    while i < len(segments):
        seg = segments[i]
        needs_recovery = i >= first_recovered or seg.base_offset in missing_indexes
        if not needs_recovery:
            try:
                seg.load()
            except (IndexCorruptError, CorruptBatchError) as exc:
                log.warning("%s: %s; rebuilding the segment's indexes", seg.log_path, exc)
                needs_recovery = True
        if needs_recovery:
            recovered_any = True
            truncated = seg.recover()
            if truncated and i + 1 < len(segments):
                log.warning("%s: dropping %d later segments after the corrupt batch",
                            dir, len(segments) - i - 1)
                for later in segments[i + 1:]:
                    retire(later)
                del segments[i + 1:]
        i += 1
    for seg in segments[:-1]:
        seg.make_inactive()
    segments[-1].make_active()
    return recovered_any


def rebuild_from_headers(segments: list[LogSegment], cache: LeaderEpochCache | None,
                         producers: ProducerStateTable | None,
                         on_completed: Callable[[LogSegment, list], None] | None = None) -> None:
    """Rebuild the epoch cache (from partitionLeaderEpoch changes) and/or the producer
    state (replaying every idempotent batch without validation, and the transaction
    markers: `on_completed` gets each segment's completed transactions) from all batch
    headers. One C header walk per segment, window by window (records.scan_windows); no
    CRC work; only control batches are looked into."""
    entries: list[tuple[int, int]] = []
    latest = -1
    for seg in segments:
        if not seg.size:
            continue
        completed: list = []
        for w in scan_windows(seg.fd, seg.size, False):
            batches = w.batches
            if producers is not None:  # markers are read from the window
                prepared = producers.check_and_update([b for b in batches if b.producer_id >= 0], None,
                                                      validate=False, buf=w.data)
                completed += prepared.completed
            if cache is not None:
                for b in batches:
                    if b.partition_leader_epoch > latest:
                        latest = b.partition_leader_epoch
                        entries.append((latest, b.base_offset))
        if completed and on_completed is not None:
            on_completed(seg, completed)
    if cache is not None:
        cache.replace(entries)
