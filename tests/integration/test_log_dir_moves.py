"""JBOD: a partition's replica moved between a broker's log dirs (AlterReplicaLogDirs)
while a producer writes to it with acks=all, and a kill -9 in the middle of a move."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey

TOPIC = "mv"
RATE = 2_000_000  # replica.alter.log.dirs.io.max.bytes.per.second: the move takes seconds


def two_dirs(cluster_factory):
    c = cluster_factory(1, start=False)
    b = c.brokers[1]
    root = b.config.parent
    d1, d2 = root / "d1", root / "d2"
    b.set_log_dirs(d1, d2)
    c.start()
    c.create_topic(TOPIC, 1, 1, {"segment.bytes": 200_000})
    return c, d1, d2


def call(c, api_key: int, version: int, body: dict) -> dict:
    return wire.call("127.0.0.1", c.brokers[1].port, api_key, version, body, timeout=30)


def alter(c, path: Path, topic: str = TOPIC, partitions: tuple[int, ...] = (0,)) -> list[int]:
    resp = call(c, ApiKey.ALTER_REPLICA_LOG_DIRS, 2,
                {"dirs": [{"path": str(path), "topics": [{"name": topic, "partitions": list(partitions)}]}]})
    return [p["error_code"] for t in resp["results"] for p in t["partitions"]]


def describe(c) -> dict[tuple[str, bool], int]:
    """{(log dir, is_future): offset lag} of the partition mv-0."""
    resp = call(c, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": TOPIC, "partitions": [0]}]})
    return {(r["log_dir"], p["is_future_key"]): p["offset_lag"]
            for r in resp["results"] for t in r["topics"] for p in t["partitions"]}


def set_rate(c, rate: int | None) -> None:
    op = {"name": "replica.alter.log.dirs.io.max.bytes.per.second", "config_operation": 0 if rate else 1,
          "value": str(rate) if rate else None}
    resp = call(c, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 4, "resource_name": "1", "configs": [op]}], "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp


class Writer:
    """acks=all producer in a thread; `acked` holds the values the broker acknowledged."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "batch.size": 65536,  # below segment.bytes
                                  "message.timeout.ms": 60000})
        self.prefix = prefix
        self.acked: set[bytes] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def _done(self, err, msg) -> None:
        if err is None:
            self.acked.add(msg.value())

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, value=b"%s-%08d-" % (self.prefix.encode(), i) + b"v" * 200,
                                      partition=0, on_delivery=self._done)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if i % 50 else 0.01)
        self.producer.flush(60)

    def bulk(self, n: int) -> None:
        for i in range(n):
            self.producer.produce(TOPIC, value=b"%s-bulk-%08d-" % (self.prefix.encode(), i) + b"b" * 1000,
                                  partition=0, on_delivery=self._done)
            if i % 1000 == 0:
                self.producer.poll(0)
        assert self.producer.flush(60) == 0
        assert len(self.acked) >= n


def read_all(bootstrap: str) -> set[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic()}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    cons.assign([TopicPartition(TOPIC, 0, 0)])
    _low, high = cons.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    got: set[bytes] = set()
    last = -1
    deadline = time.monotonic() + 60
    while last < high - 1 and time.monotonic() < deadline:
        for m in cons.consume(1000, 1.0):
            if m.error() is None:
                got.add(m.value())
                last = m.offset()
    cons.close()
    return got


def wait_for(pred, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_move_while_producing_with_acks_all(cluster_factory) -> None:
    c, d1, d2 = two_dirs(cluster_factory)
    writer = Writer(c.bootstrap, "a")
    writer.bulk(8000)  # ~8 MB, many segments
    src = d1 if (d1 / f"{TOPIC}-0").is_dir() else d2
    dst = d2 if src == d1 else d1
    assert alter(c, Path("/not/a/log/dir")) == [57]  # LOG_DIR_NOT_FOUND
    assert alter(c, src) == [0]  # already there
    assert alter(c, dst, topic="not-here-yet") == [9]  # REPLICA_NOT_AVAILABLE
    set_rate(c, RATE)
    writer.thread.start()
    try:
        time.sleep(0.5)
        assert alter(c, dst) == [0]
        seen: list[dict] = []
        wait_for(lambda: seen.append(describe(c)) or (str(dst), True) in seen[-1], 10, "the future log")
        during = seen[-1]
        assert (str(src), False) in during and during[(str(dst), True)] > 0, during
        set_rate(c, None)  # let it finish
        wait_for(lambda: set(describe(c)) == {(str(dst), False)}, 60, "the swap")
        time.sleep(1)
    finally:
        writer.stop.set()
        writer.thread.join(90)
    assert len(writer.acked) > 8000
    assert not (src / f"{TOPIC}-0").exists()
    files = sorted(p.name for p in (dst / f"{TOPIC}-0").iterdir())
    assert sum(f.endswith(".log") for f in files) > 10, files
    assert not [p for p in src.iterdir() if p.name.startswith(f"{TOPIC}-0")]
    missing = writer.acked - read_all(c.bootstrap)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    # and after a restart, from the new dir
    c.restart(1)
    c.wait_for_leaders(TOPIC, 1)
    missing = writer.acked - read_all(c.bootstrap)
    assert not missing, f"{len(missing)} acknowledged records lost after the restart"
    assert describe(c) == {(str(dst), False): 0}


def start_move_and_kill(c, writer: Writer, dst: Path) -> None:
    """The writer started, broker 1's replica moving to `dst` at RATE, killed -9 once part
    of it is copied (the future log left there)."""
    set_rate(c, RATE)
    writer.thread.start()
    assert alter(c, dst) == [0]
    wait_for(lambda: any(p.name.endswith("-future") for p in dst.iterdir()), 10, "the future log")
    time.sleep(1.0)  # part of it copied
    c.kill(1)
    assert any(p.name.endswith("-future") for p in dst.iterdir())


def test_kill_during_a_move_loses_nothing_and_the_move_completes(cluster_factory) -> None:
    c, d1, d2 = two_dirs(cluster_factory)
    writer = Writer(c.bootstrap, "k")
    writer.bulk(8000)
    src = d1 if (d1 / f"{TOPIC}-0").is_dir() else d2
    dst = d2 if src == d1 else d1
    try:
        start_move_and_kill(c, writer, dst)
        writer.stop.set()  # what it could not get acknowledged meanwhile does not count
        writer.thread.join(90)
    finally:
        writer.stop.set()
    c.brokers[1].start()
    c.wait_serving(1)
    # the killed process's ZooKeeper session (and its /controller) lasts until it expires
    c.wait_for_leaders(TOPIC, 1, timeout=90)
    set_rate(c, None)
    # The move starts again after the restart, and completes.
    wait_for(lambda: set(describe(c)) == {(str(dst), False)}, 60, "the restarted move")
    missing = writer.acked - read_all(c.bootstrap)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    assert len(writer.acked) > 8000


def test_a_move_from_a_disk_replaced_by_an_empty_one_is_not_served_short(cluster_factory) -> None:
    """Broker 1 (two log dirs) moves its replica of mv-0 (replicas 1, 2, 3) between them
    while an acks=all producer writes; kill -9 mid-copy; the source dir's disk replaced by
    an empty one. At the restart the future log is a partial copy whose current log is
    gone: it must not be taken for the partition's log (a completed swap). The replica is
    recreated empty (in the move's destination), fetched from the leader, and rejoins the
    ISR; leading mv-0 again, it serves every acknowledged record."""
    from tests.integration.test_log_dir_failure import create_on

    c = cluster_factory(3, start=False)
    b1 = c.brokers[1]
    d1, d2 = b1.config.parent / "d1", b1.config.parent / "d2"
    b1.set_log_dirs(d1, d2)
    c.start()
    create_on(c, TOPIC, [1, 2, 3], {"min.insync.replicas": "2", "segment.bytes": "200000"})
    writer = Writer(c.bootstrap, "r")
    writer.bulk(8000)  # ~8 MB: a move of seconds at RATE
    src = d1 if (d1 / f"{TOPIC}-0").is_dir() else d2
    dst = d2 if src == d1 else d1
    try:
        start_move_and_kill(c, writer, dst)
        [future] = [p for p in dst.iterdir() if p.name.endswith("-future")]
        copied = sum(f.stat().st_size for f in future.glob("*.log"))
        whole = sum(f.stat().st_size for f in (src / f"{TOPIC}-0").glob("*.log"))
        assert 0 < copied < whole, (copied, whole)
        # The disk of `src` replaced by an empty one: the dir is there, online, empty.
        for p in src.iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        b1.start()
        c.wait_serving(1, 60)
        log = b1.log.read_text(errors="replace")
        assert "and the swap had not begun: a partial copy" in log, c.tail(1, 80)
        assert "the swap with the current log" not in log
        # the killed process's ZooKeeper session lasts until it expires
        c.wait_for_leaders(TOPIC, 1, isr=3, timeout=90)
        assert set(describe(c)) == {(str(dst), False)}  # created where the move was going
        assert not [p for p in dst.iterdir() if p.name.endswith("-future")]
        time.sleep(1)  # a few more acknowledged writes with broker 1 in the ISR
    finally:
        writer.stop.set()
        writer.thread.join(90)
    # Broker 1, the preferred leader, leads again: what it serves is its own log.
    body = {"election_type": 0, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}], "timeout_ms": 30000}
    resp = wire.call("127.0.0.1", c.brokers[2].port, ApiKey.ELECT_LEADERS, 1, body, timeout=35)
    assert resp["error_code"] == 0, resp
    wait_for(lambda: c.leader_of(TOPIC) == 1, 30, "broker 1 leading mv-0")
    missing = writer.acked - read_all(c.bootstrap)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    assert len(writer.acked) > 8000
