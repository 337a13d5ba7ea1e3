"""Record batch v2 header layout and header-only walks over segment files.

The storage layer never looks inside a batch: it reads the 61-byte header (offsets,
length, timestamps, producer fields) and treats the rest as opaque bytes. Validation
and CRC work happen in kafkarepl._core; this module holds the few header facts Python
needs and a walk that reads headers with positional reads (never record by record).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from kafkarepl import _core
from kafkarepl.errors import CorruptBatchError, CorruptRecordError, InvalidRecordError, KafkaError

# baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I, attributes h,
# lastOffsetDelta i, firstTimestamp q, maxTimestamp q, producerId q, producerEpoch h,
# baseSequence i, recordsCount i
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede the length-counted part
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers attributes .. end of batch
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # set = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_ATTR = struct.Struct(">h")
_TS = struct.Struct(">q")
_CRC = struct.Struct(">I")


class BatchHeader(NamedTuple):
    """The header fields the log needs while walking a file."""

    position: int
    size: int  # whole batch, LOG_OVERHEAD included
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    max_timestamp: int


def walk_headers(fd: int, start: int, end: int, chunk: int = 4096) -> Iterator[BatchHeader]:
    """Batch headers of fd from byte `start` up to `end` (a batch boundary or file size).

    Reads `chunk` bytes at a time so a scan over small batches costs one pread; a batch
    larger than the chunk costs one pread of its header. Raises CorruptBatchError when a
    header is unsound (torn length, wrong magic): callers only walk ranges that recovery
    already validated, so this signals damage after the fact.
    """
    buf = b""
    buf_start = start
    pos = start
    while pos < end:
        off = pos - buf_start
        if off + HEADER_SIZE > len(buf):
            buf = os.pread(fd, max(min(chunk, end - pos), HEADER_SIZE), pos)
            buf_start, off = pos, 0
            if len(buf) < HEADER_SIZE:
                raise CorruptBatchError(pos, f"torn batch header ({end - pos} bytes left)")
        (base, length, epoch, magic, _crc, _attr, delta, _first_ts, max_ts, _pid, _pe, _seq,
         _count) = HEADER.unpack_from(buf, off)
        size = length + LOG_OVERHEAD
        if magic != 2 or length < MIN_BATCH_LENGTH or pos + size > end:
            raise CorruptBatchError(pos, f"unsound batch header (magic {magic}, length {length})")
        yield BatchHeader(pos, size, base, base + delta, epoch, max_ts)
        pos += size


# Whole-file walks (recovery, rebuilds, dump-log) read this much at a time, more for a
# larger batch. Reads, not a mapping: a disk's read error (EIO) on a mapped page is a
# SIGBUS that kills the process, where a read fails with an OSError that fails only the
# log dir (KIP-112), as Kafka's FileRecords reads do; and a file truncated under a
# mapping (dump-log beside a live broker) faults the same way.
SCAN_WINDOW = 8 << 20


class ScanWindow(NamedTuple):
    position: int  # of data in the file; batches' positions are relative to data
    data: bytes
    batches: list  # BatchInfo of the whole, sound batches in data
    end: int  # file position after the last of them
    error: str | None  # why the walk stopped in this window (None: it goes on or ended clean)
    error_position: int  # file position of the batch that stopped it (-1 without error)


def scan_windows(fd: int, size: int, check_crc: bool) -> Iterator[ScanWindow]:
    """The batches of fd's first `size` bytes (_core.scan_batches), window by window; a
    batch cut by a window's end starts the next window. The walk stops at the first
    torn or unsound batch (the window's error), or where the file ends if it shrank
    while read."""
    pos, want = 0, SCAN_WINDOW
    while pos < size:
        asked = min(want, size - pos)
        data = os.pread(fd, asked, pos)
        if len(data) < asked:  # the file shrank under the walk: it ends there now
            size = pos + len(data)
            if not data:
                return
        infos, valid, reason, errpos = _core.scan_batches(data, 0, check_crc)
        if reason is not None and pos + len(data) < size:
            if errpos + LOG_OVERHEAD > len(data):
                cut = True  # not even its length in this window
            else:
                total = LOG_OVERHEAD + int.from_bytes(data[errpos + 8 : errpos + 12], "big", signed=True)
                cut = errpos + total > len(data) and pos + errpos + total <= size
                want = max(want, total) if cut else want
            if cut:
                yield ScanWindow(pos, data, infos, pos + valid, None, -1)
                pos += valid
                continue
        yield ScanWindow(pos, data, infos, pos + valid, reason, -1 if reason is None else pos + errpos)
        if reason is not None:
            return
        pos += len(data)


# Kafka's ByteBufferLogInputStream: a batch length below a v0 record's overhead is corrupt;
# the magic byte sits at this offset and must be 0..2 to be read at all.
_RECORD_OVERHEAD_V0 = 14
_MAGIC_OFFSET = 16


def _whole_batch_size(buf: memoryview, pos: int) -> int | None:
    """Size of the batch starting at `pos` when the buffer holds all of it, else None;
    CorruptRecordError for a length or magic no batch can have (Kafka's nextBatchSize)."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return None
    length = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
    if length < _RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Record size {length} is less than the minimum record overhead ({_RECORD_OVERHEAD_V0})")
    if remaining < _MAGIC_OFFSET + 1:
        return None
    magic = buf[pos + _MAGIC_OFFSET]
    if magic > 2:  # a byte read unsigned: Kafka's "< 0 or > 2"
        raise CorruptRecordError(f"Invalid magic found in record: {magic if magic < 128 else magic - 256}")
    size = length + LOG_OVERHEAD
    return size if remaining >= size else None


def produce_records_error(records, version: int) -> KafkaError | None:
    """Kafka's ProduceRequest.validateRecords for Produce v3+ (all kafkarepl serves),
    which KafkaApis applies to each partition before any append, reading batch headers
    only: the records must hold a whole batch, of magic 2, and exactly one. The error
    (INVALID_RECORD, or CORRUPT_MESSAGE for a length or magic no batch can have) or None.
    Trailing bytes short of a second whole batch are left to the leader's validation."""
    buf = memoryview(records).cast("B") if records is not None else memoryview(b"")
    try:
        first = _whole_batch_size(buf, 0)
        if first is None:
            return InvalidRecordError(f"Produce requests with version {version} must have at least one "
                                      "record batch per partition")
        if buf[_MAGIC_OFFSET] != 2:
            return InvalidRecordError(f"Produce requests with version {version} are only allowed to contain "
                                      "record batches with magic version 2")
        if _whole_batch_size(buf, first) is not None:
            return InvalidRecordError(f"Produce requests with version {version} are only allowed to contain "
                                      "exactly one record batch per partition")
    except CorruptRecordError as exc:
        return exc
    return None


def set_log_append_time(buf: memoryview, batches: list, now_ms: int) -> None:
    """Stamp every batch as LogAppendTime in place and re-CRC it.

    maxTimestamp and attributes both sit inside the CRC, so unlike offset assignment this
    needs a new checksum per batch; only LogAppendTime topics pay for it.
    """
    ts = _TS.pack(now_ms)
    for b in batches:
        p = b.position
        buf[p + MAX_TIMESTAMP_OFFSET : p + MAX_TIMESTAMP_OFFSET + 8] = ts
        _ATTR.pack_into(buf, p + ATTRIBUTES_OFFSET, b.attributes | TIMESTAMP_TYPE_MASK)
        crc = _core.crc32c(buf[p + ATTRIBUTES_OFFSET : p + b.size])
        _CRC.pack_into(buf, p + CRC_OFFSET, crc)


def clear_log_append_time(buf: memoryview, batch):
    """Store a producer's batch flagged LogAppendTime as CreateTime in place (attributes
    rewritten, maxTimestamp kept, CRC redone); its BatchInfo, replaced."""
    p = batch.position
    attributes = batch.attributes & ~TIMESTAMP_TYPE_MASK
    _ATTR.pack_into(buf, p + ATTRIBUTES_OFFSET, attributes)
    crc = _core.crc32c(buf[p + ATTRIBUTES_OFFSET : p + batch.size])
    _CRC.pack_into(buf, p + CRC_OFFSET, crc)
    return batch._replace(attributes=attributes, crc=crc)


def fix_max_timestamps(buf: memoryview, batches: list, fixups: list[tuple[int, int]]) -> None:
    """Write the greatest record timestamp into the maxTimestamp of the CreateTime
    batches listed (index, timestamp) and re-CRC them, replacing their BatchInfo; as
    Kafka's LogValidator does (it sets maxTimestamp from the records). Producers normally
    get it right, so this is the rare path."""
    for i, ts in fixups:
        b = batches[i]
        p = b.position
        _TS.pack_into(buf, p + MAX_TIMESTAMP_OFFSET, ts)
        crc = _core.crc32c(buf[p + ATTRIBUTES_OFFSET : p + b.size])
        _CRC.pack_into(buf, p + CRC_OFFSET, crc)
        batches[i] = b._replace(max_timestamp=ts, crc=crc)


def batch_crc_valid(buf, batch) -> bool:
    """Whether the stored CRC of `batch` (a BatchInfo over buf) matches its bytes."""
    p = batch.position
    return _core.crc32c(memoryview(buf)[p + ATTRIBUTES_OFFSET : p + batch.size]) == batch.crc


# Control record types (the key of a control batch's one record): transaction markers.
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint (record fields) at pos; ValueError past `end` or over 10 bytes."""
    shift = value = 0
    for i in range(pos, min(end, pos + 10)):
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), i + 1
        shift += 7
    raise ValueError("truncated or overlong varint")


def control_record_type(buf, position: int, size: int) -> int:
    """The type of the control record of the batch at `position` (`size` bytes, header
    included): CONTROL_ABORT, CONTROL_COMMIT, or another type Kafka may add; -1 when the
    batch holds no well-formed control record. Only control batches are parsed (one
    record each), never data records."""
    end = position + size
    try:
        pos = position + HEADER_SIZE
        _length, pos = _varint(buf, pos, end)
        pos += 1  # attributes
        _ts_delta, pos = _varint(buf, pos, end)
        _offset_delta, pos = _varint(buf, pos, end)
        key_len, pos = _varint(buf, pos, end)
    except ValueError:
        return -1
    if key_len < 4 or pos + 4 > end:
        return -1
    return int.from_bytes(bytes(buf[pos + 2 : pos + 4]), "big", signed=True)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of a batch's last record; sequences wrap from 2^31-1 to 0 (Kafka)."""
    if base_sequence > 0x7FFFFFFF - last_offset_delta:
        return last_offset_delta - (0x7FFFFFFF - base_sequence) - 1
    return base_sequence + last_offset_delta
