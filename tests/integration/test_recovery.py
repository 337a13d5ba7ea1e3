"""Broker restarts with real processes: the idempotent producer's dedupe survives a
clean (SIGTERM) and an unclean (kill -9) restart, and kill -9 in the middle of acks=1
production loses no acknowledged batch that reached the log and serves no corrupt one.

The idempotence tests work at the wire level with kafkarepl's own protocol module and
batches built by kafka-python's DefaultRecordBatchBuilder, so the retry is byte for byte
the same Produce request."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch, decode
from tests.fixtures.cluster import TestCluster

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"


# ------------------------------------------------------------------ wire helpers ----
def init_producer_id(port: int) -> tuple[int, int]:
    resp = wire.call(HOST, port, ApiKey.INIT_PRODUCER_ID, 1,
                     {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert resp["error_code"] == 0, resp
    return resp["producer_id"], resp["producer_epoch"]


def produce(port: int, topic: str, records: bytes, partition: int = 0, acks: int = 1) -> dict:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    resp = wire.call(HOST, port, ApiKey.PRODUCE, 7, body, timeout=15)
    [t] = resp["responses"]
    [p] = t["partition_responses"]
    return p


def fetch_records(port: int, topic: str, partition: int = 0) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record from offset 0 to the HW, decoded (and CRC-checked) by kafka-python."""
    out: list = []
    offset = 0
    while True:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                    "log_start_offset": -1, "partition_max_bytes": 64 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        resp = wire.call(HOST, port, ApiKey.FETCH, 11, body, timeout=15)
        [p] = resp["responses"][0]["partitions"]
        assert p["error_code"] == 0, p
        recs = decode(p["records"] or b"")
        recs = [r for r in recs if r[0] >= offset]
        if not recs:
            return out
        out.extend(recs)
        offset = recs[-1][0] + 1
        if offset >= p["high_watermark"]:
            return out


def log_end_offset(port: int, topic: str, partition: int = 0) -> int:
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                       "timestamp": -1}]}]}
    resp = wire.call(HOST, port, ApiKey.LIST_OFFSETS, 5, body)
    [p] = resp["topics"][0]["partitions"]
    assert p["error_code"] == 0, p
    return p["offset"]


def dump_log(paths: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", "dump-log", "--json", *map(str, paths)],
                          capture_output=True, text=True, timeout=60)


def partition_dir(c: TestCluster, topic: str, partition: int = 0, broker_id: int = 1) -> Path:
    return c.brokers[broker_id].config.parent / "logs" / f"{topic}-{partition}"


# -------------------------------------------------------------- idempotent retry ----
def _idempotent_scenario(c: TestCluster, restart) -> None:
    topic = "idem"
    c.create_topic(topic, 1, 1)
    port = c.brokers[1].port
    pid, epoch = init_producer_id(port)
    assert pid >= 0 and epoch >= 0

    def batch(seq: int, n: int) -> bytes:
        return bytes(build_batch([f"v{seq + i}".encode() for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq))

    first, second = batch(0, 3), batch(3, 2)
    r1 = produce(port, topic, first)
    assert (r1["error_code"], r1["base_offset"]) == (0, 0), r1
    retry = produce(port, topic, first)  # the same Produce again: a retry after a lost response
    assert (retry["error_code"], retry["base_offset"]) == (0, 0), retry
    r2 = produce(port, topic, second)
    assert (r2["error_code"], r2["base_offset"]) == (0, 3), r2
    assert log_end_offset(port, topic) == 5

    restart(c)
    port = c.brokers[1].port
    c.wait_for_leaders(topic, 1)
    for b, offset in ((second, 3), (first, 0)):
        again = produce(port, topic, b)
        assert (again["error_code"], again["base_offset"]) == (0, offset), (
            f"retry of the batch at {offset} after the restart: {again}")
    assert log_end_offset(port, topic) == 5
    assert [(o, v) for o, _t, _k, v in fetch_records(port, topic)] == [(i, f"v{i}".encode()) for i in range(5)]

    # The sequence continues where the log left off; a gap is refused and writes nothing.
    nxt = produce(port, topic, batch(5, 1))
    assert (nxt["error_code"], nxt["base_offset"]) == (0, 5), nxt
    gap = produce(port, topic, batch(9, 1))
    assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45, gap
    assert log_end_offset(port, topic) == 6


def test_idempotent_retry_no_duplicate_across_clean_restart(cluster_factory) -> None:
    def restart(c: TestCluster) -> None:
        assert c.stop(1) == 0, "broker did not exit cleanly on SIGTERM"
        c.restart(1)

    _idempotent_scenario(cluster_factory(1), restart)


def test_idempotent_retry_no_duplicate_across_kill9(cluster_factory) -> None:
    def restart(c: TestCluster) -> None:
        c.kill(1)
        c.restart(1)

    _idempotent_scenario(cluster_factory(1), restart)


def test_idempotent_sequence_gap_is_refused(cluster_factory) -> None:
    c = cluster_factory(1)
    c.create_topic("gap", 1, 1)
    port = c.brokers[1].port
    pid, epoch = init_producer_id(port)
    ok = produce(port, "gap", bytes(build_batch(2, producer_id=pid, producer_epoch=epoch, base_sequence=0)))
    assert ok["error_code"] == 0
    gap = produce(port, "gap", bytes(build_batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=5)))
    assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, gap
    assert log_end_offset(port, "gap") == 2


# --------------------------------------------------------- kill -9 while producing ----
PRODUCER = textwrap.dedent("""
    import signal, sys, time
    from confluent_kafka import Producer

    bootstrap, topic, acked_path = sys.argv[1:4]
    stop = False

    def on_term(*_):
        global stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    out = open(acked_path, "w", buffering=1)

    def on_delivery(err, msg):
        if err is None:
            out.write(f"{msg.offset()} {msg.value().decode()}\\n")

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 2, "batch.num.messages": 50,
                  "message.timeout.ms": 3000, "retries": 0, "enable.idempotence": False,
                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
    i = 0
    while not stop:
        try:
            p.produce(topic, value=f"m{i:08d}-".encode() + b"x" * 200, partition=0, on_delivery=on_delivery)
            i += 1
        except BufferError:
            pass
        p.poll(0.0005 if i % 100 == 0 else 0)
    p.flush(5)
    out.close()
""")


def test_kill9_during_acks1_production_loses_no_acked_batch(cluster_factory, tmp_path: Path) -> None:
    c = cluster_factory(1, log_segment_bytes=64 * 1024)  # several segments, a torn tail in the last
    topic = "crash"
    c.create_topic(topic, 1, 1)
    acked = tmp_path / "acked.txt"
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER)
    prod = subprocess.Popen([sys.executable, str(script), c.bootstrap, topic, str(acked)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Kill the broker once a good number of batches is acknowledged.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not acked.exists() or acked.stat().st_size < 200_000):
            assert prod.poll() is None, prod.stderr.read().decode()
            time.sleep(0.05)
        c.kill(1)
        time.sleep(0.3)  # the producer sees the broken connection and keeps failing
    finally:
        prod.send_signal(signal.SIGTERM)
        try:
            prod.wait(20)
        except subprocess.TimeoutExpired:
            prod.kill()
            prod.wait(5)
    acks: dict[int, str] = {}
    for line in acked.read_text().splitlines():
        off, value = line.split()
        acks[int(off)] = value
    assert len(acks) > 500, f"only {len(acks)} records acknowledged before the kill"

    c.restart(1)
    c.wait_for_leaders(topic, 1)
    port = c.brokers[1].port

    # Every recovered segment is a valid sequence of batches.
    segs = sorted(partition_dir(c, topic).glob("*.log"))
    assert len(segs) > 1
    r = dump_log(segs)
    assert r.returncode == 0, r.stderr
    stored = [b for doc in json.loads(r.stdout) for b in doc["batches"]]
    assert all(b["crcValid"] for b in stored)
    offsets = [(b["baseOffset"], b["lastOffset"]) for b in stored]
    assert offsets[0][0] == 0
    assert all(nxt[0] == prev[1] + 1 for prev, nxt in zip(offsets, offsets[1:], strict=False)), "offset gap"

    # Every acknowledged record is there with its value (kafka-python checks CRCs).
    leo = log_end_offset(port, topic)
    assert leo == offsets[-1][1] + 1
    assert max(acks) < leo, f"acknowledged offset {max(acks)} beyond the recovered LEO {leo}"
    got = {o: v.decode().split("-")[0] for o, _t, _k, v in fetch_records(port, topic)}
    assert len(got) == leo
    missing = [o for o, v in acks.items() if got.get(o) != v.split("-")[0]]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, first {missing[:5]}"

    # A real consumer reads the whole recovered log without a corrupt-batch error.
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "crash", "enable.auto.commit": False,
                     "check.crcs": True})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < leo and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            assert m.offset() == seen
            seen += 1
        assert seen == leo
    finally:
        cons.close()


def test_sighup_stops_cleanly_and_sigusr2_is_ignored(cluster_factory) -> None:
    """A broker whose terminal closes (SIGHUP) stops as on SIGTERM, as a JVM's shutdown
    hooks do: clean-shutdown marker written, exit 0; unless started with SIGHUP ignored
    (nohup). A stray SIGUSR2 (the profiler's signal, off) changes nothing."""
    c = cluster_factory(1)
    b = next(iter(c.brokers.values()))
    c.create_topic("sig", 1, 1)
    b.signal(signal.SIGUSR2)
    time.sleep(0.5)
    assert b.alive
    c.wait_serving(b.broker_id)
    b.signal(signal.SIGHUP)
    assert b.wait(60) == 0
    marker = c.root / f"broker-{b.broker_id}" / "logs" / ".kafka_cleanshutdown"
    assert marker.exists()
    # Started under nohup (SIGHUP ignored), as the JVM it keeps ignoring it.
    with open(b.log, "ab") as logf:
        b.proc = subprocess.Popen(["nohup", sys.executable, "-m", "kafkarepl.cli.main", "broker", "start",
                                   "--config", str(b.config)], stdout=logf, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
    c.wait_serving(b.broker_id)
    b.signal(signal.SIGHUP)
    time.sleep(1.0)
    assert b.alive
    c.wait_serving(b.broker_id)
    b.signal(signal.SIGTERM)
    assert b.wait(60) == 0


def test_kill9_after_rolls_recovers_only_the_newest_segment(cluster_factory) -> None:
    """A roll flushes the segments below the new one and moves the recovery point, which
    the broker checkpoints every log.flush.offset.checkpoint.interval.ms; a kill -9 then
    recovers only the newest segment, the producer state comes from that roll's snapshot
    plus the newest segment, and the idempotent producer's retries are still duplicates."""
    from tests.integration.chaos import wait_until
    from tests.integration.test_log_flush import recovery_point

    c = cluster_factory(1, log_flush_offset_checkpoint_interval_ms=200)
    topic = "rolls"
    c.create_topic(topic, 1, 1, configs={"segment.bytes": "1024"})
    port = c.brokers[1].port
    pid, epoch = init_producer_id(port)
    sent: list[tuple[bytes, int]] = []
    for seq in range(0, 120, 4):
        b = bytes(build_batch([f"v{seq + i:03d}".encode() * 10 for i in range(4)], producer_id=pid,
                              producer_epoch=epoch, base_sequence=seq))
        r = produce(port, topic, b)
        assert r["error_code"] == 0, r
        sent.append((b, r["base_offset"]))
    d = partition_dir(c, topic)
    bases = sorted(int(p.name[:20]) for p in d.glob("*.log"))
    assert len(bases) >= 5
    assert sorted(int(p.name[:20]) for p in d.glob("*.snapshot")) == bases[1:]
    wait_until(lambda: recovery_point(c, topic) == bases[-1], 15,
               "the roll's flush to move the checkpointed recovery point to the newest segment")
    c.kill(1)
    c.restart(1)
    c.wait_for_leaders(topic, 1)
    text = c.brokers[1].log.read_text(errors="replace")
    assert f"{topic}-0: recovered 1 unflushed segment(s) from offset {bases[-1]}" in text
    port = c.brokers[1].port
    for b, offset in sent[-5:]:  # the retained batches: in the replayed segment and below it
        again = produce(port, topic, b)
        assert (again["error_code"], again["base_offset"]) == (0, offset), again
    assert log_end_offset(port, topic) == 120
    assert [v for _o, _t, _k, v in fetch_records(port, topic)] == [f"v{i:03d}".encode() * 10 for i in range(120)]
