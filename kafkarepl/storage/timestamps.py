"""Record-level timestamp search inside one batch, for ListOffsets by timestamp.

The time index and batch headers find the first batch whose max timestamp reaches the
target; Kafka then answers with the first *record* at or after the target, so this
walks that one batch's records (decompressing it if needed, streamed and bounded). Only
ListOffsets pays for this; fetch never decodes records.
"""

from __future__ import annotations

import struct

from kafkarepl import _core
from kafkarepl.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kafkarepl.storage.validation import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DecompressionBudget,
    inflate,
    records_of,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")  # record batch v2 header, 61 bytes


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Zigzag varint/varlong at pos -> (value, next pos)."""
    shift = result = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptRecordError("record varint runs past the batch")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def records_section(batch: bytes | memoryview) -> bytes:
    """The uncompressed records of one v2 batch, inflated within the default
    decompression budget (storage.validation): MessageTooLargeError past it, so a stored
    bomb can never cost more than that."""
    if len(batch) < _HEADER.size:
        raise CorruptRecordError("batch shorter than its header")
    attrs = _HEADER.unpack_from(batch, 0)[5]
    try:
        return bytes(records_of(memoryview(batch), attrs, DecompressionBudget(DEFAULT_MAX_DECOMPRESSED_BYTES)))
    except ImportError as exc:
        raise UnsupportedCompressionTypeError(f"codec {attrs & 0x7} needs {exc.name}") from None


def first_record_at_or_after(batch: bytes | memoryview, target_ms: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of `batch` with timestamp >= target_ms.

    The records are streamed (decompressed piece by piece within the default budget of
    storage.validation) through the C walker, which stops being fed once it has found
    the record: memory stays at one piece, work at most the budget."""
    if len(batch) < _HEADER.size:
        raise CorruptRecordError("batch shorter than its header")
    h = _HEADER.unpack_from(batch, 0)
    base_offset, attrs, base_ts, max_ts, count = h[0], h[5], h[7], h[8], h[12]
    if attrs & 0x8:  # LogAppendTime: every record carries the batch's max timestamp
        return (base_offset, max_ts) if max_ts >= target_ms else None
    walker = _core.RecordsValidator(count, base_ts, 0, target_ms)
    payload = memoryview(batch)[_HEADER.size :]
    codec = attrs & 0x7
    pieces = [payload] if codec == 0 else inflate(
        codec, payload, DecompressionBudget(DEFAULT_MAX_DECOMPRESSED_BYTES), 0)
    try:
        for piece in pieces:
            walker.feed(piece)
            if walker.found is not None:
                break
    except ImportError as exc:
        raise UnsupportedCompressionTypeError(f"codec {codec} needs {exc.name}") from None
    found = walker.found
    if found is None:
        return None
    return base_offset + found[0], found[1]
