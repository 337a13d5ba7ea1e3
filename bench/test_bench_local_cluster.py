"""Start-up time of kafkarepl.LocalCluster (docs/embedding.md), 1 and 3 brokers, and the
idle RSS of a broker process (run: pytest bench/test_bench_local_cluster.py
--benchmark-enable).

The timed value is `LocalCluster(...).start()`: ZooKeeper launched (JVM), broker
interpreters spawned at the same moment, until every broker answers Metadata with all
brokers registered and a controller elected. Teardown is not timed. extra_info keeps the
phases of the last round (seconds since start(): brokers spawned, ZooKeeper serving, all
serving) and the idle RSS of each broker process after the start-up settled.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import kafkarepl


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.parametrize("brokers", [1, 3])
def test_local_cluster_start(benchmark, brokers):
    clusters: list[kafkarepl.LocalCluster] = []

    def stop_previous():  # untimed
        while clusters:
            clusters.pop().stop(graceful=False)
        return (), {}

    def start():
        c = kafkarepl.LocalCluster(brokers=brokers)
        clusters.append(c)
        c.start()

    try:
        benchmark.pedantic(start, setup=stop_previous, rounds=7, warmup_rounds=1)
        c = clusters[-1]
        time.sleep(2.0)  # idle: controller work and group/offset loading done
        benchmark.extra_info["phases_s"] = {k: round(v, 3) for k, v in c.startup_phases.items()}
        benchmark.extra_info["idle_rss_mib_per_broker"] = [
            round(rss_mib(pid), 1) for b in c.broker_ids if (pid := c.pid(b)) is not None
        ]
    finally:
        stop_previous()
