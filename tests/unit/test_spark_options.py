"""Option parsing of the kafkarepl Spark source and sink (no Spark needed): Spark's Kafka
option names, and a clear error naming the option for every bad input."""

from __future__ import annotations

import pytest

from kafkarepl.spark.options import (
    OptionError,
    Subscription,
    include_headers,
    parse_sink,
    parse_source,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def src(streaming: bool = False, **opts: str):
    return parse_source({**BOOT, **opts}, streaming=streaming)


def fails(option: str, streaming: bool = False, **opts: str) -> str:
    with pytest.raises(OptionError) as ei:
        parse_source(opts, streaming=streaming)
    assert ei.value.option == option, str(ei.value)
    assert f"'{option}'" in str(ei.value)
    return str(ei.value)


def test_defaults_follow_spark_batch_and_stream():
    b = src(subscribe="a")
    assert (b.starting, b.ending, b.include_headers, b.fail_on_data_loss) == ("earliest", "latest", False, True)
    s = src(streaming=True, subscribe="a")
    assert s.starting == "latest"
    assert b.kafka == {"bootstrap.servers": "127.0.0.1:9092"}
    assert b.poll_timeout_ms == 120_000 and b.max_offsets_per_trigger is None


def test_option_names_are_case_insensitive_and_kafka_prefix_passes_through():
    o = parse_source({"KAFKA.BOOTSTRAP.SERVERS": "h:1,h:2", "Subscribe": "a, b ,a", "INCLUDEHEADERS": "True",
                      "kafka.fetch.max.bytes": "1000", "kafka.group.id": "g", "maxOffsetsPerTrigger": "50",
                      "minPartitions": "4", "failOnDataLoss": "false"}, streaming=True)
    assert o.subscription == Subscription("subscribe", topics=("a", "b"))
    assert o.kafka == {"bootstrap.servers": "h:1,h:2", "fetch.max.bytes": "1000"}
    assert o.group_id == "g"
    assert (o.include_headers, o.max_offsets_per_trigger, o.min_partitions, o.fail_on_data_loss) == (True, 50, 4, False)


def test_plain_bootstrap_servers_is_accepted():
    o = parse_source({"bootstrap.servers": "h:9092", "subscribe": "t"}, streaming=False)
    assert o.kafka["bootstrap.servers"] == "h:9092"


def test_assign_and_pattern():
    o = src(assign='{"t": [0, 2], "u": [1]}')
    assert o.subscription.assignment == (("t", 0), ("t", 2), ("u", 1))
    assert src(subscribePattern="ev.*").subscription.pattern == "ev.*"


def test_offsets_json_with_sentinels():
    o = src(startingOffsets='{"t": {"0": 23, "1": -2}}', endingOffsets='{"t": {"0": 50, "1": -1}}', subscribe="t")
    assert o.starting == {("t", 0): 23, ("t", 1): -2}
    assert o.ending == {("t", 0): 50, ("t", 1): -1}


@pytest.mark.parametrize("opts, option", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({**BOOT}, "subscribe"),
    ({**BOOT, "subscribe": "t", "assign": '{"t":[0]}'}, "subscribe"),
    ({**BOOT, "subscribe": " , "}, "subscribe"),
    ({**BOOT, "subscribePattern": "(unclosed"}, "subscribePattern"),
    ({**BOOT, "assign": "[0,1]"}, "assign"),
    ({**BOOT, "assign": '{"t": []}'}, "assign"),
    ({**BOOT, "assign": '{"t": ["x"]}'}, "assign"),
    ({**BOOT, "assign": "{not json"}, "assign"),
    ({"kafka.bootstrap.servers": "nohostport", "subscribe": "t"}, "kafka.bootstrap.servers"),
    ({**BOOT, "subscribe": "t", "startingOffsets": "latest"}, "startingOffsets"),  # batch
    ({**BOOT, "subscribe": "t", "startingOffsets": "yesterday"}, "startingOffsets"),
    ({**BOOT, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "startingOffsets"),
    ({**BOOT, "subscribe": "t", "startingOffsets": '{"t": {"0": "5"}}'}, "startingOffsets"),
    ({**BOOT, "subscribe": "t", "endingOffsets": "earliest"}, "endingOffsets"),
    ({**BOOT, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, "endingOffsets"),
    ({**BOOT, "subscribe": "t", "includeHeaders": "yes"}, "includeHeaders"),
    ({**BOOT, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({**BOOT, "subscribe": "t", "minPartitions": "many"}, "minPartitions"),
    ({**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
    ({**BOOT, "subscribe": "t", "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
    ({**BOOT, "subscribe": "t", "startingTimestamp": "1000"}, "startingtimestamp"),
])
def test_bad_source_options_name_the_option(opts, option):
    fails(option, **opts)


def test_stream_rejects_ending_offsets_and_accepts_latest_start():
    fails("endingOffsets", streaming=True, **BOOT, subscribe="t", endingOffsets="latest")
    assert src(streaming=True, subscribe="t", startingOffsets="latest").starting == "latest"


def test_subscription_select():
    cluster = {"a": 2, "b": 1, "ab": 3, "__consumer_offsets": 50}
    assert Subscription("subscribe", topics=("a", "missing")).select(cluster) == [("a", 0), ("a", 1)]
    assert Subscription("subscribePattern", pattern="a.*").select(cluster) == [
        ("a", 0), ("a", 1), ("ab", 0), ("ab", 1), ("ab", 2)]
    assert Subscription("subscribePattern", pattern=".*").select(cluster)[-1] == ("b", 0)  # no internal topics
    assert Subscription("subscribePattern", pattern="b").select({"ab": 1, "b": 1}) == [("b", 0)]  # full match
    assert Subscription("assign", assignment=(("b", 0),)).select(cluster) == [("b", 0)]
    with pytest.raises(OptionError, match="b-1"):
        Subscription("assign", assignment=(("b", 1),)).select(cluster)


def test_sink_options():
    s = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": " out ", "kafka.linger.ms": "5"})
    assert (s.topic, s.kafka) == ("out", {"bootstrap.servers": "h:1", "linger.ms": "5"})
    assert parse_sink({"bootstrap.servers": "h:1"}).topic is None
    with pytest.raises(OptionError, match="'kafka.bootstrap.servers'"):
        parse_sink({"topic": "t"})
    with pytest.raises(OptionError, match="'topic'"):
        parse_sink({**BOOT, "topic": "  "})
    with pytest.raises(OptionError, match="'kafka.value.serializer'"):
        parse_sink({**BOOT, "kafka.value.serializer": "x"})


def test_include_headers_alone():
    assert include_headers({"includeHeaders": "true"}) is True
    assert include_headers({}) is False
