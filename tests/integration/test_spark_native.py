"""The Spark source's native data plane (kafkarepl's client + the C Arrow codec) against a
real cluster and real clients: records confluent-kafka wrote with every compression codec
read back exactly; Spark's writes land where librdkafka (or Java's murmur2) would put each
key, in every codec, across topics; both data planes agree; settings the native plane
cannot honour fall back to librdkafka (auto) or fail on the driver (native).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kafka.partitioner.default import murmur2

from tests.integration import test_spark as base
from tests.integration.test_spark import (
    confluent_records,
    produce,
    reader,
    sample,
    spark_records,
    topic_name,
)

# The same module-scoped fixtures: a real 3-broker cluster and a local Spark session.
spark = base.spark
cluster = base.cluster

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_from_librdkafka_read_back_exactly(spark, cluster, codec):
    topic = topic_name(f"cz-{codec}")
    cluster.create_topic(topic, partitions=2, rf=2)
    recs = sample(400, 2)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "compression.type": codec, "linger.ms": 20})
    for r in recs:
        p.produce(topic, value=r["value"], key=r["key"], headers=r["headers"] or None, timestamp=r["timestamp"],
                  partition=r["partition"])
    assert p.flush(30) == 0
    expected = confluent_records(cluster, topic, 2)
    native = spark_records(reader(spark, cluster, subscribe=topic, includeHeaders="true", dataPlane="native"))
    assert native == expected and len(native) == 400
    assert spark_records(reader(spark, cluster, subscribe=topic, includeHeaders="true",
                                dataPlane="librdkafka")) == expected


def keyed_frame(spark, n: int):
    from pyspark.sql import functions as F

    return spark.range(n, numPartitions=2).select(
        F.when(F.col("id") % 10 == 0, F.lit(None)).otherwise(F.concat(F.lit("k"), F.col("id").cast("string")))
        .cast("binary").alias("key"),
        F.col("id").cast("string").alias("value"))


def write(df, cluster, topic: str | None = None, **opts: str) -> None:
    w = df.write.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap).mode("append")
    if topic:
        w = w.option("topic", topic)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save()


@pytest.mark.parametrize("partitioner", [None, "murmur2_random"])
def test_keyed_writes_land_where_librdkafka_puts_them(spark, cluster, partitioner):
    ours, theirs = topic_name("pk-ours"), topic_name("pk-rdk")
    cluster.create_topic(ours, partitions=5, rf=2)
    cluster.create_topic(theirs, partitions=5, rf=2)
    opts = {"kafka.partitioner": partitioner} if partitioner else {}
    write(keyed_frame(spark, 2000), cluster, ours, dataPlane="native", **opts)
    write(keyed_frame(spark, 2000), cluster, theirs, dataPlane="librdkafka", **opts)
    placed_ours = {(k, v): p for p, _, k, v, _, _, _ in confluent_records(cluster, ours, 5)}
    placed_theirs = {(k, v): p for p, _, k, v, _, _, _ in confluent_records(cluster, theirs, 5)}
    assert len(placed_ours) == len(placed_theirs) == 2000
    keyed = {kv for kv in placed_ours if kv[0] is not None}
    assert {kv: placed_ours[kv] for kv in keyed} == {kv: placed_theirs[kv] for kv in keyed}
    if partitioner == "murmur2_random":  # Java's DefaultPartitioner, as Spark's Kafka sink places keys
        assert all(p == (murmur2(k) & 0x7FFFFFFF) % 5 for (k, _), p in placed_ours.items() if k is not None)
    # Null keys are spread (sticky per chunk), every record exactly once.
    assert sorted(int(v) for _, v in placed_ours) == list(range(2000))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_native_writes_in_every_codec_read_back_by_librdkafka(spark, cluster, codec):
    from pyspark.sql import functions as F

    topic = topic_name(f"wz-{codec}")
    cluster.create_topic(topic, partitions=3, rf=3)
    df = spark.range(3000, numPartitions=2).select(
        F.col("id").cast("string").alias("key"), F.concat(F.lit("v-"), F.col("id").cast("string")).alias("value"),
        (F.col("id") % 3).cast("int").alias("partition"),
        F.array(F.struct(F.lit("n").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))).alias("headers"))
    write(df, cluster, topic, dataPlane="native", **{"kafka.compression.type": codec})
    got = confluent_records(cluster, topic, 3)
    assert sorted((p, k, v, h) for p, _, k, v, h, _, _ in got) == sorted(
        (i % 3, str(i).encode(), f"v-{i}".encode(), [("n", str(i).encode())]) for i in range(3000))
    # offsets contiguous per partition: each record written once
    for p in range(3):
        offs = sorted(o for q, o, *_ in got if q == p)
        assert offs == list(range(1000))
    assert spark_records(reader(spark, cluster, subscribe=topic, includeHeaders="true")) == got


def test_topic_column_spreads_rows_over_topics(spark, cluster):
    from pyspark.sql import functions as F

    a, b = topic_name("tc-a"), topic_name("tc-b")
    cluster.create_topic(a, partitions=2, rf=2)
    cluster.create_topic(b, partitions=3, rf=2)
    df = spark.range(1000, numPartitions=2).select(
        F.when(F.col("id") % 3 == 0, F.lit(a)).otherwise(F.lit(b)).alias("topic"),
        F.col("id").cast("string").alias("value"))
    write(df, cluster, dataPlane="native")
    assert sorted(int(v) for _, _, _, v, *_ in confluent_records(cluster, a, 2)) == list(range(0, 1000, 3))
    assert len(confluent_records(cluster, b, 3)) == 1000 - 334


def test_settings_the_native_plane_cannot_honour(spark, cluster):
    topic = topic_name("fallback")
    cluster.create_topic(topic, partitions=1, rf=2)
    produce(cluster, topic, sample(30, 1))
    # auto: read_committed is librdkafka's to honour; the read still works
    df = reader(spark, cluster, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    assert df.count() == 30
    with pytest.raises(Exception, match="'dataPlane'.*isolation.level=read_committed"):
        reader(spark, cluster, subscribe=topic, dataPlane="native", **{"kafka.isolation.level": "read_committed"}).count()
    with pytest.raises(Exception, match="'dataPlane'"):
        reader(spark, cluster, subscribe=topic, dataPlane="fast").count()
