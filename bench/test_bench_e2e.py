"""End-to-end throughput as pytest-benchmark entries (run: pytest bench/test_bench_e2e.py
--benchmark-enable). The full suite with latency, failover and the 1 GiB comparison is
bench/run_e2e.sh; this is the quick subset for tracking regressions over time.

Each round runs `bench/e2e.py` in its own process against one 3-broker kafkarepl cluster
(started once for the module); the timed value includes that process's start-up, so
compare the records/s stored in extra_info, not the raw time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
BASE_PORT = 27092
BOOTSTRAP = ",".join(f"127.0.0.1:{BASE_PORT + i}" for i in range(3))
RECORDS = 300_000


def e2e(*args: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "e2e.py"), *args], check=True,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("e2e-cluster"))
    subprocess.run(["kafkarepl", "cluster", "up", "--brokers", "3", "--base-port",
                    str(BASE_PORT), "--data-dir", data], check=True, capture_output=True)
    try:
        yield data
    finally:
        subprocess.run(["kafkarepl", "cluster", "down", "--data-dir", data],
                       capture_output=True)


def create_topic(name: str, rf: int) -> None:
    cfg = ["--config", "min.insync.replicas=2"] if rf == 3 else []
    subprocess.run(["kafkarepl", "topics", "--bootstrap-server", BOOTSTRAP.split(",")[0],
                    "--create", "--topic", name, "--partitions", "6",
                    "--replication-factor", str(rf), *cfg], check=True, capture_output=True)


@pytest.mark.parametrize("rf,acks", [(1, "1"), (3, "all")])
def test_produce(benchmark, cluster, rf, acks):
    rounds = iter(range(100))

    def fresh_topic():  # untimed: each round produces into a new, empty topic
        topic = f"bench-rf{rf}-{next(rounds)}"
        create_topic(topic, rf)
        return (topic,), {}

    def run(topic):
        return e2e("produce", "--bootstrap", BOOTSTRAP, "--topic", topic, "--records",
                   str(RECORDS), "--acks", acks, "--data-dir", cluster)

    res = benchmark.pedantic(run, setup=fresh_topic, rounds=3, iterations=1)
    assert res["acked"] == RECORDS and res["errors"] == 0
    benchmark.extra_info.update(res)


@pytest.mark.parametrize("command", ["consume", "consume-kcat"])
def test_consume(benchmark, cluster, command):
    """consume: confluent-kafka from Python; consume-kcat: librdkafka alone (the broker's
    side without Python's per-record cost)."""
    topic = f"bench-{command}"
    create_topic(topic, 1)
    e2e("produce", "--bootstrap", BOOTSTRAP, "--topic", topic, "--records", str(RECORDS),
        "--acks", "1")
    res = benchmark.pedantic(
        lambda: e2e(command, "--bootstrap", BOOTSTRAP, "--topic", topic), rounds=3, iterations=1)
    assert res["records"] == RECORDS
    benchmark.extra_info.update(res)
