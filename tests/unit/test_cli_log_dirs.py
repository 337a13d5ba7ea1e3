"""kafka-log-dirs.sh's document from DescribeLogDirs results (kafkarepl.cli.log_dirs)."""

from __future__ import annotations

import json

import pytest

from kafkarepl.cli.log_dirs import format_log_dirs, parse_brokers


def test_document_shape_filter_and_errors() -> None:
    results = {
        2: [{"log_dir": "/b", "error_code": 56, "topics": []}],
        1: [{"log_dir": "/a", "error_code": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "partition_size": 10, "offset_lag": 0,
                                          "is_future_key": False},
                                         {"partition_index": 0, "partition_size": 4, "offset_lag": 3,
                                          "is_future_key": True}]},
            {"name": "u", "partitions": [{"partition_index": 1, "partition_size": 7, "offset_lag": 0,
                                          "is_future_key": False}]}]}],
    }
    text = format_log_dirs(results, {"t"})
    assert text.startswith('{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/a","error":null,'
                           '"partitions":[{"partition":"t-0","size":10,"offsetLag":0,"isFuture":false}')
    doc = json.loads(text)
    assert [b["broker"] for b in doc["brokers"]] == [1, 2]
    assert doc["brokers"][1]["logDirs"] == [
        {"logDir": "/b", "error": "org.apache.kafka.common.errors.KafkaStorageException", "partitions": []}]
    assert {p["partition"] for p in doc["brokers"][0]["logDirs"][0]["partitions"]} == {"t-0"}
    everything = json.loads(format_log_dirs(results, set()))
    assert len(everything["brokers"][0]["logDirs"][0]["partitions"]) == 3


def test_broker_list() -> None:
    assert parse_brokers("") == set() and parse_brokers("1,1, 2,") == {1, 2}
    with pytest.raises(ValueError, match="not a broker id"):
        parse_brokers("1,x")
