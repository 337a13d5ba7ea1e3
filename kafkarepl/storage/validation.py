"""The leader's validation of a producer's compressed batches, bounded.

Kafka's LogValidator decompresses every compressed batch and walks its records (count,
offset deltas, sizes). Kafka streams the records, so its memory stays near one record;
it puts no bound on the decompressed size, because its handler threads may spend the CPU.
Here validation runs on the broker's event loop, so the work is bounded as well:

- Decompression is streamed in pieces of at most ``_PIECE`` bytes into the C records
  walker (``_core.RecordsValidator``, O(1) state), so memory stays at one piece per codec
  (raw snappy, a single block format, is the exception: one block at most, itself
  bounded below).
- Every request has a budget of decompressed bytes, ``kafkarepl.max.decompressed.request.bytes``
  (default 64 MiB, see DEFAULT_MAX_DECOMPRESSED_BYTES). The network layer sets it per
  request with ``request_budget``; without one (tests, tools) each append gets a fresh
  default budget. A batch that would inflate past it is refused with MESSAGE_TOO_LARGE
  before more is inflated; a batch whose header claims more records than the budget can
  hold (7 bytes per record at least) is refused with INVALID_RECORD before any inflating.
  64 MiB costs about 0.1-0.3 s of CPU in the worst case (gzip), the longest a single
  produce request can hold the loop for decompression.

Errors: bytes that do not decompress, or decompress to something that is not records:
CORRUPT_MESSAGE (CorruptBatchError); sound records that break the batch's rules (count,
offset deltas, timestamps): INVALID_RECORD (InvalidBatchError).
"""

from __future__ import annotations

import contextvars
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from kafkarepl import _core
from kafkarepl.errors import (
    CorruptBatchError,
    InvalidBatchError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from kafkarepl.storage.records import HEADER_SIZE

DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
MIN_RECORD_SIZE = 7  # one byte per field of an empty record
_PIECE = 256 * 1024  # decompressor output handed to the walker at a time
_XERIAL = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic + version + compatible version
# zstd emits at most one 128 KiB block per 3-byte block header: output/input <= 2^16.
_ZSTD_MAX_RATIO = 1 << 16


@dataclass
class DecompressionBudget:
    """Decompressed bytes one request may still produce."""

    limit: int
    used: int = 0

    @property
    def remaining(self) -> int:
        return self.limit - self.used


_budget: contextvars.ContextVar[DecompressionBudget | None] = contextvars.ContextVar(
    "kafkarepl_decompression_budget", default=None)


def request_budget(limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> DecompressionBudget:
    """Give the current context (a request's handler task) a fresh budget."""
    budget = DecompressionBudget(limit)
    _budget.set(budget)
    return budget


def current_budget() -> DecompressionBudget:
    return _budget.get() or DecompressionBudget(DEFAULT_MAX_DECOMPRESSED_BYTES)


def check_compressed(buf: memoryview, batches: list, fixups: list,
                     budget: DecompressionBudget | None = None,
                     indexes: list[int] | None = None,
                     ts_bounds: tuple[int, int] | None = None,
                     stray: list[int] | None = None) -> None:
    """Decompress and walk the records of every compressed batch of `buf` (BatchInfo
    list from ``_core.validate_leader_batches``; `indexes`: those to check, default every
    compressed one). Appends (index, greatest record timestamp) to `fixups` for
    CreateTime batches whose header maxTimestamp differs, and with `ts_bounds` (low,
    high) the index of each CreateTime batch with a record timestamp outside them to
    `stray` (KIP-937)."""
    budget = budget or current_budget()
    if indexes is None:
        indexes = [i for i, b in enumerate(batches) if b.attributes & 7]
    for i in indexes:
        b = batches[i]
        codec = b.attributes & 7
        count = b.records_count
        if count * MIN_RECORD_SIZE > budget.remaining:
            raise InvalidBatchError(
                b.position, f"the header declares {count} records: more than "
                f"{budget.remaining} bytes left of kafkarepl.max.decompressed.request.bytes "
                f"({budget.limit}) can hold")
        walker = _core.RecordsValidator(count, b.first_timestamp, b.position)
        payload = buf[b.position + HEADER_SIZE : b.position + b.size]
        for piece in inflate(codec, payload, budget, b.position):
            walker.feed(piece)
        max_ts = walker.finish()
        if not b.attributes & 8 and max_ts != b.max_timestamp:
            fixups.append((i, max_ts))
        if (ts_bounds is not None and stray is not None and not b.attributes & 8
                and (walker.min_timestamp < ts_bounds[0] or max_ts > ts_bounds[1])):
            stray.append(i)


def records_of(batch: memoryview, attributes: int, budget: DecompressionBudget,
               position: int = 0) -> bytes | memoryview:
    """One batch's records section: a view of it when uncompressed, else inflated whole
    within `budget` (MessageTooLargeError past it)."""
    codec = attributes & 0x07
    section = batch[HEADER_SIZE:]
    if codec == 0:
        return section
    return b"".join(bytes(p) for p in inflate(codec, section, budget, position))


def _spend(budget: DecompressionBudget, n: int, position: int) -> None:
    budget.used += n
    if budget.used > budget.limit:
        raise MessageTooLargeError(
            f"compressed batch at position {position} inflates past "
            f"kafkarepl.max.decompressed.request.bytes ({budget.limit} bytes for one request)")


def _corrupt(position: int, codec: str, exc: BaseException | str) -> CorruptBatchError:
    return CorruptBatchError(position, f"{codec} payload does not decompress: {exc}")


def inflate(codec: int, data: memoryview, budget: DecompressionBudget,
             position: int) -> Iterator[memoryview | bytes]:
    """The decompressed bytes of a batch payload in pieces of at most _PIECE bytes (one
    snappy block for raw snappy), charged to `budget` as they come."""
    if codec == 1:
        yield from _gzip(data, budget, position)
    elif codec == 2:
        yield from _snappy(data, budget, position)
    elif codec == 3:
        yield from _lz4(data, budget, position)
    elif codec == 4:
        yield from _zstd(data, budget, position)
    else:  # kr_batch_check already refuses codecs above 4
        raise UnsupportedCompressionTypeError(f"unknown compression codec {codec}")


def _gzip(data: memoryview, budget: DecompressionBudget, position: int) -> Iterator[bytes]:
    # GZIPInputStream (Kafka) reads concatenated members: so do we.
    pending: bytes | memoryview = data
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            while True:
                out = d.decompress(pending, min(_PIECE, budget.remaining + 1))
                pending = d.unconsumed_tail
                if out:
                    _spend(budget, len(out), position)
                    yield out
                elif d.eof or not pending:
                    break
        except zlib.error as exc:
            raise _corrupt(position, "gzip", exc) from None
        if not d.eof:
            raise _corrupt(position, "gzip", "truncated stream")
        pending = d.unused_data
        if not pending:
            return


def _lz4(data: memoryview, budget: DecompressionBudget, position: int) -> Iterator[bytes]:
    import lz4.frame

    pending: bytes | memoryview = data
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        try:
            out = d.decompress(pending, max_length=min(_PIECE, budget.remaining + 1))
            while True:
                if out:
                    _spend(budget, len(out), position)
                    yield out
                if d.eof or (d.needs_input and not out):
                    break
                out = d.decompress(b"", max_length=min(_PIECE, budget.remaining + 1))
        except RuntimeError as exc:  # lz4 reports every frame error as RuntimeError
            raise _corrupt(position, "lz4", exc) from None
        if not d.eof:
            raise _corrupt(position, "lz4", "truncated frame")
        pending = d.unused_data
        if not pending:
            return


def _zstd(data: memoryview, budget: DecompressionBudget, position: int) -> Iterator[memoryview]:
    import zstandard

    # decompressobj has no output bound, so input goes in slices small enough that one
    # call cannot overshoot the remaining budget by more than one slice at maximal ratio.
    src: bytes | memoryview = data
    pos = 0
    d = zstandard.ZstdDecompressor().decompressobj()
    try:
        while True:
            if d.eof:  # another frame may follow: Kafka's zstd stream reads them all
                src = bytes(d.unused_data) + bytes(src[pos:])
                pos = 0
                if not src:
                    return
                d = zstandard.ZstdDecompressor().decompressobj()
            if pos >= len(src):
                break
            step = max(64, min(64 * 1024, budget.remaining // _ZSTD_MAX_RATIO))
            out = d.decompress(src[pos : pos + step])
            pos += step
            if out:
                _spend(budget, len(out), position)
                view = memoryview(out)
                for k in range(0, len(out), _PIECE):
                    yield view[k : k + _PIECE]
    except zstandard.ZstdError as exc:
        raise _corrupt(position, "zstd", exc) from None
    raise _corrupt(position, "zstd", "truncated frame")


def _snappy_block(block: memoryview, budget: DecompressionBudget, position: int) -> bytes:
    import cramjam

    # The uncompressed length leads a raw snappy block (uvarint): check it against the
    # budget before inflating anything.
    size, shift, k = 0, 0, 0
    while True:
        if k >= len(block) or k >= 5:
            raise _corrupt(position, "snappy", "bad block length preamble")
        byte = block[k]
        size |= (byte & 0x7F) << shift
        k += 1
        shift += 7
        if not byte & 0x80:
            break
    # A snappy element of n bytes emits at most 64 / 3 * n: more is a lie, not a bomb.
    if size > 22 * len(block):
        raise _corrupt(position, "snappy", f"a {len(block)}-byte block cannot hold {size} bytes")
    _spend(budget, size, position)
    try:
        out = bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # noqa: BLE001 - cramjam raises its own DecompressionError
        raise _corrupt(position, "snappy", exc) from None
    if len(out) != size:
        raise _corrupt(position, "snappy", f"block inflates to {len(out)}, not {size} bytes")
    return out


def _snappy(data: memoryview, budget: DecompressionBudget, position: int) -> Iterator[bytes]:
    # Java clients (and librdkafka when it reads) use xerial framing: a 16-byte header,
    # then [int32 length][raw snappy block]...; librdkafka produces one raw block.
    if bytes(data[: len(_XERIAL)]) != _XERIAL:
        yield _snappy_block(data, budget, position)
        return
    pos = _XERIAL_HEADER
    if len(data) < pos:
        raise _corrupt(position, "snappy", "truncated xerial header")
    while pos < len(data):
        if pos + 4 > len(data):
            raise _corrupt(position, "snappy", "truncated xerial block length")
        (n,) = struct.unpack_from(">i", data, pos)
        if n < 0 or pos + 4 + n > len(data):
            raise _corrupt(position, "snappy", f"xerial block length {n} runs past the batch")
        yield _snappy_block(data[pos + 4 : pos + 4 + n], budget, position)
        pos += 4 + n
