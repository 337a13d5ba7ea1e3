"""Executor side of a write: send a task's rows with an idempotent, acks=all
confluent-kafka producer, flush, and raise if any record was not acknowledged, so the
Spark task fails instead of silently dropping data.

Input is either Arrow record batches (DataSourceArrowWriter) or Spark Rows (the plain
stream writer of older PySpark); both become column lists before the produce loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")
ROW_CHUNK = 4096


def producer_config(kafka: Mapping[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = {"acks": "all", "enable.idempotence": True}
    conf.update(kafka)  # explicit kafka.* settings win, as in Spark's sink
    return conf


def _arrow_columns(batch: Any) -> dict[str, list]:
    import pyarrow as pa

    out = {}
    for name in SINK_COLUMNS:
        if name not in batch.schema.names:
            continue
        col = batch.column(name)
        if name in ("key", "value") and pa.types.is_string(col.type):
            col = col.cast(pa.binary())  # zero-copy: same UTF-8 bytes
        out[name] = col.to_pylist()
    return out


def _row_columns(rows: list) -> dict[str, list]:
    fields = set(rows[0].__fields__) if rows else set()
    return {name: [r[name] for r in rows] for name in SINK_COLUMNS if name in fields}


def column_chunks(items: Iterable[Any]) -> Iterator[dict[str, list]]:
    """{column: values} chunks from Arrow batches or Rows."""
    import pyarrow as pa

    rows: list = []
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield _arrow_columns(item)
        else:
            rows.append(item)
            if len(rows) >= ROW_CHUNK:
                yield _row_columns(rows)
                rows = []
    if rows:
        yield _row_columns(rows)


def _bytes(v: Any) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def _headers(hs: list | None) -> list[tuple[str, bytes | None]] | None:
    if not hs:
        return None
    out = []
    for h in hs:
        if h["key"] is None:
            raise ValueError("kafkarepl: a header has a null key")
        out.append((h["key"], _bytes(h["value"])))
    return out


class DeliveryError(RuntimeError):
    """Records the brokers did not acknowledge; the Spark task fails with it."""


def produce_all(kafka: Mapping[str, str], topic_option: str | None, items: Iterable[Any],
                flush_timeout_ms: int) -> dict[str, int]:
    """Send every row; return {topic: records acknowledged}. Raises DeliveryError if any
    record failed or is still unacknowledged after flush_timeout_ms."""
    from confluent_kafka import Producer

    producer = Producer(producer_config(kafka))
    failures: list[str] = []
    acked: dict[str, int] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            where = msg.topic() if msg.partition() in (None, -1) else f"{msg.topic()}-{msg.partition()}"
            failures.append(f"{where}: {err.str()}")
        else:
            acked[msg.topic()] = acked.get(msg.topic(), 0) + 1

    sent = 0
    for cols in column_chunks(items):
        values = cols["value"]
        n = len(values)
        keys = cols.get("key") or [None] * n
        topics = cols.get("topic") or [None] * n
        partitions = cols.get("partition") or [None] * n
        headers = cols.get("headers") or [None] * n
        for i in range(n):
            topic = topic_option or topics[i]
            if not topic:
                raise ValueError("kafkarepl: a row has a null topic and no 'topic' option is set")
            kw: dict[str, Any] = {"on_delivery": on_delivery}
            if partitions[i] is not None:
                kw["partition"] = partitions[i]
            h = _headers(headers[i])
            if h:
                kw["headers"] = h
            while True:
                try:
                    producer.produce(topic, _bytes(values[i]), _bytes(keys[i]), **kw)
                    break
                except BufferError:
                    producer.poll(0.05)  # local queue full: serve delivery reports, retry
            sent += 1
            if failures:
                break
        producer.poll(0)
        if failures:
            break
    deadline = time.monotonic() + flush_timeout_ms / 1000.0
    remaining = producer.flush(0)
    while remaining and time.monotonic() < deadline:
        remaining = producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))
    if failures or remaining:
        detail = "; ".join(failures[:5]) + (f" (and {len(failures) - 5} more)" if len(failures) > 5 else "")
        raise DeliveryError(
            f"kafkarepl: {len(failures)} record(s) failed, {remaining} unacknowledged after flush, "
            f"of {sent} sent: {detail or 'flush timed out (flushTimeoutMs)'}")
    return acked
