"""`kafkarepl log-dirs --describe` (kafka-log-dirs.sh) on a broker with two log dirs: the
JSON document lists both dirs with the replica's size and lag, a JBOD move's future log
with isFuture, the topic and broker filters, and Kafka's error for unknown brokers."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.integration.test_log_dir_moves import TOPIC, alter, set_rate, two_dirs


def log_dirs(c, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", "log-dirs", "--bootstrap-server",
                        c.bootstrap, "--describe", *args], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def document(r: subprocess.CompletedProcess) -> dict:
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stderr
    assert lines[0] == "Querying brokers for log directories information", lines
    assert lines[1] == "Received log directory information from brokers 1", lines
    return json.loads(lines[2])


def test_log_dirs_describe(cluster_factory) -> None:
    from confluent_kafka import Producer

    c, d1, d2 = two_dirs(cluster_factory)
    c.create_topic("other", 1, 1)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "batch.size": 65536})  # < segment.bytes
    acked: list[int] = []
    for i in range(3000):
        p.produce(TOPIC, value=b"x" * 1000, partition=0,
                  on_delivery=lambda err, _m: err is None and acked.append(1))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0 and len(acked) == 3000
    src = d1 if (d1 / f"{TOPIC}-0").is_dir() else d2
    dst = d2 if src == d1 else d1

    doc = document(log_dirs(c))
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [1]
    dirs = {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}
    assert set(dirs) == {str(d1), str(d2)} and all(d["error"] is None for d in dirs.values())
    mine = [x for x in dirs[str(src)]["partitions"] if x["partition"] == f"{TOPIC}-0"]
    assert len(mine) == 1 and mine[0]["size"] > 3_000_000 and mine[0]["offsetLag"] == 0, mine
    assert mine[0]["isFuture"] is False
    listed = {x["partition"] for d in dirs.values() for x in d["partitions"]}
    assert {f"{TOPIC}-0", "other-0"} <= listed

    # --topic-list keeps only that topic's replicas; every dir is still listed
    doc = document(log_dirs(c, "--topic-list", TOPIC, "--broker-list", "1"))
    listed = {x["partition"] for d in doc["brokers"][0]["logDirs"] for x in d["partitions"]}
    assert listed == {f"{TOPIC}-0"} and len(doc["brokers"][0]["logDirs"]) == 2

    # a throttled move: the future log shows in the destination dir, with its lag
    set_rate(c, 500_000)
    assert alter(c, dst) == [0]
    doc = document(log_dirs(c, "--topic-list", TOPIC))
    dirs = {d["logDir"]: d["partitions"] for d in doc["brokers"][0]["logDirs"]}
    assert [x["isFuture"] for x in dirs[str(src)]] == [False]
    assert [x["isFuture"] for x in dirs[str(dst)]] == [True] and dirs[str(dst)][0]["offsetLag"] > 0, dirs
    set_rate(c, None)

    r = log_dirs(c, "--broker-list", "1,9,7")
    assert r.returncode == 1 and r.stdout == ""
    assert ("ERROR: The given brokers do not exist from --broker-list: 7,9. Current existent brokers: 1"
            in r.stderr), r.stderr
