"""Record-level timestamp search inside one batch, for ListOffsets by timestamp.

The time index and batch headers find the first batch whose max timestamp reaches the
target; Kafka then answers with the first *record* at or after the target, so this
walks that one batch's records (decompressing it if needed). Only ListOffsets pays for
this; produce and fetch never decode records.
"""

from __future__ import annotations

import gzip
import struct

import lz4.frame

from kafkarepl.errors import CorruptRecordError, UnsupportedCompressionTypeError

_HEADER = struct.Struct(">qiibIhiqqqhii")  # record batch v2 header, 61 bytes
_XERIAL = b"\x82SNAPPY\x00"


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


def _snappy(data: bytes) -> bytes:
    import cramjam

    if data.startswith(_XERIAL):  # Java/xerial framing: 16-byte header, then length-prefixed blocks
        out = bytearray()
        pos = 16
        while pos + 4 <= len(data):
            (n,) = struct.unpack_from(">i", data, pos)
            out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        return bytes(out)
    return bytes(cramjam.snappy.decompress_raw(data))


def _zstd(data: bytes) -> bytes:
    import cramjam

    return bytes(cramjam.zstd.decompress(data))


def records_section(batch: bytes) -> bytes:
    """The uncompressed records of one v2 batch."""
    attrs = _HEADER.unpack_from(batch, 0)[5]
    payload = bytes(batch[_HEADER.size :])
    codec = attrs & 0x7
    try:
        if codec == 0:
            return payload
        if codec == 1:
            return gzip.decompress(payload)
        if codec == 2:
            return _snappy(payload)
        if codec == 3:
            return lz4.frame.decompress(payload)
        if codec == 4:
            return _zstd(payload)
    except ImportError as exc:
        raise UnsupportedCompressionTypeError(f"codec {codec} needs {exc.name}") from None
    except Exception as exc:  # noqa: BLE001 - any decoder failure means a bad batch
        raise CorruptRecordError(f"cannot decompress codec {codec}: {exc}") from None
    raise UnsupportedCompressionTypeError(f"unknown compression codec {codec}")


def first_record_at_or_after(batch: bytes, target_ms: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of `batch` with timestamp >= target_ms."""
    if len(batch) < _HEADER.size:
        raise CorruptRecordError("batch shorter than its header")
    h = _HEADER.unpack_from(batch, 0)
    base_offset, attrs, base_ts, max_ts, count = h[0], h[5], h[7], h[8], h[12]
    if attrs & 0x8:  # LogAppendTime: every record carries the batch's max timestamp
        return (base_offset, max_ts) if max_ts >= target_ms else None
    recs = records_section(batch)
    pos = 0
    for _ in range(count):
        length, body = read_varint(recs, pos)
        if length < 0 or body + length > len(recs):
            raise CorruptRecordError("record length runs past the batch")
        p = body + 1  # attributes
        ts_delta, p = read_varint(recs, p)
        off_delta, p = read_varint(recs, p)
        if base_ts + ts_delta >= target_ms:
            return base_offset + off_delta, base_ts + ts_delta
        pos = body + length
    return None
