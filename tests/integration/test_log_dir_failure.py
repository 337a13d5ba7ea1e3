"""A broker whose log dir fills up (a real tmpfs: ENOSPC in the middle of a write) halts,
as Kafka's broker does when its log dirs have failed; the controller moves leadership
to the in-sync replicas and no acknowledged write is lost. Restarted with room, it
recovers the cut batch and rejoins the ISR."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

TOPIC = "full"


def require_mount() -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mounting a tmpfs (root) is required in CI")
        pytest.skip("needs root to mount a tmpfs")


def mount(path, size: str, remount: bool = False) -> None:
    opts = f"remount,size={size}" if remount else f"size={size}"
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], check=True)


def test_a_full_log_dir_halts_the_broker_and_no_acked_write_is_lost(cluster_factory) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP

    require_mount()
    c = cluster_factory(3, start=False)
    b3 = c.brokers[3]
    small = b3.config.parent / "small-disk"
    small.mkdir()
    mount(small, "12m")
    try:
        b3.set_log_dirs(small)
        c.start()
        c.create_topic(TOPIC, 3, 3, {"min.insync.replicas": "2", "segment.bytes": "4194304"})
        c.wait_for_leaders(TOPIC, 3, isr=3)

        acked: set[bytes] = set()
        errors: list[str] = []

        def done(err, msg) -> None:
            if err is None:
                acked.add(msg.value()[:12])
            else:
                errors.append(str(err))

        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 20, "batch.size": 262144, "message.timeout.ms": 120000})
        sent = 0
        for i in range(30_000):  # ~30 MB: the 12 MB disk fills a third of the way
            p.produce(TOPIC, value=b"%012d" % i + b"x" * 1000, partition=i % 3, on_delivery=done)
            sent += 1
            if i % 200 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        assert not errors and len(acked) == sent, (errors[:3], len(acked))

        assert b3.wait(60) == 1, "the broker with the full disk did not halt"
        log = b3.log.read_text(errors="replace")
        assert "Shutdown broker because all log dirs in" in log and str(small) in log, log[-3000:]
        assert "No space left on device" in log

        # every acknowledged record is there, read from the two brokers left
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "check", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
        cons.assign([TP(TOPIC, i, 0) for i in range(3)])
        got: set[bytes] = set()
        deadline = time.monotonic() + 90
        while len(got) < len(acked) and time.monotonic() < deadline:
            for m in cons.consume(1000, 1.0):
                if m.error() is None:
                    got.add(m.value()[:12])
        cons.close()
        missing = acked - got
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"

        # with room again it recovers (the cut batch, the unflushed tail) and catches up
        mount(small, "128m", remount=True)
        b3.start()
        c.wait_serving(3, 60)
        c.wait_for_leaders(TOPIC, 3, isr=3, timeout=90)
    finally:
        c.shutdown()
        subprocess.run(["umount", "-l", str(small)], check=False)


def create_on(c, name: str, replicas: list[int], configs: dict[str, str] | None = None,
              isr: int | None = None) -> None:
    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey

    body = {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 30000, "validate_only": False}
    resp = wire.call("127.0.0.1", c.brokers[1].port, ApiKey.CREATE_TOPICS, 5, body, timeout=35)
    assert resp["topics"][0]["error_code"] == 0, resp
    c.wait_for_leaders(name, 1, len(replicas) if isr is None else isr)


def test_jbod_a_failed_log_dir_goes_offline_and_the_broker_serves_its_other_dir(cluster_factory) -> None:
    """KIP-112: broker 3 has two log dirs; the one holding `fill-0` (which it leads) fills
    up. The broker stays up: that dir goes offline, the controller (told through
    /log_dir_event_notification and LeaderAndIsr's KAFKA_STORAGE_ERROR) moves fill-0's
    leadership to an in-sync replica and drops 3 from its ISR, no acknowledged write is
    lost, and broker 3 goes on leading `keep-0` from its other dir. Restarted with room,
    it loads the dir again and fill-0 is back to three in-sync replicas."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP

    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey

    require_mount()
    c = cluster_factory(3, start=False)
    b3 = c.brokers[3]
    small, other = b3.config.parent / "small-disk", b3.config.parent / "big-disk"
    small.mkdir()
    other.mkdir()
    mount(small, "12m")
    try:
        b3.set_log_dirs(small, other)
        c.start()
        create_on(c, "fill", [3, 1, 2], {"min.insync.replicas": "2", "segment.bytes": "4194304"})
        create_on(c, "keep", [3, 1, 2])  # the other dir: fewest partitions
        assert (small / "fill-0").is_dir() and (other / "keep-0").is_dir()

        acked: dict[str, set[bytes]] = {"fill": set(), "keep": set()}
        errors: list[str] = []

        def done(err, msg) -> None:
            if err is None:
                acked[msg.topic()].add(msg.value()[:12])
            else:
                errors.append(str(err))

        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 20, "batch.size": 262144, "message.timeout.ms": 120000})
        for i in range(24_000):  # ~24 MB into fill-0: the 12 MB dir fills half way
            p.produce("fill", value=b"%012d" % i + b"x" * 1000, partition=0, on_delivery=done)
            if i % 200 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        assert not errors and len(acked["fill"]) == 24_000, (errors[:3], len(acked["fill"]))

        assert b3.alive, "broker 3 halted although it has another log dir"
        log = b3.log.read_text(errors="replace")
        assert f"Stopped serving replicas in dir {small}" in log, log[-3000:]
        md = c.metadata(["fill", "keep"])
        parts = {t["name"]: t["partitions"][0] for t in md["topics"]}
        assert parts["fill"]["leader_id"] in (1, 2) and 3 not in parts["fill"]["isr_nodes"], parts
        assert parts["fill"]["offline_replicas"] == [3], parts
        assert parts["keep"]["leader_id"] == 3 and parts["keep"]["offline_replicas"] == [], parts

        # broker 3 still leads keep-0 from its other dir
        for i in range(100):
            p.produce("keep", value=b"k%011d" % i, partition=0, on_delivery=done)
        assert p.flush(30) == 0 and len(acked["keep"]) == 100 and not errors
        dirs = wire.call("127.0.0.1", b3.port, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})["results"]
        by_dir = {r["log_dir"]: r for r in dirs}
        assert by_dir[str(small)]["error_code"] == 56 and by_dir[str(small)]["topics"] == []
        assert by_dir[str(other)]["error_code"] == 0
        assert any(t["name"] == "keep" for t in by_dir[str(other)]["topics"])

        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "check", "enable.auto.commit": False})
        cons.assign([TP("fill", 0, 0), TP("keep", 0, 0)])
        got: dict[str, set[bytes]] = {"fill": set(), "keep": set()}
        deadline = time.monotonic() + 90
        while sum(map(len, got.values())) < sum(map(len, acked.values())) and time.monotonic() < deadline:
            for m in cons.consume(1000, 1.0):
                if m.error() is None:
                    got[m.topic()].add(m.value()[:12])
        cons.close()
        for t in acked:
            missing = acked[t] - got[t]
            assert not missing, f"{t}: {len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"

        # Restarted with the dir unusable (the disk not mounted: a file where the dir was),
        # the broker starts on its other dir, and fill-0's replica there is offline from
        # the start: not recreated empty (it may be on the missing disk).
        c.stop(3)
        subprocess.run(["umount", "-l", str(small)], check=True)
        small.rmdir()
        small.write_text("the disk is not mounted")
        b3.start()
        c.wait_serving(3, 60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            parts = {t["name"]: t["partitions"][0] for t in c.metadata(["fill", "keep"])["topics"]}
            if parts["fill"]["offline_replicas"] == [3] and 3 in parts["keep"]["isr_nodes"]:
                break
            time.sleep(0.2)
        assert parts["fill"]["offline_replicas"] == [3] and 3 not in parts["fill"]["isr_nodes"], parts
        assert 3 in parts["keep"]["isr_nodes"], parts
        assert "Error while loading log dir" in b3.log.read_text(errors="replace")
        assert not (other / "fill-0").exists()

        # the disk back (empty: a new tmpfs) and a restart: fill-0 is copied again
        c.stop(3)
        small.unlink()
        small.mkdir()
        mount(small, "128m")
        b3.start()
        c.wait_serving(3, 60)
        c.wait_for_leaders("fill", 1, isr=3, timeout=90)
        md = c.metadata(["fill"])
        assert md["topics"][0]["partitions"][0]["offline_replicas"] == []
    finally:
        c.shutdown()
        subprocess.run(["umount", "-l", str(small)], check=False)
