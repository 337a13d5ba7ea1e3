"""Arrow arrays <-> record batches v2 through the C codec in kafkarepl._core.

Python only hands buffers across and wraps results: per record work (varints, copies,
validity bits, CRCs) is C. Compressed batches are inflated here, one batch at a time,
with the same bounded decompressors the broker uses.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from kafkarepl import _core
from kafkarepl.storage.codecs import compress
from kafkarepl.storage.validation import DecompressionBudget, inflate

HEADER_SIZE = _core.BATCH_HEADER_SIZE
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# One inflated batch may not grow past this (a hostile broker cannot exhaust the executor).
MAX_INFLATED_BATCH = 256 << 20


# ---- sink -------------------------------------------------------------------------------

def bin_column(arr: Any) -> tuple:
    """(validity, offsets, data, base, length) of a binary/string array for _core."""
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.binary())
    elif pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())  # the same UTF-8 bytes
    if not pa.types.is_binary(arr.type):
        raise TypeError(f"kafkarepl: expected a binary or string column, got {arr.type}")
    validity, offsets, data = arr.buffers()[:3]
    return (validity if arr.null_count else None, offsets, data, arr.offset, len(arr))


def headers_column(arr: Any) -> tuple:
    """(validity, offsets, base, length, key column, value column) of a
    list<struct<key: string, value: binary|string>> array."""
    if pa.types.is_large_list(arr.type):
        arr = arr.cast(pa.list_(arr.type.value_type))
    validity, offsets = arr.buffers()[:2]
    key, value = arr.values.flatten()  # the struct's fields, its offset and nulls applied
    return (validity if arr.null_count else None, offsets, arr.offset, len(arr),
            bin_column(key), bin_column(value))


def encode_batches(encoder: _core.RecordEncoder, row: int, row_end: int, max_bytes: int,
                   codec: int = 0) -> list[tuple[bytearray, int]]:
    """Unsealed batches (records from byte HEADER_SIZE, compressed when codec != 0) of rows
    [row, row_end), each with its record count. Seal with seal()."""
    out = []
    while row < row_end:
        batch, n = encoder.encode(row, row_end, max_bytes)
        if codec:
            batch = bytearray(HEADER_SIZE) + compress(codec, memoryview(batch)[HEADER_SIZE:])
        out.append((batch, n))
        row += n
    return out


def seal(batch: bytearray, count: int, codec: int, producer_id: int, producer_epoch: int,
         base_sequence: int, timestamp_ms: int | None = None) -> bytearray:
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    _core.seal_batch(batch, codec, count, ts, ts, producer_id, producer_epoch, base_sequence)
    return batch


def partitions_of(key: tuple | None, rows: int, num_partitions: int, algorithm: int,
                  null_as_empty: bool) -> np.ndarray:
    out = np.empty(rows, np.int32)
    if key is None:
        out.fill(-1)
    else:
        _core.partition_keys(key, num_partitions, algorithm, null_as_empty, out)
    return out


# ---- source -----------------------------------------------------------------------------

class RecordsDecoder:
    """Fetch response record bytes -> Arrow columns of one partition's range [start, end)."""

    def __init__(self, with_headers: bool) -> None:
        self._builder = _core.ArrowRecordsBuilder(with_headers)

    @property
    def rows(self) -> int:
        return self._builder.rows

    @property
    def data_bytes(self) -> int:
        return self._builder.data_bytes

    def add(self, records: Any, start: int, end: int, next_offset: int) -> int:
        """Decodes the batches of `records` (a partition's Records field); returns the
        offset to fetch next (past the last whole batch). CorruptBatchError on bad bytes."""
        b = self._builder
        pos = 0
        while True:
            pos, next_offset, compressed = b.decode_batches(records, pos, start, end, next_offset)
            if compressed is None:
                return next_offset
            info = compressed
            payload = memoryview(records)[pos + HEADER_SIZE: pos + info.size]
            budget = DecompressionBudget(MAX_INFLATED_BATCH)
            data = b"".join(inflate(info.attributes & 7, payload, budget, pos))
            b.decode_records(data, info.records_count, info.base_offset, info.first_timestamp,
                             1 if info.attributes & 8 else 0, info.max_timestamp, start, end)
            next_offset = max(next_offset, info.base_offset + info.last_offset_delta + 1)
            pos += info.size

    def take(self, schema: Any, topic: str, partition: int) -> Any:
        """The decoded rows as a pyarrow.RecordBatch of `schema` (the source's); the
        decoder is empty afterwards."""
        out = self._builder.finish()
        n = out["rows"]
        cols = {
            "key": _binary(pa.binary(), n, out["key"]),
            "value": _binary(pa.binary(), n, out["value"]),
            "topic": _repeated_string(topic, n),
            "partition": pa.array(np.full(n, partition, np.int32)),
            "offset": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(out["offset"])]),
            "timestamp": pa.Array.from_buffers(schema.field("timestamp").type, n,
                                               [None, pa.py_buffer(out["timestamp"])]),
            "timestampType": pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(out["timestampType"])]),
        }
        if "headers" in schema.names:
            cols["headers"] = _headers(schema.field("headers").type, n, out["headers"])
        return pa.RecordBatch.from_arrays([cols[name] for name in schema.names], schema=schema)


def _binary(typ: Any, n: int, parts: tuple) -> Any:
    valid, offsets, data, nulls = parts
    return pa.Array.from_buffers(typ, n, [pa.py_buffer(valid) if nulls else None, pa.py_buffer(offsets),
                                          pa.py_buffer(data)], null_count=nulls)


def _repeated_string(s: str, n: int) -> Any:
    raw = s.encode()
    offsets = np.arange(0, (n + 1) * len(raw), len(raw), dtype=np.int32) if raw else np.zeros(n + 1, np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _headers(list_type: Any, n: int, parts: tuple) -> Any:
    valid, offsets, nulls, count, key_offsets, key_data, value_parts = parts
    struct_type = list_type.value_type
    key = _binary(pa.string(), count, (b"", key_offsets, key_data, 0))
    value = _binary(pa.binary(), count, value_parts)
    entries = pa.StructArray.from_arrays([key, value], fields=list(struct_type))
    return pa.Array.from_buffers(list_type, n, [pa.py_buffer(valid) if nulls else None, pa.py_buffer(offsets)],
                                 null_count=nulls, children=[entries])
