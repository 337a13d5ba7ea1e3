"""A log dir whose disk fails with a real EIO (KIP-112): an ext4 file system on a loop
device, shut down under a running acks=all producer with the ext4 shutdown ioctl (every
read, write and fsync on it then fails with EIO, as after a disk error).

With another log dir left, the broker stays up: the failed dir goes offline (its
replicas answered KAFKA_STORAGE_ERROR, shown in Metadata's offline_replicas), the
controller moves their leaders to in-sync replicas, no acknowledged write is lost and
the broker's other dir goes on serving. Once the file system is checked and mounted
again, the restarted broker rejoins the ISRs with every acknowledged record. With no
other dir the broker halts, as Kafka's does."""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.fixtures.cluster import TestCluster, free_port
from tests.integration.test_log_dir_failure import create_on

EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2  # as a dying disk: the journal is not flushed either
RECORD = 1000


def require_loop_ext4() -> None:
    tools = ("mount", "umount", "losetup", "mkfs.ext4", "e2fsck")
    if os.geteuid() != 0 or not os.path.exists("/dev/loop-control") \
            or any(shutil.which(t) is None for t in tools):
        if os.environ.get("CI") == "true":
            pytest.fail("mounting an ext4 image on a loop device (root, losetup, mkfs.ext4) is required in CI")
        pytest.skip("needs root, loop devices and e2fsprogs to mount an ext4 image")


class LoopExt4:
    """An ext4 file system in an image file, mounted through a loop device of its own."""

    def __init__(self, image: Path, mountpoint: Path, size: str = "64M") -> None:
        self.image = image
        self.mountpoint = mountpoint
        self.device: str | None = None
        mountpoint.mkdir(exist_ok=True)
        subprocess.run(["truncate", "-s", size, str(image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)

    def mount(self) -> None:
        self.device = subprocess.run(["losetup", "-f", "--show", str(self.image)], check=True,
                                     capture_output=True, text=True).stdout.strip()
        subprocess.run(["mount", "-t", "ext4", self.device, str(self.mountpoint)], check=True)

    def shut_down(self) -> None:
        """The disk fails: from now on the file system answers EIO."""
        fd = os.open(self.mountpoint, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)

    def unmount(self) -> None:
        """Unmount (lazily if still busy) and free the loop device; safe to repeat."""
        if os.path.ismount(self.mountpoint):
            if subprocess.run(["umount", str(self.mountpoint)], check=False).returncode != 0:
                subprocess.run(["umount", "-l", str(self.mountpoint)], check=False)
        if self.device is not None:
            subprocess.run(["losetup", "-d", self.device], check=False)
            self.device = None

    def fsck(self) -> None:
        rc = subprocess.run(["e2fsck", "-fy", str(self.image)], capture_output=True, text=True)
        assert rc.returncode in (0, 1), f"e2fsck: {rc.returncode}\n{rc.stdout}\n{rc.stderr}"


def wait_until(check: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.1)


def partitions(c: TestCluster, topics: list[str]) -> dict[str, dict]:
    return {t["name"]: t["partitions"][0] for t in c.metadata(topics)["topics"]}


def produce_across_failure(c: TestCluster, plan: dict[str, int], fail: Callable[[], None]) -> dict[str, set[bytes]]:
    """Write plan[topic] records to partition 0 of each topic (acks=all, idempotent) and
    call fail() a third of the way, with writes in flight; every record must be
    acknowledged (counted in the delivery callback). Returns the acked record ids."""
    from confluent_kafka import Producer

    acked: dict[str, set[bytes]] = {t: set() for t in plan}
    errors: list[str] = []

    def done(err, msg) -> None:
        if err is None:
            acked[msg.topic()].add(msg.value()[:12])
        else:
            errors.append(f"{msg.topic()}: {err}")

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 65536, "message.timeout.ms": 90000})
    def some_acked() -> bool:
        p.poll(0.05)
        return all(acked.values())

    total = max(plan.values())
    for i in range(total):
        if i == total // 3:
            wait_until(some_acked, 30, "first acks")
            fail()
        for t, n in plan.items():
            if i < n:
                p.produce(t, value=b"%012d" % i + b"x" * (RECORD - 12), partition=0, on_delivery=done)
        if i % 100 == 0:
            p.poll(0)
    left = p.flush(100)
    assert left == 0 and not errors, (left, errors[:5])
    for t, n in plan.items():
        assert len(acked[t]) == n, (t, len(acked[t]), n)
    return acked


def read_back(c: TestCluster, acked: dict[str, set[bytes]], timeout: float = 60) -> None:
    """Every acknowledged record is read (partition 0 of each topic, from its leader)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    cons = Consumer({"bootstrap.servers": c.alive_bootstrap(), "group.id": "check",
                     "enable.auto.commit": False})
    cons.assign([TP(t, 0, 0) for t in acked])
    got: dict[str, set[bytes]] = {t: set() for t in acked}
    deadline = time.monotonic() + timeout
    try:
        while any(acked[t] - got[t] for t in acked) and time.monotonic() < deadline:
            for m in cons.consume(1000, 0.5):
                if m.error() is None:
                    got[m.topic()].add(m.value()[:12])
    finally:
        cons.close()
    for t in acked:
        missing = acked[t] - got[t]
        assert not missing, f"{t}: {len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"


def gauge(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.split("{", 1)[0].split(" ", 1)[0] == name)


def test_eio_takes_the_dir_offline_and_the_broker_serves_its_other_dir(cluster_factory) -> None:
    """Broker 3 leads `eio-0` and follows `follow-0` in a log dir on ext4, and leads
    `keep-0` in a normal one. The ext4 file system is shut down while a producer writes
    to all three."""
    require_loop_ext4()
    c = cluster_factory(3, start=False)
    b3 = c.brokers[3]
    disk = LoopExt4(b3.config.parent / "disk.img", b3.config.parent / "ext4-disk")
    other = b3.config.parent / "other-disk"
    other.mkdir()
    metrics_port = free_port()
    try:
        disk.mount()
        b3.set_log_dirs(disk.mountpoint, other)
        b3.config.write_text(b3.config.read_text() + f"metrics.port={metrics_port}\n")
        c.start()
        isr2 = {"min.insync.replicas": "2"}
        # New logs go to the dir with the fewest partitions, the first on ties.
        create_on(c, "eio", [3, 1, 2], isr2)
        create_on(c, "keep", [3, 1, 2], isr2)
        create_on(c, "follow", [1, 3, 2], isr2)
        assert (disk.mountpoint / "eio-0").is_dir() and (disk.mountpoint / "follow-0").is_dir()
        assert (other / "keep-0").is_dir()

        acked = produce_across_failure(c, {"eio": 9000, "follow": 9000, "keep": 3000}, disk.shut_down)

        assert b3.alive, "broker 3 halted although it has another log dir"
        log = b3.log.read_text(errors="replace")
        assert f"Stopped serving replicas in dir {disk.mountpoint}" in log, log[-3000:]
        assert "Input/output error" in log, log[-3000:]
        parts = wait_until(lambda: (p := partitions(c, ["eio", "follow", "keep"]))
                           and 3 not in p["follow"]["isr_nodes"] and p, 30, "broker 3 out of follow-0's ISR")
        assert parts["eio"]["leader_id"] in (1, 2) and 3 not in parts["eio"]["isr_nodes"], parts
        assert parts["eio"]["offline_replicas"] == [3] and parts["follow"]["offline_replicas"] == [3], parts
        assert parts["follow"]["leader_id"] == 1, parts
        assert parts["keep"]["leader_id"] == 3 and parts["keep"]["offline_replicas"] == [], parts
        assert sorted(parts["keep"]["isr_nodes"]) == [1, 2, 3], parts

        dirs = wire.call("127.0.0.1", b3.port, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})["results"]
        by_dir = {r["log_dir"]: r for r in dirs}
        assert by_dir[str(disk.mountpoint)]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR, by_dir
        assert by_dir[str(disk.mountpoint)]["topics"] == []
        assert by_dir[str(other)]["error_code"] == 0
        assert [t["name"] for t in by_dir[str(other)]["topics"]] == ["keep"]
        assert gauge(metrics_port, "kafka_log_logmanager_offlinelogdirectorycount") == 1

        # broker 3 goes on leading keep-0 from its other dir
        acked["keep"] |= produce_across_failure(c, {"keep": 500}, lambda: None)["keep"]
        read_back(c, acked)

        # The disk back: checked, mounted again; the restarted broker loads and recovers
        # the dir, catches up and rejoins every ISR.
        assert c.stop(3) == 0, c.tail(3)
        disk.unmount()
        disk.fsck()
        disk.mount()
        b3.start()
        c.wait_serving(3, 60)
        for t in ("eio", "follow", "keep"):
            c.wait_for_leaders(t, 1, isr=3, timeout=60)
        assert all(p["offline_replicas"] == [] for p in partitions(c, ["eio", "follow", "keep"]).values())
        # Nothing lost on broker 3 either: it leads eio-0 again and serves every acked record.
        body = {"election_type": 0, "topic_partitions": [{"topic": "eio", "partitions": [0]}],
                "timeout_ms": 30000}
        resp = wire.call("127.0.0.1", c.brokers[1].port, ApiKey.ELECT_LEADERS, 1, body, timeout=35)
        assert resp["error_code"] == 0, resp
        wait_until(lambda: partitions(c, ["eio"])["eio"]["leader_id"] == 3, 30, "broker 3 leading eio-0")
        read_back(c, {"eio": acked["eio"]})
    finally:
        c.shutdown()
        disk.unmount()


@pytest.mark.parametrize("found_by", ["read", "create"])
def test_eio_found_by_a_read_or_a_log_creation_takes_the_dir_offline(cluster_factory, found_by: str) -> None:
    """No writes after the failure: a consumer reading `cold-0` from its start, or a new
    partition to create on broker 3, finds the EIO (as Kafka's LocalLog.read and
    getOrCreateLog fail the dir). The dir goes offline, cold-0's leadership moves and the
    consumer gets every record. Checkpoints, which would write to the dir and fail it
    too, are made rare so that the read or the creation is what finds the failure."""
    require_loop_ext4()
    rare = {"replica.high.watermark.checkpoint.interval.ms": "3600000",
            "log.flush.offset.checkpoint.interval.ms": "3600000"}
    c = cluster_factory(3, start=False)
    b3 = c.brokers[3]
    disk = LoopExt4(b3.config.parent / "disk.img", b3.config.parent / "ext4-disk")
    other = b3.config.parent / "other-disk"
    other.mkdir()
    try:
        disk.mount()
        b3.set_log_dirs(disk.mountpoint, other)
        b3.config.write_text(b3.config.read_text() + "".join(f"{k}={v}\n" for k, v in rare.items()))
        c.start()
        create_on(c, "cold", [3, 1, 2], {"min.insync.replicas": "2"})
        create_on(c, "keep", [3, 1, 2])
        assert (disk.mountpoint / "cold-0").is_dir() and (other / "keep-0").is_dir()
        acked = produce_across_failure(c, {"cold": 3000, "keep": 300}, lambda: None)
        c.wait_for_leaders("cold", 1, isr=3)
        read_back(c, {"keep": acked["keep"]})  # __consumer_offsets made while the disk works

        disk.shut_down()
        time.sleep(1)  # nothing writes to the dir: it is still online
        assert partitions(c, ["cold"])["cold"]["leader_id"] == 3
        assert "Stopped serving replicas" not in b3.log.read_text(errors="replace")
        if found_by == "create":
            # new logs go to the dir with the fewest partitions: the first new one to ext4
            create_on(c, "new", [3, 1, 2], isr=2)  # broker 3 cannot create its replica
            wait_until(lambda: partitions(c, ["cold"])["cold"]["leader_id"] != 3, 30, "cold-0 moved")
        read_back(c, acked, timeout=30)

        log = b3.log.read_text(errors="replace")
        assert f"Stopped serving replicas in dir {disk.mountpoint}" in log, log[-3000:]
        created = f"Error while creating log for new-0 in dir {disk.mountpoint}"
        assert (created in log) == (found_by == "create"), log[-3000:]
        parts = partitions(c, ["cold", "keep"])
        assert parts["cold"]["leader_id"] in (1, 2) and parts["cold"]["offline_replicas"] == [3], parts
        assert parts["keep"]["leader_id"] == 3 and parts["keep"]["offline_replicas"] == [], parts
        assert b3.alive
    finally:
        c.shutdown()
        disk.unmount()


def test_eio_on_the_only_log_dir_halts_the_broker(cluster_factory) -> None:
    require_loop_ext4()
    c = cluster_factory(3, start=False)
    b3 = c.brokers[3]
    disk = LoopExt4(b3.config.parent / "disk.img", b3.config.parent / "ext4-disk")
    try:
        disk.mount()
        b3.set_log_dirs(disk.mountpoint)
        c.start()
        create_on(c, "eio", [3, 1, 2], {"min.insync.replicas": "2"})

        acked = produce_across_failure(c, {"eio": 9000}, disk.shut_down)

        assert b3.wait(30) == 1, "the broker whose only log dir failed did not halt"
        log = b3.log.read_text(errors="replace")
        assert f"Shutdown broker because all log dirs in {disk.mountpoint} have failed" in log, log[-3000:]
        assert "Input/output error" in log, log[-3000:]
        read_back(c, acked)

        disk.unmount()
        disk.fsck()
        disk.mount()
        b3.start()
        c.wait_serving(3, 60)
        c.wait_for_leaders("eio", 1, isr=3, timeout=60)
    finally:
        c.shutdown()
        disk.unmount()
