"""Record batch v2 building and record walking, for the coordinator's own log records.

The coordinator writes small uncompressed batches of (key, value) records to its
`__consumer_offsets` partition and reads them back when it takes a partition over.
Only that needs record-level access; the produce/fetch data path never decodes records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from kafkarepl import _core
from kafkarepl.storage.timestamps import records_section

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21  # attributes onwards are covered by the CRC
_CONTROL_BIT = 0x20


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _bytes_field(b: bytes | None) -> bytes:
    return _zigzag(-1) if b is None else _zigzag(len(b)) + b


class BatchBuilder:
    """One uncompressed v2 batch built a record at a time, so a caller on the event loop
    can yield between records of a large batch (an OffsetCommit of many partitions)."""

    __slots__ = ("_body", "count")

    def __init__(self) -> None:
        self._body = bytearray()
        self.count = 0

    def add(self, key: bytes | None, value: bytes | None) -> None:
        rec = b"\x00" + _zigzag(0) + _zigzag(self.count) + _bytes_field(key) + _bytes_field(value) + _zigzag(0)
        self._body += _zigzag(len(rec)) + rec
        self.count += 1

    def build(self, timestamp_ms: int, *, producer_id: int = -1, producer_epoch: int = -1,
              base_sequence: int = -1, attributes: int = 0) -> bytearray:
        """The batch (offsets from 0, no producer id unless given); the log assigns the
        real base offset and leader epoch in place on append."""
        if not self.count:
            raise ValueError("a batch needs at least one record")
        header = bytearray(_HEADER.pack(
            0, _HEADER.size - 12 + len(self._body), -1, 2, 0, attributes, self.count - 1,
            timestamp_ms, timestamp_ms, producer_id, producer_epoch, base_sequence, self.count,
        ))
        batch = header + self._body
        struct.pack_into(">I", batch, 17, _core.crc32c(memoryview(batch)[_CRC_START:]))
        return batch


def build_batch(records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int, *,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                attributes: int = 0) -> bytearray:
    """One uncompressed v2 batch of `records` (BatchBuilder.build)."""
    builder = BatchBuilder()
    for key, value in records:
        builder.add(key, value)
    return builder.build(timestamp_ms, producer_id=producer_id, producer_epoch=producer_epoch,
                         base_sequence=base_sequence, attributes=attributes)


TRANSACTIONAL_BIT = 0x10
MARKER_ABORT, MARKER_COMMIT = 0, 1


def build_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytearray:
    """A transaction marker: a transactional control batch of one record whose key is
    (version 0, COMMIT or ABORT) and value (version 0, coordinator epoch), as Kafka's
    EndTransactionMarker."""
    key = struct.pack(">hh", 0, MARKER_COMMIT if commit else MARKER_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch([(key, value)], timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, attributes=TRANSACTIONAL_BIT | _CONTROL_BIT)


def iter_records(batch: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of each record of one whole v2 batch; control batches
    (transaction markers) yield nothing. Raises CorruptBatchError on malformed records."""
    base_offset, attributes, count = (_HEADER.unpack_from(batch, 0)[i] for i in (0, 5, 12))
    if attributes & _CONTROL_BIT:
        return
    for delta, key, value in _core.record_fields(records_section(batch), count):
        yield base_offset + delta, key, value
