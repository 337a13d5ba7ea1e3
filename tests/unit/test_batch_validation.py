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
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
)
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.records import produce_records_error
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


# ---- client-only rules: one batch at base offset 0 (Kafka's AppendOrigin.CLIENT) ---------

def with_base_offset(batch: bytes | bytearray, base: int) -> bytearray:
    """The batch with another baseOffset (outside the CRC, which stays valid)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base)
    return out


@pytest.mark.parametrize("codecs", [("none", "none"), ("gzip", "gzip"), ("none", "zstd"), ("lz4", "none")])
def test_client_records_holding_two_batches_are_refused(log, codecs):
    """Accepted with error 0 before: Kafka's LogValidator takes one batch per append
    (getFirstBatchAndMaybeValidateNoMoreBatches), compressed or not."""
    two = build_batch([b"a", b"b"], compression=codecs[0]) + build_batch([b"c"], compression=codecs[1])
    with pytest.raises(InvalidRecordError) as e:
        log.append_as_leader(two, 0, T0, client=True)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert str(e.value) == "Compressed outer record has more than one batch"
    assert log.log_end_offset == 0


def test_the_brokers_own_appends_may_hold_several_batches(log):
    """Without `client` (coordinators, tools) the log still takes several batches, as its
    follower-side and recovery logic do."""
    two = build_batch([b"a", b"b"]) + build_batch([b"c"], compression="gzip")
    info = log.append_as_leader(two, 0, T0)
    assert (info.first_offset, info.last_offset) == (0, 2)


@pytest.mark.parametrize("codec", ["none", "snappy"])
def test_client_batch_base_offset_must_be_0(log, codec):
    bad = with_base_offset(build_batch([b"a"], compression=codec), 42)
    with pytest.raises(InvalidRecordError) as e:
        log.append_as_leader(bad, 0, T0, client=True)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert str(e.value) == "The baseOffset of the record batch in the append to t-0 should be 0, but it is 42"
    # checked before the CRC, as Kafka's analyzeAndValidateRecords does
    bad[-1] ^= 0xFF
    with pytest.raises(InvalidRecordError, match="should be 0, but it is 42"):
        log.append_as_leader(bad, 0, T0, client=True)
    # a second batch's base offset is named before the batch count
    two = build_batch([b"a"]) + with_base_offset(build_batch([b"b"]), 7)
    with pytest.raises(InvalidRecordError, match="should be 0, but it is 7"):
        log.append_as_leader(two, 0, T0, client=True)
    assert log.log_end_offset == 0
    # the broker's own appends keep any base offset: the log assigns it
    log.append_as_leader(with_base_offset(build_batch([b"a"]), 42), 0, T0)
    assert log.log_end_offset == 1


@pytest.mark.parametrize("producer_id", [7, -1])
def test_clients_may_not_write_control_batches(log, producer_id):
    """Transaction markers come from the broker's WriteTxnMarkers only: a producer's control
    batch is refused, with a producer id or without one (Kafka refuses both)."""
    from kafkarepl.coordinator.records import build_marker

    for client in (True, False):
        with pytest.raises(InvalidRecordError, match="may not write control batches"):
            log.append_as_leader(build_marker(producer_id, 0, True, 3, T0), 0, T0, client=client)
    assert log.log_end_offset == 0


def test_coordinator_records_meet_the_client_rules(log):
    """The group and transaction coordinators and WriteTxnMarkers append with
    client=False; what they build is one batch at base offset 0 all the same."""
    from kafkarepl.coordinator.records import build_batch as coordinator_batch
    from kafkarepl.coordinator.records import build_marker

    log.append_as_leader(coordinator_batch([(b"k", b"v"), (b"k2", None)], T0), 0, T0, client=True)
    log.append_as_leader(build_marker(7, 0, True, 3, T0), 0, T0, control_allowed=True)
    assert len(_core.validate_batches(build_marker(7, 0, True, 3, T0))) == 1
    assert log.log_end_offset == 3


@pytest.mark.parametrize(("records", "code", "message"), [
    (b"", ErrorCode.INVALID_RECORD, "must have at least one record batch per partition"),
    (None, ErrorCode.INVALID_RECORD, "must have at least one record batch per partition"),
    (bytes(build_batch([b"a"]))[:-1], ErrorCode.INVALID_RECORD, "at least one record batch"),
    (bytes(build_batch([b"a"]) + build_batch([b"b"])), ErrorCode.INVALID_RECORD,
     "only allowed to contain exactly one record batch per partition"),
    (bytes(build_batch([b"a"], compression="gzip") * 3), ErrorCode.INVALID_RECORD, "exactly one record batch"),
    (bytes(build_batch([b"a"])[:16]) + b"\x01" + bytes(build_batch([b"a"])[17:]), ErrorCode.INVALID_RECORD,
     "only allowed to contain record batches with magic version 2"),
    (bytes(build_batch([b"a"])[:16]) + b"\x07" + bytes(build_batch([b"a"])[17:]), ErrorCode.CORRUPT_MESSAGE,
     "Invalid magic found in record: 7"),
    (struct.pack(">qi", 0, 3) + b"\x00" * 60, ErrorCode.CORRUPT_MESSAGE, "minimum record overhead"),
])
def test_produce_request_records_checked_as_kafkas_validate_records(records, code, message):
    err = produce_records_error(records, 9)
    assert err is not None and err.code == code
    assert message in str(err)
    if code == ErrorCode.INVALID_RECORD and "exactly one" in message:
        assert str(err).startswith("Produce requests with version 9 are only allowed")


def test_produce_request_with_one_batch_passes_the_header_check():
    one = build_batch([b"a", b"b"], compression="zstd")
    assert produce_records_error(one, 3) is None
    assert produce_records_error(memoryview(bytes(one)), 9) is None
    # trailing bytes short of a second batch's length field: left to the leader's validation
    assert produce_records_error(bytes(one) + b"\x00" * 11, 9) is None
    # a second length field no batch can have: Kafka's batch iterator throws, CORRUPT_MESSAGE
    assert produce_records_error(bytes(one) + b"\x00" * 20, 9).code == ErrorCode.CORRUPT_MESSAGE


# ---- a producer's batch flagged LogAppendTime (Kafka's LogValidator.validateTimestamp) -----

def log_append_time_batch(codec: int = 0, max_ts: int = T0 + 7, count: int = 3) -> bytearray:
    recs = b"".join(record(i, b"value-%d" % i, ts_delta=i, key=b"k" if i == 0 else None) for i in range(count))
    return raw_batch(compress(codec, recs), count, codec | 0x08, max_ts=max_ts)


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_log_append_time_flag_refused_in_a_log_append_time_topic(tmp_path, codec):
    """Accepted before (and restamped): Kafka refuses every record with INVALID_TIMESTAMP."""
    lg = Log.open(tmp_path / "lat-0", LogConfig(message_timestamp_type="LogAppendTime"))
    try:
        with pytest.raises(InvalidTimestampError) as e:
            lg.append_as_leader(log_append_time_batch(codec), 0, T0, client=True)
        assert e.value.code == ErrorCode.INVALID_TIMESTAMP
        assert str(e.value) == "One or more records have been rejected due to invalid timestamp"
        assert [i for i, _m in e.value.record_errors] == [0, 1, 2]
        assert e.value.record_errors[0][1] == (
            f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={T0 + 7}, key=1 bytes, "
            f"value=7 bytes). Producer should not set timestamp type to LogAppendTime.")
        assert lg.log_end_offset == 0
    finally:
        lg.close()


@pytest.mark.parametrize("codec", [0, 3])
def test_log_append_time_flag_in_a_create_time_topic_is_stored_as_create_time(log, codec):
    """Kafka (3.6+) checks each record's timestamp - the batch's maxTimestamp - against the
    bounds and stores the batch as CreateTime (setMaxTimestamp(CREATE_TIME, max)): before,
    kafkarepl stored the flag, so readers saw LogAppendTime stamps the broker never gave."""
    info = log.append_as_leader(log_append_time_batch(codec, max_ts=T0 + 7), 0, T0, client=True)
    assert info.log_append_time == -1
    stored = log.read(0, 1 << 20)
    data = _core.file_pread(stored.fd, stored.size, stored.position)
    [b] = _core.validate_batches(data)  # CRC redone
    assert not b.attributes & 0x08 and b.attributes & 7 == codec
    assert b.max_timestamp == T0 + 7  # kept, as Kafka keeps it
    assert [r[1] for r in decode(data)] == [T0, T0 + 1, T0 + 2]  # the records' own, now CreateTime


def test_log_append_time_flag_without_a_timestamp_refused(log):
    with pytest.raises(InvalidTimestampError) as e:
        log.append_as_leader(log_append_time_batch(max_ts=-1), 0, T0, client=True)
    assert len(e.value.record_errors) == 3
    assert "timestamp=-1" in e.value.record_errors[2][1]
    assert "Producer should not set timestamp type to LogAppendTime." in e.value.record_errors[2][1]
    assert log.log_end_offset == 0


def test_log_append_time_flag_outside_the_bounds_refused(tmp_path):
    lg = Log.open(tmp_path / "b-0", LogConfig(message_timestamp_after_max_ms=1000))
    try:
        with pytest.raises(InvalidTimestampError) as e:
            lg.append_as_leader(log_append_time_batch(max_ts=T0 + 5000), 0, T0, client=True)
        low, high = lg.config.timestamp_bounds(T0)
        assert high == T0 + 1000
        assert e.value.record_errors == [
            (i, f"Timestamp {T0 + 5000} of message with offset {i} is out of range. "
                f"The timestamp should be within [{low}, {high}]") for i in range(3)]
        assert lg.log_end_offset == 0
    finally:
        lg.close()
