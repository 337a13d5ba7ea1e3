"""flush.ms on a real broker: a topic's time-based fsync, checked every
log.flush.scheduler.interval.ms (Kafka's knob). A flush moves the partition's recovery
point, which the broker then checkpoints (recovery-point-offset-checkpoint): well before
log.flush.offset.checkpoint.interval.ms (60 s) only the flusher writes it."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from kafkarepl.storage.checkpoints import RECOVERY_POINT_CHECKPOINT
from tests.batches import build_batch
from tests.integration.chaos import wait_until

pytestmark = pytest.mark.integration
HOST = "127.0.0.1"


def produce(port: int, topic: str, n: int, acks: int = 1) -> None:
    batch = build_batch([b"v%d" % i for i in range(n)], timestamp=int(time.time() * 1000))
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    resp = wire.call(HOST, port, ApiKey.PRODUCE, 7, body, timeout=15)
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp


def checkpointed(c, broker_id: int, name: str, topic: str) -> int | None:
    """Partition 0 of `topic` in checkpoint file `name` of the broker's log dir."""
    path = c.brokers[broker_id].config.parent / "logs" / name
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        t, part, offset = line.split()
        if (t, part) == (topic, "0"):
            return int(offset)
    return None


def recovery_point(c, topic: str) -> int | None:
    return checkpointed(c, 1, RECOVERY_POINT_CHECKPOINT, topic)


def test_flush_ms_is_checked_every_log_flush_scheduler_interval(cluster_factory) -> None:
    fast = cluster_factory(1, log_flush_scheduler_interval_ms=100)
    fast.create_topic("fl", 1, 1, configs={"flush.ms": "50"})
    produce(fast.brokers[1].port, "fl", 10)
    wait_until(lambda: recovery_point(fast, "fl") == 10, 10, "flush.ms to flush the partition")


def test_flush_ms_is_never_checked_with_kafkas_default_scheduler_interval(cluster_factory) -> None:
    never = cluster_factory(1, log_flush_scheduler_interval_ms=2**63 - 1)  # Kafka's default
    never.create_topic("fl", 1, 1, configs={"flush.ms": "50"})
    produce(never.brokers[1].port, "fl", 10)
    time.sleep(3)  # three of kafkarepl's default checks
    assert (recovery_point(never, "fl") or 0) < 10, "flush.ms was checked although the scheduler never runs"


def test_a_followers_log_start_is_checkpointed_every_interval(cluster_factory) -> None:
    """DeleteRecords moves the leader's log start, which it checkpoints at once; the
    follower's moves with the leader's fetch answers and nothing of its own writes it:
    log.flush.start.offset.checkpoint.interval.ms does (Kafka's), so a kill -9 of the
    follower does not bring the deleted records back when it leads."""
    from kafkarepl.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT
    from tests.integration.test_cli_offsets_tools import offsets, tool

    c = cluster_factory(2, log_flush_start_offset_checkpoint_interval_ms=200)
    c.create_topic("ls", 1, 2)
    c.wait_for_leaders("ls", 1, isr=2)
    leader = c.leader_of("ls")
    follower = 3 - leader
    for _ in range(4):
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{"name": "ls",
                "partition_data": [{"index": 0, "records": bytes(build_batch(5))}]}]}
        resp = wire.call(HOST, c.brokers[leader].port, ApiKey.PRODUCE, 7, body, timeout=15)
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp
    plan = c.root / "delete.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "ls", "partition": 0, "offset": 12}]}')
    r = tool(c, "delete-records", "--offset-json-file", str(plan))
    assert r.returncode == 0 and "low_watermark: 12" in r.stdout, (r.stdout, r.stderr)
    wait_until(lambda: checkpointed(c, follower, LOG_START_OFFSET_CHECKPOINT, "ls") == 12, 15,
               "the follower's log start to be checkpointed")
    c.kill(follower)
    c.restart(follower)
    c.wait_for_leaders("ls", 1, isr=2)
    c.kill(leader)
    wait_until(lambda: c.leader_of("ls") == follower, 30, "the follower to lead")
    assert offsets(c, "--topic", "ls", "--time", "earliest") == ["ls:0:12"]


class FsyncTrace:
    """strace -f on a running broker, recording its fdatasync/fsync calls per thread;
    with `delay_us`, each fdatasync is held that long first (a slow disk)."""

    def __init__(self, pid: int, out, delay_us: int = 0) -> None:
        import shutil
        import subprocess

        if shutil.which("strace") is None:
            if os.environ.get("CI") == "true":
                pytest.fail("strace is required in CI (tools/setup.sh installs it)")
            pytest.skip("needs strace")
        self.pid, self.out = pid, out
        inject = ["-e", f"inject=fdatasync:delay_enter={delay_us}"] if delay_us else []
        self.proc = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=fdatasync,fsync", *inject,
                                      "-o", str(out), "-p", str(pid)], stderr=subprocess.PIPE)
        time.sleep(1.0)  # every thread attached
        assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""

    def stop(self) -> tuple[int, int]:
        """Detach; (fsyncs by the event loop's thread, the main one; fsyncs by others)."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(15)
        on_loop = others = 0
        for line in self.out.read_text().splitlines():
            tid, _, call = line.partition(" ")
            if call.lstrip().startswith(("fdatasync(", "fsync(")):
                if int(tid) == self.pid:
                    on_loop += 1
                else:
                    others += 1
        return on_loop, others


def test_flush_messages_fsyncs_off_the_event_loop_before_the_ack(cluster_factory) -> None:
    """flush.messages=1: each acknowledged produce was fsynced on the leader first, and the
    follower fsyncs what it fetched before it fetches on (Kafka flushes inline in the
    append); the fdatasyncs run in the broker's flush thread, never on the event loop,
    which serves every connection meanwhile."""
    c = cluster_factory(2)
    c.create_topic("fm", 1, 2, configs={"flush.messages": "1"})
    c.wait_for_leaders("fm", 1, isr=2)
    leader = c.leader_of("fm")
    follower = 3 - leader
    port = c.brokers[leader].port

    produce(port, "fm", 3, acks=-1)  # the log's first write (its first epoch checkpoint) before the traces
    traces = [FsyncTrace(c.brokers[b].proc.pid, c.root / f"strace-{b}.txt") for b in (leader, follower)]
    try:
        for i in range(20):
            produce(port, "fm", 3, acks=1 if i % 2 else -1)
    finally:
        (lead_loop, lead_thread), (foll_loop, foll_thread) = (t.stop() for t in traces)
    assert lead_loop == 0 and foll_loop == 0, (lead_loop, foll_loop)
    # At least the segment file's per produce on the leader (one at a time: none shares a
    # flush) and per fetch that brought records on the follower; that the answers wait
    # for them is the next test's.
    assert lead_thread >= 20, lead_thread
    assert foll_thread >= 10, foll_thread
    from tests.integration.test_cli_offsets_tools import offsets
    assert offsets(c, "--topic", "fm", "--time", "latest") == ["fm:0:63"]


def test_flush_messages_acks_wait_for_the_fsync_and_the_event_loop_does_not(cluster_factory) -> None:
    """Every fdatasync of one broker held 0.4 s (strace's syscall delay, a slow disk). On
    the leader: an acks=1 produce to a flush.messages=1 partition is answered only after
    the fsync, and a request sent on another connection while it runs is answered before
    it (the event loop does not wait for the fsync). On the follower: an acks=all produce
    is answered only after the follower's fsync (it fetches on, moving the leader's HW,
    once its flush is done)."""
    import threading

    c = cluster_factory(2)
    c.create_topic("fs", 1, 2, configs={"flush.messages": "1", "min.insync.replicas": "2"})
    c.wait_for_leaders("fs", 1, isr=2)
    leader = c.leader_of("fs")
    follower = 3 - leader
    port = c.brokers[leader].port
    produce(port, "fs", 3, acks=-1)  # the log's first write (its first epoch checkpoint) untraced
    answered: dict[str, float] = {}

    def timed(acks: int) -> None:
        t0 = time.monotonic()
        produce(port, "fs", 3, acks=acks)
        answered[f"acks={acks}"] = time.monotonic() - t0
        answered["at"] = time.monotonic()

    slow = FsyncTrace(c.brokers[leader].proc.pid, c.root / "strace-leader.txt", delay_us=400_000)
    try:
        t = threading.Thread(target=timed, args=(1,))
        t.start()
        time.sleep(0.1)  # the produce is in, its fsync held
        wire.metadata(HOST, port, ["fs"], timeout=15)
        metadata_at = time.monotonic()
        t.join(30)
    finally:
        slow.stop()
    assert answered["acks=1"] >= 0.4, answered  # not before the leader's fsync
    assert metadata_at < answered["at"], (metadata_at, answered)  # served during it

    slow = FsyncTrace(c.brokers[follower].proc.pid, c.root / "strace-follower.txt", delay_us=400_000)
    try:
        timed(-1)
    finally:
        slow.stop()
    assert answered["acks=-1"] >= 0.4, answered  # not before the follower's fsync
