"""Leader failover under the Spark source's native data plane, on a real 3-broker cluster
(RF=3, min.insync.replicas=2): the partition leader is killed -9 while a Spark job is
running. A write must still land every row exactly once (the native producer retries on
the new leader with its idempotent sequence numbers, so a resent batch is not written
twice); a read must still return every record exactly once (the reader refreshes its
metadata and goes on from its offset). Spark runs local[2], which does not retry a
failed task: a failure would surface as the job's error, never as missing rows.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.integration import test_spark as base
from tests.integration.test_spark import confluent_records, reader, spark_records, topic_name

spark = base.spark

pytestmark = pytest.mark.integration

PARTITIONS = 3


def failover_cluster(cluster_factory):
    return cluster_factory(3, min_insync_replicas=2, auto_create_topics_enable="false",
                           unclean_leader_election_enable="false")


class LeaderKiller(threading.Thread):
    """Kills the leader of partition 0 of `topic` once the running Spark stage has finished
    `done_tasks` tasks and still has some to run. The Spark job itself runs on the test's
    thread (the data source is registered with that thread's session)."""

    def __init__(self, spark, cluster, topic: str, done_tasks: int, timeout: float = 120) -> None:
        super().__init__(daemon=True)
        self.spark, self.cluster, self.topic = spark, cluster, topic
        self.done_tasks, self.timeout = done_tasks, timeout
        self.victim = -1
        self.tasks_left = 0
        self.done = threading.Event()

    def run(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline and not self.done.is_set():
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info is not None and info.numCompletedTasks >= self.done_tasks:
                    victim = self.cluster.leader_of(self.topic, 0)
                    self.cluster.kill(victim)
                    self.victim = victim
                    self.tasks_left = info.numTasks - info.numCompletedTasks
                    return
            time.sleep(0.005)

    def check(self) -> None:
        """After the job: it must have run into the kill."""
        self.done.set()
        self.join(10)
        assert self.victim > 0, "the Spark job ended before the leader could be killed"
        assert self.tasks_left > 0


def test_native_write_survives_leader_kill(spark, cluster_factory):
    from pyspark.sql import functions as F

    cluster = failover_cluster(cluster_factory)
    topic = topic_name("fw")
    cluster.create_topic(topic, partitions=PARTITIONS, rf=3)
    n, tasks = 240_000, 24
    df = spark.range(n, numPartitions=tasks).select(
        F.col("id").cast("string").alias("key"), F.col("id").cast("string").alias("value"),
        (F.col("id") % PARTITIONS).cast("int").alias("partition"))

    def write() -> None:
        # Small batches: each task spends most of its time with Produce requests in flight.
        (df.write.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("topic", topic).option("dataPlane", "native").option("kafka.batch.size", "4096")
         .mode("append").save())

    killer = LeaderKiller(spark, cluster, topic, done_tasks=3)
    killer.start()
    write()  # a failed task fails the job (local[2] does not retry tasks)
    killer.check()

    cluster.wait_for_leaders(topic, PARTITIONS, isr=2)
    got = confluent_records(cluster, topic, PARTITIONS)
    # Every row exactly once, in its partition; offsets contiguous (no duplicate batch, no hole).
    assert sorted(int(v) for _, _, _, v, *_ in got) == list(range(n))
    assert all(p == int(v) % PARTITIONS and k == v for p, _, k, v, *_ in got)
    for p in range(PARTITIONS):
        offs = [o for q, o, *_ in got if q == p]
        assert offs == list(range(n // PARTITIONS)), f"partition {p}: offsets not 0..{n // PARTITIONS - 1}"
    assert spark_records(reader(spark, cluster, subscribe=topic, dataPlane="native")) == got


@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_native_producer_resends_in_flight_batches_to_the_new_leader(cluster_factory, fault):
    """Without Spark, so that the fault lands at a known point: half the rows are submitted
    (many small batches in flight), the leader dies (kill -9) or stops answering (SIGSTOP:
    its requests time out), the rest follow. The sender must resend what the old leader
    never acknowledged to the new one, once."""
    import pyarrow as pa

    from kafkarepl.spark.sink import produce_native

    cluster = failover_cluster(cluster_factory)
    topic = topic_name("fp")
    cluster.create_topic(topic, partitions=PARTITIONS, rf=3)
    n, chunk = 150_000, 5_000
    victims = []

    def chunks():
        for lo in range(0, n, chunk):
            if lo == n // 2:
                victims.append(cluster.leader_of(topic, 0))
                (cluster.kill if fault == "kill" else cluster.pause)(victims[0])
            ids = pa.array([str(i).encode() for i in range(lo, lo + chunk)], pa.binary())
            yield pa.record_batch({"key": ids, "value": ids,
                                   "partition": pa.array([i % PARTITIONS for i in range(lo, lo + chunk)], pa.int32())})

    conf = {"bootstrap.servers": cluster.bootstrap, "batch.size": "2048", "request.timeout.ms": "5000"}
    acked = produce_native(conf, topic, chunks(), 120_000)
    assert victims and acked == {topic: n}
    if fault == "pause":  # the old leader comes back as a follower and truncates what it alone had
        cluster.resume(victims[0])
        cluster.wait_for_leaders(topic, PARTITIONS, isr=3)
    got = confluent_records(cluster, topic, PARTITIONS)
    assert sorted(int(v) for _, _, _, v, *_ in got) == list(range(n))
    for p in range(PARTITIONS):
        assert [o for q, o, *_ in got if q == p] == list(range(n // PARTITIONS))


def test_native_read_survives_leader_kill(spark, cluster_factory):
    from pyspark.sql import functions as F

    cluster = failover_cluster(cluster_factory)
    topic = topic_name("fr")
    cluster.create_topic(topic, partitions=PARTITIONS, rf=3)
    n = 90_000
    (spark.range(n, numPartitions=2)
     .select(F.col("id").cast("string").alias("value"), (F.col("id") % PARTITIONS).cast("int").alias("partition"))
     .write.format("kafkarepl").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", topic)
     .option("dataPlane", "native").mode("append").save())
    cluster.wait_for_leaders(topic, PARTITIONS, isr=3)  # every replica holds every record
    expected = confluent_records(cluster, topic, PARTITIONS)
    assert len(expected) == n

    # Many small tasks (8 per partition), so that most of them start after the kill and
    # find their partition's leader gone.
    df = reader(spark, cluster, subscribe=topic, dataPlane="native", maxRecordsPerPartition=str(n // PARTITIONS // 8))
    killer = LeaderKiller(spark, cluster, topic, done_tasks=2)
    killer.start()
    got = spark_records(df)
    killer.check()
    assert got == expected
