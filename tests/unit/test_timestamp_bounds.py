"""KIP-937: a leader refuses CreateTime records whose timestamp lies too far before or
after its clock (message.timestamp.before/after.max.ms; Kafka 4.0's after default is
one hour, KIP-1030) with INVALID_TIMESTAMP naming each record, as Kafka's LogValidator."""

from __future__ import annotations

import pytest

from kafkarepl import _core
from kafkarepl.errors import CorruptBatchError, ErrorCode, InvalidTimestampError
from kafkarepl.storage import Log, LogConfig
from tests.batches import build_batch, concat, decode

NOW = 1_700_000_000_000
HOUR = 3_600_000


def message(ts: int, offset: int, low: int, high: int) -> str:
    return (f"Timestamp {ts} of message with offset {offset} is out of range. "
            f"The timestamp should be within [{low}, {high}]")


@pytest.fixture
def open_log(tmp_path):
    logs: list[Log] = []

    def make(name: str = "t-0", **config) -> Log:
        lg = Log.open(tmp_path / name, LogConfig(**config))
        logs.append(lg)
        return lg

    yield make
    for lg in logs:
        lg.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd"])
def test_records_past_the_after_bound_are_refused_by_default(open_log, codec) -> None:
    lg = open_log()
    future = NOW + HOUR + 1
    stamps = [NOW] * 3 + [future] + [NOW] * 2 + [future + 5]
    bad = build_batch(len(stamps), timestamp=stamps, compression=codec)
    ok = build_batch(4, timestamp=NOW + HOUR, compression=codec)  # the bound itself is in
    with pytest.raises(InvalidTimestampError) as e:
        lg.append_as_leader(concat([bytearray(ok), bad]), 0, NOW)
    assert e.value.code is ErrorCode.INVALID_TIMESTAMP
    assert str(e.value) == "One or more records have been rejected due to invalid timestamp"
    low = NOW - (2**63 - 1)
    assert e.value.record_errors == [(3, message(future, 3, low, NOW + HOUR)),
                                     (6, message(future + 5, 6, low, NOW + HOUR))]
    assert lg.log_end_offset == 0  # nothing of the request is written
    assert lg.append_as_leader(ok, 0, NOW).last_offset == 3
    # an old record is fine by default (before.max.ms is unbounded)
    assert lg.append_as_leader(build_batch(2, timestamp=1, compression=codec), 0, NOW).first_offset == 4


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_before_bound_catches_a_record_older_than_its_batch_base(open_log, codec) -> None:
    """A record may carry an earlier timestamp than its batch's base (a negative delta):
    the header alone would not show it."""
    lg = open_log(message_timestamp_before_max_ms=60_000)
    stamps = [NOW - 1000, NOW - 61_000, NOW]
    with pytest.raises(InvalidTimestampError) as e:
        lg.append_as_leader(build_batch(3, timestamp=stamps, compression=codec), 0, NOW)
    assert e.value.record_errors == [(1, message(NOW - 61_000, 1, NOW - 60_000, NOW + HOUR))]
    lg.append_as_leader(build_batch(3, timestamp=[NOW - 1000, NOW - 60_000, NOW], compression=codec), 0, NOW)
    stored = lg.read(0, 1 << 20)
    data = _core.file_pread(stored.fd, stored.size, stored.position)
    assert [r[1] for r in decode(data)] == [NOW - 1000, NOW - 60_000, NOW]


def test_log_append_time_topics_and_records_without_a_timestamp_are_exempt(open_log) -> None:
    lat = open_log("lat-0", message_timestamp_type="LogAppendTime", message_timestamp_after_max_ms=0)
    assert lat.append_as_leader(build_batch(2, timestamp=NOW + 10 * HOUR), 0, NOW).log_append_time == NOW
    plain = open_log("p-0", message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
    # -1 is "no timestamp" (Kafka's NO_TIMESTAMP): exempt; NOW itself is inside [NOW, NOW]
    assert plain.append_as_leader(build_batch(3, timestamp=[-1, NOW, -1]), 0, NOW).first_offset == 0
    with pytest.raises(InvalidTimestampError) as e:
        plain.append_as_leader(build_batch(3, timestamp=[-1, NOW + 1, NOW - 1]), 0, NOW)
    assert [i for i, _ in e.value.record_errors] == [1, 2]


def test_difference_max_ms_bounds_both_sides(open_log) -> None:
    """Kafka 3.x's symmetric bound (removed in 4.0): a topic that still has it keeps it."""
    lg = open_log(message_timestamp_difference_max_ms=1000)
    with pytest.raises(InvalidTimestampError):
        lg.append_as_leader(build_batch(1, timestamp=NOW - 1001), 0, NOW)
    with pytest.raises(InvalidTimestampError):
        lg.append_as_leader(build_batch(1, timestamp=NOW + 1001), 0, NOW)
    assert lg.append_as_leader(build_batch(2, timestamp=[NOW - 1000, NOW + 1000]), 0, NOW).first_offset == 0


def test_unwalked_uncompressed_batches_are_judged_by_their_header(open_log) -> None:
    lg = open_log(validate_uncompressed_records=False)
    with pytest.raises(InvalidTimestampError) as e:
        lg.append_as_leader(build_batch(2, timestamp=[NOW, NOW + 2 * HOUR]), 0, NOW)
    assert [i for i, _ in e.value.record_errors] == [1]


def test_config_names_and_values() -> None:
    cfg = LogConfig.from_props({"log.message.timestamp.after.max.ms": "5",
                                "message.timestamp.before.max.ms": "7"})
    assert cfg.timestamp_bounds(100) == (93, 105)
    assert LogConfig().timestamp_bounds(100) == (100 - (2**63 - 1), 100 + HOUR)
    assert LogConfig(message_timestamp_after_max_ms=2**63 - 1).timestamp_bounds(NOW)[1] == 2**63 - 1
    with pytest.raises(Exception, match="must be >= 0"):
        LogConfig.from_props({"message.timestamp.after.max.ms": "-1"})
    with pytest.raises(Exception, match="LONG"):
        LogConfig.from_props({"message.timestamp.before.max.ms": str(2**63)})


def test_records_outside_walks_every_record() -> None:
    batch = build_batch(5, timestamp=[NOW, NOW - 5, NOW + 9, NOW, NOW + 1])
    recs = bytes(batch[61:])
    assert _core.records_outside(recs, 5, NOW, NOW - 4, NOW + 1) == [(1, NOW - 5), (2, NOW + 9)]
    assert _core.records_outside(recs, 5, NOW, -(2**63), 2**63 - 1) == []
    with pytest.raises(CorruptBatchError, match="records cannot fit"):
        _core.records_outside(recs, len(recs) + 1, NOW, 0, 0)
    with pytest.raises(CorruptBatchError):  # a cut record
        _core.records_outside(recs[:-3], 5, NOW, 0, 0)
