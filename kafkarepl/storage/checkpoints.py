"""Broker-level offset checkpoint files (Kafka's OffsetCheckpointFile text format):

    0                      <- version
    2                      <- number of entries
    my-topic 0 1500        <- "topic partition offset"
    my-topic 1 42

plus the "xxh64 <hex>" trailer line that kafkarepl._core.checkpoint_write appends, so a
torn or altered file is detected (CheckpointCorruptError) rather than trusted.
Used for replication-offset-checkpoint (HW), recovery-point-offset-checkpoint and
log-start-offset-checkpoint, one file of each per log dir.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafkarepl import _core
from kafkarepl.errors import CheckpointCorruptError

HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

TopicPartition = tuple[str, int]


def format_offsets(offsets: Mapping[TopicPartition, int]) -> bytes:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode()


def parse_offsets(path: str, payload: bytes) -> dict[TopicPartition, int]:
    """Entries of an offset checkpoint payload; CheckpointCorruptError if malformed."""
    try:
        lines = payload.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise CheckpointCorruptError(path, f"not text: {exc}") from None
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CheckpointCorruptError(path, "missing or unknown version line")
    out: dict[TopicPartition, int] = {}
    try:
        count = int(lines[1])
        for line in lines[2:]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
    except ValueError as exc:
        raise CheckpointCorruptError(path, f"malformed entry: {exc}") from None
    if count != len(lines) - 2 or count != len(out):
        raise CheckpointCorruptError(path, f"expected {count} entries, found {len(lines) - 2}")
    return out


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    _core.checkpoint_write(str(path), format_offsets(offsets))


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """{} when the file does not exist; CheckpointCorruptError when it cannot be trusted."""
    try:
        payload = _core.checkpoint_read(str(path))
    except FileNotFoundError:
        return {}
    return parse_offsets(str(path), payload)
