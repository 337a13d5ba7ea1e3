"""Spark through the `kafkarepl` data source vs the bare confluent-kafka client, in one run on
one fresh 1-broker cluster, topic of 4 partitions (issue 17). Prints one JSON line per figure.

    python bench/spark_bench.py [--records 1000000] [--runs 3] [--only write,read,stream,latency]

write-bare        confluent-kafka produce loop (acks=all, idempotent) over Python lists, median of runs
write-spark-cold  df.write.format("kafkarepl") from a cached DataFrame: the session's first write
write-spark       the same, median of the next runs (Python workers warm)
read-bare         confluent-kafka consume(10000) loop over the 4 partitions, counting messages
read-spark-cold   spark.read.format("kafkarepl").load().count(): the session's first read
read-spark        the same, median of the next runs
read-spark-noop   the same read written to Spark's noop sink (every row reaches Spark), as a
                  baseline for the stream, which writes to the noop sink too
stream-spark      readStream availableNow + maxOffsetsPerTrigger (250k) into the noop sink,
                  whole query from start() to termination (cold: the session's first stream)
latency-spark     produce -> kafkarepl stream (processingTime 0) -> kafkarepl sink topic ->
                  consumer, one record at a time: p50/p99 ms

Spark runs local[2] on this 2-core machine, as in the issue; Spark figures include job
scheduling and task start-up, since a user pays them too. Records: key str(i), value
"event-%08d" (14 bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkarepl import LocalCluster


def records(n: int) -> tuple[list[bytes], list[bytes]]:
    keys = [str(i).encode() for i in range(n)]
    values = [f"event-{i:08d}".encode() for i in range(n)]
    return keys, values


def write_bare(boot: str, topic: str, keys: list[bytes], values: list[bytes]) -> float:
    p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True})
    p.produce(topic, b"warm-up")  # producer id and metadata out of the figure
    p.flush(30)
    t0 = time.perf_counter()
    for k, v in zip(keys, values, strict=True):
        while True:
            try:
                p.produce(topic, v, k)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return len(keys) / (time.perf_counter() - t0)


def read_bare(boot: str, topic: str, partitions: int, n: int) -> float:
    c = Consumer({"bootstrap.servers": boot, "group.id": f"b-{time.time()}", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 0, "queued.min.messages": 1000000})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        msgs = c.consume(10000, 5.0)
        if not msgs:
            break
        got += sum(1 for m in msgs if m.error() is None)
    rate = got / (time.perf_counter() - t0)
    c.close()
    assert got >= n, got
    return rate


def spark_session():
    from pyspark.sql import SparkSession

    from kafkarepl.spark import KafkareplDataSource

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (SparkSession.builder.master("local[2]").appName("kafkarepl-bench")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false").config("spark.sql.streaming.pollingDelay", "10ms")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(KafkareplDataSource)
    return s


def write_spark(spark, boot: str, topics: list[str], n: int) -> list[float]:
    """One timed write per topic (the first is a warm-up: Python workers, imports)."""
    from pyspark.sql import functions as F

    df = (spark.range(n, numPartitions=2)
          .select(F.col("id").cast("string").cast("binary").alias("key"),
                  F.concat(F.lit("event-"), F.lpad(F.col("id").cast("string"), 8, "0")).cast("binary").alias("value"))
          .cache())
    df.count()  # materialize the cache
    rates = []
    for topic in topics:
        w = df.write.format("kafkarepl").option("kafka.bootstrap.servers", boot).option("topic", topic).mode("append")
        t0 = time.perf_counter()
        w.save()
        rates.append(n / (time.perf_counter() - t0))
    df.unpersist()
    return rates


def read_spark(spark, boot: str, topic: str, n: int) -> float:
    t0 = time.perf_counter()
    got = (spark.read.format("kafkarepl").option("kafka.bootstrap.servers", boot)
           .option("subscribe", topic).load().count())
    rate = got / (time.perf_counter() - t0)
    assert got == n, got
    return rate


def read_spark_noop(spark, boot: str, topic: str) -> float:
    """A batch read into the noop sink: every row reaches Spark (count() need not)."""
    t0 = time.perf_counter()
    (spark.read.format("kafkarepl").option("kafka.bootstrap.servers", boot).option("subscribe", topic).load()
     .write.format("noop").mode("overwrite").save())
    return 1 / (time.perf_counter() - t0)


def stream_spark(spark, boot: str, topic: str, n: int, per_trigger: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as ckpt:
        t0 = time.perf_counter()
        q = (spark.readStream.format("kafkarepl").option("kafka.bootstrap.servers", boot)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(per_trigger)).load()
             .writeStream.format("noop").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(600)
        dt = time.perf_counter() - t0
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        batches = sum(1 for p in q.recentProgress if p["numInputRows"])
    assert rows == n, rows
    return n / dt, batches


def latency_spark(spark, cl, boot: str, probes: int) -> dict:
    """p50/p99 of produce -> Spark stream -> sink topic, one small record at a time."""
    src, dst = "lat-in", "lat-out"
    cl.create_topic(src, partitions=1, replication_factor=1)
    cl.create_topic(dst, partitions=1, replication_factor=1)
    with tempfile.TemporaryDirectory() as ckpt:
        q = (spark.readStream.format("kafkarepl").option("kafka.bootstrap.servers", boot)
             .option("subscribe", src).option("startingOffsets", "latest").load()
             .selectExpr("key", "value")
             .writeStream.format("kafkarepl").option("kafka.bootstrap.servers", boot)
             .option("topic", dst).option("checkpointLocation", ckpt)
             .trigger(processingTime="0 seconds").start())
        c = Consumer({"bootstrap.servers": boot, "group.id": f"lat-{time.time()}", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 5})
        c.assign([TopicPartition(dst, 0, 0)])
        p = Producer({"bootstrap.servers": boot, "linger.ms": 0, "acks": "all", "enable.idempotence": True})
        out: list[float] = []
        try:
            time.sleep(3)  # the first micro-batches (query start-up) out of the figure
            for i in range(probes + 5):
                sent = time.perf_counter()
                p.produce(src, f"probe-{i}".encode(), str(i).encode())
                p.flush(10)
                while True:
                    m = c.poll(10)
                    assert m is not None, "probe lost"
                    if m.error() is None and m.key() == str(i).encode():
                        break
                if i >= 5:
                    out.append((time.perf_counter() - sent) * 1000)
        finally:
            q.stop()
            c.close()
    out.sort()
    return {"p50_ms": round(statistics.median(out), 1), "p99_ms": round(out[int(len(out) * 0.99) - 1], 1),
            "max_ms": round(out[-1], 1), "probes": len(out)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--only", default="write,read,stream,latency")
    ap.add_argument("--per-trigger", type=int, default=250_000)
    ap.add_argument("--probes", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    n, parts = args.records, args.partitions
    only = set(args.only.split(","))
    keys, values = records(n)

    def emit(name: str, **fig: object) -> None:
        print(json.dumps({"bench": name, "records": n, **fig, "load1": round(os.getloadavg()[0], 2)}), flush=True)

    with LocalCluster(brokers=1, broker_properties={"num.partitions": parts}) as cl:
        boot = cl.bootstrap_servers
        runs = args.runs
        spark_topics = [f"spark-{i}" for i in range(runs + 1)]
        for t in ("bare", *spark_topics):
            cl.create_topic(t, partitions=parts, replication_factor=1)
        spark = spark_session()
        try:
            if only & {"write", "read", "stream"}:
                wb = [write_bare(boot, "bare", keys, values) for _ in range(runs)]
                emit("write-bare", rec_per_s=round(statistics.median(wb)), runs=[round(x) for x in wb])
                ws = write_spark(spark, boot, spark_topics, n)
                emit("write-spark-cold", rec_per_s=round(ws[0]))
                ws = ws[1:]
                emit("write-spark", rec_per_s=round(statistics.median(ws)), runs=[round(x) for x in ws],
                     ratio=round(statistics.median(ws) / statistics.median(wb), 3))
            if "read" in only:
                # Each topic holds n records: the bare reads use the first `runs` copies of "bare"
                # (written runs times: read n of them), Spark one copy each.
                rb = [read_bare(boot, "bare", parts, n) for _ in range(runs)]
                emit("read-bare", rec_per_s=round(statistics.median(rb)), runs=[round(x) for x in rb])
                cold = read_spark(spark, boot, spark_topics[0], n)
                emit("read-spark-cold", rec_per_s=round(cold))
                rs = [read_spark(spark, boot, t, n) for t in spark_topics[1:]]
                emit("read-spark", rec_per_s=round(statistics.median(rs)), runs=[round(x) for x in rs],
                     ratio=round(statistics.median(rs) / statistics.median(rb), 3))
            if "stream" in only:
                rn = [n * read_spark_noop(spark, boot, t) for t in spark_topics[1:]]
                emit("read-spark-noop", rec_per_s=round(statistics.median(rn)), runs=[round(x) for x in rn])
                # The first streaming query of a session starts Spark's streaming Python workers.
                for name in ("stream-spark-cold", "stream-spark"):
                    ss, batches = stream_spark(spark, boot, spark_topics[1], n, args.per_trigger)
                    emit(name, rec_per_s=round(ss), micro_batches=batches, max_offsets_per_trigger=args.per_trigger)
            if "latency" in only:
                emit("latency-spark", **latency_spark(spark, cl, boot, args.probes))
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
