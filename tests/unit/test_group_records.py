"""The coordinator's record codec checked against an independent implementation
(kafka-python's batch reader/builder), and Kafka's group -> partition hash."""

from __future__ import annotations

import pytest

from kafkarepl import _core
from kafkarepl.coordinator import (
    OffsetAndMetadata,
    build_batch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    iter_records,
    java_string_hash,
    partition_for,
)
from tests.batches import build_batch as kp_build_batch
from tests.batches import decode as kp_decode


def test_built_batch_is_valid_for_kafka_python_and_our_validator() -> None:
    recs = [(encode_key("g", "t", 3), encode_value(OffsetAndMetadata(42, 7, "meta", 1234))), (b"k2", None)]
    batch = build_batch(recs, 1_700_000_000_000)
    [info] = _core.validate_batches(bytes(batch))
    assert (info.records_count, info.last_offset_delta, info.first_timestamp) == (2, 1, 1_700_000_000_000)
    assert kp_decode(batch) == [(0, 1_700_000_000_000, recs[0][0], recs[0][1]), (1, 1_700_000_000_000, b"k2", None)]
    assert list(iter_records(batch)) == [(0, recs[0][0], recs[0][1]), (1, b"k2", None)]


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4"])
def test_iter_records_reads_batches_built_elsewhere(compression: str) -> None:
    values = [b"v0", None, b"x" * 300]
    batch = kp_build_batch(values, keys=[b"a", b"b", None], compression=compression)
    assert list(iter_records(bytes(batch))) == [(0, b"a", b"v0"), (1, b"b", None), (2, None, b"x" * 300)]


def test_offset_key_and_value_layout() -> None:
    key = encode_key("grp", "topic", 5)
    assert key == b"\x00\x01" + b"\x00\x03grp" + b"\x00\x05topic" + b"\x00\x00\x00\x05"
    assert decode_key(key).__dict__ == {"group_id": "grp", "topic": "topic", "partition": 5}
    value = encode_value(OffsetAndMetadata(2**40, 3, "m", 99))
    assert value == (b"\x00\x03" + (2**40).to_bytes(8, "big") + b"\x00\x00\x00\x03" + b"\x00\x01m"
                     + (99).to_bytes(8, "big"))
    assert decode_value(value) == OffsetAndMetadata(2**40, 3, "m", 99)
    # Value v1 (Kafka 0.10-era: offset, metadata, commit and expire timestamps).
    v1 = b"\x00\x01" + (5).to_bytes(8, "big") + b"\x00\x00" + (7).to_bytes(8, "big") + (8).to_bytes(8, "big")
    assert decode_value(v1) == OffsetAndMetadata(5, -1, "", 7)
    assert decode_value(None) is None
    assert decode_key(b"\x00\x02\x00\x01g") is None  # group metadata key: not an offset


@pytest.mark.parametrize("text,expected", [
    ("", 0), ("hello", 99162322), ("my-group", -1906497762),
    ("polygenelubricants", -(2**31)),  # hashCode == Integer.MIN_VALUE
    ("\U0001f600", 0xD83D * 31 + 0xDE00),  # outside the BMP: hashed as two UTF-16 units
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_matches_kafka() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-group", 50) == 1906497762 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0


def test_offsets_log_load_keeps_each_keys_last_record_and_replays_like_the_whole_log(tmp_path) -> None:
    """A new coordinator reads only each key's last record (in the order of those last
    records), a TxnOffsetCommit's records only once its COMMIT marker is read, and ends in
    the state a replay of every record gives."""
    import asyncio
    from types import SimpleNamespace

    from kafkarepl.coordinator.coordinator import GroupCoordinator
    from kafkarepl.coordinator.group import GroupConfig
    from kafkarepl.coordinator.records import TRANSACTIONAL_BIT, build_marker
    from kafkarepl.server.group_coordinator import GroupCoordinatorService
    from kafkarepl.storage import Log, LogConfig

    t = 1_700_000_000_000
    lg = Log.open(tmp_path / "__consumer_offsets-0", LogConfig(cleanup_policy="compact"))
    a, b, c = (encode_key("g", "t", p) for p in range(3))
    every: list[tuple[bytes | None, bytes | None]] = []

    def commit(recs: list, **kw) -> None:
        lg.append_as_leader(build_batch(recs, t, **kw), 0, t, control_allowed=True)

    for i in range(5):
        recs = [(a, encode_value(OffsetAndMetadata(i, 0, "", t))), (b, encode_value(OffsetAndMetadata(10 + i, 0, "", t)))]
        commit(recs)
        every += recs
    commit([(b, None)])  # OffsetDelete: a tombstone
    every.append((b, None))
    commit([(a, encode_value(OffsetAndMetadata(99, 0, "", t)))])
    every.append((a, encode_value(OffsetAndMetadata(99, 0, "", t))))
    txn = [(c, encode_value(OffsetAndMetadata(7, 0, "", t)))]
    commit(txn, producer_id=5, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL_BIT)
    lg.append_as_leader(build_marker(5, 0, True, 0, t), 0, t, control_allowed=True)
    every += txn
    commit([(c, encode_value(OffsetAndMetadata(8, 0, "", t)))], producer_id=6, producer_epoch=0,
           base_sequence=0, attributes=TRANSACTIONAL_BIT)  # still open at the load
    try:
        records, open_txns = asyncio.run(GroupCoordinatorService._read_offsets_log(SimpleNamespace(log=lg)))
        assert [k for k, _v in records] == [b, a, c]  # each key once, by its last record
        assert dict(records)[b] is None and decode_value(dict(records)[a]).offset == 99
        assert list(open_txns) == [6]
        loaded, replayed = GroupCoordinator(GroupConfig(), 1), GroupCoordinator(GroupConfig(), 1)
        loaded.load(0, records)
        replayed.load(0, every)
        assert loaded.groups["g"].offsets == replayed.groups["g"].offsets
        assert set(loaded.groups["g"].offsets) == {("t", 0), ("t", 2)}
    finally:
        lg.close()
