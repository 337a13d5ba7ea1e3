"""`kafkarepl get-offsets` (kafka-get-offsets.sh) and `kafkarepl delete-records`
(kafka-delete-records.sh) against a 2-broker cluster whose partitions have leaders on
both brokers: offsets by time as GetOffsetShell prints them, records deleted below an
offset with DeleteRecordsCommand's output, and its per-partition errors."""

from __future__ import annotations

import json
import subprocess
import sys

TOPIC = "offsets-tool"
T0 = 1_700_000_000_000  # record i of a partition has timestamp T0 + 1000 * i


def tool(c, name: str, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", name, "--bootstrap-server", c.bootstrap,
                        *args], capture_output=True, text=True, timeout=90)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def offsets(c, *args: str) -> list[str]:
    r = tool(c, "get-offsets", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_get_offsets_and_delete_records(cluster_factory, tmp_path) -> None:
    from confluent_kafka import Producer

    c = cluster_factory(2)
    c.create_topic(TOPIC, 3, 2)
    c.create_topic("other", 1, 1)
    c.wait_for_leaders(TOPIC, 3, isr=2)
    acked: list[int] = []
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    for part, count in ((0, 10), (1, 20), (2, 5)):
        for i in range(count):
            p.produce(TOPIC, value=b"v%d" % i, partition=part, timestamp=T0 + 1000 * i,
                      on_delivery=lambda err, _m: err is None and acked.append(1))
    assert p.flush(30) == 0 and len(acked) == 35

    assert offsets(c, "--topic", TOPIC) == [f"{TOPIC}:0:10", f"{TOPIC}:1:20", f"{TOPIC}:2:5"]
    assert offsets(c, "--topic", TOPIC, "--time", "earliest") == [f"{TOPIC}:0:0", f"{TOPIC}:1:0", f"{TOPIC}:2:0"]
    # the first offset at or after a time; none for a partition whose records are all older
    assert offsets(c, "--topic", TOPIC, "--time", str(T0 + 7000)) == [f"{TOPIC}:0:7", f"{TOPIC}:1:7"]
    assert offsets(c, "--topic-partitions", f"{TOPIC}:1-", "--time", "max-timestamp") == \
        [f"{TOPIC}:1:19", f"{TOPIC}:2:4"]
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g"})  # makes __consumer_offsets
    cons.commit(offsets=[TP(TOPIC, 0, 3)], asynchronous=False)
    cons.close()
    every = offsets(c)  # every topic, internal ones included unless excluded
    assert "other:0:0" in every and f"{TOPIC}:2:5" in every
    assert any(line.startswith("__consumer_offsets:") for line in every), every
    assert offsets(c, "--exclude-internal-topics") == sorted(
        [f"{TOPIC}:0:10", f"{TOPIC}:1:20", f"{TOPIC}:2:5", "other:0:0"], key=lambda s: s.rsplit(":", 1)[0])
    r = tool(c, "get-offsets", "--topic", "nothing-like-this")
    assert r.returncode == 1 and "Could not match any topic-partitions with the specified filters" in r.stderr

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "offset": 4},
        {"topic": TOPIC, "partition": 1, "offset": -1},  # the high watermark: all of it
        {"topic": TOPIC, "partition": 2, "offset": 99},  # past the high watermark
        {"topic": "missing", "partition": 0, "offset": 1},
    ]}))
    r = tool(c, "delete-records", "--offset-json-file", str(plan))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["Executing records delete operation", "Records delete operation completed:"], lines
    assert sorted(lines[2:]) == sorted([
        f"partition: {TOPIC}-0\tlow_watermark: 4",
        f"partition: {TOPIC}-1\tlow_watermark: 20",
        f"partition: {TOPIC}-2\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server.",
        "partition: missing-0\terror: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "This server does not host this topic-partition.",
    ]), lines
    assert offsets(c, "--topic", TOPIC, "--time", "earliest") == [f"{TOPIC}:0:4", f"{TOPIC}:1:20", f"{TOPIC}:2:0"]

    plan.write_text('{"version": 1, "partitions": [{"topic": "a", "partition": 0, "offset": 1},'
                    '{"topic": "a", "partition": 0, "offset": 2}]}')
    r = tool(c, "delete-records", "--offset-json-file", str(plan))
    assert r.returncode == 1 and "duplicate topic partitions: a-0" in r.stderr
