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
        text = "".join(line + "\n" for line in b3.config.read_text().splitlines()
                       if not line.startswith("log.dirs="))
        b3.config.write_text(text + f"log.dirs={small}\n")
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
