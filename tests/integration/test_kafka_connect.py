"""Kafka Connect in distributed mode against kafkarepl: Connect's own DistributedHerder,
Worker and Kafka-backed config/offset/status stores (tests/java/ConnectWorker.java; only
the REST server is left out, see there) run a FileStream source and sink connector. The
workers join their group with Connect's protocol, keep their state in compacted internal
topics, and a restarted worker resumes from its committed source offsets: every line
arrives once."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests import java_tools

pytestmark = pytest.mark.integration


def _start(c, tmp_path: Path, stop: Path) -> subprocess.Popen:
    cp, main = java_tools.compiled("ConnectWorker", java_tools.CONNECT_JARS)
    stop.unlink(missing_ok=True)
    log = open(tmp_path / "connect.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", cp, main, c.bootstrap, "connect-it", str(tmp_path / "in.txt"),
         "connect-lines", str(tmp_path / "out.txt"), str(stop), "3"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait_lines(path: Path, n: int, proc: subprocess.Popen, timeout: float = 90) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return lines
        assert proc.poll() is None, "the Connect worker exited"
        assert time.monotonic() < deadline, f"{len(lines)} of {n} lines after {timeout}s"
        time.sleep(0.3)


def test_connect_distributed_source_and_sink_resume_exactly(cluster_factory, tmp_path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    c = cluster_factory(3)
    src, out, stop = tmp_path / "in.txt", tmp_path / "out.txt", tmp_path / "stop"
    first = [f"line-{i}" for i in range(100)]
    src.write_text("".join(x + "\n" for x in first))
    worker = _start(c, tmp_path, stop)
    try:
        assert _wait_lines(out, 100, worker) == first
        # Connect's internal topics: compacted, as its TopicAdmin verified at start-up.
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        res = [ConfigResource(ConfigResource.Type.TOPIC, f"connect-it-{k}") for k in ("configs", "offsets", "status")]
        for f in admin.describe_configs(res).values():
            assert f.result(20)["cleanup.policy"].value == "compact"
        stop.touch()  # graceful stop: source offsets committed
        assert worker.wait(60) == 0
        more = [f"line-{i}" for i in range(100, 150)]
        with src.open("a") as f:
            f.write("".join(x + "\n" for x in more))
        worker = _start(c, tmp_path, stop)
        assert _wait_lines(out, 150, worker) == first + more
        time.sleep(2.0)  # and nothing is delivered twice
        assert out.read_text().splitlines() == first + more
    finally:
        stop.touch()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
