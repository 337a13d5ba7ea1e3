"""The leader's record validation (issue 10 items 2 and 4): csrc/kr_records.c through
_core, storage.validation's bounded decompressors and Log.append_as_leader."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkarepl import _core
from kafkarepl.errors import (
    CorruptBatchError,
    ErrorCode,
    InvalidBatchError,
    MessageTooLargeError,
)
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.timestamps import first_record_at_or_after, records_section
from kafkarepl.storage.validation import DecompressionBudget, check_compressed, request_budget
from tests.batches import CODECS, build_batch, decode

T0 = 1_700_000_000_000
HEADER = struct.Struct(">qiibIhiqqqhii")


def zz(n: int) -> bytes:
    """Zigzag varint."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def record(offset_delta: int, value: bytes | None = b"v", ts_delta: int = 0,
           key: bytes | None = None, headers: list[tuple[bytes, bytes | None]] = ()) -> bytes:
    body = b"\x00" + zz(ts_delta) + zz(offset_delta)
    body += zz(-1) if key is None else zz(len(key)) + key
    body += zz(-1) if value is None else zz(len(value)) + value
    body += zz(len(headers))
    for hk, hv in headers:
        body += zz(len(hk)) + hk + (zz(-1) if hv is None else zz(len(hv)) + hv)
    return zz(len(body)) + body


def compress(codec: int, data: bytes) -> bytes:
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return lz4.frame.compress(data)
    if codec == 4:
        return zstandard.ZstdCompressor().compress(data)
    return data


def xerial(data: bytes, block: int = 32 * 1024) -> bytes:
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for i in range(0, len(data), block):
        c = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += struct.pack(">i", len(c)) + c
    return out


def raw_batch(payload: bytes, count: int, attributes: int = 0, max_ts: int | None = None,
              last_offset_delta: int | None = None) -> bytearray:
    """A v2 batch around an arbitrary records payload, with a correct CRC."""
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    head = HEADER.pack(0, 49 + len(payload), 0, 2, 0, attributes, max(lod, 0), T0,
                       T0 if max_ts is None else max_ts, -1, -1, -1, count)
    buf = bytearray(head + payload)
    struct.pack_into(">I", buf, 17, _core.crc32c(buf[21:]))
    return buf


def good_records(n: int = 5) -> bytes:
    return b"".join(record(i, b"value-%d" % i, ts_delta=i) for i in range(n))


@pytest.fixture
def log(tmp_path):
    """A log that walks uncompressed records too (kafkarepl.validate.uncompressed.records)."""
    lg = Log.open(tmp_path / "t-0", LogConfig(validate_uncompressed_records=True))
    yield lg
    lg.close()


@pytest.fixture
def unwalked_log(tmp_path):
    lg = Log.open(tmp_path / "d-0", LogConfig(validate_uncompressed_records=False))
    yield lg
    lg.close()


def test_default_config_walks_uncompressed_records(tmp_path):
    """As Kafka's LogValidator: a CRC-valid uncompressed batch with malformed records is
    refused by default."""
    lg = Log.open(tmp_path / "w-0", LogConfig())
    try:
        with pytest.raises(InvalidBatchError):
            lg.append_as_leader(raw_batch(record(0) + record(5), 2, 0), 0, T0)  # wrong offset delta
        assert lg.log_end_offset == 0
    finally:
        lg.close()


def test_opt_out_leaves_uncompressed_records_unwalked(unwalked_log):
    """kafkarepl.validate.uncompressed.records=false: header checks only for uncompressed
    batches (which already bound the count by the bytes), compressed batches in full."""
    assert not LogConfig.from_props({"kafkarepl.validate.uncompressed.records": "false"}) \
        .validate_uncompressed_records
    bad = raw_batch(record(0) + record(5), 2, 0)  # wrong offset delta, sound CRC
    unwalked_log.append_as_leader(bad, 0, T0)
    assert unwalked_log.log_end_offset == 2
    with pytest.raises(InvalidBatchError):
        unwalked_log.append_as_leader(raw_batch(compress(1, record(0) + record(5)), 2, 1), 0, T0)
    with pytest.raises(CorruptBatchError):  # header: 2^31-1 records cannot fit
        unwalked_log.append_as_leader(raw_batch(record(0), 0x7FFFFFFF, 0), 0, T0)
    with pytest.raises(InvalidBatchError):
        unwalked_log.append_as_leader(raw_batch(b"", 0, 0, last_offset_delta=0), 0, T0)
    assert unwalked_log.log_end_offset == 2


# ---- accepted: what real clients send --------------------------------------------------

@pytest.mark.parametrize("codec", list(CODECS))
def test_client_batches_accepted(log, codec):
    batch = build_batch([b"a" * 100, None, b"c"], compression=codec, keys=[b"k", None, b""],
                        timestamp=[T0 + 5, T0 + 1, T0 + 3])
    info = log.append_as_leader(batch, 0, T0)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert info.max_timestamp == T0 + 5


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_hand_built_compressed_batches(log, codec):
    recs = b"".join(record(i, os.urandom(50), ts_delta=i, headers=[(b"h", None), (b"k", b"v")])
                    for i in range(300))
    log.append_as_leader(raw_batch(compress(codec, recs), 300, codec, max_ts=T0 + 299), 0, T0)
    assert log.log_end_offset == 300


def test_xerial_snappy_multiblock(log):
    recs = b"".join(record(i, os.urandom(200)) for i in range(1000))  # > 32 KiB: many blocks
    log.append_as_leader(raw_batch(xerial(recs), 1000, 2), 0, T0)
    assert log.log_end_offset == 1000


def test_concatenated_gzip_members_and_zstd_frames(log):
    recs = good_records(10)
    two_gzip = gzip.compress(recs[:30]) + gzip.compress(recs[30:])
    log.append_as_leader(raw_batch(two_gzip, 10, 1, max_ts=T0 + 9), 0, T0)
    zc = zstandard.ZstdCompressor()
    two_zstd = zc.compress(recs[:17]) + zc.compress(recs[17:])
    log.append_as_leader(raw_batch(two_zstd, 10, 4, max_ts=T0 + 9), 0, T0)
    assert log.log_end_offset == 20


# ---- refused: garbage, lies, bombs -------------------------------------------------------

@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_payload_is_corrupt(log, codec):
    # Accepted with error 0 before the fix (issue 10 item 4).
    with pytest.raises(CorruptBatchError) as e:
        log.append_as_leader(raw_batch(os.urandom(300), 3, codec), 0, T0)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_non_records_are_corrupt(log, codec):
    with pytest.raises(CorruptBatchError):
        log.append_as_leader(raw_batch(compress(codec, b"\x00" * 5000), 3, codec), 0, T0)
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_compressed_payload_is_corrupt(log, codec):
    data = compress(codec, good_records(50))
    with pytest.raises(CorruptBatchError):
        log.append_as_leader(raw_batch(data[: len(data) - 5], 50, codec), 0, T0)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_count_lie_of_2_31_records_refused(log, codec):
    """A ~60-byte batch claiming 2^31-1 records moved the LEO by 2^31 before the fix."""
    data = compress(codec, record(0))
    batch = raw_batch(data, 0x7FFFFFFF, codec)
    with pytest.raises((InvalidBatchError, CorruptBatchError)) as e:
        log.append_as_leader(batch, 0, T0)
    assert e.value.code in (ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE)
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [0, 1, 4])
@pytest.mark.parametrize("count", [4, 6])
def test_count_mismatch_is_invalid_record(log, codec, count):
    with pytest.raises(InvalidBatchError) as e:
        log.append_as_leader(raw_batch(compress(codec, good_records(5)), count, codec), 0, T0)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [0, 3])
def test_offset_deltas_must_be_0_to_n_minus_1(log, codec):
    recs = record(0) + record(2) + record(1)
    with pytest.raises(InvalidBatchError, match="offsetDelta"):
        log.append_as_leader(raw_batch(compress(codec, recs), 3, codec), 0, T0)


def test_empty_producer_batch_refused(log):
    with pytest.raises(InvalidBatchError):
        log.append_as_leader(raw_batch(b"", 0, 0, last_offset_delta=0), 0, T0)


@pytest.mark.parametrize("bad", [
    zz(5) + b"\x00\x00\x00",                          # record length past its fields
    zz(7) + b"\x00\x00\x00\x01\x00\x00\x00",           # key length -> bytes past the record
    zz(6) + b"\x00" + b"\xff" * 5,                     # varint too long
    zz(-3) + b"\x00" * 5,                              # negative record length
    zz(8) + b"\x00\x00\x00\x01\x01\x00\x00",          # trailing byte inside the record
])
def test_malformed_uncompressed_records_are_corrupt(log, bad):
    with pytest.raises(CorruptBatchError):
        log.append_as_leader(raw_batch(bad, 1, 0), 0, T0)


def test_timestamp_overflow_invalid(log):
    batch = raw_batch(record(0, ts_delta=2**63 - 1), 1, 0)
    with pytest.raises(InvalidBatchError, match="overflow"):
        log.append_as_leader(batch, 0, T0)


def test_negative_header_count_and_null_header_key_invalid(log):
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(-1)
    with pytest.raises(InvalidBatchError, match="header count"):
        log.append_as_leader(raw_batch(zz(len(body)) + body, 1, 0), 0, T0)
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(-1) + zz(-1)
    with pytest.raises(InvalidBatchError, match="headerKeyLength"):
        log.append_as_leader(raw_batch(zz(len(body)) + body, 1, 0), 0, T0)


def one_huge_record(value_size: int) -> bytes:
    return record(0, b"\x00" * value_size)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_bomb_refused_within_budget(codec):
    batch = raw_batch(compress(codec, one_huge_record(3 << 20)), 1, codec)
    batches, _ = _core.validate_leader_batches(batch)
    budget = DecompressionBudget(1 << 20)
    with pytest.raises(MessageTooLargeError):
        check_compressed(memoryview(batch), batches, [], budget)
    # it stopped within one piece past the budget
    assert budget.used <= (1 << 20) + (256 << 10) + 1 or codec == 2


def test_request_budget_is_shared_by_the_batches_of_a_request(log):
    batch = raw_batch(compress(4, one_huge_record(600 << 10)), 1, 4)
    request_budget(1 << 20)
    try:
        log.append_as_leader(bytearray(batch), 0, T0)  # 600 KiB of the 1 MiB
        with pytest.raises(MessageTooLargeError) as e:
            log.append_as_leader(bytearray(batch), 0, T0)
        assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    finally:
        request_budget()
    assert log.log_end_offset == 1


def test_count_beyond_budget_refused_before_inflating():
    batch = raw_batch(compress(1, good_records(3)), 10_000_000, 1)
    batches, _ = _core.validate_leader_batches(batch)
    budget = DecompressionBudget(1 << 20)
    with pytest.raises(InvalidBatchError):
        check_compressed(memoryview(batch), batches, [], budget)
    assert budget.used == 0


@pytest.mark.parametrize("codec", [0, 1, 3])
def test_wrong_max_timestamp_rewritten_as_kafka_does(log, codec):
    recs = b"".join(record(i, ts_delta=10 * i) for i in range(4))  # max = T0 + 30
    log.append_as_leader(raw_batch(compress(codec, recs), 4, codec, max_ts=T0 + 999), 0, T0)
    stored = log.read(0, 1 << 20)
    data = _core.file_pread(stored.fd, stored.size, stored.position)
    assert HEADER.unpack_from(data, 0)[8] == T0 + 30
    _core.validate_batches(data)  # CRC redone
    assert [r[1] for r in decode(data)] == [T0, T0 + 10, T0 + 20, T0 + 30]


# ---- ListOffsets by timestamp: streamed and bounded --------------------------------------

@pytest.mark.parametrize("codec", list(CODECS))
def test_first_record_at_or_after(codec):
    batch = bytes(build_batch(5, compression=codec, timestamp=[T0, T0 + 10, T0 + 5, T0 + 20, T0]))
    assert first_record_at_or_after(batch, T0 + 6) == (1, T0 + 10)
    assert first_record_at_or_after(batch, T0 + 15) == (3, T0 + 20)
    assert first_record_at_or_after(batch, T0 + 21) is None
    assert len(records_section(batch)) > 0


def test_first_record_at_or_after_stored_bomb_is_bounded():
    """A bomb stored before validation existed (or by an old leader) costs at most the
    default budget: MessageTooLarge, not 1 GiB of memory."""
    batch = bytes(raw_batch(compress(4, one_huge_record(80 << 20)), 1, 4, max_ts=T0 + 1))
    with pytest.raises(MessageTooLargeError):
        records_section(batch)
    # the search itself stops at the first record: no need to inflate the rest
    assert first_record_at_or_after(batch, T0) == (0, T0)


# ---- the two C walkers agree; random and mutated input -----------------------------------

def verdict(fn) -> str:
    try:
        fn()
        return "ok"
    except InvalidBatchError:
        return "invalid"
    except CorruptBatchError:
        return "corrupt"


def streamed(data: bytes, count: int, cuts: list[int]) -> None:
    w = _core.RecordsValidator(count, T0)
    prev = 0
    for c in sorted(min(c, len(data)) for c in cuts):
        w.feed(data[prev:c])
        prev = c
    w.feed(data[prev:])
    w.finish()


SAMPLE = good_records(6) + b"".join(
    record(6 + i, b"x" * (i * 70), key=b"k", headers=[(b"h", b"v")]) for i in range(3))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_walkers_agree_on_mutations(data):
    buf = bytearray(SAMPLE)
    for _ in range(data.draw(st.integers(0, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "byte"]))
        if not buf:
            break
        i = data.draw(st.integers(0, len(buf) - 1))
        if op == "flip":
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "byte":
            buf[i] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x01, 0x0F]))
        elif op == "cut":
            del buf[i:]
        else:
            buf[i:i] = data.draw(st.binary(max_size=6))
    count = data.draw(st.sampled_from([9, 9, 9, 8, 10, 0, 0x7FFFFFFF]))
    cuts = data.draw(st.lists(st.integers(0, len(buf)), max_size=6))
    whole = verdict(lambda: _core.check_records(bytes(buf), count, T0))
    assert whole == verdict(lambda: streamed(bytes(buf), count, cuts))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(-1, 50))
def test_walkers_agree_on_random_bytes(blob, count):
    count = max(count, 0)
    assert verdict(lambda: _core.check_records(blob, count, T0)) == \
        verdict(lambda: streamed(blob, count, [len(blob) // 3, len(blob) // 2]))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([1, 2, 3, 4]))
def test_random_compressed_payloads_never_crash(blob, codec):
    batch = raw_batch(blob, 3, codec)
    batches, _ = _core.validate_leader_batches(batch)
    try:
        check_compressed(memoryview(batch), batches, [], DecompressionBudget(1 << 20))
    except (CorruptBatchError, InvalidBatchError, MessageTooLargeError):
        pass


def test_zlib_raw_deflate_is_not_gzip(log):
    # Kafka's gzip codec is the gzip format; a bare deflate stream is corrupt
    with pytest.raises(CorruptBatchError):
        log.append_as_leader(raw_batch(zlib.compress(good_records(2)), 2, 1), 0, T0)
