"""PySpark data source `kafkarepl`: read and write kafkarepl topics from Spark.

Spark's built-in Kafka connector is a JVM jar and owns the name "kafka"; this is a
Python Data Source (PySpark 4.x) with the same schema and option names::

    from kafkarepl.spark import KafkareplDataSource
    spark.dataSource.register(KafkareplDataSource)

    df = (spark.read.format("kafkarepl")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())                      # key, value, topic, partition, offset, timestamp, timestampType

    (df.selectExpr("key", "upper(cast(value as string)) AS value")
       .write.format("kafkarepl")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
       .option("topic", "events-upper")
       .mode("append").save())

Streaming: spark.readStream.format("kafkarepl") / df.writeStream.format("kafkarepl").
See docs/spark.md for every option. Needs `pyspark>=4.0`, `pyarrow` and
`confluent-kafka`. Executors move records with kafkarepl's own client and the C Arrow
codec (fetch.py, sink.py; `dataPlane=native`) unless a `kafka.*` setting needs librdkafka
(consume.py, produce.py). The submodules options, offsets and native are pure Python and
import without Spark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KafkareplDataSource"]


def __getattr__(name: str) -> Any:
    # Imported on first use so that `kafkarepl.spark.options` works without PySpark.
    if name == "KafkareplDataSource":
        from .source import KafkareplDataSource

        return KafkareplDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
