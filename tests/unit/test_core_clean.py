"""The log cleaner's C loops (csrc/kr_clean.c): the offset map, record filtering and
batch rewriting, checked against kafka-python's reading of the output."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl import _core
from kafkarepl.errors import CorruptBatchError
from tests.batches import build_batch, decode


def new_map(capacity: int = 1024, load: float = 0.9) -> _core.OffsetMap:
    return _core.OffsetMap(np.zeros(2 * capacity, dtype=np.uint64), capacity, load)


def with_base(batch: bytearray, base: int) -> bytearray:
    _core.assign_offsets(batch, base, 0)
    return batch


def test_map_keeps_each_keys_latest_offset_and_fills_up_at_its_load_limit() -> None:
    m = new_map(8, 0.5)  # 4 keys at most
    b = with_base(build_batch([b"v"] * 3, keys=[b"a", b"b", b"a"]), 10)
    assert m.map_records(memoryview(b)[61:], 3, 10) == (False, 3)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"zz"), m.size) == (12, 11, -1, 2)
    b2 = with_base(build_batch([b"v"] * 4, keys=[b"c", b"d", b"e", b"f"]), 13)
    full, mapped = m.map_records(memoryview(b2)[61:], 4, 13)
    assert full and mapped == 2 and m.size == m.limit == 4
    m.clear()
    assert m.size == 0 and m.get(b"a") == -1


def test_clean_batch_keeps_latest_values_and_rewrites_count_length_crc() -> None:
    m = new_map()
    keys = [b"a", b"b", b"a", b"c", b"b"]
    values = [b"a1", b"b1", b"a2", None, b"b2"]  # c's latest is a tombstone
    batch = with_base(build_batch(values, keys=keys, producer_id=7, producer_epoch=2, base_sequence=40), 100)
    m.map_records(memoryview(batch)[61:], 5, 100)
    out = bytearray(len(batch))
    n, kept = m.clean_batch(batch, True, False, out, 0)
    assert kept == 3  # a2, c (tombstone kept), b2
    got = decode(out[:n])  # kafka-python checks the CRC
    assert [(o, k, v) for o, _, k, v in got] == [(102, b"a", b"a2"), (103, b"c", None), (104, b"b", b"b2")]
    # Base offset, last offset delta, producer fields unchanged: offsets never move.
    assert out[:8] == batch[:8] and out[23:27] == batch[23:27] and out[43:57] == batch[43:57]
    n, kept = m.clean_batch(batch, False, False, out, 0)  # past delete.retention.ms
    assert kept == 2 and [k for _, _, k, _ in decode(out[:n])] == [b"a", b"b"]


def test_an_emptied_batch_goes_unless_it_must_keep_its_producer_state() -> None:
    m = new_map()
    old = with_base(build_batch([b"x"], keys=[b"k"], producer_id=5, producer_epoch=0, base_sequence=0), 0)
    new = with_base(build_batch([b"y"], keys=[b"k"]), 1)
    m.map_records(memoryview(old)[61:], 1, 0)
    m.map_records(memoryview(new)[61:], 1, 1)
    out = bytearray(len(old))
    assert m.clean_batch(old, True, False, out, 0) == (0, 0)
    n, kept = m.clean_batch(old, True, True, out, 0)
    assert kept == 0 and n == 61 and _core.validate_batches(out[:n])[0].records_count == 0
    assert out[43:57] == old[43:57]  # producer id, epoch, base sequence kept for dedupe


def test_keyless_records_are_dropped_and_compressed_batches_refused() -> None:
    m = new_map()
    b = with_base(build_batch([b"v1", b"v2"], keys=[None, b"k"]), 0)
    m.map_records(memoryview(b)[61:], 2, 0)
    out = bytearray(len(b))
    n, kept = m.clean_batch(b, True, False, out, 0)
    assert kept == 1 and decode(out[:n])[0][2] == b"k"
    gz = build_batch([b"v" * 100] * 20, keys=[b"k"] * 20, compression="gzip")
    assert gz[22] & 7 == 1
    with pytest.raises(CorruptBatchError, match="uncompressed"):
        m.clean_batch(gz, True, False, bytearray(len(gz) + 64), 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 50))
def test_malformed_records_are_an_error_never_a_crash(data: bytes, count: int) -> None:
    m = new_map(16)
    try:
        m.map_records(data, count, 0)
    except CorruptBatchError:
        pass
    try:
        m.filter_records(data, count, 0, True)
    except CorruptBatchError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.integers(61, 200), st.binary(min_size=1, max_size=8))
def test_truncated_or_altered_batches_are_an_error_never_a_crash(cut: int, junk: bytes) -> None:
    m = new_map(16)
    b = bytes(with_base(build_batch([b"v" * 20] * 5, keys=[b"a", b"b", b"c", b"d", b"e"]), 0))
    for bad in (b[:cut], b[:cut] + junk + b[cut + len(junk):]):
        try:
            m.clean_batch(bad, True, False, bytearray(len(bad) + 8), 0)
        except CorruptBatchError:
            pass
