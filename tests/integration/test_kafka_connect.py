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


def _start(c, tmp_path: Path, stop: Path, url: str = "http://127.0.0.1:0/", join_only: bool = False,
           ) -> subprocess.Popen:
    cp, main = java_tools.compiled("ConnectWorker", java_tools.CONNECT_JARS)
    stop.unlink(missing_ok=True)
    log = open(tmp_path / "connect.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", cp, main, c.bootstrap, "connect-it", str(tmp_path / "in.txt"),
         "connect-lines", str(tmp_path / "out.txt"), str(stop), "3", url, *(["join-only"] if join_only else [])],
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


def test_connect_tasks_move_to_the_surviving_worker_when_one_is_killed(cluster_factory, tmp_path) -> None:
    """Two distributed workers of one group share the connectors and their tasks (Connect's
    incremental cooperative protocol over JoinGroup/SyncGroup). The first worker (the
    group's leader) is killed -9: once its session expires the other becomes leader and,
    after scheduled.rebalance.max.delay.ms, runs all of it; lines written after the kill
    arrive. At least once: lines whose source offsets were not committed before the kill
    may arrive twice, none is lost."""
    c = cluster_factory(3)
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    stops = [tmp_path / "stop-a", tmp_path / "stop-b"]
    first = [f"line-{i}" for i in range(100)]
    src.write_text("".join(x + "\n" for x in first))
    a = _start(c, tmp_path, stops[0], "http://127.0.0.1:1/")
    b = None
    try:
        assert _wait_lines(out, 100, a) == first
        b = _start(c, tmp_path, stops[1], "http://127.0.0.1:2/", join_only=True)
        _wait_for(tmp_path / "connect.log", "joined", b)
        # the group rebalances: both workers members of its generation, b with its share
        _wait_group(c, "connect-it", lambda g: g["group_state"] == "Stable" and len(g["members"]) == 2)
        time.sleep(3)  # the follow-up rebalance of the incremental cooperative protocol
        a.kill()
        a.wait(10)
        # a's session expires (Connect's session.timeout.ms, 10 s): b alone, the leader
        _wait_group(c, "connect-it", lambda g: g["group_state"] == "Stable" and len(g["members"]) == 1)
        more = [f"line-{i}" for i in range(100, 150)]
        with src.open("a") as f:
            f.write("".join(x + "\n" for x in more))
        lines = _wait_lines(out, 150, b, timeout=120)
        deadline = time.monotonic() + 60
        while set(lines) != set(first + more):  # duplicates may come first
            assert time.monotonic() < deadline, sorted(set(first + more) - set(lines))[:10]
            time.sleep(0.3)
            lines = out.read_text().splitlines()
        assert set(lines) <= set(first + more)
        # in order, but for a replay of what the killed worker had not committed
        firsts = list(dict.fromkeys(lines))
        assert firsts == first + more
    finally:
        for s in stops:
            s.touch()
        for w in (a, b):
            if w is None:
                continue
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None, "the Connect worker exited"
        assert time.monotonic() < deadline, f"no {text!r} after {timeout}s"
        time.sleep(0.3)


def _wait_group(c, group: str, ok, timeout: float = 60) -> None:
    """Until the group, as its coordinator describes it, satisfies `ok`."""
    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey

    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        for b in c.brokers.values():
            if not b.alive:
                continue
            found = wire.call("127.0.0.1", b.port, ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
            if found["error_code"] == 0:
                [seen] = wire.call(found["host"], found["port"], ApiKey.DESCRIBE_GROUPS, 0,
                                   {"groups": [group]})["groups"]
                if seen["error_code"] == 0 and ok(seen):
                    return
            break
        time.sleep(0.3)
    raise AssertionError(f"group {group}: {seen and (seen['group_state'], len(seen['members']))}")
