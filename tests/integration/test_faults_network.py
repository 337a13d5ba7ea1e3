"""Network partitions between real processes: ZooKeeper and each broker on a host of its
own (a network namespace, tests/fixtures/netns.py), the test's clients on a third side.
A cut drops packets silently, both ways, as a real partition does; a process keeps
running on each side (unlike kill -9 or SIGSTOP), so a cut-off leader goes on serving
the clients that still reach it.

- A leader (and controller) cut off from ZooKeeper and the other brokers, still reached
  by clients, must not acknowledge an acks=all write that is then lost; after the heal
  it follows the new leader, truncates what it alone had, and rejoins the ISR.
- A seeded random schedule of partitions (one broker cut from everything, from ZooKeeper
  only, from the other brokers only, from the clients only; two brokers cut from each
  other; a broker cut from ZooKeeper and one peer), a quarter of them refusing connections
  rather than dropping packets, mixed with kill -9 and SIGSTOP, while
  three clients (librdkafka, kafka-python, Kafka's Java producer) produce with acks=all,
  idempotent: every acknowledged record is read back at its offset, once (the Java
  producer may write one twice, see the test), and the replicas are identical below the
  HW; after the last heal every partition is led again with its full ISR (liveness).
  KAFKAREPL_NEMESIS_SECONDS sets the length (default 40), KAFKAREPL_NEMESIS_SEED the
  schedule.
- Transactions (Kafka's Java producer) stay atomic and group commits stay durable while
  their coordinators and leaders are cut off; a broker whose registration is deleted
  after a ZooKeeper reconnection registers again; two live brokers behind a firewall
  that rejects each other's connections delete each other's registration once, not
  once a second.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from kafkarepl.zk.local import LocalZooKeeper
from tests import java_tools
from tests.fixtures import netns
from tests.fixtures.cluster import TestCluster
from tests.fixtures.netns import CLIENT, Network
from tests.fixtures.zookeeper import new_chroot
from tests.integration.chaos import (
    ChaosProducer,
    all_logs,
    consume_all,
    leader_hw,
    partition_info,
    produce_raw,
    verify_acked,
    verify_replicas_identical,
    wait_until,
)

pytestmark = pytest.mark.integration

SESSION_MS = 3000  # the brokers' zookeeper.session.timeout.ms (TestCluster's)
BROKERS = ["b1", "b2", "b3"]
NEMESIS_SECONDS = float(os.environ.get("KAFKAREPL_NEMESIS_SECONDS", "40"))


class NamespacedZooKeeper(LocalZooKeeper):
    """The test ZooKeeper, run on a host of the network and listening on its address."""

    def __init__(self, data_dir: Path, net: Network, host: str) -> None:
        super().__init__(data_dir, tick_ms=200)
        self.host = net.addr[host]
        self._prefix = net.prefix(host)

    def command(self) -> list[str]:
        return [*self._prefix, *super().command()]


def assert_no_tracebacks(c: TestCluster) -> None:
    """A partition is an expected condition: every failure it causes is handled (a
    warning), none escapes as an unexpected error with a traceback."""
    bad = {i: b.log.read_text(errors="replace") for i, b in c.brokers.items()}
    bad = {i: text for i, text in bad.items() if "Traceback" in text}
    for i, text in bad.items():
        at = text.index("Traceback")
        raise AssertionError(f"broker {i} logged a traceback:\n{text[max(0, at - 300):at + 3000]}")


class PartitionedCluster:
    """A TestCluster whose brokers b1..b3 and ZooKeeper each sit on a host of `net`."""

    def __init__(self, net: Network, zk: LocalZooKeeper, cluster: TestCluster, metrics: dict[int, int]) -> None:
        self.net = net
        self.zk = zk
        self.c = cluster
        self.metrics_ports = metrics  # broker id -> metrics.port, on the broker's address

    def gauge(self, broker_id: int, name: str) -> float:
        import urllib.request

        b = self.c.brokers[broker_id]
        text = urllib.request.urlopen(f"http://{b.host}:{self.metrics_ports[broker_id]}/metrics", timeout=5).read()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.decode().splitlines()
                   if line.split("{", 1)[0].split(" ", 1)[0] == name)

    @staticmethod
    def host(broker_id: int) -> str:
        return f"b{broker_id}"

    def others(self, broker_id: int) -> list[int]:
        return [b for b in self.c.brokers if b != broker_id]

    def info(self, topic: str, via: int) -> dict[int, dict]:
        return partition_info(self.c, topic, via=via)


@pytest.fixture
def partitioned(tmp_path) -> Iterator[PartitionedCluster]:
    why = netns.available()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    net = Network(["zk", *BROKERS])
    zk = NamespacedZooKeeper(tmp_path / "zookeeper", net, "zk")
    cluster: TestCluster | None = None
    try:
        zk.start(timeout=30)
        hosts = {i: (net.addr[h], net.prefix(h)) for i, h in enumerate(BROKERS, start=1)}
        cluster = TestCluster(new_chroot(zk), tmp_path / "cluster", len(BROKERS),
                              {"min.insync.replicas": "2"}, hosts=hosts)
        metrics = cluster.serve_metrics()
        cluster.start(timeout=60)
        yield PartitionedCluster(net, zk, cluster, metrics)
    finally:
        net.heal()
        if cluster is not None:
            cluster.shutdown()
        zk.kill()
        net.close()


def test_leader_cut_off_from_zookeeper_and_its_followers_acks_nothing_it_loses(partitioned):
    pc, c, net = partitioned, partitioned.c, partitioned.net
    # The controller leads: cut off, it also holds its own leader's ISR change (an
    # AlterPartition it cannot write) when its ZooKeeper session expires.
    old = c.metadata([])["controller_id"]
    c.create_topic("cut", assignment={0: [old, *pc.others(old)]})
    c.wait_for_leaders("cut", 1, isr=3)
    assert c.leader_of("cut") == old
    watcher = pc.others(old)[0]
    raw: list = []

    def produce_to_old_leader(acks: int, values: list[bytes]) -> None:
        # The client still reaches the old leader, which does not know it was replaced.
        b = c.brokers[old]
        try:
            raw.append((acks, values, produce_raw(b.port, "cut", 0, acks=acks, timeout_ms=4000,
                                                  values=values, timeout=60, host=b.host)))
        except (OSError, ConnectionError) as exc:
            raw.append((acks, values, exc))

    with ChaosProducer(c.bootstrap, "cut", 1, rate=300) as prod:
        prod.wait_acks(100)
        net.isolate(pc.host(old), ["zk", *(pc.host(b) for b in pc.others(old))])
        try:
            writers = [threading.Thread(target=produce_to_old_leader, args=(acks, [b"%s-%d" % (tag, i) for i in range(3)]),
                                        daemon=True)
                       for acks, tag in ((-1, b"all"), (1, b"one"))]
            for w in writers:
                w.start()
            new = wait_until(lambda: (lead := pc.info("cut", watcher)[0]["leader_id"]) not in (-1, old) and lead,
                             6 * SESSION_MS / 1000, f"a leader other than the cut-off {old}")
            # `prod` may go on writing to the old leader, which it still reaches: a ZooKeeper
            # broker learns that its session expired only once it reconnects, and librdkafka
            # asks for metadata over the connections it has (Kafka behaves the same). A
            # producer bootstrapped from the others writes to the new leader meanwhile, at
            # the offsets the old one gave its own writes.
            others = ",".join(f"{c.brokers[b].host}:{c.brokers[b].port}" for b in pc.others(old))
            with ChaosProducer(others, "cut", 1, rate=300, prefix=b"new-") as fresh:
                fresh.wait_acks(200, timeout=60)
                fresh_stats = fresh.stop()
            for w in writers:
                w.join(60)
        finally:
            net.heal()
        c.wait_for_leaders("cut", 1, isr=3, timeout=60)
        prod.wait_acks(100, timeout=60)  # the first producer too, once the old leader steps down
        stats = prod.stop()
    print(f"leader {old} cut off, {new} elected; raw writes to the old leader: {raw}")
    assert len(raw) == 2, raw
    verify_acked(c.bootstrap, "cut", 1, stats.acked + fresh_stats.acked)
    logs = dict(consume_all(c.bootstrap, "cut", 1)[0])
    for acks, values, r in raw:
        if acks == -1 and isinstance(r, dict):
            assert r["error_code"] != 0 or [logs.get(r["base_offset"] + i) for i in range(3)] == values, (
                f"the cut-off leader {old} acknowledged {values} with acks=all at {r['base_offset']}, "
                f"the final log does not have them\n{all_logs(c)}")
    # The old leader's own acks=1 write may be lost (by design); if it is, the old leader
    # truncated it away: the replicas agree.
    verify_replicas_identical(c, "cut", 1)
    assert_no_tracebacks(c)


FAULTS = ["isolate", "zookeeper", "peers", "clients", "bridge", "zookeeper+peer", "kill", "pause"]


def test_random_partitions_and_crashes_lose_no_acknowledged_write(partitioned):
    pc, c, net = partitioned, partitioned.c, partitioned.net
    seed = int(os.environ.get("KAFKAREPL_NEMESIS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"nemesis seed {seed} (KAFKAREPL_NEMESIS_SEED), {NEMESIS_SECONDS} s")
    c.create_topic("n1", partitions=3, rf=3)
    c.create_topic("n2", partitions=2, rf=3)
    c.create_topic("n3", partitions=2, rf=3)
    history: list[str] = []
    with ChaosProducer(c.bootstrap, "n1", 3, client="confluent", rate=300) as p1, \
            ChaosProducer(c.bootstrap, "n2", 2, client="kafka-python", rate=100) as p2, \
            ChaosProducer(c.bootstrap, "n3", 2, client="java", rate=100) as p3:
        p1.wait_acks(100)
        p2.wait_acks(30)
        p3.wait_acks(30, timeout=60)
        deadline = time.monotonic() + NEMESIS_SECONDS
        try:
            while time.monotonic() < deadline:
                fault = rng.choice(FAULTS)
                a = rng.choice(list(c.brokers))
                b = rng.choice(pc.others(a))
                hold = rng.uniform(0.5, 2.5 * SESSION_MS / 1000)
                # A quarter of the cuts refuse instead of dropping (a rejecting firewall):
                # brokers then read each other as crashed (fast failover's probe).
                reject = fault not in ("kill", "pause") and rng.random() < 0.25
                history.append(f"{time.strftime('%H:%M:%S')} {fault}{' (reject)' if reject else ''} broker {a}"
                               f"{f' / {b}' if fault in ('bridge', 'zookeeper+peer') else ''} for {hold:.1f} s")
                if fault == "isolate":
                    net.isolate(pc.host(a), reject=reject)
                elif fault == "zookeeper":
                    net.cut(pc.host(a), "zk", reject)
                elif fault == "peers":
                    net.isolate(pc.host(a), [pc.host(o) for o in pc.others(a)], reject)
                elif fault == "clients":
                    net.cut(pc.host(a), CLIENT, reject)
                elif fault == "bridge":
                    net.cut(pc.host(a), pc.host(b), reject)
                elif fault == "zookeeper+peer":
                    net.isolate(pc.host(a), ["zk", pc.host(b)], reject)
                elif fault == "kill":
                    c.kill(a)
                elif fault == "pause":
                    c.pause(a)
                time.sleep(hold)
                net.heal()
                if fault == "kill":
                    c.restart(a, timeout=60)
                elif fault == "pause":
                    c.resume(a)
                time.sleep(rng.uniform(0.5, 3.0))
        finally:
            net.heal()
            for bid in c.brokers:
                c.resume(bid)
        print("\n".join(history))
        # Liveness: once healed, every partition is led again with its whole ISR, and
        # both producers go on.
        for topic, n in (("n1", 3), ("n2", 2), ("n3", 2)):
            try:
                c.wait_for_leaders(topic, n, isr=3, timeout=90)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nseed {seed}\n" + "\n".join(history) + "\n" + all_logs(c)) from None
        p1.wait_acks(100, timeout=90)
        p2.wait_acks(30, timeout=90)
        p3.wait_acks(30, timeout=90)
        s1, s2, s3 = p1.stop(), p2.stop(), p3.stop()
    print(f"acknowledged: {len(s1.acked)} (confluent-kafka), {len(s2.acked)} (kafka-python), "
          f"{len(s3.acked)} (Java); producer errors: {s1.errors[:3] + s2.errors[:3] + s3.errors[:3]}")
    verify_acked(c.bootstrap, "n1", 3, s1.acked)
    verify_acked(c.bootstrap, "n2", 2, s2.acked)
    # Kafka's Java producer may write a record twice here, under the broker rules Kafka
    # has too: a batch in flight to a leader that is cut off is retried, after its
    # timeout, at the new leader, which meanwhile took more than the 5 later batches it
    # remembers per producer (the producer sends them over its other connection), so
    # the retry is answered OUT_OF_ORDER_SEQUENCE_NUMBER, not as a duplicate; the client
    # then bumps its epoch and sends the batch again with new sequence numbers. Nothing
    # acknowledged may be lost, and the order of first copies holds.
    verify_acked(c.bootstrap, "n3", 2, s3.acked, allow_duplicates=True)
    for topic, n in (("n1", 3), ("n2", 2), ("n3", 2)):
        verify_replicas_identical(c, topic, n, timeout=60)
    assert_no_tracebacks(c)


class JavaTransactions:
    """KafkaTools.java txn-chaos in a JVM: transactions until stop(), each one's outcome as
    the Java producer saw it ("commit", "abort", or "unknown": the call failed)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, transactional_id: str) -> None:
        cp, main = java_tools.compiled()
        self.proc = subprocess.Popen(
            ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, main, "txn-chaos", bootstrap, topic,
             str(partitions), transactional_id],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.outcomes: dict[int, str] = {}
        self.done = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind in ("commit", "abort", "unknown"):
                self.outcomes[int(rest.split()[0])] = kind if kind != "unknown" else line.strip()
            elif kind == "done":
                self.done = True

    def count(self, kind: str) -> int:
        return sum(1 for o in list(self.outcomes.values()) if o.startswith(kind))

    def wait_for(self, kind: str, more: int, timeout: float) -> None:
        target = self.count(kind) + more
        wait_until(lambda: self.count(kind) >= target, timeout, f"{more} more transactions to {kind}")

    def stop(self) -> dict[int, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)
        assert self.done, f"the Java transactions ended badly: {self.proc.stderr.read()[-2000:] if self.proc.stderr else ''}"
        return self.outcomes


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> list[bytes]:
    """Every value a read_committed consumer reads from the start to the high watermark
    (the last offsets may be transaction markers, which a consumer never returns)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-verifier", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while True:
            values += [m.value() for m in c.consume(1000, 0.5) if not m.error()]
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in range(partitions)])}
            if all(pos[p] >= ends[p] for p in range(partitions)):
                return values
            assert time.monotonic() < deadline, f"read_committed: at {pos}, not at the HW {ends} after {timeout}s"
    finally:
        c.close()


def coordinator(c: TestCluster, key: str, key_type: int) -> int:
    """The broker coordinating a group (key_type 0) or a transactional id (1)."""
    b = next(iter(c.brokers.values()))
    resp = wire.call(b.host, b.port, ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})
    assert resp["error_code"] == 0, resp
    return resp["node_id"]


def test_transactions_stay_atomic_when_their_coordinator_or_a_leader_is_cut_off(partitioned):
    """Kafka's Java transactional producer commits and aborts in a loop while first the
    transaction coordinator is cut off from everything past its session timeout (its
    markers and state writes stall; a new coordinator loads the transaction state), then
    the leader of a partition written to, then the coordinator again by a refusing
    firewall. A read_committed consumer then sees every committed transaction whole, no
    aborted record, and each transaction whose outcome the producer never learned whole
    or not at all."""
    pc, c, net = partitioned, partitioned.c, partitioned.net
    c.create_topic("tx", partitions=2, rf=3)
    txid = "chaos-tx"
    txns = JavaTransactions(c.bootstrap, "tx", 2, txid)
    try:
        txns.wait_for("commit", 5, timeout=90)  # also creates __transaction_state
        for what, reject, hold in (("coordinator", False, 2.5), ("leader", False, 1.5), ("coordinator", True, 1.5)):
            target = coordinator(c, txid, 1) if what == "coordinator" else c.leader_of("tx", 0)
            net.isolate(pc.host(target), reject=reject)
            time.sleep(hold * SESSION_MS / 1000)
            net.heal()
            c.wait_for_leaders("tx", 2, isr=3, timeout=90)
            txns.wait_for("commit", 5, timeout=90)  # and the producer goes on
    finally:
        net.heal()
        outcomes = txns.stop()
    values = read_committed(c.bootstrap, "tx", 2)
    seen: dict[int, list[int]] = {}
    for v in values:
        t, i = map(int, v.split(b"-"))
        seen.setdefault(t, []).append(i)
    print(f"transactions: {sum(o == 'commit' for o in outcomes.values())} committed, "
          f"{sum(o == 'abort' for o in outcomes.values())} aborted, unknown: "
          f"{[o for o in outcomes.values() if o.startswith('unknown')]}")
    assert not set(seen) - set(outcomes), f"records of transactions never begun: {sorted(set(seen) - set(outcomes))}"
    for t, outcome in sorted(outcomes.items()):
        got = sorted(seen.get(t, []))
        if outcome == "commit":
            assert got == [0, 1, 2, 3, 4], f"committed transaction {t} reads back as {got}"
        elif outcome == "abort":
            assert got == [], f"aborted transaction {t} has records read_committed: {got}"
        else:
            assert got in ([], [0, 1, 2, 3, 4]), f"transaction {t} ({outcome}) is neither whole nor absent: {got}"
    assert_no_tracebacks(c)


class GroupMember:
    """A librdkafka consumer of a group: reads, and commits what it read every 0.3 s
    (synchronously); keeps every value read and every commit the coordinator
    acknowledged."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.values: set[bytes] = set()
        self.committed: dict[int, int] = {}  # partition -> highest acknowledged commit
        self.commit_errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._exc: BaseException | None = None
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                      "topic.metadata.refresh.interval.ms": 1000, "enable.partition.eof": False})
        try:
            c.subscribe([self.topic])
            pending: dict[int, int] = {}
            last_commit = time.monotonic()
            while not self._stop.is_set():
                for m in c.consume(500, 0.1):
                    if not m.error():
                        self.values.add(m.value())
                        pending[m.partition()] = m.offset() + 1
                if pending and time.monotonic() - last_commit > 0.3:
                    last_commit = time.monotonic()
                    try:
                        done = c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in pending.items()],
                                        asynchronous=False)
                    except KafkaException as exc:
                        self.commit_errors.append(str(exc))
                    else:
                        for tp in done or []:
                            if tp.error is None:
                                self.committed[tp.partition] = max(self.committed.get(tp.partition, 0), tp.offset)
                    pending.clear()
        except BaseException as exc:  # surfaced by stop()
            self._exc = exc
        finally:
            c.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self._exc is not None:
            raise self._exc


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)}
    finally:
        c.close()


def test_group_commits_survive_their_coordinator_and_leaders_being_cut_off(partitioned):
    """Two librdkafka consumers of one group read and commit while a producer writes; the
    group coordinator is cut off past its session timeout (the offsets partition moves,
    the new coordinator loads the commits), then a data partition's leader, then the
    coordinator behind a refusing firewall. Every acknowledged record is read at least
    once, and each partition's committed offset is, in the end, the highest commit the
    coordinator ever acknowledged: no acknowledged commit is lost or overtaken by an
    older one."""
    pc, c, net = partitioned, partitioned.c, partitioned.net
    topic, group, parts = "g", "chaos-group", 3
    c.create_topic(topic, partitions=parts, rf=3)
    with ChaosProducer(c.bootstrap, topic, parts, rate=200) as prod:
        members = [GroupMember(c.bootstrap, group, topic) for _ in range(2)]
        try:
            wait_until(lambda: sum(len(m.committed) for m in members) >= parts, 60, "first commits")
            for what, reject, hold in (("coordinator", False, 2.5), ("leader", False, 1.5),
                                       ("coordinator", True, 1.5)):
                target = coordinator(c, group, 0) if what == "coordinator" else c.leader_of(topic, 0)
                net.isolate(pc.host(target), reject=reject)
                time.sleep(hold * SESSION_MS / 1000)
                net.heal()
                c.wait_for_leaders(topic, parts, isr=3, timeout=90)
                c.wait_for_leaders("__consumer_offsets", 50, isr=3, timeout=90)
                prod.wait_acks(200, timeout=90)
            stats = prod.stop()
            ends = {p: leader_hw(c, topic, p)[1] for p in range(parts)}

            def drained() -> bool:
                best = {p: max((m.committed.get(p, 0) for m in members), default=0) for p in range(parts)}
                return all(best[p] >= ends[p] for p in range(parts))

            wait_until(drained, 90, f"the group's commits to reach the end offsets {ends}")
        finally:
            net.heal()
            for m in members:
                m.stop()
    acked_values = {a.value for a in stats.acked}
    read = set().union(*(m.values for m in members))
    missing = acked_values - read
    assert not missing, f"{len(missing)} acknowledged records never read by the group: {sorted(missing)[:10]}"
    highest = {p: max(m.committed.get(p, 0) for m in members) for p in range(parts)}
    final = committed_offsets(c.bootstrap, group, topic, parts)
    print(f"commit errors seen by the members: {sum(len(m.commit_errors) for m in members)}; "
          f"highest acknowledged commits {highest}; committed now {final}")
    assert final == highest, f"committed offsets {final} are not the highest acknowledged commits {highest}"
    assert_no_tracebacks(c)


def test_a_registration_deleted_after_a_reconnection_is_restored(partitioned):
    """kazoo drops every one-shot watch when its connection drops (ZooKeeper's Java client
    restores them): a broker that reconnected within its session must still notice its
    registration being deleted (as another broker's crash detection does on a refused
    connection) and register again. Before the watch was a persistent one, the broker
    stayed unregistered, taken for dead by the controller, until its session next ended."""
    from kazoo.client import KazooClient

    pc, c, net = partitioned, partitioned.c, partitioned.net
    victim = 2
    log_path = c.brokers[victim].log

    def logged_since(start: int, *lines: str) -> str | None:
        text = log_path.read_text(errors="replace")[start:]
        return next((line for line in lines if line in text), None)

    zk = KazooClient(hosts=c.zk_connect, timeout=10.0)
    zk.start(10)
    try:
        path = f"/brokers/ids/{victim}"
        for _attempt in range(3):  # until a cut ends inside the session (not in its expiry)
            seen = len(log_path.read_text(errors="replace"))
            net.cut(pc.host(victim), "zk")
            wait_until(lambda start=seen: logged_since(start, "CONNECTED -> SUSPENDED"), 10,
                       "the broker's ZooKeeper connection to drop")
            net.heal()
            outcome = wait_until(lambda start=seen: logged_since(start, "SUSPENDED -> CONNECTED", "SUSPENDED -> LOST"),
                                 15, "the broker to reconnect")
            if outcome == "SUSPENDED -> CONNECTED":
                break
            time.sleep(2)  # the session expired: the broker registers again by itself first
        else:
            pytest.fail("three cuts in a row outlasted the session")
        epoch = zk.exists(path).czxid
        seen = len(log_path.read_text(errors="replace"))
        zk.delete(path)
        wait_until(lambda: (st := zk.exists(path)) is not None and st.czxid != epoch, 10,
                   f"broker {victim} to register again")
        assert logged_since(seen, "registration deleted while alive; registering again")
    finally:
        zk.stop()
        zk.close()
    assert_no_tracebacks(c)


FENCED = "refuses connections; removed its registration"


def test_a_rejecting_firewall_between_two_live_brokers_fences_each_once(partitioned):
    """Two brokers behind a firewall that rejects (TCP resets) each other's connections,
    both still reaching ZooKeeper: each reads the other's refusals as a crash and deletes
    its registration once (fast failover's probe), the other registers again in the same
    ZooKeeper session, which proves it alive, and from then on its refusals are left to
    its session as Kafka does. Before, each deleted the other's registration about once a
    second for as long as the firewall stood, moving leaders every time."""
    import json

    from kazoo.client import KazooClient

    pc, c, net = partitioned, partitioned.c, partitioned.net
    c.create_topic("fw", partitions=4, rf=3)  # fetchers both ways between every two brokers
    c.wait_for_leaders("fw", 4, isr=3)
    zk = KazooClient(hosts=c.zk_connect, timeout=10.0)
    zk.start(10)
    try:
        ctrl = json.loads(zk.get("/controller")[0])["brokerid"]
    finally:
        zk.stop()
        zk.close()
    # The controller behind the firewall, and a partition on the two brokers only: whichever
    # leads it, the other's fetcher keeps meeting refusals (leaders of the others move away).
    a, b = ctrl, pc.others(ctrl)[0]
    third = next(i for i in c.brokers if i not in (a, b))
    c.create_topic("pair", assignment={0: [a, b]})
    c.wait_for_leaders("pair", 1, isr=2)

    def count(line: str) -> int:
        return sum(b.log.read_text(errors="replace").count(line) for b in c.brokers.values())

    fetcher_lines = "[kafkarepl.server.replica_fetcher] fetcher "
    before_fenced, before_trusted = count(FENCED), count("registered again in the ZooKeeper session")
    before_fetcher = count(fetcher_lines)
    with ChaosProducer(c.bootstrap, "fw", 4, client="confluent", rate=200) as p:
        p.wait_acks(50)
        net.cut(pc.host(a), pc.host(b), reject=True)
        time.sleep(4 * SESSION_MS / 1000)  # a dozen suspicions each way, one a second
        distrusted = {i: pc.gauge(i, "kafkarepl_fast_failover_distrusted_brokers") for i in c.brokers}
        net.heal()
        c.wait_for_leaders("fw", 4, isr=3, timeout=60)
        p.wait_acks(50, timeout=60)
        s = p.stop()
    fenced = count(FENCED) - before_fenced
    assert 1 <= fenced <= 2, f"{fenced} registrations deleted behind the firewall (one each way at most):\n" + all_logs(c)
    assert count("registered again in the ZooKeeper session") - before_trusted >= 1, all_logs(c)
    # the operator's signal: the broker(s) that fenced a live one now distrust it; the third sees no firewall
    assert distrusted[a] + distrusted[b] >= 1 and distrusted[third] == 0, distrusted
    assert sum(pc.gauge(i, "kafkarepl_fast_failover_fenced_total") for i in c.brokers) >= fenced
    # a fetcher logs its first failure and its recovery, not each retry (10 a second here)
    assert count(fetcher_lines) - before_fetcher <= 30, all_logs(c)
    verify_acked(c.bootstrap, "fw", 4, s.acked)
    verify_replicas_identical(c, "fw", 4, timeout=60)
    assert_no_tracebacks(c)
