"""Executor side of a read: fetch exactly the offsets [start, end) of one partition with
confluent-kafka (librdkafka does fetching, decompression and leader changes in C) and
hand Spark Arrow record batches, not Python rows.

The consumer is assigned an explicit offset and never joins a group or commits:
Spark's checkpoint owns the offsets. Per message, Python only copies the fields into
column lists; columns are then built by Arrow in one call each.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from .offsets import DataLossError, OffsetRange

BATCH_ROWS = 8192       # rows per Arrow batch handed to Spark
POLL_S = 1.0            # one consume() wait; the range's overall limit is poll_timeout_ms


def consumer_config(kafka: Mapping[str, str], group_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        # librdkafka insists on a group id even for assign(); it is never joined.
        "group.id": group_id or f"spark-kafkarepl-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        # Spark's Kafka source reads up to the high watermark (the Java consumer's default).
        "isolation.level": "read_uncommitted",
        # A task reads one bounded range as fast as it can: librdkafka's defaults stop
        # fetching for fetch.queue.backoff.ms (1 s) whenever its queue holds
        # queued.min.messages (100k), which made a 500k-record read 7x slower (2.5 s vs 0.33 s).
        "fetch.queue.backoff.ms": 0,
        "queued.min.messages": 1000000,
    }
    conf.update(kafka)
    return conf


def _column_batch(pa: Any, schema: Any, r: OffsetRange, offsets: list, keys: list, values: list,
                  timestamps: list, ts_types: list, headers: list | None) -> Any:
    n = len(offsets)
    names = schema.names
    ts = pa.array(timestamps, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(schema.field("timestamp").type)
    cols = {
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "topic": pa.array([r.topic] * n, pa.string()),
        "partition": pa.array([r.partition] * n, pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": ts,
        "timestampType": pa.array(ts_types, pa.int32()),
    }
    if headers is not None:
        cols["headers"] = pa.array(headers, schema.field("headers").type)
    return pa.RecordBatch.from_arrays([cols[name] for name in names], schema=schema)


def read_range(kafka: Mapping[str, str], group_id: str | None, r: OffsetRange, schema: Any,
               fail_on_data_loss: bool, poll_timeout_ms: int) -> Iterator[Any]:
    """Arrow batches (schema: the source's Arrow schema) of the records of r, in offset order.
    Offsets missing inside the range (compaction, transaction markers) are skipped; an end
    that never arrives fails after poll_timeout_ms without progress."""
    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    if r.size <= 0:
        return
    with_headers = "headers" in schema.names
    consumer = Consumer(consumer_config(kafka, group_id))
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        next_offset = r.start
        deadline = time.monotonic() + poll_timeout_ms / 1000.0
        offsets: list[int] = []
        keys: list = []
        values: list = []
        timestamps: list = []
        ts_types: list[int] = []
        headers: list | None = [] if with_headers else None
        eof_at = -1

        def flush() -> Any:
            batch = _column_batch(pa, schema, r, offsets, keys, values, timestamps, ts_types, headers)
            for col in (offsets, keys, values, timestamps, ts_types):
                col.clear()
            if headers is not None:
                headers.clear()
            return batch

        while next_offset < r.end:
            msgs = consumer.consume(num_messages=min(BATCH_ROWS, r.end - next_offset), timeout=POLL_S)
            progressed = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # At the log end: everything below it was delivered, so offsets up to
                        # r.end that never came are gaps (compaction, markers). An end below
                        # r.end means truncation since planning, or a new leader's high
                        # watermark still catching up: wait for it unless loss is accepted.
                        at = m.offset()
                        if at is None:
                            continue  # no position given (librdkafka gives one): nothing learned
                        eof_at = at
                        if eof_at >= r.end or not fail_on_data_loss:
                            next_offset = r.end
                            break
                        continue
                    if err.fatal() or err.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                        if err.code() != KafkaError._FATAL and not fail_on_data_loss:
                            next_offset = r.end
                            break
                        raise DataLossError(f"kafkarepl: reading {r.topic}-{r.partition} [{r.start}, {r.end}) "
                                            f"at offset {next_offset}: {err.str()}")
                    if not err.retriable() and err.code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                        raise RuntimeError(f"kafkarepl: reading {r.topic}-{r.partition}: {err.str()}")
                    continue  # transient: librdkafka retries by itself
                off = m.offset()
                assert off is not None  # a delivered record has its offset
                if off >= r.end:
                    next_offset = r.end
                    break
                progressed = True
                next_offset = off + 1
                offsets.append(off)
                keys.append(m.key())
                values.append(m.value())
                ts_type, ts = m.timestamp()
                # librdkafka: 1 CreateTime, 2 LogAppendTime (0 none); Spark: 0 and 1.
                ts_types.append(ts_type - 1 if ts_type > 0 else 0)
                timestamps.append(ts if ts_type > 0 else None)
                if headers is not None:
                    h = m.headers()
                    assert not isinstance(h, dict)  # consumed: a list of (key, value); dicts are for producing
                    headers.append([{"key": k, "value": v} for k, v in h] if h else None)
            if len(offsets) >= BATCH_ROWS:
                yield flush()
            if progressed:
                deadline = time.monotonic() + poll_timeout_ms / 1000.0
            elif next_offset < r.end and time.monotonic() > deadline:
                if eof_at >= 0:
                    raise DataLossError(
                        f"kafkarepl: {r.topic}-{r.partition} ends at {eof_at}, below the planned end {r.end}: "
                        "the log was truncated (set failOnDataLoss=false to accept the loss)")
                raise TimeoutError(
                    f"kafkarepl: no records from {r.topic}-{r.partition} for {poll_timeout_ms} ms "
                    f"(at offset {next_offset}, reading up to {r.end}); see kafkaConsumer.pollTimeoutMs")
        if offsets:
            yield flush()
    finally:
        consumer.close()
