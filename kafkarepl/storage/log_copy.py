"""Filling a future log (JBOD: a replica moving to another log dir) from the current one.

Kafka's ReplicaAlterLogDirsThread does it by fetching from the current log and appending
to the future log as a follower; so does LogCopy, by whole batches in byte ranges:

- `next_chunk()` (on the loop that owns the source log, cheap): the file range of whole
  batches from the future log's end, with a duplicated descriptor, so retention or a
  cleaner swap may remove the segment meanwhile;
- `copy(chunk)` (on a worker thread, the bulk): pread the range and append it to the future
  log (batch headers and CRCs checked in C, indexes, epochs and producer state built as a
  follower builds them; no record is handled in Python);
- `finish()` (on the loop, bounded by the caller): the last bytes, then the state that
  lives only in memory (log start offset, leader epochs, producer state) taken over.

A truncation of the source (a follower diverged from a new leader) voids what was copied
past the truncation point, and a chunk read while it happened may hold rewritten bytes:
`stale()` tells, and the copy restarts from scratch (`restart()`). Retention past the copy
position restarts it at the new log start. A cleaner swap needs nothing: offsets stay, the
copy reads by offset, and a dup'ed descriptor of a replaced segment still reads its old,
valid batches.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import NamedTuple

from kafkarepl.errors import OffsetOutOfRangeError
from kafkarepl.storage.log import Log

FUTURE_SUFFIX = "-future"
_FUTURE_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})" + re.escape(FUTURE_SUFFIX) + "$")


def future_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<uuid>-future`, Kafka's name for a future log's directory."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    m = _FUTURE_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


class RestartCopy(Exception):
    """The source changed under the copy in a way that voids it (a truncation)."""


class Chunk(NamedTuple):
    fd: int  # a duplicate, owned by the chunk: copy() closes it
    position: int
    size: int
    first_offset: int


class LogCopy:
    def __init__(self, source: Log, future: Log) -> None:
        self.source = source
        self.future = future
        self.truncations = source.truncations
        self.copied_bytes = 0

    def stale(self) -> bool:
        return self.source.truncations != self.truncations

    def restart(self) -> None:
        """Empty the future log and copy again from the source's log start (on the loop,
        no copy in flight)."""
        self.truncations = self.source.truncations
        self.future.truncate_fully_and_start_at(self.source.log_start_offset)

    def position(self) -> int:
        """The source offset the copy reads next."""
        fut = self.future
        if fut.size_in_bytes == 0:
            return self.source.log_start_offset
        return fut.log_end_offset

    def remaining_bytes(self) -> int:
        """Bytes of the source still to copy (on the loop)."""
        return self.source.bytes_from(self.position())

    def next_chunk(self, max_bytes: int) -> Chunk | None:
        """The next range to copy, None when the future log has caught up (on the loop)."""
        if self.stale():
            raise RestartCopy(f"{self.source!r} was truncated")
        src = self.source
        start = self.position()
        if start < src.log_start_offset:  # retention went past the copy: skip ahead
            self.future.truncate_fully_and_start_at(src.log_start_offset)
            start = src.log_start_offset
        try:
            sl = src.read(start, max_bytes)
        except OffsetOutOfRangeError as exc:
            raise RestartCopy(str(exc)) from exc
        if sl.size == 0:
            return None
        return Chunk(os.dup(sl.fd), sl.position, sl.size, sl.first_offset)

    def copy(self, chunk: Chunk) -> int:
        """Append the chunk's batches to the future log (on a worker thread, or on the loop
        for the last bytes). Returns the bytes copied."""
        try:
            data = self.source.read_bytes(chunk.fd, chunk.position, chunk.size)
        finally:
            os.close(chunk.fd)
        if len(data) != chunk.size:  # the file shrank under us: only a truncation does that
            raise RestartCopy(f"short read of {len(data)} of {chunk.size} bytes")
        fut = self.future
        if fut.size_in_bytes == 0 and fut.log_end_offset != chunk.first_offset:
            fut.truncate_fully_and_start_at(chunk.first_offset)  # segment named as the source's
        fut.append_as_follower(data, gaps=True)
        self.copied_bytes += len(data)
        return len(data)

    def finish(self, max_bytes: int) -> bool:
        """On the loop, in the step that swaps the logs (no append may come between):
        copy the last bytes (False, nothing done, if more than `max_bytes` remain or the
        copy is stale), then take over the log start offset, leader epochs and producer
        state, which are the source's exactly now that both hold the same batches."""
        if self.stale() or self.remaining_bytes() > max_bytes:
            return False
        src, fut = self.source, self.future
        while True:
            chunk = self.next_chunk(max_bytes)
            if chunk is None:
                break
            self.copy(chunk)
        if fut.log_end_offset != src.log_end_offset:
            raise RestartCopy(f"future log ends at {fut.log_end_offset}, the log at {src.log_end_offset}")
        fut.maybe_increment_log_start_offset(src.log_start_offset)
        fut.leader_epoch_cache.replace(src.epoch_entries())
        fut.producer_state = src.producer_state  # the source is closed right after
        return True


def future_path(log_dir: Path, topic: str, partition: int) -> Path:
    return log_dir / future_dir_name(topic, partition)
