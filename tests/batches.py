"""Record batches built by an independent implementation (kafka-python's
DefaultRecordBatchBuilder), for tests of any layer that handles record bytes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build_batch(
    values: Sequence[bytes | None] | int = 1,
    *,
    compression: str = "none",
    timestamp: int | Sequence[int] = 1_700_000_000_000,
    keys: Sequence[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    value_size: int = 10,
) -> bytearray:
    """One v2 batch. `values` may be a count (values of `value_size` bytes are made up);
    `timestamp` one value for all records or one per record."""
    if isinstance(values, int):
        values = [bytes([65 + i % 26]) * value_size for i in range(values)]
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[compression], is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 30)
    for i, value in enumerate(values):
        ts = timestamp if isinstance(timestamp, int) else timestamp[i]
        key = keys[i] if keys is not None else f"k{i}".encode()
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return builder.build()


def concat(batches: Iterable[bytes | bytearray]) -> bytearray:
    out = bytearray()
    for b in batches:
        out += b
    return out


def decode(buf: bytes | bytearray | memoryview) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record in buf, decoded by kafka-python
    (it decompresses and checks nothing we wrote ourselves)."""
    data = bytes(buf)
    out = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        batch = DefaultRecordBatch(data[pos : pos + 12 + length])
        assert batch.validate_crc(), f"kafka-python rejects the CRC of batch at {pos}"
        for rec in batch:
            out.append((rec.offset, rec.timestamp, rec.key, rec.value))
        pos += 12 + length
    return out
