"""Kafka's Java client (the one kafka-topics.sh, Kafka Streams and Kafka Connect use)
against a real cluster: the calls that failed before (issue 11)."""

from __future__ import annotations

import re

import pytest

from kafkarepl.server.config_docs import BROKER_CONFIG_DOCS, TOPIC_CONFIG_DOCS
from tests import java_tools

pytestmark = pytest.mark.integration


def test_java_admin_creates_and_describes_a_topic(cluster_factory) -> None:
    c = cluster_factory(3)
    out = java_tools.run("create-topic", c.bootstrap, "orders", "3", "3", "retention.ms=60000", "min.insync.replicas=2")
    m = re.fullmatch(r"created partitions=3 rf=3 configs=(\d+) retention.ms=60000", out)
    assert m and int(m.group(1)) > 10, out
    c.wait_for_leaders("orders", 3, 3)
    assert java_tools.run("describe-topic", c.bootstrap, "orders") == "partitions=3 isr0=3"


def test_java_transactional_producer_and_kafka_transactions_describe(cluster_factory) -> None:
    from tests.integration.test_transactions import consume

    c = cluster_factory(1, transaction_state_log_num_partitions=2, offsets_topic_num_partitions=1)
    c.create_topic("jtx", 1, 1)
    assert java_tools.run("transactions", c.bootstrap, "jtx") == "done"
    got = consume(c.bootstrap, "jtx", "read_committed", 4, partitions=1)
    assert sorted(got) == [b"java-0", b"java-1", b"java-2", b"java-5"]
    assert java_tools.run("describe-transactions", c.bootstrap, "java-tx") == (
        "list=[java-tx:CompleteCommit] state=CompleteCommit epoch=0 timeout=60000")


def test_fence_producers_as_kafka_transactions_force_terminate(cluster_factory) -> None:
    """Admin.fenceProducers (kafka-transactions.sh force-terminate; Kafka Connect fences a
    source connector's old task producers with it): the open transaction of the fenced
    id is aborted, its producer's commit fails with ProducerFencedException, and
    read_committed consumers go past the aborted records."""
    from confluent_kafka import Producer

    from tests.integration.test_transactions import consume

    c = cluster_factory(1, transaction_state_log_num_partitions=2, offsets_topic_num_partitions=1)
    c.create_topic("fence", 1, 1)
    # epoch 0 at init; the fencing aborts at epoch 1 and hands out epoch 2, as Kafka's
    # prepareFenceProducerEpoch then the retried InitProducerId do
    assert java_tools.run("fence-producers", c.bootstrap, "fence", "fence-tx") == (
        "fenced epoch=2 commit=ProducerFencedException")
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    p.produce("fence", b"after", partition=0)
    assert p.flush(10) == 0
    assert consume(c.bootstrap, "fence", "read_committed", 1, partitions=1) == [b"after"]
    assert sorted(consume(c.bootstrap, "fence", "read_uncommitted", 3, partitions=1)) == [
        b"after", b"fenced-0", b"fenced-1"]
    # the id stays, at the new epoch, with no transaction open (Kafka's Empty)
    assert java_tools.run("describe-transactions", c.bootstrap, "fence-tx").split(" ")[1:3] == [
        "state=Empty", "epoch=2"]


def test_abort_a_hanging_transaction_as_kafka_transactions_abort(cluster_factory) -> None:
    """kafka-transactions.sh abort --start-offset: DescribeProducers finds the open
    transaction of a partition (its start offset, the coordinator epoch), and the admin
    client's WriteTxnMarkers aborts it at the partition leader: the LSO moves, and
    read_committed consumers go past the hanging records."""
    from confluent_kafka import Producer

    from tests.integration.test_transactions import consume

    c = cluster_factory(1, transaction_state_log_num_partitions=2, offsets_topic_num_partitions=1)
    c.create_topic("hang", 1, 1)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    p.produce("hang", b"before", partition=0)
    assert p.flush(10) == 0
    assert java_tools.run("abort-hanging", c.bootstrap, "hang", "hang-tx") == "aborted start=1 open_after=false"
    p.produce("hang", b"after", partition=0)
    assert p.flush(10) == 0
    assert consume(c.bootstrap, "hang", "read_committed", 2, partitions=1) == [b"before", b"after"]


def test_topics_by_id_as_kafka_topics_describe_topic_id(cluster_factory) -> None:
    """KIP-516's topic ids through the Java AdminClient: describeTopics by id (kafka-topics.sh
    --describe --topic-id, Metadata v12), deleteTopics by id (DeleteTopics v6), then the
    gone id is UnknownTopicIdException."""
    c = cluster_factory(1)
    c.create_topic("byid", 2, 1)
    assert java_tools.run("describe-topic-id", c.bootstrap, "byid") == (
        "name=byid partitions=2 same_id=true after_delete=UnknownTopicIdException")


def test_max_timestamp_offset_as_kafka_get_offsets_time_minus_3(cluster_factory) -> None:
    from confluent_kafka import Producer

    c = cluster_factory(1)
    c.create_topic("ts", 1, 1)
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0, "acks": "all"})
    for i, ts in enumerate([1_000, 9_000, 9_000, 3_000]):  # one batch each
        p.produce("ts", value=b"v%d" % i, partition=0, timestamp=1_700_000_000_000 + ts)
        assert p.flush(10) == 0
    # The first record with the largest timestamp, not the last offset of its batch.
    assert java_tools.run("max-timestamp", c.bootstrap, "ts", "0") == "offset=1 timestamp=1700000009000"


def test_describe_configs_synonyms_in_kafkas_order(cluster_factory) -> None:
    c = cluster_factory(1, log_retention_ms=3_600_000)
    c.create_topic("syn", 1, 1, configs={"retention.ms": "60000"})
    java_tools.run("broker-throttle", c.bootstrap, "1", "5000")
    out = java_tools.run("synonyms", c.bootstrap, "syn", "retention.ms", "1", "leader.replication.throttled.rate")
    topic, broker = out.split("] ")
    # A topic override first, then the broker settings it would fall back to, by source:
    # server.properties, then the built-in default, which Kafka keeps in hours.
    assert topic == ("retention.ms=60000:DYNAMIC_TOPIC_CONFIG [retention.ms=60000:DYNAMIC_TOPIC_CONFIG;"
                     "log.retention.ms=3600000:STATIC_BROKER_CONFIG;log.retention.hours=168:DEFAULT_CONFIG;"), out
    assert broker.startswith("leader.replication.throttled.rate=5000:DYNAMIC_BROKER_CONFIG "
                             "[leader.replication.throttled.rate=5000:DYNAMIC_BROKER_CONFIG;"), out


def test_delete_delay_preallocate_and_timestamp_difference_described_as_kafka(cluster_factory) -> None:
    """file.delete.delay.ms and preallocate fall back to log.segment.delete.delay.ms and
    log.preallocate, as Kafka lists them; message.timestamp.difference.max.ms is not listed
    for a topic without it, as Kafka 4.0, which removed it (KIP-937)."""
    c = cluster_factory(1, log_segment_delete_delay_ms=5000)
    c.create_topic("fdd", 1, 1, configs={"file.delete.delay.ms": "100"})
    out = java_tools.run("synonyms", c.bootstrap, "fdd", "file.delete.delay.ms", "1", "log.segment.delete.delay.ms")
    assert out == ("file.delete.delay.ms=100:DYNAMIC_TOPIC_CONFIG [file.delete.delay.ms=100:DYNAMIC_TOPIC_CONFIG;"
                   "log.segment.delete.delay.ms=5000:STATIC_BROKER_CONFIG;"
                   "log.segment.delete.delay.ms=60000:DEFAULT_CONFIG;] "
                   "log.segment.delete.delay.ms=5000:STATIC_BROKER_CONFIG "
                   "[log.segment.delete.delay.ms=5000:STATIC_BROKER_CONFIG;"
                   "log.segment.delete.delay.ms=60000:DEFAULT_CONFIG;]"), out
    out = java_tools.run("synonyms", c.bootstrap, "fdd", "preallocate", "1", "log.preallocate")
    assert out == ("preallocate=false:DEFAULT_CONFIG [log.preallocate=false:DEFAULT_CONFIG;] "
                   "log.preallocate=false:DEFAULT_CONFIG [log.preallocate=false:DEFAULT_CONFIG;]"), out
    # Kafka keeps the retention and roll defaults in hours: the ms forms have none of their own.
    out = java_tools.run("synonyms", c.bootstrap, "fdd", "segment.ms", "1", "log.retention.ms")
    assert out == ("segment.ms=604800000:DEFAULT_CONFIG [log.roll.hours=168:DEFAULT_CONFIG;] "
                   "log.retention.ms=null:DEFAULT_CONFIG [log.retention.hours=168:DEFAULT_CONFIG;]"), out
    out = java_tools.run("synonyms", c.bootstrap, "fdd", "message.timestamp.difference.max.ms", "1",
                         "log.message.timestamp.before.max.ms")
    assert out.startswith("message.timestamp.difference.max.ms=absent log.message.timestamp.before.max.ms="), out


def test_acls_without_an_authorizer_answer_security_disabled(cluster_factory) -> None:
    c = cluster_factory(1)
    assert java_tools.run("describe-acls", c.bootstrap) == "failed SecurityDisabledException"


def test_authorized_operations_without_an_authorizer_are_all_supported_ones(cluster_factory) -> None:
    # Kafka with no authorizer answers every operation the resource type supports (KIP-430).
    c = cluster_factory(1, offsets_topic_num_partitions=1, offsets_topic_replication_factor=1)
    c.create_topic("ops", 1, 1)
    assert java_tools.run("authorized-ops", c.bootstrap, "ops", "nogroup") == (
        "cluster=[ALTER, ALTER_CONFIGS, CLUSTER_ACTION, CREATE, DESCRIBE, DESCRIBE_CONFIGS, IDEMPOTENT_WRITE]"
        " topic=[ALTER, ALTER_CONFIGS, CREATE, DELETE, DESCRIBE, DESCRIBE_CONFIGS, READ, WRITE]"
        " group=[DELETE, DESCRIBE, READ] unasked=null")


def test_groups_listed_with_type_and_deleted_as_kafka_consumer_groups_does(cluster_factory) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP

    c = cluster_factory(1, offsets_topic_num_partitions=1, offsets_topic_replication_factor=1,
                        group_initial_rebalance_delay_ms=0)
    c.create_topic("g-data", 1, 1)
    p = Producer({"bootstrap.servers": c.bootstrap})
    for i in range(5):
        p.produce("g-data", value=b"%d" % i)
    assert p.flush(10) == 0

    def member() -> Consumer:
        return Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g1", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})

    cons = member()
    cons.subscribe(["g-data"])
    got = 0
    while got < 5:
        got += sum(1 for m in cons.consume(10, timeout=2) if m.error() is None)
    cons.commit(asynchronous=False)
    assert java_tools.run("delete-group", c.bootstrap, "g1") == "failed GroupNotEmptyException"
    # --delete-offsets: refused while a member consumes the topic, and for unknown groups.
    assert java_tools.run("delete-offsets", c.bootstrap, "g1", "g-data", "0") == \
        "failed GroupSubscribedToTopicException"
    assert java_tools.run("delete-offsets", c.bootstrap, "nobody", "g-data", "0") == \
        "failed GroupIdNotFoundException"
    cons.close()
    # Empty now: it keeps its protocol type, as Kafka's classic groups do.
    assert java_tools.run("list-groups", c.bootstrap) == "groups=[g1:Classic:consumer:Empty]"
    assert java_tools.run("delete-group", c.bootstrap, "g1") == "deleted"
    assert java_tools.run("list-groups", c.bootstrap) == "groups=[]"
    assert java_tools.run("delete-group", c.bootstrap, "g1") == "failed GroupIdNotFoundException"
    # The tombstones are in __consumer_offsets: a reloaded coordinator has no offsets either.
    c.stop(1)
    c.restart(1)
    c.wait_for_leaders("__consumer_offsets", 1, 1)
    probe = member()
    [tp] = probe.committed([TP("g-data", 0)], timeout=20)
    assert tp.error is None and tp.offset < 0, tp
    probe.close()


def test_delete_offsets_of_an_empty_group(cluster_factory) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    c = cluster_factory(1, offsets_topic_num_partitions=1, offsets_topic_replication_factor=1)
    c.create_topic("od", 2, 1)
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g2", "enable.auto.commit": False})
    cons.commit(offsets=[TP("od", 0, 3), TP("od", 1, 4)], asynchronous=False)  # no subscription
    assert java_tools.run("delete-offsets", c.bootstrap, "g2", "od", "0") == "deleted"
    got = {tp.partition: tp.offset for tp in cons.committed([TP("od", 0), TP("od", 1)], timeout=10)}
    assert got[0] < 0 and got[1] == 4, got
    cons.close()


def test_delete_records_moves_the_log_start_on_every_replica(cluster_factory) -> None:
    import time

    from confluent_kafka import Producer

    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey

    c = cluster_factory(3)
    c.create_topic("dr", 1, 3, configs={"min.insync.replicas": 2})
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("dr", value=b"%d" % i, partition=0)
    assert p.flush(10) == 0
    assert java_tools.run("delete-records", c.bootstrap, "dr", "0", "6") == "low_watermark=6"
    assert java_tools.run("delete-records", c.bootstrap, "dr", "0", "99") == "failed OffsetOutOfRangeException"

    def earliest() -> int:
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "dr", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]}
        port = c.brokers[c.leader_of("dr")].port
        [r] = wire.call("127.0.0.1", port, ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"]
        return r["offset"] if r["error_code"] == 0 else -1

    assert earliest() == 6
    # No wait here: as Kafka's, the answer came once every live replica's log start
    # reached 6 (followers take it from their next fetch), so any new leader starts there.
    c.kill(c.leader_of("dr"))
    deadline = time.monotonic() + 30
    while True:  # a new leader (a former follower) still starts at 6
        try:
            got = earliest()
        except (OSError, ConnectionError):
            got = -1
        if got == 6 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got == 6


def test_describe_log_dirs_as_kafka_log_dirs_does(cluster_factory) -> None:
    from confluent_kafka import Producer

    c = cluster_factory(1)
    c.create_topic("ld", 2, 1)
    p = Producer({"bootstrap.servers": c.bootstrap})
    for i in range(10):
        p.produce("ld", value=b"x" * 100, partition=i % 2)
    assert p.flush(10) == 0
    assert java_tools.run("log-dirs", c.bootstrap, "1") == "dirs=1 [ld-0:true:0, ld-1:true:0, usable=true]"


def test_connect_worker_creates_and_verifies_its_internal_topics(cluster_factory) -> None:
    """Kafka Connect's TopicAdmin, as a distributed worker runs it at start-up (it died
    with "Error while attempting to create/find topic(s)" on a null CreateTopics configs)."""
    c = cluster_factory(3)
    out = java_tools.run("connect-topics", c.bootstrap, "connect", "3")
    assert out == "created=[connect-configs, connect-offsets, connect-status]", out
    assert java_tools.run("connect-topics", c.bootstrap, "connect", "3") == "created=[]"  # found, not made


def test_broker_throttles_set_and_cleared_as_reassign_partitions_does(cluster_factory) -> None:
    c = cluster_factory(2)
    assert java_tools.run("broker-throttle", c.bootstrap, "2", "10000000") == "rate=10000000:DYNAMIC_BROKER_CONFIG"
    assert java_tools.run("broker-throttle", c.bootstrap, "2", "-") == "rate=none"


def test_describe_producers_as_kafka_transactions_does(cluster_factory) -> None:
    from confluent_kafka import Producer

    c = cluster_factory(1)
    c.create_topic("idem", 1, 1)
    assert java_tools.run("describe-producers", c.bootstrap, "idem", "0") == "producers=[]"
    p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(3):  # three batches: sequences 0, 1, 2
        p.produce("idem", value=b"%d" % i, partition=0)
        assert p.flush(10) == 0
    assert java_tools.run("describe-producers", c.bootstrap, "idem", "0") == \
        "producers=[epoch=0,last_seq=2,ts=true,txn=false]"


def test_describe_configs_documentation_when_asked(cluster_factory) -> None:
    """ConfigEntry.documentation() (DescribeConfigs v3+ include_documentation): a topic
    config's meaning, a broker's default of one as that default, a broker config's own;
    null when not asked."""
    c = cluster_factory(1)
    c.create_topic("docs", 1, 1)
    out = java_tools.run("config-docs", c.bootstrap, "docs", "1", "retention.ms", "min.insync.replicas",
                         "log.retention.ms", "broker.id", "replica.lag.time.max.ms")
    docs = {name: (doc, plain) for name, doc, plain in (entry.split("\t") for entry in out.split("\x1f"))}
    assert docs["retention.ms"] == (TOPIC_CONFIG_DOCS["retention.ms"], "null"), docs
    assert docs["min.insync.replicas"][0].startswith("With acks=all"), docs  # the topic's entry
    assert docs["log.retention.ms"] == ("The default of the topic config retention.ms: "
                                        + TOPIC_CONFIG_DOCS["retention.ms"], "null"), docs
    assert docs["broker.id"] == (BROKER_CONFIG_DOCS["broker.id"], "null"), docs
    assert docs["replica.lag.time.max.ms"] == (BROKER_CONFIG_DOCS["replica.lag.time.max.ms"], "null"), docs


def test_describe_configs_types_as_the_java_admin_client_reads_them(cluster_factory) -> None:
    """ConfigEntry.type() (DescribeConfigs v3+ config_type) is Kafka's type of each config:
    UIs built on the Java AdminClient render and validate configs by it."""
    c = cluster_factory(1)
    c.create_topic("types", 1, 1)
    out = java_tools.run("config-types", c.bootstrap, "types", "1", "cleanup.policy", "retention.ms", "segment.bytes",
                         "min.cleanable.dirty.ratio", "unclean.leader.election.enable", "compression.type",
                         "broker.id", "log.retention.ms", "listeners", "auto.create.topics.enable",
                         "offsets.topic.replication.factor", "zookeeper.connect",
                         "leader.replication.throttled.replicas")
    assert out == ("cleanup.policy=LIST retention.ms=LONG segment.bytes=INT min.cleanable.dirty.ratio=DOUBLE "
                   "unclean.leader.election.enable=BOOLEAN compression.type=STRING broker.id=INT "
                   "log.retention.ms=LONG listeners=LIST auto.create.topics.enable=BOOLEAN "
                   "offsets.topic.replication.factor=SHORT zookeeper.connect=STRING "
                   "leader.replication.throttled.replicas=LIST"), out
