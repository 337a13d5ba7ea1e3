"""Transactions with real brokers and real clients: confluent-kafka's transactional
producer (commit, abort, zombie fencing, send_offsets_to_transaction) against
read_committed and read_uncommitted consumers."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration

TXN = {"transaction_state_log_num_partitions": 3, "offsets_topic_num_partitions": 3,
       "group_initial_rebalance_delay_ms": 0}


def consume(bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 2) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic()}", "isolation.level": isolation,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < expect and time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is not None and m.error() is None:
            got.append(m.value())
    end = time.monotonic() + 1.0  # nothing more
    while time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def producer(bootstrap: str, tid: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 20000})
    p.init_transactions(20)
    return p


def test_committed_transactions_are_read_and_aborted_ones_are_not(cluster_factory) -> None:
    c = cluster_factory(3, **TXN)
    c.create_topic("tx-out", 2, 3, configs={"min.insync.replicas": "2"})
    p = producer(c.bootstrap, "tx-1")
    for txn, (n, commit) in enumerate([(10, True), (5, False), (3, True)]):
        p.begin_transaction()
        for i in range(n):
            p.produce("tx-out", value=b"t%d-%d" % (txn, i), partition=i % 2)
        if commit:
            p.commit_transaction(20)
        else:
            assert p.flush(20) == 0  # in the log, then aborted (else the client just drops them)
            p.abort_transaction(20)
    committed = consume(c.bootstrap, "tx-out", "read_committed", 13)
    assert sorted(committed) == sorted([b"t0-%d" % i for i in range(10)] + [b"t2-%d" % i for i in range(3)])
    everything = consume(c.bootstrap, "tx-out", "read_uncommitted", 18)
    assert len(everything) == 18


def test_a_zombie_producer_is_fenced(cluster_factory) -> None:
    from confluent_kafka import KafkaException

    c = cluster_factory(1, **TXN)
    c.create_topic("z", 1, 1)
    old = producer(c.bootstrap, "tx-z")
    old.begin_transaction()
    old.produce("z", value=b"zombie")
    old.flush(10)
    new = producer(c.bootstrap, "tx-z")  # same id: aborts the old one's transaction, bumps the epoch
    new.begin_transaction()
    new.produce("z", value=b"alive")
    new.commit_transaction(20)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(10)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), e.value
    assert consume(c.bootstrap, "z", "read_committed", 1, partitions=1) == [b"alive"]


def test_consume_transform_produce_commits_offsets_in_the_transaction(cluster_factory) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP

    c = cluster_factory(1, **TXN)
    c.create_topic("in", 1, 1)
    c.create_topic("out", 1, 1)
    plain = Producer({"bootstrap.servers": c.bootstrap})
    for i in range(20):
        plain.produce("in", value=b"%d" % i)
    assert plain.flush(10) == 0
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "ctp", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    cons.subscribe(["in"])
    p = producer(c.bootstrap, "tx-ctp")
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 20 and time.monotonic() < deadline:
        msgs = cons.consume(20, 0.5)
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce("out", value=b"x" + m.value())
        seen += len(msgs)
        p.send_offsets_to_transaction(cons.position(cons.assignment()), cons.consumer_group_metadata(), 20)
        p.commit_transaction(20)
    assert seen == 20
    assert cons.committed([TP("in", 0)], timeout=10)[0].offset == 20
    cons.close()
    assert sorted(consume(c.bootstrap, "out", "read_committed", 20, partitions=1)) == sorted(
        b"x%d" % i for i in range(20))


def test_kafkarepl_transactions_lists_and_describes(cluster_factory) -> None:
    import subprocess
    import sys

    c = cluster_factory(1, **TXN)
    c.create_topic("cli-tx", 2, 1)
    done = producer(c.bootstrap, "tx-done")
    done.begin_transaction()
    done.produce("cli-tx", value=b"a", partition=0)
    done.commit_transaction(20)
    open_ = producer(c.bootstrap, "tx-open")
    open_.begin_transaction()
    open_.produce("cli-tx", value=b"b", partition=1)
    assert open_.flush(10) == 0

    def cli(*args: str) -> list[list[str]]:
        out = subprocess.run([sys.executable, "-m", "kafkarepl", "transactions", "--bootstrap-server", c.bootstrap,
                              *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return [line.split() for line in out.stdout.splitlines()]

    listed = cli("--list")
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert {(r[0], r[3]) for r in listed[1:]} == {("tx-done", "CompleteCommit"), ("tx-open", "Ongoing")}
    header, row = cli("--describe", "--transactional-id", "tx-open")
    assert header[0] == "CoordinatorId" and header[-1] == "TopicPartitions"
    assert row[1] == "tx-open" and row[4] == "Ongoing" and row[-1] == "cli-tx-1"
    open_.abort_transaction(20)


def test_kill9_of_coordinator_and_leaders_keeps_transactions_atomic(cluster_factory) -> None:
    """Transactions (each writes 3 records to each of 3 partitions, then commits or
    aborts) while the transaction coordinator's broker and then a partition leader are
    killed with -9 and restarted. A read_committed consumer must see every transaction
    whose commit succeeded, no aborted one, and every other one entirely or not at all."""
    from confluent_kafka import KafkaException

    c = cluster_factory(3, **TXN, min_insync_replicas=2)
    c.create_topic("atomic", 3, 3)
    committed: set[int] = set()
    aborted: set[int] = set()
    uncertain: set[int] = set()
    p = producer(c.bootstrap, "tx-chaos")
    kills = {7: "coordinator", 19: "leader"}  # commits (n % 3 != 2)
    import threading

    def kill_and_restart(victim: int) -> None:
        c.kill(victim)
        c.brokers[victim].start()

    killers: list[threading.Thread] = []
    for n in range(32):
        try:
            p.begin_transaction()
            for part in range(3):
                for i in range(3):
                    p.produce("atomic", value=b"%d:%d:%d" % (n, part, i), partition=part)
            if n in kills:  # killed while the commit is on its way: markers half written
                victim = _txn_coordinator(c, "tx-chaos") if kills[n] == "coordinator" else c.leader_of("atomic", 1)
                t = threading.Timer(0.005, kill_and_restart, (victim,))
                t.start()
                killers.append(t)
            if n % 3 == 2:
                p.abort_transaction(30)
                aborted.add(n)
            else:
                p.commit_transaction(30)
                committed.add(n)
        except KafkaException as exc:
            uncertain.add(n)
            err = exc.args[0]
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(30)
                    aborted.add(n)
                    uncertain.discard(n)
                except KafkaException:
                    p = producer(c.alive_bootstrap(), "tx-chaos")
            else:
                p = producer(c.alive_bootstrap(), "tx-chaos")
    for t in killers:
        t.join()
    for b in c.brokers:
        c.wait_serving(b)
    seen: dict[int, set[bytes]] = {}
    for v in consume(c.bootstrap, "atomic", "read_committed", 9 * len(committed), partitions=3):
        seen.setdefault(int(v.split(b":")[0]), set()).add(v)
    print(f"committed {len(committed)} aborted {len(aborted)} uncertain {sorted(uncertain)}")
    assert committed, "no transaction committed"
    for n in committed:
        assert len(seen.get(n, ())) == 9, (n, sorted(seen.get(n, ())))
    for n in aborted:
        assert n not in seen, (n, sorted(seen[n]))
    for n in uncertain:
        assert len(seen.get(n, ())) in (0, 9), (n, sorted(seen.get(n, ())))  # all or nothing


def _txn_coordinator(c, tid: str) -> int:
    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey

    port = next(iter(c.brokers.values())).port
    r = wire.call("127.0.0.1", port, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]})
    return r["coordinators"][0]["node_id"]


def test_an_abandoned_transaction_times_out_and_is_aborted(cluster_factory) -> None:
    # A producer that dies mid-transaction (here: simply never ends it) holds the LSO back
    # until transaction.timeout.ms; then the coordinator aborts it with an epoch bump and
    # read_committed consumers move on.
    from confluent_kafka import KafkaException

    c = cluster_factory(1, **TXN, transaction_abort_timed_out_transaction_cleanup_interval_ms=200)
    c.create_topic("abandon", 1, 1)
    from confluent_kafka import Producer

    dead = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "tx-dead",
                     "transaction.timeout.ms": 1500})
    dead.init_transactions(20)
    dead.begin_transaction()
    dead.produce("abandon", value=b"never")
    assert dead.flush(10) == 0
    alive = producer(c.bootstrap, "tx-alive")
    alive.begin_transaction()
    alive.produce("abandon", value=b"later")
    alive.commit_transaction(20)
    # Blocked behind the open transaction at first, then readable once it is aborted.
    assert consume(c.bootstrap, "abandon", "read_committed", 1, partitions=1) == [b"later"]
    with pytest.raises(KafkaException):  # the abandoned producer was fenced by the abort
        dead.commit_transaction(10)


def test_a_late_transactional_write_is_refused_by_the_coordinator_check(cluster_factory) -> None:
    """KIP-890 part 1: a transactional batch reaches a partition only if the partition is
    in the producer's ongoing transaction, asked of the coordinator (locally or by
    AddPartitionsToTxn v4 from another broker). A retry arriving after its transaction was
    aborted would otherwise open a transaction nobody ends and hold the LSO for ever."""
    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey
    from tests.batches import build_batch

    host = "127.0.0.1"
    c = cluster_factory(3, **TXN)
    c.create_topic("late", 3, 3, configs={"min.insync.replicas": "2"})
    tid = "late-1"
    deadline = time.monotonic() + 30
    while True:  # the coordinator of tid, once __transaction_state exists
        r = wire.call(host, next(iter(c.brokers.values())).port, ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})
        if r["error_code"] == 0:
            coord = r["port"]
            init = wire.call(host, coord, ApiKey.INIT_PRODUCER_ID, 2,
                             {"transactional_id": tid, "transaction_timeout_ms": 60000})
            if init["error_code"] == 0:
                break
        assert time.monotonic() < deadline, r
        time.sleep(0.3)
    pid, epoch = init["producer_id"], init["producer_epoch"]
    leaders = {p: c.brokers[c.leader_of("late", p)].port for p in range(3)}
    assert coord in leaders.values() and set(leaders.values()) - {coord}, "want local and remote checks"

    def produce(p: int, seq: int) -> int:
        batch = build_batch([b"v%d" % seq], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                            transactional=True)
        body = {"transactional_id": tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "late", "partition_data": [{"index": p, "records": bytes(batch)}]}]}
        resp = wire.call(host, leaders[p], ApiKey.PRODUCE, 9, body, timeout=15)
        return resp["responses"][0]["partition_responses"][0]["error_code"]

    def add_partitions() -> None:
        body = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "late", "partitions": [0, 1, 2]}]}
        r = wire.call(host, coord, ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
        assert {x["partition_error_code"] for x in r["results_by_topic_v3_and_below"][0]["results_by_partition"]} == {0}

    def stable(p: int) -> bool:
        offs = []
        for isolation in (0, 1):
            body = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": "late", "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}]}]}
            offs.append(wire.call(host, leaders[p], ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]["offset"])
        return offs[0] == offs[1]

    invalid_txn_state = 48
    # Not added to any transaction yet: refused, whether the coordinator is local or not.
    assert [produce(p, 0) for p in range(3)] == [invalid_txn_state] * 3
    add_partitions()
    assert [produce(p, 0) for p in range(3)] == [0, 0, 0]
    assert [produce(p, 1) for p in range(3)] == [0, 0, 0]  # open here: no second check
    r = wire.call(host, coord, ApiKey.END_TXN, 3, {"transactional_id": tid, "producer_id": pid,
                                                  "producer_epoch": epoch, "committed": False})
    assert r["error_code"] == 0
    deadline = time.monotonic() + 15
    while not all(stable(p) for p in range(3)):
        assert time.monotonic() < deadline, "abort markers not written"
        time.sleep(0.2)
    # The late retry of the aborted transaction: refused, and the LSO stays at the HW.
    assert [produce(p, 2) for p in range(3)] == [invalid_txn_state] * 3
    assert all(stable(p) for p in range(3))
    # The producer's next transaction goes on with the same epoch and sequences.
    add_partitions()
    assert [produce(p, 2) for p in range(3)] == [0, 0, 0]
    assert not any(stable(p) for p in range(3))


_DYING_PRODUCER = r"""
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "tx-phoenix",
              "transaction.timeout.ms": 60000})
p.init_transactions(20)
p.begin_transaction()
for i in range(50):
    p.produce("phoenix", value=b"dead-%d" % i, partition=i % 2)
assert p.flush(20) == 0
print("in the log", flush=True)
time.sleep(600)
"""


def test_kill9_of_the_producer_process_then_its_successor_aborts_its_transaction(cluster_factory) -> None:
    """A transactional producer process killed -9 mid-transaction, its records in the log:
    the next producer with the same transactional.id fences it at InitProducerId and the
    coordinator aborts the open transaction at once (not after transaction.timeout.ms),
    so read_committed consumers see the successor's commit and never the dead records."""
    import subprocess
    import sys

    c = cluster_factory(3, **TXN, min_insync_replicas=2)
    c.create_topic("phoenix", 2, 3)
    dying = subprocess.Popen([sys.executable, "-c", _DYING_PRODUCER, c.bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        assert dying.stdout is not None and dying.stdout.readline().strip() == "in the log"
    finally:
        dying.kill()
        dying.wait()
    assert len(consume(c.bootstrap, "phoenix", "read_uncommitted", 50)) == 50
    start = time.monotonic()
    p = producer(c.bootstrap, "tx-phoenix")  # well inside the dead one's 60 s timeout
    p.begin_transaction()
    for i in range(10):
        p.produce("phoenix", value=b"alive-%d" % i, partition=i % 2)
    p.commit_transaction(20)
    assert time.monotonic() - start < 30
    got = consume(c.bootstrap, "phoenix", "read_committed", 10)
    assert sorted(got) == sorted(b"alive-%d" % i for i in range(10))


def test_idle_transactional_ids_expire_and_stay_gone_after_a_restart(cluster_factory) -> None:
    """transactional.id.expiration.ms: an id idle in a completed state is removed (a
    tombstone in __transaction_state), so DescribeTransactions no longer knows it, also
    after the coordinator reloads the partition."""
    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey

    c = cluster_factory(1, **TXN, transactional_id_expiration_ms=1500,
                        transaction_remove_expired_transaction_cleanup_interval_ms=300)
    c.create_topic("expire", 1, 1)
    p = producer(c.bootstrap, "tx-idle")
    p.begin_transaction()
    p.produce("expire", value=b"x")
    p.commit_transaction(20)
    del p
    port = next(iter(c.brokers.values())).port

    def describe() -> int:
        r = wire.call("127.0.0.1", port, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx-idle"]})
        return r["transaction_states"][0]["error_code"]

    assert describe() == 0
    deadline = time.monotonic() + 20
    while describe() != 105:  # TRANSACTIONAL_ID_NOT_FOUND
        assert time.monotonic() < deadline, "the idle transactional id did not expire"
        time.sleep(0.3)
    b = next(iter(c.brokers))
    c.kill(b)
    c.restart(b)
    deadline = time.monotonic() + 30
    while True:
        try:
            code = describe()
        except (OSError, ConnectionError):
            code = -1
        if code not in (-1, 14, 15, 16):  # loading / not available yet
            break
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert code == 105


# ------------------------------------------------- the pure Python clients ----
# aiokafka and kafka-python implement transactions themselves (their own
# InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit / EndTxn
# versions, not librdkafka's): committed and aborted transactions, and the offsets of a
# consume-transform-produce step committed, or not, with them.
ROUNDS = [(10, True), (5, False), (3, True)]
INPUT_OFFSETS = {0: 6, 1: 9}  # a consume-transform-produce step's input offset, per round
COMMITTED = sorted([b"t0-%d" % i for i in range(10)] + [b"t2-%d" % i for i in range(3)])


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    finally:
        c.close()


def test_aiokafka_transactions(cluster_factory) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    c = cluster_factory(3, **TXN)
    c.create_topic("aio-tx", 2, 3, configs={"min.insync.replicas": "2"})
    c.create_topic("aio-in", 1, 3)  # offsets of a topic that does not exist are refused (as Kafka)

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=c.bootstrap, transactional_id="aio-tx")
        await p.start()
        try:
            for txn, (n, commit) in enumerate(ROUNDS):
                await p.begin_transaction()
                for i in range(n):
                    await p.send_and_wait("aio-tx", b"t%d-%d" % (txn, i), partition=i % 2)
                if txn in INPUT_OFFSETS:  # the input's offset goes with the transaction
                    await p.send_offsets_to_transaction({TopicPartition("aio-in", 0): INPUT_OFFSETS[txn]}, "aio-ctp")
                await (p.commit_transaction() if commit else p.abort_transaction())
        finally:
            await p.stop()
        cons = AIOKafkaConsumer(bootstrap_servers=c.bootstrap, isolation_level="read_committed",
                                enable_auto_commit=False)
        await cons.start()
        got: list[bytes] = []
        try:
            cons.assign([TopicPartition("aio-tx", 0), TopicPartition("aio-tx", 1)])
            await cons.seek_to_beginning()
            for _ in range(12):
                for msgs in (await cons.getmany(timeout_ms=250)).values():
                    got.extend(m.value for m in msgs)
        finally:
            await cons.stop()
        return got

    assert sorted(asyncio.run(asyncio.wait_for(run(), 90))) == COMMITTED  # aiokafka's read_committed
    assert sorted(consume(c.bootstrap, "aio-tx", "read_committed", 13)) == COMMITTED
    assert len(consume(c.bootstrap, "aio-tx", "read_uncommitted", 18)) == 18
    assert committed_offset(c.bootstrap, "aio-ctp", "aio-in") == 6  # the aborted 9 never landed


def test_kafka_python_transactions(cluster_factory) -> None:
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = cluster_factory(3, **TXN)
    c.create_topic("kp-tx", 2, 3, configs={"min.insync.replicas": "2"})
    c.create_topic("kp-in", 1, 3)
    p = KafkaProducer(bootstrap_servers=c.bootstrap, transactional_id="kp-tx")
    try:
        p.init_transactions()
        for txn, (n, commit) in enumerate(ROUNDS):
            p.begin_transaction()
            for i in range(n):
                p.send("kp-tx", b"t%d-%d" % (txn, i), partition=i % 2)
            if txn in INPUT_OFFSETS:
                p.send_offsets_to_transaction(
                    {TopicPartition("kp-in", 0): OffsetAndMetadata(INPUT_OFFSETS[txn], "", -1)}, "kp-ctp")
            if commit:
                p.commit_transaction()
            else:
                p.flush()  # in the log, then aborted
                p.abort_transaction()
    finally:
        p.close()
    assert sorted(consume(c.bootstrap, "kp-tx", "read_committed", 13)) == COMMITTED
    assert len(consume(c.bootstrap, "kp-tx", "read_uncommitted", 18)) == 18
    assert committed_offset(c.bootstrap, "kp-ctp", "kp-in") == 6
