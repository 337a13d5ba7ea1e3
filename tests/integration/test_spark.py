"""The kafkarepl PySpark data source against a real 3-broker kafkarepl cluster and a local
Spark (one session and one cluster for the module: Spark starts slowly).

Records written by Spark are read back by Spark and by confluent-kafka; records produced
by confluent-kafka are read by Spark; both must match field for field (keys, values,
headers, offsets, timestamps). Streaming reads resume from their checkpoint, respect
maxOffsetsPerTrigger and pick up new partitions; a failed delivery fails the Spark job.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.fixtures.cluster import TestCluster
from tests.fixtures.zookeeper import new_chroot

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000


def _missing_spark() -> str | None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"pyspark/pyarrow not installed ({exc}); pip install 'pyspark>=4.0,<5' pyarrow"
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        return "no Java runtime for Spark (java not on PATH, JAVA_HOME unset)"
    return None


@pytest.fixture(scope="module")
def spark():
    why = _missing_spark()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    from pyspark.sql import SparkSession

    from kafkarepl.spark import KafkareplDataSource

    # Spark's Python workers (the data source planner included) run `python3` from PATH
    # unless PYSPARK_PYTHON says otherwise; under CI the venv is not activated, so point
    # them at this interpreter, which has kafkarepl and pyarrow.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("kafkarepl-test")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "512m")
               .config("spark.sql.streaming.pollingDelay", "10ms")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkareplDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = TestCluster(new_chroot(zookeeper), tmp_path_factory.mktemp("spark"), 3,
                    {"auto.create.topics.enable": "false", "log.retention.check.interval.ms": "200"})
    try:
        yield c.start()
    finally:
        c.shutdown()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def reader(spark, cluster, **opts):
    r = spark.read.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def produce(cluster, topic: str, recs: list[dict]) -> list[tuple[int, int]]:
    """confluent-kafka, acks=all; returns each record's (partition, offset) in order."""
    done: dict[int, tuple[int, int]] = {}
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    for i, r in enumerate(recs):
        p.produce(topic, value=r["value"], key=r["key"], headers=r["headers"] or None,
                  timestamp=r["timestamp"], partition=r["partition"],
                  on_delivery=lambda err, m, i=i: done.__setitem__(i, (m.partition(), m.offset()) if err is None else err))
    assert p.flush(30) == 0
    assert all(isinstance(done[i], tuple) for i in range(len(recs))), done
    return [done[i] for i in range(len(recs))]


def confluent_records(cluster, topic: str, partitions: int) -> list[tuple]:
    """Every record of the topic as (partition, offset, key, value, headers, ts_type, ts)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "check", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    out = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        eof: set[int] = set()
        deadline = time.monotonic() + 30
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
                continue
            ts_type, ts = m.timestamp()
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers() or None, ts_type - 1, ts))
    finally:
        c.close()
    return sorted(out)


def spark_records(df) -> list[tuple]:
    """The same tuple shape from a DataFrame of the source (timestamp as epoch ms)."""
    from pyspark.sql import functions as F

    cols = [F.col("partition"), F.col("offset"), F.col("key"), F.col("value")]
    cols.append(F.col("headers") if "headers" in df.columns else F.lit(None).alias("headers"))
    cols += [F.col("timestampType"), F.unix_millis("timestamp").alias("ts")]
    out = []
    for r in df.select(*cols).collect():
        hs = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]] if r["headers"] else None
        out.append((r["partition"], r["offset"], None if r["key"] is None else bytes(r["key"]),
                    None if r["value"] is None else bytes(r["value"]), hs, r["timestampType"], r["ts"]))
    return sorted(out)


def sample(n: int, partitions: int) -> list[dict]:
    """Null and non-null keys and values, zero/one/several headers (repeated keys, null
    values), explicit non-monotonic timestamps, spread over partitions."""
    return [{
        "key": None if i % 7 == 3 else f"k{i}".encode(),
        "value": None if i % 11 == 5 else bytes([i % 256]) * (i % 50) + f"v{i}".encode(),
        "headers": [("h", f"{i}".encode()), ("n", None), ("h", b"again")][: i % 4],
        "timestamp": BASE_TS + i * 10 - (i % 3) * 7,
        "partition": i % partitions,
    } for i in range(n)]


def test_confluent_produced_records_read_back_exactly(spark, cluster):
    topic = topic_name("cf")
    cluster.create_topic(topic, partitions=3, rf=2)
    recs = sample(600, 3)
    placed = produce(cluster, topic, recs)
    df = reader(spark, cluster, subscribe=topic, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    got = spark_records(df)
    expected = sorted((p, o, r["key"], r["value"], r["headers"] or None, 0, r["timestamp"])
                      for r, (p, o) in zip(recs, placed, strict=True))
    assert got == expected
    assert {r["topic"] for r in df.select("topic").distinct().collect()} == {topic}
    # Without includeHeaders: Spark's 7 columns.
    assert len(reader(spark, cluster, subscribe=topic).columns) == 7


def test_log_append_time_topic_reports_timestamp_type_1(spark, cluster):
    topic = topic_name("lat")
    cluster.create_topic(topic, partitions=1, rf=2, configs={"message.timestamp.type": "LogAppendTime"})
    produce(cluster, topic, sample(20, 1))  # their CreateTimes are replaced by the broker
    got = spark_records(reader(spark, cluster, subscribe=topic, includeHeaders="true"))
    assert got == confluent_records(cluster, topic, 1)
    assert {r[5] for r in got} == {1}
    assert all(r[6] != BASE_TS + i * 10 - (i % 3) * 7 for i, r in enumerate(got))


def test_spark_write_then_batch_read_every_field(spark, cluster):
    from pyspark.sql import functions as F

    topic = topic_name("rt")
    cluster.create_topic(topic, partitions=3, rf=3)
    n = 3000
    df = (spark.range(n, numPartitions=2)
          .select(F.when(F.col("id") % 9 == 4, F.lit(None)).otherwise(F.concat(F.lit("key-"), F.col("id").cast("string"))).alias("key"),
                  F.concat(F.lit("value-"), F.col("id").cast("string")).cast("binary").alias("value"),
                  (F.col("id") % 3).cast("int").alias("partition"),
                  F.when(F.col("id") % 4 == 0, F.lit(None)).otherwise(F.array(
                      F.struct(F.lit("id").alias("key"), F.col("id").cast("string").cast("binary").alias("value")),
                      F.struct(F.lit("empty").alias("key"), F.lit(None).cast("binary").alias("value")))).alias("headers"),
                  F.col("id")))  # an extra column: ignored, as in Spark's sink
    (df.write.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap)
       .option("topic", topic).mode("append").save())

    back = reader(spark, cluster, subscribe=topic, includeHeaders="true")
    rows = back.collect()
    assert len(rows) == n
    seen = set()
    for r in rows:
        i = int(bytes(r["value"]).decode().removeprefix("value-"))
        seen.add(i)
        assert r["partition"] == i % 3 and r["topic"] == topic
        assert r["key"] == (None if i % 9 == 4 else f"key-{i}".encode())
        expect_h = None if i % 4 == 0 else [("id", str(i).encode()), ("empty", None)]
        got_h = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]] if r["headers"] else None
        assert got_h == expect_h
        assert r["timestampType"] == 0 and r["timestamp"] is not None
    assert seen == set(range(n))
    # Offsets: contiguous from 0 in every partition, and exactly what a Kafka client sees.
    for p in range(3):
        offs = sorted(r["offset"] for r in rows if r["partition"] == p)
        assert offs == list(range(len(offs)))
    assert spark_records(back) == confluent_records(cluster, topic, 3)


def test_offset_bounds_assign_and_split_tasks(spark, cluster):
    topic = topic_name("ob")
    cluster.create_topic(topic, partitions=2, rf=2)
    recs = [dict(r, partition=r["partition"]) for r in sample(200, 2)]
    produce(cluster, topic, recs)  # 100 per partition, offsets 0..99

    def offsets(df) -> list[tuple[int, int]]:
        return sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())

    bounded = reader(spark, cluster, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
                     endingOffsets=f'{{"{topic}": {{"0": 20, "1": 5}}}}')
    assert offsets(bounded) == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(0, 5)]
    assigned = reader(spark, cluster, assign=f'{{"{topic}": [1]}}', startingOffsets=f'{{"{topic}": {{"1": 90}}}}')
    assert offsets(assigned) == [(1, o) for o in range(90, 100)]
    pattern = reader(spark, cluster, subscribePattern=topic.replace("-", ".") + "|nothing-.*")
    assert len(offsets(pattern)) == 200
    split = reader(spark, cluster, subscribe=topic, maxRecordsPerPartition="30")
    assert split.rdd.getNumPartitions() == 8  # 100 offsets -> 4 tasks of <= 30, per partition
    assert offsets(split) == offsets(reader(spark, cluster, subscribe=topic))
    assert reader(spark, cluster, subscribe=topic, minPartitions="6").rdd.getNumPartitions() == 6
    # A range past the end of the log is refused on the driver.
    with pytest.raises(Exception, match="endingOffsets"):
        reader(spark, cluster, subscribe=topic, endingOffsets=f'{{"{topic}": {{"0": 1000}}}}').count()


def stream(spark, cluster, topic: str, **opts):
    r = (spark.readStream.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest").option("includeHeaders", "true"))
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def finish(q) -> list[int]:
    """Wait for an availableNow query; the sizes of its non-empty micro-batches."""
    assert q.awaitTermination(90), "availableNow query did not finish"
    assert q.exception() is None
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def test_streaming_read_available_now_into_memory_respects_max_offsets(spark, cluster, tmp_path):
    topic = topic_name("sr")
    cluster.create_topic(topic, partitions=2, rf=2)
    produce(cluster, topic, sample(100, 2))
    table = "sr_" + uuid.uuid4().hex[:6]
    q = (stream(spark, cluster, topic, maxOffsetsPerTrigger="30")
         .writeStream.format("memory").queryName(table).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    batches = finish(q)
    assert sum(batches) == 100 and max(batches) <= 30 and len(batches) >= 4
    assert spark_records(spark.table(table)) == confluent_records(cluster, topic, 2)


def test_streaming_read_resumes_from_checkpoint_and_finds_new_partitions(spark, cluster, tmp_path):
    topic = topic_name("rs")
    cluster.create_topic(topic, partitions=2, rf=2)
    produce(cluster, topic, sample(100, 2))
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run() -> list[int]:
        # The file sink recovers from its checkpoint (the memory sink cannot).
        return finish(stream(spark, cluster, topic).writeStream.format("parquet").option("path", out)
                      .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())

    assert sum(run()) == 100
    # More records and one more partition: the restarted query reads only what is new
    # (from its checkpoint, not startingOffsets), the new partition from its start.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept alive until the result
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    cluster.wait_for_leaders(topic, 3, 1)
    produce(cluster, topic, sample(90, 3))
    assert sum(run()) == 90
    got = spark_records(spark.read.parquet(out))
    assert got == confluent_records(cluster, topic, 3)
    assert len(got) == 190 and sum(1 for r in got if r[0] == 2) == 30


def test_streaming_write_copies_a_stream(spark, cluster, tmp_path):
    src, dst = topic_name("sw-in"), topic_name("sw-out")
    cluster.create_topic(src, partitions=2, rf=2)
    cluster.create_topic(dst, partitions=2, rf=2)
    recs = sample(150, 2)
    produce(cluster, src, recs)
    q = (spark.readStream.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("subscribe", src).option("startingOffsets", "earliest").option("includeHeaders", "true").load()
         .selectExpr("key", "value", "headers", "partition")
         .writeStream.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        q.processAllAvailable()
        produce(cluster, src, sample(50, 2))  # and what arrives while it runs
        q.processAllAvailable()
    finally:
        q.stop()
    strip = [(p, o, k, v, h) for p, o, k, v, h, _, _ in confluent_records(cluster, src, 2)]
    copied = [(p, o, k, v, h) for p, o, k, v, h, _, _ in confluent_records(cluster, dst, 2)]
    # Same partition, same records; order within a partition is kept by one task each.
    assert sorted(copied) == sorted(strip)


def log_start(cluster, topic: str) -> int:
    from confluent_kafka.admin import OffsetSpec

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})[TopicPartition(topic, 0)].result().offset


def test_deleted_offsets_fail_the_read_unless_data_loss_is_accepted(spark, cluster):
    topic = topic_name("ret")
    cluster.create_topic(topic, partitions=1, rf=2, configs={"segment.bytes": 2000, "retention.bytes": 2000})
    for _ in range(5):  # five produce rounds: five batches, each rolling a segment
        produce(cluster, topic, sample(40, 1))
    deadline = time.monotonic() + 20
    while log_start(cluster, topic) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    start = log_start(cluster, topic)
    assert 0 < start < 200
    from_zero = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss") as ei:
        reader(spark, cluster, subscribe=topic, startingOffsets=from_zero).count()
    assert f"{topic}-0: offset 0 is no longer available" in str(ei.value)
    # Retention may still be deleting: the read starts at the log start of its planning.
    lossy = reader(spark, cluster, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    offsets = sorted(r["offset"] for r in lossy.select("offset").collect())
    assert offsets == list(range(offsets[0], 200)) and start <= offsets[0] <= log_start(cluster, topic)
    earliest = [r["offset"] for r in reader(spark, cluster, subscribe=topic).select("offset").collect()]
    assert sorted(earliest) == list(range(200 - len(earliest), 200)) and len(earliest) <= 200 - start


def test_stream_picks_up_a_topic_created_after_it_started(spark, cluster, tmp_path):
    topic = topic_name("late")
    table = "late_" + uuid.uuid4().hex[:6]
    q = (stream(spark, cluster, topic).writeStream.format("memory").queryName(table)
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        q.processAllAvailable()
        assert spark.table(table).count() == 0
        cluster.create_topic(topic, partitions=2, rf=2)
        produce(cluster, topic, sample(40, 2))
        deadline = time.monotonic() + 30
        while spark.table(table).count() < 40 and time.monotonic() < deadline:
            q.processAllAvailable()
        assert spark_records(spark.table(table)) == confluent_records(cluster, topic, 2)
    finally:
        q.stop()


def test_failed_delivery_fails_the_job(spark, cluster):
    topic = topic_name("bad")
    cluster.create_topic(topic, partitions=1, rf=1)
    df = spark.createDataFrame([(b"v", 7)], "value binary, partition int")  # partition 7 does not exist
    with pytest.raises(Exception, match="record\\(s\\) failed") as ei:
        (df.write.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap)
           .option("topic", topic).option("kafka.message.timeout.ms", "5000").mode("append").save())
    assert "kafkarepl" in str(ei.value)


@pytest.mark.parametrize("opts, needle", [
    ({}, "'subscribe'"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "'subscribe'"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "'startingOffsets'"),
    ({"assign": '{"nosuchtopic": [0]}'}, "nosuchtopic-0"),
    ({"subscribe": "t", "kafka.no.such.setting": "1"}, "kafka.*"),
    ({"subscribe": "t", "includeHeaders": "maybe"}, "'includeHeaders'"),
])
def test_bad_read_options_fail_with_the_option_named(spark, cluster, opts, needle):
    with pytest.raises(Exception, match="kafkarepl") as ei:
        reader(spark, cluster, **opts).count()
    assert needle in str(ei.value)


def test_bad_write_options_fail_with_the_option_named(spark, cluster):
    df = spark.createDataFrame([("k", "v")], "key string, value string")

    def save(frame, mode: str = "append", **opts: str) -> None:
        w = frame.write.format("kafkarepl").mode(mode)  # a new writer each time: option() mutates it
        for k, v in opts.items():
            w = w.option(k, v)
        w.save()

    boot = {"kafka.bootstrap.servers": cluster.bootstrap}
    with pytest.raises(Exception, match="'kafka.bootstrap.servers'"):
        save(df, topic="t")
    with pytest.raises(Exception, match="'topic'"):
        save(df, **boot)
    with pytest.raises(Exception, match="'value' column"):
        save(df.selectExpr("key"), topic="t", **boot)
    with pytest.raises(Exception, match="column 'partition' must be int"):
        save(df.selectExpr("value", "'x' AS partition"), topic="t", **boot)
    with pytest.raises(Exception, match="overwrite"):
        save(df, "overwrite", topic="t", **boot)
