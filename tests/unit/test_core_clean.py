"""The log cleaner's C loops (csrc/kr_clean.c): the offset map, record filtering and
batch rewriting (KIP-534 delete horizons included), checked against kafka-python's
reading of the output."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl import _core
from kafkarepl.errors import CorruptBatchError
from tests.batches import build_batch, decode

T0 = 1_700_000_000_000
DAY = 86_400_000


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


def header(b: bytes | bytearray) -> tuple[int, int, int, int]:
    """(attributes, base timestamp, max timestamp, records count) of a batch."""
    return (int.from_bytes(b[21:23], "big"), int.from_bytes(b[27:35], "big", signed=True),
            int.from_bytes(b[35:43], "big", signed=True), int.from_bytes(b[57:61], "big"))


def test_clean_batch_keeps_latest_values_and_rewrites_count_length_crc() -> None:
    m = new_map()
    keys = [b"a", b"b", b"a", b"c", b"b"]
    values = [b"a1", b"b1", b"a2", b"c1", b"b2"]
    batch = with_base(build_batch(values, keys=keys, producer_id=7, producer_epoch=2, base_sequence=40,
                                  timestamp=[T0 + i for i in range(5)]), 100)
    m.map_records(memoryview(batch)[61:], 5, 100)
    out = bytearray(3 * len(batch))
    n, kept, horizon = m.clean_batch(batch, T0, DAY, False, out, 0)
    assert kept == 3 and horizon is None  # a2, c1, b2; no tombstone: no delete horizon
    got = decode(out[:n])  # kafka-python checks the CRC
    assert got == [(102, T0 + 2, b"a", b"a2"), (103, T0 + 3, b"c", b"c1"), (104, T0 + 4, b"b", b"b2")]
    # Base offset, last offset delta, producer fields unchanged: offsets never move.
    assert out[:8] == batch[:8] and out[23:27] == batch[23:27] and out[43:57] == batch[43:57]
    assert header(out)[1:] == (T0, T0 + 4, 3)  # maxTimestamp of what is left


def test_a_kept_tombstone_gets_a_delete_horizon_then_goes_once_it_passed_kip534() -> None:
    m = new_map()
    ts = [T0 - 5 * DAY + i for i in range(4)]  # older than delete.retention.ms already
    batch = with_base(build_batch([b"a1", None, b"b1", b"a2"], keys=[b"a", b"c", b"b", b"a"], timestamp=ts), 10)
    m.map_records(memoryview(batch)[61:], 4, 10)
    out = bytearray(3 * len(batch))
    now = T0
    n, kept, horizon = m.clean_batch(batch, now, DAY, False, out, 0)
    first = bytes(out[:n])
    # The first cleaning keeps the tombstone, whatever its own timestamp, and marks the batch.
    assert kept == 3 and horizon == now + DAY
    attrs, base_ts, max_ts, count = header(first)
    assert attrs & _core.ATTR_DELETE_HORIZON and base_ts == now + DAY and max_ts == ts[3] and count == 3
    # Every record keeps its exact timestamp (base + re-encoded delta, as every reader computes).
    assert decode(first) == [(11, ts[1], b"c", None), (12, ts[2], b"b", b"b1"), (13, ts[3], b"a", b"a2")]
    # Before the horizon: kept as it is (no second rewrite, the horizon stays).
    n, kept, horizon = m.clean_batch(first, now + DAY - 1, DAY, False, out, 0)
    assert bytes(out[:n]) == first and kept == 3 and horizon == now + DAY
    # At the horizon: the tombstone goes; the rest keep their timestamps and the flag.
    n, kept, horizon = m.clean_batch(first, now + DAY, DAY, False, out, 0)
    assert kept == 2 and horizon is None
    assert decode(out[:n]) == [(12, ts[2], b"b", b"b1"), (13, ts[3], b"a", b"a2")]
    assert header(out[:n])[1:] == (now + DAY, ts[3], 2)


def test_a_horizon_rewrite_that_grows_the_batch_fits_in_three_times_its_size() -> None:
    m = new_map()
    # Tiny records with 1-byte timestamp deltas; the horizon makes each delta 10 bytes.
    keys = [b"%d" % i for i in range(50)]
    batch = with_base(build_batch([None] * 50, keys=keys, timestamp=-(1 << 62)), 0)
    m.map_records(memoryview(batch)[61:], 50, 0)
    with pytest.raises(ValueError, match="too small"):
        m.clean_batch(batch, 1 << 62, 0, False, bytearray(len(batch)), 0)
    out = bytearray(3 * len(batch))
    n, kept, horizon = m.clean_batch(batch, 1 << 62, 0, False, out, 0)
    assert kept == 50 and n >= len(batch) + 8 * 50 and horizon == 1 << 62
    assert [t for _o, t, _k, _v in decode(out[:n])] == [-(1 << 62)] * 50


def test_an_emptied_batch_goes_unless_it_must_keep_its_producer_state() -> None:
    m = new_map()
    old = with_base(build_batch([b"x"], keys=[b"k"], producer_id=5, producer_epoch=0, base_sequence=0), 0)
    new = with_base(build_batch([b"y"], keys=[b"k"]), 1)
    m.map_records(memoryview(old)[61:], 1, 0)
    m.map_records(memoryview(new)[61:], 1, 1)
    out = bytearray(3 * len(old))
    assert m.clean_batch(old, T0, DAY, False, out, 0) == (0, 0, None)
    n, kept, _h = m.clean_batch(old, T0, DAY, True, out, 0)
    assert kept == 0 and n == 61 and _core.validate_batches(out[:n])[0].records_count == 0
    assert out[43:57] == old[43:57]  # producer id, epoch, base sequence kept for dedupe
    assert header(out[:n])[1:] == (-1, header(old)[2], 0)  # as Kafka's writeEmptyHeader


def test_rebase_records_keeps_every_timestamp() -> None:
    ts = [T0 + 7, T0 - 3, T0 + 1000]
    batch = build_batch([b"1", None, b"3"], keys=[b"a", b"b", b"c"], timestamp=ts)
    recs, greatest = _core.rebase_records(memoryview(batch)[61:], 3, T0 + 7, T0 + DAY)
    assert greatest == T0 + 1000
    rebuilt = bytearray(batch[:61]) + recs
    rebuilt[8:12] = (len(rebuilt) - 12).to_bytes(4, "big")
    rebuilt[27:35] = (T0 + DAY).to_bytes(8, "big")
    rebuilt[17:21] = _core.crc32c(memoryview(rebuilt)[21:]).to_bytes(4, "big")
    assert [t for _o, t, _k, _v in decode(rebuilt)] == ts
    with pytest.raises(CorruptBatchError):
        _core.rebase_records(memoryview(batch)[61:], 3, (1 << 63) - 1, 0)  # timestamps past int64


def test_keyless_records_are_dropped_and_compressed_batches_refused() -> None:
    m = new_map()
    b = with_base(build_batch([b"v1", b"v2"], keys=[None, b"k"]), 0)
    m.map_records(memoryview(b)[61:], 2, 0)
    out = bytearray(3 * len(b))
    n, kept, _h = m.clean_batch(b, T0, DAY, False, out, 0)
    assert kept == 1 and decode(out[:n])[0][2] == b"k"
    gz = build_batch([b"v" * 100] * 20, keys=[b"k"] * 20, compression="gzip")
    assert gz[22] & 7 == 1
    with pytest.raises(CorruptBatchError, match="uncompressed"):
        m.clean_batch(gz, T0, DAY, False, bytearray(3 * len(gz)), 0)


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
    try:
        _core.rebase_records(data, count, T0, T0 + DAY)
    except CorruptBatchError:
        pass
    try:
        fields = _core.record_fields(data, count)
    except CorruptBatchError:
        pass
    else:  # every span inside the input
        assert len(fields) == count
        assert all((k is None or k in data) and (v is None or v in data) for _d, k, v in fields)


def test_record_fields_read_what_kafka_python_wrote() -> None:
    recs = [(b"k1", b"v1"), (None, b"no key"), (b"k3", None), (b"", b"")]
    batch = build_batch([v for _k, v in recs], keys=[k for k, _v in recs], timestamp=T0)
    fields = _core.record_fields(bytes(batch[61:]), len(recs))
    assert fields == [(i, k, v) for i, (k, v) in enumerate(recs)]
    assert [(o, k, v) for o, _t, k, v in decode(batch)] == fields
    with pytest.raises(CorruptBatchError):
        _core.record_fields(bytes(batch[61:-1]), len(recs))  # cut short
    with pytest.raises(CorruptBatchError):
        _core.record_fields(bytes(batch[61:]), 10**9)  # a count no section can hold


@settings(max_examples=200, deadline=None)
@given(st.integers(61, 200), st.binary(min_size=1, max_size=8))
def test_truncated_or_altered_batches_are_an_error_never_a_crash(cut: int, junk: bytes) -> None:
    m = new_map(16)
    b = bytes(with_base(build_batch([b"v" * 20] * 5, keys=[b"a", b"b", b"c", b"d", b"e"]), 0))
    for bad in (b[:cut], b[:cut] + junk + b[cut + len(junk):]):
        try:
            m.clean_batch(bad, T0, DAY, False, bytearray(3 * len(bad) + 8), 0)
        except CorruptBatchError:
            pass
