"""Record batch v2 walking, validation and in-place offset assignment in the C core.

Batches come from kafka-python's independent builder (and are read back with its
reader), so the C field decoding and CRC coverage are checked against another
implementation, not against themselves.
"""

from __future__ import annotations

import random
import struct

import crc32c as crc32c_ref
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkarepl import _core
from kafkarepl.errors import CorruptBatchError

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header
assert HEADER.size == _core.BATCH_HEADER_SIZE == 61


def build_batch(n_records: int, compression: int = 0, *, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, value_size: int = 20,
                ts0: int = 1_700_000_000_000, seed: int = 0) -> bytearray:
    rnd = random.Random(seed)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, batch_size=1 << 30)
    for i in range(n_records):
        key = b"key-%d" % i if i % 3 else None
        headers = [("h", b"x")] if i % 4 == 0 else []
        builder.append(i, ts0 + rnd.randrange(0, 1000), key, rnd.randbytes(value_size), headers)
    return builder.build()


def raw_batch(records: bytes, records_count: int, last_offset_delta: int, *,
              attributes: int = 0, magic: int = 2, base_offset: int = 0, epoch: int = 0) -> bytes:
    """A hand-assembled batch with a correct CRC, for header cases no builder emits."""
    batch_length = HEADER.size - 12 + len(records)
    header = HEADER.pack(base_offset, batch_length, epoch, magic, 0, attributes,
                         last_offset_delta, 1000, 1000, -1, -1, -1, records_count)
    body = header[21:] + records
    crc = crc32c_ref.crc32c(body)
    return header[:17] + struct.pack(">I", crc) + body


def several_batches() -> tuple[bytearray, list[int]]:
    counts = [5, 1, 10, 3, 7]
    parts = [build_batch(n, compression=i % 5, producer_id=1000 + i, producer_epoch=i,
                         base_sequence=10 * i, seed=i) for i, n in enumerate(counts)]
    return bytearray(b"".join(parts)), [len(p) for p in parts]


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_builder_batches_validate_with_correct_fields(compression):
    buf = bytes(build_batch(25, compression, producer_id=42, producer_epoch=3, base_sequence=17))
    [info] = _core.validate_batches(buf)
    ref = DefaultRecordBatch(buf)
    assert info.position == 0 and info.size == len(buf) == ref.size_in_bytes
    assert info.base_offset == ref.base_offset == 0
    assert info.last_offset_delta == ref.last_offset_delta == 24
    assert info.records_count == ref.records_count == 25
    assert info.partition_leader_epoch == ref.leader_epoch
    assert info.magic == 2
    assert info.crc == ref.crc
    assert info.attributes == ref.attributes and info.attributes & 7 == compression
    assert info.first_timestamp == ref.first_timestamp
    assert info.max_timestamp == ref.max_timestamp
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (42, 3, 17)
    assert isinstance(info, _core.BatchInfo) and len(info) == 14


def test_scan_walks_consecutive_batches():
    buf, sizes = several_batches()
    batches, valid, error, error_pos = _core.scan_batches(buf)
    assert (valid, error, error_pos) == (len(buf), None, -1)
    assert [b.size for b in batches] == sizes
    positions = [sum(sizes[:i]) for i in range(len(sizes))]
    assert [b.position for b in batches] == positions
    assert [b.producer_id for b in batches] == [1000, 1001, 1002, 1003, 1004]
    # starting in the middle reports positions relative to the buffer start
    later, valid2, err2, _ = _core.scan_batches(buf, positions[2])
    assert [b.position for b in later] == positions[2:] and valid2 == len(buf) and err2 is None


def test_scan_in_chunks_with_max_batches():
    buf, sizes = several_batches()
    start, seen = 0, []
    while True:
        batches, valid, error, _ = _core.scan_batches(buf, start, True, 2)
        assert error is None and len(batches) <= 2
        seen += batches
        if valid == len(buf):
            break
        assert len(batches) == 2
        start = valid
    assert seen == _core.validate_batches(buf)
    with pytest.raises(ValueError):
        _core.scan_batches(buf, 0, True, -1)


def test_empty_buffer_is_valid():
    assert _core.scan_batches(b"") == ([], 0, None, -1)
    assert _core.validate_batches(bytearray()) == []


def test_flipped_byte_under_crc_is_rejected_at_its_batch():
    buf, sizes = several_batches()
    second = sizes[0]
    for batch_pos, size in ((0, sizes[0]), (second, sizes[1])):
        for i in range(batch_pos + 21, batch_pos + size):
            bad = bytearray(buf)
            bad[i] ^= 0x40
            with pytest.raises(CorruptBatchError) as exc:
                _core.validate_batches(bad)
            assert exc.value.position == batch_pos, i
            batches, valid, error, error_pos = _core.scan_batches(bad)
            assert (len(batches), valid, error_pos) == (1 if batch_pos else 0, batch_pos, batch_pos)


def test_crc_mismatch_reason_names_both_values():
    buf = build_batch(3)
    buf[-1] ^= 1
    with pytest.raises(CorruptBatchError) as exc:
        _core.validate_batches(buf)
    stored = struct.unpack_from(">I", buf, 17)[0]
    computed = crc32c_ref.crc32c(bytes(buf[21:]))
    assert exc.value.reason == f"CRC mismatch: stored 0x{stored:08x} computed 0x{computed:08x}"
    # skipping the CRC accepts it
    assert len(_core.validate_batches(buf, check_crc=False)) == 1


def test_truncation_anywhere_in_last_batch_keeps_the_prefix():
    buf, sizes = several_batches()
    last_start = len(buf) - sizes[-1]
    for cut in range(last_start + 1, len(buf)):
        batches, valid, error, error_pos = _core.scan_batches(memoryview(buf)[:cut])
        assert valid == last_start and error_pos == last_start, cut
        assert len(batches) == len(sizes) - 1
        assert error is not None
        with pytest.raises(CorruptBatchError) as exc:
            _core.validate_batches(bytes(buf[:cut]))
        assert exc.value.position == last_start
    torn = bytes(buf[: last_start + 40])
    assert _core.scan_batches(torn)[2] == (
        f"batch length {sizes[-1] - 12} at position {last_start} runs past the end of the "
        f"buffer ({last_start + 40} bytes)")
    assert _core.scan_batches(torn[: last_start + 5])[2].startswith("truncated batch header")


def test_invalid_magic():
    good = raw_batch(b"\x00" * 7, 1, 0)
    bad = bytearray(good)
    bad[16] = 1
    with pytest.raises(CorruptBatchError, match=r"invalid magic 1 \(expected 2\)"):
        _core.validate_batches(bad)


@pytest.mark.parametrize("length", [-1, 0, 48, -(2**31)])
def test_batch_length_below_minimum(length):
    buf = bytearray(raw_batch(b"\x00" * 7, 1, 0))
    struct.pack_into(">i", buf, 8, length)
    with pytest.raises(CorruptBatchError, match="below the minimum 49"):
        _core.validate_batches(buf)


def test_huge_batch_length_runs_past_end():
    buf = bytearray(raw_batch(b"\x00" * 7, 1, 0))
    struct.pack_into(">i", buf, 8, 2**31 - 1)
    with pytest.raises(CorruptBatchError, match="runs past the end of the buffer"):
        _core.validate_batches(buf)


@pytest.mark.parametrize(
    ("records", "count", "delta", "attributes", "reason"),
    [
        (b"\x00" * 14, 2, 0, 0, "recordsCount 2 exceeds the 1 offsets of lastOffsetDelta 0"),
        (b"\x00" * 14, -1, 0, 0, "negative recordsCount -1"),
        (b"\x00" * 14, 1, -1, 0, "negative lastOffsetDelta -1"),
        (b"\x00" * 13, 2, 1, 0, "recordsCount 2 cannot fit in 13 bytes of records"),
        (b"\x00" * 14, 2, 1, 5, "invalid compression type 5"),
    ],
)
def test_incoherent_headers_are_rejected(records, count, delta, attributes, reason):
    with pytest.raises(CorruptBatchError, match=reason):
        _core.validate_batches(raw_batch(records, count, delta, attributes=attributes))


def test_fewer_records_than_offsets_is_a_compacted_batch_but_no_producer_batch():
    # Compaction keeps lastOffsetDelta and removes records: stored, replicated, read back.
    buf = raw_batch(b"\x00" * 14, 2, 5)
    [info] = _core.validate_batches(buf)
    assert (info.records_count, info.last_offset_delta) == (2, 5)
    # A producer numbers its records 0..count-1: the leader refuses anything else.
    with pytest.raises(CorruptBatchError, match="lastOffsetDelta 5 does not match recordsCount 2"):
        _core.validate_leader_batches(bytearray(buf))


def test_compressed_batch_may_hold_more_records_than_bytes():
    # 100 records in 20 compressed bytes is legal; never decompressed here
    [info] = _core.validate_batches(raw_batch(b"\x01" * 20, 100, 99, attributes=4))
    assert info.records_count == 100


def test_empty_batch_is_accepted():
    [info] = _core.validate_batches(raw_batch(b"", 0, 0))
    assert info.records_count == 0 and info.size == 61


def test_trailing_garbage_is_an_error():
    buf, sizes = several_batches()
    with pytest.raises(CorruptBatchError) as exc:
        _core.validate_batches(bytes(buf) + b"\x00" * 5)
    assert exc.value.position == len(buf)


def test_scan_start_out_of_range():
    with pytest.raises(ValueError):
        _core.scan_batches(b"abc", 4)
    with pytest.raises(ValueError):
        _core.scan_batches(b"abc", -1)


def test_assign_offsets_in_place_keeps_crc_valid():
    buf, sizes = several_batches()
    original = bytes(buf)
    assert _core.assign_offsets(buf, 100, 7) == 100 + 5 + 1 + 10 + 3 + 7
    batches = _core.validate_batches(buf)  # CRC still valid: both fields lie outside it
    assert [b.base_offset for b in batches] == [100, 105, 106, 116, 119]
    assert {b.partition_leader_epoch for b in batches} == {7}
    # only baseOffset and partitionLeaderEpoch changed
    pos = 0
    for size in sizes:
        assert buf[pos + 8 : pos + 12] == original[pos + 8 : pos + 12]
        assert buf[pos + 16 : pos + size] == original[pos + 16 : pos + size]
        pos += size
    # kafka-python reads the assigned offsets back record by record
    first = DefaultRecordBatch(bytes(buf[: sizes[0]]))
    assert [r.offset for r in first] == [100, 101, 102, 103, 104]
    assert first.leader_epoch == 7


def test_assign_offsets_requires_writable_buffer():
    buf = bytes(build_batch(2))
    with pytest.raises(BufferError):
        _core.assign_offsets(buf, 0, 0)


def test_assign_offsets_leaves_corrupt_buffer_untouched():
    buf, sizes = several_batches()
    struct.pack_into(">i", buf, sizes[0] + 8, 10**9)  # second batch runs past the end
    before = bytes(buf)
    with pytest.raises(CorruptBatchError) as exc:
        _core.assign_offsets(buf, 50, 1)
    assert exc.value.position == sizes[0]
    assert bytes(buf) == before


@pytest.mark.parametrize(("base", "epoch"), [(-1, 0), (0, 2**31), (2**63, 0), (0, -(2**31) - 1)])
def test_assign_offsets_argument_ranges(base, epoch):
    with pytest.raises(ValueError):
        _core.assign_offsets(build_batch(1), base, epoch)


def test_assign_offsets_overflow_is_rejected():
    with pytest.raises(CorruptBatchError, match="overflow"):
        _core.assign_offsets(build_batch(3), 2**63 - 2, 0)


def test_set_partition_leader_epoch():
    buf, _ = several_batches()
    _core.assign_offsets(buf, 10, 1)
    _core.set_partition_leader_epoch(buf, 9)
    batches = _core.validate_batches(buf)
    assert {b.partition_leader_epoch for b in batches} == {9}
    assert batches[0].base_offset == 10  # offsets untouched


# ---- fuzzing: arbitrary bytes must only ever yield results or CorruptBatchError ----

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
VALID, _ = several_batches()
VALID = bytes(VALID)


def check_scan_invariants(data: bytes, start: int) -> None:
    batches, valid, error, error_pos = _core.scan_batches(data, start)
    assert start <= valid <= len(data)
    assert sum(b.size for b in batches) == valid - start
    if error is None:
        assert valid == len(data) and error_pos == -1
    else:
        assert error_pos == valid and isinstance(error, str) and error


@FUZZ
@given(st.binary(max_size=2000), st.integers(0, 2000))
def test_fuzz_scan_random_bytes(data, start):
    check_scan_invariants(data, min(start, len(data)))
    try:
        _core.validate_batches(data)
    except CorruptBatchError as exc:
        assert 0 <= exc.position < len(data)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=8),
       st.integers(0, len(VALID)), st.booleans())
def test_fuzz_mutated_batches(edits, cut, check_crc):
    data = bytearray(VALID[:cut])
    for pos, value in edits:
        if pos < len(data):
            data[pos] = value
    check_scan_invariants(bytes(data), 0)
    try:
        infos = _core.validate_batches(data, check_crc)
    except CorruptBatchError as exc:
        assert 0 <= exc.position <= len(data)
    else:
        assert sum(b.size for b in infos) == len(data)
    try:
        _core.assign_offsets(data, 5, 1)
    except CorruptBatchError:
        pass


@FUZZ
@given(st.binary(min_size=12, max_size=300), st.integers(-(2**31), 2**31 - 1))
def test_fuzz_header_with_random_length(body, length):
    data = bytearray(body)
    struct.pack_into(">i", data, 8, length)
    data[16:17] = b"\x02" if len(data) > 16 else b""
    check_scan_invariants(bytes(data), 0)
