"""kafka-python and aiokafka against a real broker process: the same round trip as the
confluent-kafka tests (keys, null values, headers, explicit timestamps, codecs), and
idempotence really on where it should be (kafka-python 3.x turns it on by default and
silently drops it when it takes the broker for a pre-0.11 one)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.fixtures.cluster import TestCluster
from tests.integration.test_clients_confluent import broker, dump_segments, records

pytestmark = pytest.mark.integration

__all__ = ["broker"]  # the module-scoped one-broker fixture, shared with the confluent tests

TIMESTAMP_CREATE_TIME = 0  # kafka-python / aiokafka ConsumerRecord.timestamp_type


def py_records(n: int) -> list[dict]:
    """The confluent test records, minus what kafka-python refuses to send: a header
    with a null value (b"" instead) and a record with neither key nor value."""
    out = []
    for i, r in enumerate(records(n)):
        r = dict(r, headers=[(k, b"" if v is None else v) for k, v in r["headers"]])
        if r["key"] is None and r["value"] is None:
            r["key"] = f"key-{i}".encode()
        out.append(r)
    return out


def _headers(r: dict) -> list[tuple[str, bytes]]:
    return list(r["headers"])


def check_records(got: list, recs: list[dict]) -> None:
    assert [m.offset for m in got] == list(range(len(recs)))
    for m, r in zip(got, recs, strict=True):
        assert m.partition == 0
        assert m.key == r["key"]
        assert m.value == r["value"]
        assert list(m.headers) == _headers(r)
        assert m.timestamp == r["timestamp"]
        assert m.timestamp_type == TIMESTAMP_CREATE_TIME


# ------------------------------------------------------------------ kafka-python ----
def kp_consume(bootstrap: str, topic: str, count: int, timeout: float = 20) -> list:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out: list = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                out.extend(msgs)
        return out
    finally:
        c.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip_idempotent_by_default(broker: TestCluster, codec: str | None) -> None:
    topic = f"kp-{codec or 'none'}"
    broker.create_topic(topic, 1, 1)
    recs = py_records(30)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5)
    try:
        futures = [p.send(topic, value=r["value"], key=r["key"], headers=_headers(r),
                          timestamp_ms=r["timestamp"], partition=0) for r in recs]
        p.flush(20)
        metas = [f.get(timeout=10) for f in futures]
        # The default (idempotence on) survived version negotiation with our broker.
        assert p.config["enable_idempotence"] is True, "kafka-python silently disabled idempotence"
        pid = p._transaction_manager.producer_id_and_epoch.producer_id
        assert pid >= 0, "kafka-python never got a producer id"
    finally:
        p.close(5)
    assert [m.offset for m in metas] == list(range(len(recs)))
    check_records(kp_consume(broker.bootstrap, topic, len(recs)), recs)
    stored = dump_segments(broker, topic)
    assert sum(b["count"] for b in stored) == len(recs)
    assert {b["compression"] for b in stored} == {codec or "none"}
    assert {b["producerId"] for b in stored} == {pid}


def test_kafka_python_without_idempotence(broker: TestCluster) -> None:
    topic = "kp-plain"
    broker.create_topic(topic, 1, 1)
    recs = py_records(10)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, acks=1)
    try:
        for r in recs:
            p.send(topic, value=r["value"], key=r["key"], headers=_headers(r), timestamp_ms=r["timestamp"],
                   partition=0).get(timeout=10)
    finally:
        p.close(5)
    check_records(kp_consume(broker.bootstrap, topic, len(recs)), recs)
    assert {b["producerId"] for b in dump_segments(broker, topic)} == {-1}


# ----------------------------------------------------------------------- aiokafka ----
async def aio_round_trip(bootstrap: str, topic: str, recs: list[dict], **conf) -> tuple[list, list, int | None]:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
    await p.start()
    try:
        futs = [await p.send(topic, value=r["value"], key=r["key"], headers=_headers(r),
                             timestamp_ms=r["timestamp"], partition=0) for r in recs]
        metas = [await asyncio.wait_for(f, 20) for f in futs]
        pid = p._txn_manager.producer_id if p._txn_manager is not None else None
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        tp = AioTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < len(recs) and time.monotonic() < deadline:
            for msgs in (await c.getmany(tp, timeout_ms=500)).values():
                got.extend(msgs)
    finally:
        await c.stop()
    return metas, got, pid


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
def test_aiokafka_round_trip(broker: TestCluster, codec: str | None, idempotent: bool) -> None:
    topic = f"aio-{codec or 'none'}-{int(idempotent)}"
    broker.create_topic(topic, 1, 1)
    recs = py_records(30)
    conf = {"compression_type": codec, "enable_idempotence": idempotent}
    metas, got, pid = asyncio.run(asyncio.wait_for(aio_round_trip(broker.bootstrap, topic, recs, **conf), 60))
    assert [m.offset for m in metas] == list(range(len(recs)))
    check_records(got, recs)
    stored = dump_segments(broker, topic)
    assert sum(b["count"] for b in stored) == len(recs)
    assert {b["compression"] for b in stored} == {codec or "none"}
    if idempotent:
        assert pid is not None and pid >= 0
        assert {b["producerId"] for b in stored} == {pid}
    else:
        assert {b["producerId"] for b in stored} == {-1}
