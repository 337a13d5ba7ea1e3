"""Log compaction with real brokers and clients: every replica of a compacted topic
cleans its own log in the background; a consumer from the beginning then reads each
key's latest value (and no superseded one below the active segment) at its original
offset; `__consumer_offsets` is compacted the same way; a broker killed with -9 restarts
on a valid, readable log."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.batches import decode
from tests.integration.chaos import wait_until

pytestmark = pytest.mark.integration

CLEANER = {"log_cleaner_backoff_ms": 200, "log_cleaner_min_cleanable_ratio": 0.01,
           "offsets_topic_num_partitions": 1, "offsets_topic_replication_factor": 3,
           "offsets_topic_segment_bytes": 4096, "group_initial_rebalance_delay_ms": 0}


def dir_bytes(c, broker: int, topic: str, partition: int = 0) -> int:
    d = c.root / f"broker-{broker}" / "logs" / f"{topic}-{partition}"
    total = 0
    for p in Path(d).glob("*.log"):
        try:
            total += p.stat().st_size
        except FileNotFoundError:  # swapped by the cleaner meanwhile
            pass
    return total


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.monotonic()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == -191:  # _PARTITION_EOF
                break
            continue
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def test_replicas_compact_and_consumers_read_latest_values(cluster_factory) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP

    c = cluster_factory(3, **CLEANER)
    c.create_topic("cmp", 1, 3, configs={"cleanup.policy": "compact", "segment.bytes": "4096",
                                         "min.insync.replicas": "2"})
    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 2000,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    latest: dict[bytes, bytes] = {}
    for i in range(1500):
        k, v = b"key-%d" % (i % 10), b"value-%05d" % i
        p.produce("cmp", key=k, value=v)
        latest[k] = v
        if i % 100 == 0:
            p.flush(10)
    assert p.flush(10) == 0 and not errors, errors[:3]
    written = {b: dir_bytes(c, b, "cmp") for b in c.brokers}
    # Every replica cleans its own log: each one shrinks to a fraction.
    wait_until(lambda: all(dir_bytes(c, b, "cmp") < written[b] / 3 for b in c.brokers), 30,
               "every replica's log compacted")
    got = consume_all(c.bootstrap, "cmp")
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)) and len(got) < 1500
    assert {k: v for _o, k, v in got} == latest  # the latest value of every key
    for o, _k, v in got:
        assert v == b"value-%05d" % o  # offsets never change (one record per offset here)
    # __consumer_offsets: a group committing over and over is compacted as well.
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "committer", "enable.auto.commit": False})
    for i in range(400):
        cons.commit(offsets=[TP("cmp", 0, i)], asynchronous=False)
    cons.close()
    leader = c.leader_of("__consumer_offsets")
    wait_until(lambda: dir_bytes(c, leader, "__consumer_offsets") < 3 * 4096, 30, "__consumer_offsets compacted")
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "committer", "enable.auto.commit": False})
    assert cons.committed([TP("cmp", 0)], timeout=10)[0].offset == 399
    cons.close()
    # A kill -9 (perhaps mid-cleaning) leaves a log that reopens valid and complete.
    victim = c.leader_of("cmp")
    for i in range(300):
        p.produce("cmp", key=b"key-%d" % (i % 10), value=b"late-%05d" % i)
        latest[b"key-%d" % (i % 10)] = b"late-%05d" % i
    assert p.flush(10) == 0 and not errors, errors[:3]
    c.kill(victim)
    c.brokers[victim].start()
    c.wait_serving(victim)
    wait_until(lambda: len(c.metadata(["cmp"])["topics"][0]["partitions"][0]["isr_nodes"]) == 3, 30,
               "the restarted replica back in the ISR")
    got = consume_all(c.alive_bootstrap(), "cmp")
    assert {k: v for _o, k, v in got} == latest


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_a_compacted_topic_refuses_keyless_records_kip467(cluster_factory, codec) -> None:
    from confluent_kafka import KafkaError, Producer

    c = cluster_factory(1)
    c.create_topic("kl", 1, 1, configs={"cleanup.policy": "compact"})
    results: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "compression.type": codec, "retries": 0,
                  "on_delivery": lambda err, m: results.append((err, m.key()))})
    p.produce("kl", value=b"no key")
    p.flush(10)
    p.produce("kl", key=b"k", value=b"keyed")
    p.flush(10)
    (err, _), (ok, key) = results
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    assert ok is None and key == b"k"


def test_a_long_running_group_keeps_its_offsets_partition_bounded(cluster_factory) -> None:
    """A consumer group member auto-committing every 100 ms while records keep coming:
    __consumer_offsets takes a new commit record every 100 ms for as long as the group
    lives, yet the partition stays a few segments on disk (the cleaner keeps one record
    per key), and the group's committed offset is still the latest after all of it."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka import TopicPartition as TP

    segment = 1024  # ~10 commit records
    c = cluster_factory(1, **{**CLEANER, "offsets_topic_replication_factor": 1,
                              "offsets_topic_segment_bytes": segment})
    c.create_topic("events", 1, 1)
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0})
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "long-lived", "enable.auto.commit": True,
                     "auto.commit.interval.ms": 100, "auto.offset.reset": "earliest"})
    cons.subscribe(["events"])
    watcher = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "watcher", "enable.auto.commit": False})

    def offsets_log_end() -> int:
        try:
            return watcher.get_watermark_offsets(TP("__consumer_offsets", 0), timeout=5)[1]
        except KafkaException:  # not created yet: the group's FindCoordinator creates it
            return 0

    # Until the group has written 30 segments' worth of commits (~300 records, 30 s),
    # sample the partition's size on disk. A record every 20 ms keeps offsets moving.
    sizes: list[int] = []
    consumed = 0
    deadline = time.monotonic() + 180
    while offsets_log_end() < 300:
        assert time.monotonic() < deadline, "the group stopped committing"
        for _ in range(25):
            p.produce("events", value=b"v")
            p.poll(0)
            m = cons.poll(0.02)
            if m is not None and m.error() is None:
                consumed += 1
        sizes.append(dir_bytes(c, 1, "__consumer_offsets"))
    # Bounded: cleaned segments merged into one, dirty ones waiting for the next
    # cleaning, the active one: a handful of segments while ~30 were written.
    settled = sizes[len(sizes) // 3:]
    assert max(settled) < 8 * segment, (sizes, offsets_log_end())
    p.flush(10)
    while (m := cons.poll(1.0)) is not None:
        consumed += m.error() is None
    cons.close()  # commits the final position
    reader = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "long-lived", "enable.auto.commit": False})
    assert reader.committed([TP("events", 0)], timeout=10)[0].offset == consumed
    reader.close()
    watcher.close()


def test_aborted_transactions_are_removed_by_the_cleaner(cluster_factory) -> None:
    """A transactional producer on a compacted topic: after cleaning, even a
    read_uncommitted consumer no longer sees the aborted records (the cleaner removed
    them, as Kafka's does), and both isolation levels read every key's latest committed
    value at its original offset."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = cluster_factory(1, **{**CLEANER, "offsets_topic_replication_factor": 1,
                              "transaction_state_log_replication_factor": 1,
                              "transaction_state_log_min_isr": 1})
    c.create_topic("tx", 1, 1, configs={"cleanup.policy": "compact", "segment.bytes": "2048"})
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "cleaner-tx"})
    p.init_transactions(30)
    committed: dict[bytes, bytes] = {}
    for i in range(60):
        p.begin_transaction()
        k, v = b"k%d" % (i % 5), b"v%03d" % i
        p.produce("tx", key=k, value=v)
        if i % 3 == 2:
            assert p.flush(10) == 0  # written, then aborted (unsent records are just purged)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed[k] = v
    for i in range(40):  # plain records roll the segments past the transactions
        p.begin_transaction()
        p.produce("tx", key=b"filler", value=b"f%03d" % i)
        p.commit_transaction(30)
    committed[b"filler"] = b"f039"

    def read(isolation: str) -> list[tuple[int, bytes, bytes]]:
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"r-{isolation}-{time.monotonic()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
        cons.assign([TopicPartition("tx", 0, 0)])
        out = []
        while True:
            m = cons.poll(10)
            assert m is not None, "no end of partition"
            if m.error() is not None:
                if m.error().code() == -191:
                    break
                continue
            out.append((m.offset(), m.key(), m.value()))
        cons.close()
        return out

    aborted = {b"v%03d" % i for i in range(60) if i % 3 == 2}
    wait_until(lambda: not aborted & {v for _o, _k, v in read("read_uncommitted")}, 60,
               "the aborted records cleaned away")
    for isolation in ("read_uncommitted", "read_committed"):
        got = read(isolation)
        assert {k: v for _o, k, v in got} == committed
        assert [o for o, _k, _v in got] == sorted({o for o, _k, _v in got})
    p.flush(10)


def batches_on_disk(c, broker: int, topic: str) -> list[tuple[int, int]]:
    """(base offset, attributes) of every batch of the partition's segment files."""
    d = c.root / f"broker-{broker}" / "logs" / f"{topic}-0"
    out = []
    for p in sorted(Path(d).glob("*.log")):
        try:
            data = p.read_bytes()
        except FileNotFoundError:  # swapped meanwhile
            continue
        pos = 0
        while pos + 61 <= len(data):
            out.append((int.from_bytes(data[pos:pos + 8], "big"), int.from_bytes(data[pos + 21:pos + 23], "big")))
            pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return out


def produce_with_old_timestamps(bootstrap: str, topic: str, old: int) -> dict[bytes, tuple[bytes | None, int]]:
    """A delete (tombstone) of key "dead" and overwrites of ten keys, every record with its
    own timestamp days older than delete.retention.ms; returns each key's latest (value,
    timestamp). Every record acked (delivery callbacks), not just a flush() of 0."""
    from confluent_kafka import Producer

    acked: list[int] = []
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 2000,
                  "on_delivery": lambda err, _m: errors.append(err) if err else acked.append(1)})
    latest: dict[bytes, tuple[bytes | None, int]] = {}
    sent = 0
    for key, value in [(b"dead", b"alive"), (b"dead", None)]:
        p.produce(topic, key=key, value=value, timestamp=old + sent)
        latest[key] = (value, old + sent)
        sent += 1
        p.flush(10)
    for i in range(600):  # rolls several 4 KiB segments past the tombstone
        k, v = b"key-%d" % (i % 10), b"value-%05d" % i
        p.produce(topic, key=k, value=v, timestamp=old + sent)
        latest[k] = (v, old + sent)
        sent += 1
        if i % 50 == 0:
            p.flush(10)
    p.flush(10)
    assert not errors and len(acked) == sent, (errors[:3], len(acked), sent)
    return latest


def test_an_old_tombstone_survives_the_first_cleaning_with_its_timestamp_kip534(cluster_factory) -> None:
    """A tombstone whose own timestamp is 10 days old, on a topic with delete.retention.ms of
    an hour: the first cleaning keeps it (a consumer reading behind still sees the delete)
    and marks its batch with the delete horizon (attribute bit 6, the horizon in the base
    timestamp). librdkafka (confluent-kafka), kafka-python and Kafka's Java consumer all
    read every kept record with its exact original timestamp (base + re-encoded delta)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    from tests import java_tools

    c = cluster_factory(1, **CLEANER)
    c.create_topic("hz", 1, 1, configs={"cleanup.policy": "compact", "segment.bytes": "4096",
                                        "delete.retention.ms": "3600000"})
    old = int(time.time() * 1000) - 10 * 86_400_000
    latest = produce_with_old_timestamps(c.bootstrap, "hz", old)
    wait_until(lambda: any(attrs & 0x40 for _b, attrs in batches_on_disk(c, 1, "hz")), 30,
               "a batch rewritten with the delete horizon")
    wait_until(lambda: len(consume_all(c.bootstrap, "hz")) < 300, 30, "the log compacted")

    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "ts", "enable.auto.commit": False,
                     "enable.partition.eof": True})
    cons.assign([TopicPartition("hz", 0, 0)])
    rd: dict[bytes, tuple[bytes | None, int]] = {}
    while (m := cons.poll(10)) is not None and m.error() is None:
        rd[m.key()] = (m.value(), m.timestamp()[1])
    cons.close()
    assert rd[b"dead"] == (None, latest[b"dead"][1])  # the delete is still there
    assert rd == latest  # librdkafka: every key's latest value with its own timestamp

    kc = KafkaConsumer(bootstrap_servers=c.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    kc.assign([KTP("hz", 0)])
    kc.seek_to_beginning()
    kp = {r.key: (r.value, r.timestamp) for r in kc}
    kc.close()
    assert kp == latest  # kafka-python

    out = java_tools.run("read-all", c.bootstrap, "hz")
    jv = {}
    for item in out.split():
        _off, key, value, ts = item.split(":")
        jv[key.encode()] = (None if value == "null" else value.encode(), int(ts))
    assert jv == latest  # Kafka's Java consumer


def test_expired_tombstones_go_without_new_writes(cluster_factory) -> None:
    """delete.retention.ms of 3 s: once the horizon set by the first cleaning has passed,
    the broker cleans the log again by itself (no write since) and the tombstone goes."""
    c = cluster_factory(1, **CLEANER)
    c.create_topic("hz2", 1, 1, configs={"cleanup.policy": "compact", "segment.bytes": "4096",
                                         "delete.retention.ms": "3000"})
    old = int(time.time() * 1000) - 10 * 86_400_000
    latest = produce_with_old_timestamps(c.bootstrap, "hz2", old)
    wait_until(lambda: any(attrs & 0x40 for _b, attrs in batches_on_disk(c, 1, "hz2")), 30,
               "a batch rewritten with the delete horizon")
    wait_until(lambda: b"dead" not in {k for _o, k, _v in consume_all(c.bootstrap, "hz2")}, 60,
               "the expired tombstone removed")
    got = consume_all(c.bootstrap, "hz2")
    assert {k: v for _o, k, v in got} == {k: v for k, (v, _ts) in latest.items() if k != b"dead"}


def test_kill_9_with_cleaned_segments_staged_recovers_and_rejoins(cluster_factory) -> None:
    """The leader is killed -9 at a chosen point of a cleaning: its cleaned segments
    written to the staging directory, the swap not begun (the test-only pause holds it
    there). Restarted, it recovers to its old segments, rejoins the ISR, and every key's
    latest value is read at the offset its producer was acked with; no staging directory
    or .swap file is left."""
    from confluent_kafka import Producer

    c = cluster_factory(3, **CLEANER, kafkarepl_log_cleaner_test_pause_before_swap_ms=600_000)
    c.create_topic("stg", 1, 3, configs={"cleanup.policy": "compact", "segment.bytes": "4096",
                                         "min.insync.replicas": "2"})
    acked: dict[bytes, tuple[int, bytes]] = {}  # key -> (offset, value) of its last acked write
    errors: list = []
    n_acked = [0]

    def delivered(err, m) -> None:
        if err is not None:
            errors.append(err)
            return
        n_acked[0] += 1
        if m.key() not in acked or acked[m.key()][0] < m.offset():
            acked[m.key()] = (m.offset(), m.value())

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 2000,
                  "on_delivery": delivered})
    for i in range(1500):
        p.produce("stg", key=b"key-%d" % (i % 10), value=b"value-%05d" % i)
        if i % 100 == 0:
            p.flush(10)
    assert p.flush(10) == 0 and not errors, errors[:3]
    assert n_acked[0] == 1500 and len(acked) == 10  # every record acked, not just flushed
    leader = c.leader_of("stg")
    part = c.root / f"broker-{leader}" / "logs" / "stg-0"
    staging = part / "cleaning"
    wait_until(lambda: staging.is_dir() and any(staging.glob("*.log")), 60,
               "the leader's cleaned segments staged (held before the swap)")
    c.kill(leader)
    assert any(staging.glob("*.log")) and not list(part.glob("*.swap"))  # killed at that point
    wait_until(lambda: leader not in c.metadata(["stg"])["topics"][0]["partitions"][0]["isr_nodes"], 60,
               "the killed leader out of the ISR")
    # Restarted with the cleaner off: what is on disk then is what recovery left.
    conf = c.brokers[leader].config
    conf.write_text(conf.read_text().replace("kafkarepl.log.cleaner.test.pause.before.swap.ms=600000",
                                             "log.cleaner.enable=false"))
    c.restart(leader)
    wait_until(lambda: len(c.metadata(["stg"])["topics"][0]["partitions"][0]["isr_nodes"]) == 3, 60,
               "the restarted broker back in the ISR")
    assert not staging.exists() and not list(part.glob("*.swap")) and not list(part.glob("*.cleaned"))
    got = consume_all(c.bootstrap, "stg")
    at = {o: (k, v) for o, k, v in got}
    for key, (offset, value) in acked.items():
        assert at.get(offset) == (key, value), (key, offset)
    assert max(o for o, _, _ in got) == max(o for o, _ in acked.values())
    # The restarted replica's own log (read from its files) has every key's latest value at
    # its acked offset, in offset order.
    on_disk = []
    for seg in sorted(part.glob("*.log")):
        on_disk += [(o, k, v) for o, _ts, k, v in decode(seg.read_bytes())]
    offs = [o for o, _, _ in on_disk]
    assert offs == sorted(set(offs))
    mine = {o: (k, v) for o, k, v in on_disk}
    for key, (offset, value) in acked.items():
        assert mine.get(offset) == (key, value), (key, offset)


def test_cleaner_gauges_on_the_metrics_endpoint(cluster_factory) -> None:
    """Kafka's LogCleaner / LogCleanerManager gauges, scraped as Prometheus text after a
    real cleaning: the recopy share of what the cleaning read, how dirty the dirtiest log
    was, the last run, and no uncleanable partition in the broker's log dir."""
    import re
    import urllib.request

    from confluent_kafka import Producer


    c = cluster_factory(1, start=False, **CLEANER)
    b = next(iter(c.brokers.values()))
    [port] = c.serve_metrics().values()
    b.start()
    c.wait_serving(b.broker_id)
    c.create_topic("cmp", 1, 1, configs={"cleanup.policy": "compact", "segment.bytes": "4096"})
    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0, "batch.size": 2000,  # < segment.bytes
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    for i in range(1500):
        p.produce("cmp", key=b"key-%d" % (i % 300), value=b"value-%05d" % i)
    assert p.flush(10) == 0 and not errors, errors[:3]
    assert dir_bytes(c, b.broker_id, "cmp") > 3 * 4096

    def gauges() -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        return {m.group(1) + (m.group(2) or ""): float(m.group(3)) for m in
                re.finditer(r'^(kafka_log_\w+)\{broker="\d+"(?:,(.*?))?\} (\S+)$', text, re.M)}

    wait_until(lambda: 0 < gauges().get("kafka_log_logcleaner_cleaner_recopy_percent", 0), 30, "a cleaning")
    g = gauges()
    assert 0 < g["kafka_log_logcleaner_cleaner_recopy_percent"] < 60  # most records superseded
    assert g["kafka_log_logcleaner_max_clean_time_secs"] >= 0
    assert g["kafka_log_logcleanermanager_time_since_last_run_ms"] < 10_000  # every 200 ms backoff
    [dirs] = [k for k in g if k.startswith("kafka_log_logcleanermanager_uncleanable_partitions_count")]
    assert 'logDirectory="' in dirs and g[dirs] == 0


def test_compaction_lags_are_topic_configs(cluster_factory) -> None:
    """min.compaction.lag.ms and max.compaction.lag.ms are topic configs, as in Kafka:
    accepted by CreateTopics and AlterConfigs (min above max refused), described as the
    topic's, and obeyed: a topic whose records are younger than its min lag is left alone
    while another one is compacted."""
    from kafkarepl.cli import wire
    from kafkarepl.errors import ErrorCode
    from kafkarepl.protocol import ApiKey

    c = cluster_factory(1, **CLEANER)
    port = c.brokers[1].port

    def create(name: str, configs: dict[str, str]) -> int:
        body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 10000, "validate_only": False}
        return wire.call("127.0.0.1", port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"]

    compact = {"cleanup.policy": "compact", "segment.bytes": "4096"}
    assert create("lagged", {**compact, "min.compaction.lag.ms": "3600000", "max.compaction.lag.ms": "7200000"}) == 0
    assert create("eager", compact) == 0
    assert create("conflict", {**compact, "min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "1000"}) == \
        ErrorCode.INVALID_CONFIG
    alter = {"resources": [{"resource_type": 2, "resource_name": "eager", "configs": [
        {"name": "max.compaction.lag.ms", "config_operation": 0, "value": "86400000"}]}], "validate_only": False}
    [r] = wire.call("127.0.0.1", port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, alter)["responses"]
    assert r["error_code"] == 0, r
    describe = {"resources": [{"resource_type": 2, "resource_name": "lagged", "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
    described = {e["name"]: (e["value"], e["config_source"]) for e in wire.call(
        "127.0.0.1", port, ApiKey.DESCRIBE_CONFIGS, 4, describe)["results"][0]["configs"]}
    assert described["min.compaction.lag.ms"] == ("3600000", 1) and described["max.compaction.lag.ms"] == ("7200000", 1)

    from confluent_kafka import Producer

    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0, "batch.size": 2000,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    for i in range(600):
        for topic in ("lagged", "eager"):
            p.produce(topic, key=b"key-%d" % (i % 5), value=b"value-%05d" % i)
    assert p.flush(30) == 0 and not errors, errors
    wait_until(lambda: len(consume_all(c.bootstrap, "eager")) < 300, 30, "the eager topic compacted")
    time.sleep(1.0)  # several more cleaner passes
    assert len(consume_all(c.bootstrap, "lagged")) == 600
