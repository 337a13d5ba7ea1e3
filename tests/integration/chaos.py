"""Helpers for fault tests against a real TestCluster.

`ChaosProducer`: a background thread producing numbered values with a real client
(confluent-kafka idempotent acks=all, or kafka-python acks=all) that records every
acknowledged (partition, offset, value).

`verify_acked`: consumes every partition with assign() and checks that every acknowledged
record is present exactly once, at its acknowledged offset, in production order per
partition, and that no value was written twice.

`verify_replicas_identical`: waits until every replica's log reaches the leader's high
watermark, then compares the replicas' batches byte for byte up to that HW (batch
positions from `kafkarepl dump-log --json`, bytes read straight from the .log files).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch
from tests.fixtures.cluster import TestCluster

LATEST = -1


@dataclass
class Ack:
    partition: int
    offset: int
    value: bytes


@dataclass
class ProduceStats:
    acked: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ack_times: list[float] = field(default_factory=list)


class ChaosProducer:
    """Produces b"<n>" values round-robin over `partitions` until stop().

    client: "confluent" (enable.idempotence, acks=all), "kafka-python" (acks=all,
    idempotent too, max one in flight so retries cannot reorder) or "java" (Kafka's own
    producer, idempotent, acks=all: KafkaTools.java's chaos-produce in a JVM)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, client: str = "confluent",
                 rate: float = 300.0, value_size: int = 0, prefix: bytes = b"") -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix  # values b"<prefix><n>": two producers of one topic never collide
        self.topic = topic
        self.partitions = partitions
        self.client = client
        self.rate = rate
        self.value_size = value_size
        self.stats = ProduceStats()
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{client}", daemon=True)
        self._exc: BaseException | None = None
        self._flush_timeout = 60.0

    # -- public -----------------------------------------------------------------
    def start(self) -> ChaosProducer:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 60.0) -> ProduceStats:
        """Stop producing, wait for every outstanding delivery report; idempotent."""
        self._flush_timeout = flush_timeout
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(flush_timeout + 30)
        assert not self._thread.is_alive(), (
            f"{self.client}: producer thread did not finish; {self.acked_count()} acks, "
            f"{len(self.stats.errors)} errors, the last: {self.stats.errors[-3:]}")
        if self._exc is not None:
            raise self._exc
        return self.stats

    def __enter__(self) -> ChaosProducer:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:  # the test failed: don't wait long, don't mask its error
            self._stop.set()
            self._flush_timeout = 2.0
            self._thread.join(15)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.stats.acked)

    def wait_acks(self, more: int, timeout: float = 30.0) -> None:
        """Until `more` further acknowledgements arrive (the producer is making progress)."""
        target = self.acked_count() + more
        deadline = time.monotonic() + timeout
        while self.acked_count() < target:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.client}: no progress, {self.acked_count()}/{target} acks after {timeout}s; "
                    f"errors: {self.stats.errors[-5:]}")
            if self._exc is not None:
                raise self._exc
            time.sleep(0.05)

    def longest_ack_gap(self) -> float:
        with self._lock:
            t = sorted(self.stats.ack_times)
        return max((b - a for a, b in zip(t, t[1:], strict=False)), default=0.0)

    # -- internals ----------------------------------------------------------------
    def _value(self, n: int) -> bytes:
        v = self.prefix + str(n).encode()
        return v + b"." * max(0, self.value_size - len(v))

    def _record(self, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.stats.acked.append(Ack(partition, offset, value))
            self.stats.ack_times.append(time.monotonic())

    def _error(self, msg: str) -> None:
        with self._lock:
            self.stats.errors.append(msg)

    def _run(self) -> None:
        try:
            if self.client == "confluent":
                self._run_confluent()
            elif self.client == "kafka-python":
                self._run_kafka_python()
            elif self.client == "java":
                self._run_java()
            else:
                raise ValueError(self.client)
        except BaseException as exc:  # surfaced by stop()/wait_acks()
            self._exc = exc

    def _pace(self, started: float) -> None:
        ahead = self.sent / self.rate - (time.monotonic() - started)
        if ahead > 0:
            self._stop.wait(ahead)

    def _run_confluent(self) -> None:
        from confluent_kafka import Producer

        p = Producer({
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100,
            # A frozen broker never answers: give up on its in-flight requests (then
            # retry at the new leader) well before librdkafka's 60 s default.
            "socket.timeout.ms": 8000,
            "request.timeout.ms": 5000,
        })

        def on_delivery(err, msg):
            if err is None:
                self._record(msg.partition(), msg.offset(), msg.value())
            else:
                self._error(f"p{msg.partition()} {msg.value()!r}: {err}")

        started = time.monotonic()
        while not self._stop.is_set():
            v = self._value(self.sent)
            try:
                p.produce(self.topic, v, partition=self.sent % self.partitions, on_delivery=on_delivery)
            except BufferError:
                p.poll(0.1)
                continue
            self.sent += 1
            p.poll(0)
            self._pace(started)
        remaining = p.flush(self._flush_timeout)
        if remaining:
            self._error(f"{remaining} messages still in flight after flush")

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            max_in_flight_requests_per_connection=1,
            linger_ms=5,
            retries=2**31 - 1,
            retry_backoff_ms=100,
            metadata_max_age_ms=1000,
            request_timeout_ms=10000,
            delivery_timeout_ms=120000,
        )
        started = time.monotonic()
        while not self._stop.is_set():
            v = self._value(self.sent)
            part = self.sent % self.partitions
            fut = p.send(self.topic, value=v, partition=part)
            fut.add_callback(lambda md, v=v: self._record(md.partition, md.offset, v))
            fut.add_errback(lambda exc, v=v, part=part: self._error(f"p{part} {v!r}: {exc!r}"))
            self.sent += 1
            self._pace(started)
        p.flush(self._flush_timeout)
        p.close(10)


    def _run_java(self) -> None:
        from tests import java_tools

        cp, main = java_tools.compiled()
        proc = subprocess.Popen(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, main, "chaos-produce",
                                 self.bootstrap, self.topic, str(self.partitions), str(self.rate)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdin is not None and proc.stdout is not None

        def close_stdin_on_stop() -> None:
            self._stop.wait()
            proc.stdin.close()  # the JVM flushes, prints "done" and exits

        threading.Thread(target=close_stdin_on_stop, daemon=True).start()
        done = False
        try:
            for line in proc.stdout:
                kind, _, rest = line.rstrip("\n").partition(" ")
                if kind == "ack":
                    part, offset, value = rest.split(" ", 2)
                    self._record(int(part), int(offset), value.encode())
                    self.sent += 1
                elif kind == "err":
                    self._error(rest)
                elif kind == "done":
                    done = True
        finally:
            try:
                proc.wait(self._flush_timeout + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not done:
            self._error(f"the Java producer exited with {proc.returncode} before every outcome")


# -- verification -------------------------------------------------------------------


def _high_watermark(consumer, tp) -> int:
    """librdkafka's watermark query does not retry a leader that just moved (its metadata
    is a moment old, e.g. right after a preferred election); Kafka's clients retry."""
    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + 15
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=15)[1]
        except KafkaException as exc:
            code = exc.args[0].code()
            if code not in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def consume_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every record (offset, value) of every partition, read with assign() from the
    beginning up to the high watermark seen when starting."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "chaos-verifier",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    try:
        ends = {}
        for p in range(partitions):
            ends[p] = _high_watermark(c, TopicPartition(topic, p))
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        pending = {p for p in range(partitions) if ends[p] > 0}
        while pending:
            if time.monotonic() > deadline:
                got = {p: (out[p][-1][0] if out[p] else None) for p in pending}
                raise AssertionError(f"verifier: partitions {sorted(pending)} not read to HW {ends}, last {got}")
            msgs = c.consume(1000, 1.0)
            for m in msgs:
                if m.error():
                    continue
                out[m.partition()].append((m.offset(), m.value()))
                if m.offset() + 1 >= ends[m.partition()]:
                    pending.discard(m.partition())
        return out
    finally:
        c.close()


def verify_acked(bootstrap: str, topic: str, partitions: int, acked: list[Ack],
                 allow_duplicates: bool = False) -> dict[int, list[tuple[int, bytes]]]:
    """allow_duplicates: a value written twice is reported, not failed, and the order is
    checked on first copies (see the Java producer in test_faults_network.py)."""
    assert acked, "nothing was acknowledged: the test proves nothing"
    logs = consume_all(bootstrap, topic, partitions)
    seen: dict[bytes, list[tuple[int, int]]] = {}
    for p, recs in logs.items():
        offsets = [o for o, _ in recs]
        assert offsets == sorted(set(offsets)), f"p{p}: offsets not strictly increasing"
        for o, v in recs:
            seen.setdefault(v, []).append((p, o))
    dups = {v: where for v, where in seen.items() if len(where) > 1}
    if allow_duplicates and dups:
        print(f"{topic}: {len(dups)} values written more than once: {list(dups.items())[:10]}")
    assert allow_duplicates or not dups, f"values written more than once: {list(dups.items())[:10]}"
    by_offset = {p: dict(recs) for p, recs in logs.items()}
    where = {v: where[0] for v, where in seen.items()}
    # librdkafka reports some idempotent acks without an offset (a retried batch found
    # persisted through a later batch's ack): those are located by value.
    missing = [a for a in acked if (by_offset[a.partition].get(a.offset) != a.value if a.offset is not None
                                    else where.get(a.value, (None,))[0] != a.partition)]
    examples = [(a.partition, a.offset, a.value, by_offset[a.partition].get(a.offset), where.get(a.value))
                for a in missing[:10]]
    assert not missing, (
        f"{len(missing)}/{len(acked)} acknowledged records missing or different "
        f"(partition, acked offset, value, value there, where the value is): {examples}")
    # Production order per partition: acknowledged values (numbered) ascend with offsets.
    for p in range(partitions):
        nums = [int(n) for o, v in logs[p] if (n := v.split(b".")[0]).isdigit() and seen[v][0] == (p, o)]
        assert nums == sorted(nums), f"p{p}: records out of production order"
    return logs


def list_offset(port: int, topic: str, partition: int, timestamp: int = LATEST,
                host: str = "127.0.0.1") -> tuple[int, int]:
    """(error_code, offset) of ListOffsets (LATEST = the high watermark) at one broker."""
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]}
    resp = wire.call(host, port, ApiKey.LIST_OFFSETS, 5, body)
    r = resp["topics"][0]["partitions"][0]
    return r["error_code"], r["offset"]


def partition_dir(cluster: TestCluster, broker_id: int, topic: str, partition: int) -> Path:
    return cluster.root / f"broker-{broker_id}" / "logs" / f"{topic}-{partition}"


def replica_batches(cluster: TestCluster, broker_id: int, topic: str, partition: int) -> list[tuple[int, int, bytes]]:
    """(base_offset, last_offset, bytes) of every batch in a replica's .log files, in order,
    positions from `kafkarepl dump-log --json`."""
    d = partition_dir(cluster, broker_id, topic, partition)
    logs = sorted(d.glob("*.log"))
    if not logs:
        return []
    out = subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", "dump-log", "--json", *map(str, logs)],
                         capture_output=True, text=True, timeout=60)
    doc = json.loads(out.stdout)
    files = doc["files"] if isinstance(doc, dict) and "files" in doc else doc
    batches = []
    for f in files:
        path = Path(f["path"])
        data = path.read_bytes()
        for b in f.get("batches", []):
            batches.append((b["baseOffset"], b["lastOffset"], data[b["position"]:b["position"] + b["size"]]))
    batches.sort(key=lambda x: x[0])
    return batches


def prefix_below(batches: list[tuple[int, int, bytes]], hw: int) -> list[tuple[int, int, bytes]]:
    return [b for b in batches if b[1] < hw]


def leader_hw(cluster: TestCluster, topic: str, partition: int, timeout: float = 30.0) -> tuple[int, int]:
    """(leader id, HW) from the current leader."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            leader = cluster.leader_of(topic, partition)
            if leader > 0 and cluster.brokers[leader].alive:
                b = cluster.brokers[leader]
                err, hw = list_offset(b.port, topic, partition, host=b.host)
                if err == 0:
                    return leader, hw
                last = f"error {err} from {leader}"
        except (OSError, ConnectionError, AssertionError) as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"{topic}-{partition}: no leader answers ListOffsets: {last}")


def verify_replicas_identical(cluster: TestCluster, topic: str, partitions: int,
                              timeout: float = 30.0) -> None:
    """Every replica (alive) holds the same batches, byte for byte, below the leader's HW."""
    md = cluster.metadata([topic])
    replicas = {p["partition_index"]: p["replica_nodes"] for p in md["topics"][0]["partitions"]}
    for p in range(partitions):
        leader, hw = leader_hw(cluster, topic, p)
        ids = [r for r in replicas[p] if cluster.brokers[r].alive]
        deadline = time.monotonic() + timeout
        while True:
            prefixes = {r: prefix_below(replica_batches(cluster, r, topic, p), hw) for r in ids}
            short = {r: (pre[-1][1] + 1 if pre else 0) for r, pre in prefixes.items()
                     if (pre[-1][1] + 1 if pre else 0) < hw}
            if not short:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}-{p}: replicas {short} (next offset) never reached leader "
                                     f"{leader}'s HW {hw} within {timeout}s")
            time.sleep(0.2)
        ref = prefixes[leader]
        for r, pre in prefixes.items():
            if pre == ref:
                continue
            for i, (a, b) in enumerate(zip(ref, pre, strict=False)):
                if a != b:
                    raise AssertionError(
                        f"{topic}-{p}: replica {r} differs from leader {leader} below HW {hw} at batch {i} "
                        f"(leader offsets {a[0]}-{a[1]}, {len(a[2])} B; replica {b[0]}-{b[1]}, {len(b[2])} B)")
            raise AssertionError(f"{topic}-{p}: replica {r} has {len(pre)} batches below HW {hw}, "
                                 f"leader {leader} has {len(ref)}")


def produce_raw(port: int, topic: str, partition: int, acks: int = -1, timeout_ms: int = 3000,
                values: int | list[bytes] = 3, timeout: float | None = None, host: str = "127.0.0.1") -> dict:
    """One Produce v7 request with a batch built by kafka-python; the partition response."""
    body = {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": bytes(build_batch(values))}]}]}
    resp = wire.call(host, port, ApiKey.PRODUCE, 7, body,
                     timeout=timeout if timeout is not None else timeout_ms / 1000 + 10)
    return resp["responses"][0]["partition_responses"][0]


def wait_until(cond, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            r = cond()
            if r:
                return r
        except (OSError, ConnectionError, AssertionError) as exc:
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_exc})")


def partition_info(cluster: TestCluster, topic: str, via: int | None = None) -> dict[int, dict]:
    if via is None:
        md = cluster.metadata([topic])
    else:
        md = wire.metadata(cluster.brokers[via].host, cluster.brokers[via].port, [topic])
    return {p["partition_index"]: p for p in md["topics"][0]["partitions"]}


def broker_log(cluster: TestCluster, broker_id: int, lines: int = 60) -> str:
    return f"--- broker {broker_id} ---\n{cluster.tail(broker_id, lines)}"


def all_logs(cluster: TestCluster, lines: int = 40) -> str:
    return "\n".join(broker_log(cluster, b, lines) for b in cluster.brokers)
