"""kcat (librdkafka's command line client) against a real broker process: -L metadata,
-P produce from stdin, -C consume with -e / -o beginning / -f format."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.fixtures.cluster import TestCluster
from tests.integration.test_clients_confluent import broker, dump_segments

pytestmark = pytest.mark.integration

__all__ = ["broker"]

KCAT = shutil.which("kcat") or "/usr/bin/kcat"


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    r = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"kcat {' '.join(args)} exited {r.returncode}: {r.stderr.decode(errors='replace')}"
    return r


def test_metadata_listing(broker: TestCluster) -> None:
    broker.create_topic("kcat-md", 3, 1)
    port = broker.brokers[1].port
    md = json.loads(kcat("-L", "-J", "-b", broker.bootstrap, "-t", "kcat-md").stdout)
    assert md["controllerid"] == 1
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(1, f"127.0.0.1:{port}")]
    [t] = md["topics"]
    assert t["topic"] == "kcat-md"
    assert "error" not in t, t
    parts = sorted(t["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["leader"] == 1
        assert [r["id"] for r in p["replicas"]] == [1]
        assert [r["id"] for r in p["isrs"]] == [1]

    # The plain text listing too, as a user would read it.
    text = kcat("-L", "-b", broker.bootstrap).stdout.decode()
    assert f"broker 1 at 127.0.0.1:{port} (controller)" in text
    assert 'topic "kcat-md" with 3 partitions:' in text
    assert "partition 2, leader 1, replicas: 1, isrs: 1" in text


def test_produce_and_consume(broker: TestCluster) -> None:
    topic = "kcat-pc"
    broker.create_topic(topic, 2, 1)
    lines = [f"key{i}:value {i}" for i in range(20)]
    kcat("-P", "-b", broker.bootstrap, "-t", topic, "-p", "1", "-K", ":", "-H", "origin=kcat",
         stdin=("\n".join(lines) + "\n").encode())
    # kcat's librdkafka 2.0.2 sends this uncompressed ("Broker does not support
    # compression type"): it derives codec support from Produce/Fetch v0-v2, which this
    # broker (like Kafka 4.0) no longer lists. The confluent-kafka tests cover codecs.
    big = "no key " + "x" * 500
    kcat("-P", "-b", broker.bootstrap, "-t", topic, "-p", "1", "-z", "lz4", stdin=(big + "\n").encode())

    out = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-p", "1", "-o", "beginning", "-e",
               "-f", "%p|%o|%k|%s|%h|%T\n").stdout.decode().splitlines()
    assert len(out) == 21, out
    rows = [line.split("|") for line in out]
    assert [int(r[0]) for r in rows] == [1] * 21
    assert [int(r[1]) for r in rows] == list(range(21))
    assert [(r[2], r[3]) for r in rows[:20]] == [(f"key{i}", f"value {i}") for i in range(20)]
    assert all(r[4] == "origin=kcat" for r in rows[:20])
    assert rows[20][2:4] == ["", big]  # null key, as kcat prints it
    assert all(int(r[5]) > 1_600_000_000_000 for r in rows)  # CreateTime set by the client

    # -o with an offset and -c count, and the other partition is still empty.
    tail = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-p", "1", "-o", "18", "-e",
                "-f", "%o:%s\n").stdout.decode().splitlines()
    assert tail == ["18:value 18", "19:value 19", f"20:{big}"]
    empty = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
                 "-f", "%s\n").stdout.decode()
    assert empty == ""
    stored = dump_segments(broker, topic, 1)
    assert sum(b["count"] for b in stored) == 21
