"""The C codec between record batches v2 and Arrow buffers (csrc/kr_arrow.c through
kafkarepl.spark.arrow_records), checked against kafka-python's record codec: batches that
kafka-python builds (every compression codec) decode to the same records, batches we build
decode the same in kafka-python, and malformed bytes are refused without reading outside
the buffer.
"""

from __future__ import annotations

import random
import struct
import zlib

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("kafka")

from kafka.partitioner.default import murmur2 as kp_murmur2  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

from kafkarepl import _core  # noqa: E402
from kafkarepl.errors import CorruptBatchError  # noqa: E402
from kafkarepl.spark import arrow_records as ar  # noqa: E402

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
                    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")),
                    ("timestampType", pa.int32()), ("headers", HEADERS_TYPE)])


def kp_batch(base_offset: int, records: list[tuple], codec: int = 0, producer_id: int = -1) -> bytes:
    """A batch built by kafka-python; records are (key, value, headers, timestamp)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=producer_id,
                                  producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 24)
    for i, (k, v, h, ts) in enumerate(records):
        assert b.append(i, timestamp=ts, key=k, value=v, headers=h) is not None
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base_offset)
    return bytes(raw)


def set_attributes(batch: bytes, extra: int, max_timestamp: int | None = None) -> bytes:
    raw = bytearray(batch)
    (attrs,) = struct.unpack_from(">h", raw, 21)
    struct.pack_into(">h", raw, 21, attrs | extra)
    if max_timestamp is not None:
        struct.pack_into(">q", raw, 35, max_timestamp)
    struct.pack_into(">I", raw, 17, _core.crc32c(bytes(raw[21:])))
    return bytes(raw)


def kp_records(buf: bytes) -> list[tuple]:
    """(offset, key, value, headers, timestamp, timestamp_type) of every record, by kafka-python."""
    out = []
    mr = MemoryRecords(bytes(buf))
    while mr.has_next():
        batch = mr.next_batch()
        if batch.is_control_batch:
            continue
        for r in batch:
            out.append((r.offset, r.key, r.value, [(k, v) for k, v in r.headers] or None, r.timestamp,
                        r.timestamp_type))
    return out


def decoded(buf: bytes, start: int = 0, end: int = 1 << 62, headers: bool = True) -> tuple[list[tuple], int]:
    d = ar.RecordsDecoder(headers)
    nxt = d.add(buf, start, end, start)
    schema = SCHEMA if headers else pa.schema([f for f in SCHEMA if f.name != "headers"])
    rb = d.take(schema, "t", 3)
    rb.validate(full=True)
    assert rb.column("topic").to_pylist() == ["t"] * rb.num_rows
    assert rb.column("partition").to_pylist() == [3] * rb.num_rows
    cols = rb.to_pydict()
    rows = []
    for i in range(rb.num_rows):
        ts = rb.column("timestamp").cast(pa.int64())[i].as_py() // 1000
        h = cols["headers"][i] if headers else None
        rows.append((cols["offset"][i], cols["key"][i], cols["value"][i],
                     [(x["key"], x["value"]) for x in h] if h else None, ts, cols["timestampType"][i]))
    return rows, nxt


def sample(n: int, seed: int = 1) -> list[tuple]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 5 == 2 else f"key-{i}".encode()
        value = None if i % 7 == 3 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
        headers = [("h", f"{i}".encode()), ("none", None), ("", b"")][: i % 4]
        out.append((key, value, headers, 1_700_000_000_000 + rnd.randrange(-5000, 5000)))
    return out


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_batches_decode_to_the_same_records(codec):
    buf = b"".join(kp_batch(base, sample(40, seed=base), codec) for base in (0, 40, 80))
    rows, nxt = decoded(buf)
    assert rows == kp_records(buf)
    assert nxt == 120 and len(rows) == 120


def test_offset_range_filters_inside_batches_and_skips_whole_ones():
    buf = b"".join(kp_batch(base, sample(10, seed=base), codec) for base, codec in ((0, 0), (10, 3), (20, 0)))
    rows, nxt = decoded(buf, start=7, end=23)
    assert [r[0] for r in rows] == list(range(7, 23))
    assert rows == [r for r in kp_records(buf) if 7 <= r[0] < 23]
    assert nxt == 30  # the batch holding offset 22 was consumed whole
    rows, nxt = decoded(buf, start=12, end=18, headers=False)
    assert [r[0] for r in rows] == list(range(12, 18)) and all(r[3] is None for r in rows)


def test_a_batch_starting_at_or_past_the_end_is_left_unconsumed():
    buf = kp_batch(0, sample(5)) + kp_batch(5, sample(5))
    rows, nxt = decoded(buf, start=0, end=5)
    assert len(rows) == 5 and nxt == 5


def test_control_batches_are_skipped_but_advance_the_offset():
    marker = set_attributes(kp_batch(3, [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], 5)]), 0x20 | 0x10)
    buf = kp_batch(0, sample(3)) + marker + kp_batch(4, sample(2))
    rows, nxt = decoded(buf)
    assert [r[0] for r in rows] == [0, 1, 2, 4, 5] and nxt == 6


@pytest.mark.parametrize("codec", [0, 4])
def test_log_append_time_batches_report_the_batch_max_timestamp(codec):
    buf = set_attributes(kp_batch(0, sample(4), codec), 0x08, max_timestamp=1_234_567)
    rows, _ = decoded(buf)
    assert [(r[4], r[5]) for r in rows] == [(1_234_567, 1)] * 4
    assert [(r[4], r[5]) for r in kp_records(buf)] == [(1_234_567, 1)] * 4


def test_a_trailing_partial_batch_is_not_consumed():
    whole = kp_batch(0, sample(5)) + kp_batch(5, sample(5))
    for cut in (1, 11, 12, 61, len(kp_batch(5, sample(5))) - 1):
        rows, nxt = decoded(whole[:-cut])
        assert len(rows) == 5 and nxt == 5, cut


def test_corrupt_crc_and_unsound_records_are_refused():
    good = kp_batch(0, sample(6))
    bad_crc = bytearray(good)
    bad_crc[70] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC|crc"):
        decoded(bytes(bad_crc))
    # A valid CRC over records whose length runs past the batch: refused, never read past.
    bad_len = bytearray(good)
    bad_len[61] = 0x7E  # first record's length varint: 63 bytes, more than the record holds
    with pytest.raises(CorruptBatchError):
        decoded(set_attributes(bytes(bad_len), 0))


def test_random_damage_is_refused_or_decoded_never_misread():
    """Flip bytes in the records (CRC fixed up so the walk reaches them): every outcome is
    a clean decode or CorruptBatchError; a decode never yields more records than the batch."""
    rnd = random.Random(7)
    base = kp_batch(0, sample(30))
    for _ in range(2000):
        raw = bytearray(base)
        for _ in range(rnd.randrange(1, 4)):
            raw[rnd.randrange(61, len(raw))] = rnd.randrange(256)
        try:
            rows, _ = decoded(set_attributes(bytes(raw), 0))
        except CorruptBatchError:
            continue
        assert len(rows) <= 30


def test_a_compressed_batch_that_does_not_inflate_is_refused():
    good = bytearray(kp_batch(0, sample(20), codec=1))
    good[80:90] = b"\x00" * 10
    with pytest.raises(CorruptBatchError):
        decoded(set_attributes(bytes(good), 0))


# ---- encoder ---------------------------------------------------------------------------------

def arrow_rows(n: int, seed: int = 3) -> tuple:
    rows = sample(n, seed)
    keys = pa.array([r[0] for r in rows], pa.binary())
    values = pa.array([r[1] for r in rows], pa.binary())
    headers = pa.array([[{"key": k, "value": v} for k, v in r[2]] or None for r in rows], HEADERS_TYPE)
    return rows, keys, values, headers


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_encoded_batches_decode_in_kafka_python(codec):
    rows, keys, values, headers = arrow_rows(300)
    enc = _core.RecordEncoder(ar.bin_column(values), ar.bin_column(keys), ar.headers_column(headers))
    batches = ar.encode_batches(enc, 0, 300, 4000, codec)
    assert len(batches) > 3 and sum(n for _, n in batches) == 300
    buf, seq, base = b"", 0, 0
    for data, n in batches:
        sealed = bytearray(ar.seal(data, n, codec, 42, 1, seq, timestamp_ms=99))
        struct.pack_into(">q", sealed, 0, base)  # as the leader assigns offsets
        struct.pack_into(">I", sealed, 17, _core.crc32c(bytes(sealed[21:])))
        buf += bytes(sealed)
        seq += n
        base += n
    infos = _core.validate_batches(buf)  # the broker's checks accept them
    assert [i.producer_id for i in infos] == [42] * len(batches)
    assert [i.base_sequence for i in infos][:2] == [0, batches[0][1]]
    got = kp_records(buf)
    assert [(k, v, h) for _, k, v, h, _, _ in got] == [(r[0], r[1], r[2] or None) for r in rows]
    assert {ts for *_, ts, _ in got} == {99}
    # and our decoder reads our encoding back
    assert [r[1:4] for r in decoded(buf)[0]] == [(r[0], r[1], r[2] or None) for r in rows]


def test_encoder_takes_sliced_and_string_columns():
    keys = pa.array(["a", None, "bcd", "e", "f"]).slice(1, 3)
    values = pa.array(["x", "yy", None, "zzz", "w"]).slice(1, 3)
    headers = pa.array([None, [{"key": "k", "value": b"1"}], None, [{"key": "j", "value": None}], None],
                       HEADERS_TYPE).slice(1, 3)
    enc = _core.RecordEncoder(ar.bin_column(values), ar.bin_column(keys), ar.headers_column(headers))
    (data, n), = ar.encode_batches(enc, 0, 3, 1 << 20)
    buf = bytes(ar.seal(data, n, 0, -1, -1, -1, timestamp_ms=5))
    assert [(k, v, h) for _, k, v, h, _, _ in kp_records(buf)] == [
        (None, b"yy", [("k", b"1")]), (b"bcd", None, None), (b"e", b"zzz", [("j", None)])]


def test_a_record_larger_than_the_batch_size_goes_alone():
    values = pa.array([b"a", b"b" * 5000, b"c"])
    enc = _core.RecordEncoder(ar.bin_column(values))
    assert [n for _, n in ar.encode_batches(enc, 0, 3, 100)] == [1, 1, 1]


def test_encoder_refuses_null_header_keys_and_unsound_buffers():
    values = pa.array([b"v"])
    h = pa.array([[{"key": None, "value": b"x"}]], HEADERS_TYPE)
    enc = _core.RecordEncoder(ar.bin_column(values), None, ar.headers_column(h))
    with pytest.raises(ValueError, match="null key"):
        enc.encode(0, 1, 100)
    offsets = pa.py_buffer(struct.pack("<3i", 0, 4, 99))  # runs past 8 data bytes
    with pytest.raises(ValueError, match="outside"):
        _core.RecordEncoder((None, offsets, pa.py_buffer(b"12345678"), 0, 2))
    with pytest.raises(ValueError, match="shorter"):
        _core.RecordEncoder((None, offsets, pa.py_buffer(b"12345678"), 1, 5))
    decreasing = pa.py_buffer(struct.pack("<3i", 0, 6, 4))
    with pytest.raises(ValueError, match="out of order"):
        _core.RecordEncoder((None, decreasing, pa.py_buffer(b"12345678"), 0, 2))
    with pytest.raises(ValueError, match="validity"):
        _core.RecordEncoder((pa.py_buffer(b""), pa.py_buffer(struct.pack("<2i", 0, 1)), pa.py_buffer(b"1"), 0, 1))


def test_partitioners_match_java_murmur2_and_librdkafka_crc32():
    rnd = random.Random(5)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40))) for _ in range(2000)] + [None]
    col = ar.bin_column(pa.array(keys, pa.binary()))
    for n in (1, 3, 7, 64):
        m = ar.partitions_of(col, len(keys), n, _core.PARTITIONER_MURMUR2, False).tolist()
        assert m[:-1] == [(kp_murmur2(k) & 0x7FFFFFFF) % n for k in keys[:-1]] and m[-1] == -1
        c = ar.partitions_of(col, len(keys), n, _core.PARTITIONER_CRC32, True).tolist()
        assert c == [zlib.crc32(k or b"") % n for k in keys]


def test_header_keys_that_are_not_utf8_read_with_replacement_characters():
    buf = kp_batch(0, [(None, b"v", [("ok", b"1")], 1)])
    raw = bytearray(buf)
    at = raw.index(b"ok")
    raw[at:at + 2] = b"\xffk"  # same length: only the CRC changes
    rows, _ = decoded(set_attributes(bytes(raw), 0))
    assert rows[0][3] == [("\ufffdk", b"1")]
