"""Compressing a batch's records section with one of Kafka's codecs (attribute bits 0-2:
1 gzip, 2 snappy, 3 lz4, 4 zstd), as Kafka's Java client and broker write them: gzip
framing, snappy in xerial framing, the lz4 frame format, zstd frames. Levels are KIP-390's
(`compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level`); None is
Kafka's default. Decompression, streamed and bounded, is storage/validation.py's."""

from __future__ import annotations

import struct
import zlib

from kafkarepl import _core
from kafkarepl.storage.records import CONTROL_MASK, HEADER_SIZE
from kafkarepl.storage.validation import DecompressionBudget, records_of

NAMES = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DEFAULT_LEVELS = {1: 6, 3: 9, 4: 3}  # Kafka's: Deflater's default, lz4 level 9, zstd level 3
LEVEL_RANGES = {1: (1, 9), 3: (1, 17), 4: (-131072, 22)}
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_SNAPPY_BLOCK = 32 * 1024  # Java's xerial SnappyOutputStream block size


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """`data` compressed with `codec`; ImportError when this process lacks the codec's
    library, ValueError for an unknown codec."""
    if codec == 1:
        lvl = DEFAULT_LEVELS[1] if level is None or level < 0 else level
        c = zlib.compressobj(lvl, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip framing
        return c.compress(data) + c.flush()
    if codec == 2:
        import cramjam

        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for i in range(0, len(view), _SNAPPY_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(bytes(view[i : i + _SNAPPY_BLOCK])))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == 3:
        import lz4.frame

        # Kafka's default level 9 is lz4's fast compressor; other levels its HC one
        hc = 0 if level is None or level == DEFAULT_LEVELS[3] else level
        return bytes(lz4.frame.compress(bytes(data), compression_level=hc))
    if codec == 4:
        import zstandard

        return bytes(zstandard.ZstdCompressor(level=DEFAULT_LEVELS[4] if level is None else level).compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def recompress_batches(buf: memoryview, batches: list, codec: int, level: int | None,
                       budget: DecompressionBudget) -> bytearray:
    """The batches of `buf` (validated BatchInfo list) with every data batch not in
    `codec` re-encoded in it (0: uncompressed), as Kafka's leader does for a topic whose
    compression.type is not `producer`. Only the records section changes: records,
    offsets deltas, timestamps, producer id/epoch/sequence and flags stay; the header's
    length, codec bits and CRC are redone. Control batches are left as they are."""
    out = bytearray()
    for b in batches:
        batch = buf[b.position : b.position + b.size]
        source = b.attributes & 0x07
        if source == codec or b.attributes & CONTROL_MASK:
            out += batch
            continue
        records = records_of(batch, b.attributes, budget, b.position)
        payload = records if codec == 0 else compress(codec, records, level)
        start = len(out)
        out += batch[:HEADER_SIZE]
        out += payload
        struct.pack_into(">i", out, start + 8, HEADER_SIZE - 12 + len(payload))
        struct.pack_into(">h", out, start + 21, (b.attributes & ~0x07) | codec)
        struct.pack_into(">I", out, start + 17, _core.crc32c(memoryview(out)[start + 21 :]))
    return out
