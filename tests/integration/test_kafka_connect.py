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
           eos: bool = False) -> subprocess.Popen:
    cp, main = java_tools.compiled("ConnectWorker", java_tools.CONNECT_JARS)
    stop.unlink(missing_ok=True)
    log = open(tmp_path / "connect.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", cp, main, c.bootstrap, "connect-it", str(tmp_path / "in.txt"),
         "connect-lines", str(tmp_path / "out.txt"), str(stop), "3", url,
         *(["join-only"] if join_only else []), *(["eos"] if eos else [])],
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


def _values(c, topic: str, isolation: str, n: int = 1, timeout: float = 120) -> list[str]:
    """The topic's values as a consumer of that isolation level sees them, once n have
    arrived and nothing more comes for a few seconds."""
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "eos-check", "enable.auto.commit": False,
                     "isolation.level": isolation, "auto.offset.reset": "earliest"})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        quiet_until = None
        while True:
            m = cons.poll(0.5)
            now = time.monotonic()
            if m is not None and m.error() is None:
                seen.append(m.value().decode())
                quiet_until = None
            elif len(seen) >= n:
                quiet_until = quiet_until or now + 3
                if now > quiet_until:
                    return seen
            assert now < deadline, f"{len(seen)} of {n} records after {timeout}s"
    finally:
        cons.close()


def test_connect_exactly_once_source_survives_a_killed_worker(cluster_factory, tmp_path) -> None:
    """KIP-618: a worker with exactly.once.source.support=enabled runs the FileStream source
    (exactly.once.support=required) with a transactional producer whose transactions (2 s
    each) carry the records and their source offsets; its leader fences the task's earlier
    producers before starting it. The worker is killed -9 while lines stream in, a
    transaction open, and started again: the new task producer's InitProducerId aborts what
    the dead one left (its records stay in the log, behind abort markers), it resumes from
    the offsets committed with the last transaction, and a read_committed consumer sees
    every line exactly once, in order, while a read_uncommitted one sees the aborted ones
    too. (At least once, as the other tests here, would repeat the lines sent since the
    last offset flush.)"""
    import threading

    c = cluster_factory(3)
    src, stop = tmp_path / "in.txt", tmp_path / "stop"
    total = 3000
    src.write_text("".join(f"line-{i}\n" for i in range(200)))
    written = [200]
    done = threading.Event()

    def feed() -> None:  # lines keep arriving across the kill and the restart (~7 s)
        while written[0] < total and not done.is_set():
            with src.open("a") as f:
                f.write("".join(f"line-{i}\n" for i in range(written[0], written[0] + 8)))
            written[0] += 8
            time.sleep(0.02)

    worker = _start(c, tmp_path, stop, eos=True)
    feeder = threading.Thread(target=feed)
    try:
        _wait_for(tmp_path / "connect.log", "connectors running", worker)
        assert _values(c, "connect-lines", "read_committed", 200)[:200] == [f"line-{i}" for i in range(200)]
        feeder.start()
        time.sleep(3.0)  # in mid-stream: a transaction open with records
        assert feeder.is_alive()
        worker.kill()
        worker.wait(10)
        worker = _start(c, tmp_path, stop, eos=True)
        feeder.join(120)
        assert written[0] == total
        values = _values(c, "connect-lines", "read_committed", total)
        dupes = len(values) - len(set(values))
        assert dupes == 0, f"{dupes} lines delivered twice"
        assert values == [f"line-{i}" for i in range(total)]
        # the killed worker's open transaction was aborted, not lost or committed
        assert len(_values(c, "connect-lines", "read_uncommitted")) > total
    finally:
        done.set()
        stop.touch()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        if feeder.is_alive():
            feeder.join(10)


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
