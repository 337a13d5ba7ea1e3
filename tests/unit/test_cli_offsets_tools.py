"""The argument handling of `kafkarepl get-offsets` (GetOffsetShell) and
`kafkarepl delete-records` (DeleteRecordsCommand), checked against Kafka's rules."""

from __future__ import annotations

import pytest

from kafkarepl.cli.delete_records import parse_offsets
from kafkarepl.cli.get_offsets import parse_time, topic_partition_filter
from kafkarepl.cli.java_errors import java_exception_class, java_exception_message
from kafkarepl.errors import ErrorCode


def selected(f, universe) -> set[tuple[str, int]]:
    return {tp for tp in universe if f(*tp)}


UNIVERSE = [(t, p) for t in ("topic1", "topic2", "topic3", "topic4", "topic5", "other") for p in range(8)]


def test_topic_partition_rules_as_get_offset_shell() -> None:
    f = topic_partition_filter(None, None, "topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3")
    assert selected(f, UNIVERSE) == (
        {("topic1", 1)} | {("topic2", p) for p in range(3)} | {("topic3", p) for p in range(8)}
        | {("topic4", p) for p in range(5, 8)} | {("topic5", p) for p in range(3)})
    # a rule without a topic matches every topic; a regex must match the whole name
    assert selected(topic_partition_filter(None, None, ":7"), UNIVERSE) == {(t, 7) for t, _ in UNIVERSE}
    assert selected(topic_partition_filter(None, None, "topic"), UNIVERSE) == set()
    assert selected(topic_partition_filter(None, None, "topic[12]:0"), UNIVERSE) == {("topic1", 0), ("topic2", 0)}
    with pytest.raises(ValueError, match="Invalid rule specification: a:b"):
        topic_partition_filter(None, None, "a:b")


def test_topic_and_partitions_options() -> None:
    every = topic_partition_filter(None, None, None)
    assert selected(every, UNIVERSE) == set(UNIVERSE)
    f = topic_partition_filter("topic[45]", "0,6", None)
    assert selected(f, UNIVERSE) == {("topic4", 0), ("topic4", 6), ("topic5", 0), ("topic5", 6)}
    assert selected(topic_partition_filter("other,topic1", "2", None), UNIVERSE) == {("other", 2), ("topic1", 2)}
    with pytest.raises(ValueError, match="--partitions expects a comma separated list"):
        topic_partition_filter(None, "0,x", None)
    with pytest.raises(ValueError, match="cannot be used with --topic or --partitions"):
        topic_partition_filter("t", None, "t:0")


def test_time_argument() -> None:
    assert [parse_time(x) for x in ("latest", "earliest", "max-timestamp", "-1", "-2", "-3")] == [-1, -2, -3] * 2
    assert parse_time("1700000000000") == 1_700_000_000_000
    with pytest.raises(ValueError, match="Malformed time argument yesterday"):
        parse_time("yesterday")


def test_offset_json_file() -> None:
    doc = '{"partitions": [{"topic": "foo", "partition": 1, "offset": 10}, {"topic": "foo", "partition": 0, ' \
          '"offset": -1}], "version": 1}'
    assert parse_offsets(doc) == {("foo", 1): 10, ("foo", 0): -1}
    assert parse_offsets('{"partitions": []}') == {}  # version defaults to 1
    with pytest.raises(ValueError, match="duplicate topic partitions: foo-1"):
        parse_offsets('{"partitions": [{"topic": "foo", "partition": 1, "offset": 1},'
                      '{"topic": "foo", "partition": 1, "offset": 2}], "version": 1}')
    with pytest.raises(ValueError, match="Not supported version field value 2"):
        parse_offsets('{"partitions": [], "version": 2}')
    with pytest.raises(ValueError, match="Missing partitions field"):
        parse_offsets('{"version": 1}')
    with pytest.raises(ValueError, match="not a valid JSON"):
        parse_offsets("{")
    with pytest.raises(ValueError, match="integer partition"):
        parse_offsets('{"partitions": [{"topic": "foo", "partition": "1", "offset": 1}]}')


def test_java_exception_names() -> None:
    assert java_exception_class(0) is None
    assert java_exception_class(ErrorCode.OFFSET_OUT_OF_RANGE) == \
        "org.apache.kafka.common.errors.OffsetOutOfRangeException"
    assert java_exception_class(ErrorCode.TOPIC_AUTHORIZATION_FAILED) == \
        "org.apache.kafka.common.errors.TopicAuthorizationException"
    assert java_exception_message(ErrorCode.OFFSET_OUT_OF_RANGE) == (
        "org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server.")
    assert java_exception_class(9999) == "org.apache.kafka.common.errors.UnknownServerException"
