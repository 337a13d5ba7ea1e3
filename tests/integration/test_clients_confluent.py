"""confluent-kafka (librdkafka) against a real broker process: produce with and without
idempotence in every codec, with keys, null values, headers and explicit timestamps;
consume back with assign() and check every field and offset; ListOffsets (earliest,
latest, by timestamp) and the Fetch long poll waking when data arrives."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition

from tests.fixtures.cluster import TestCluster
from tests.fixtures.zookeeper import new_chroot

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(zookeeper, tmp_path_factory):
    """One broker shared by the tests of this module (each test uses its own topics)."""
    c = TestCluster(new_chroot(zookeeper), tmp_path_factory.mktemp("confluent"), 1, {})
    try:
        yield c.start()
    finally:
        c.shutdown()


def records(n: int) -> list[dict]:
    """Keys (some null), values (some null), headers (some none, some repeated, some
    with null values) and explicit, non-monotonic timestamps."""
    out = []
    for i in range(n):
        out.append({
            "key": None if i % 4 == 1 else f"key-{i}".encode(),
            "value": None if i % 5 == 2 else (f"value-{i}-".encode() * (1 + i % 7)),
            "headers": [] if i % 3 == 0 else [("h1", f"x{i}".encode()), ("h2", None), ("h1", b"dup")][: 1 + i % 3],
            "timestamp": BASE_TS + (i * 1000 if i % 6 else i * 1000 - 500),
        })
    return out


def produce(bootstrap: str, topic: str, recs: list[dict], **conf) -> list:
    delivered: list = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})  # conf may override linger
    for r in recs:
        p.produce(topic, value=r["value"], key=r["key"], headers=r["headers"] or None,
                  timestamp=r["timestamp"], partition=0,
                  on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(20) == 0, "messages left undelivered"
    return delivered


def consume_all(bootstrap: str, topic: str, count: int, partition: int = 0, start: int = 0,
                timeout: float = 20) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, partition, start)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m)
        return out
    finally:
        c.close()


def dump_segments(broker: TestCluster, topic: str, partition: int = 0) -> list[dict]:
    """The stored batches of a partition, as kafkarepl dump-log reads them from disk."""
    pdir = broker.brokers[1].config.parent / "logs" / f"{topic}-{partition}"
    segs = sorted(pdir.glob("*.log"))
    assert segs, f"no segment in {pdir}"
    r = subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", "dump-log", "--json", *map(str, segs)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [b for doc in json.loads(r.stdout) for b in doc["batches"]]


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_field(broker: TestCluster, codec: str, idempotent: bool) -> None:
    topic = f"rt-{codec}-{int(idempotent)}"
    broker.create_topic(topic, 1, 1)
    recs = records(40)
    # One batch (linger): librdkafka sends a batch uncompressed when compressing does not
    # shrink it, which happens to a lone small record.
    conf = {"compression.type": codec, "enable.idempotence": idempotent, "linger.ms": 200}
    if not idempotent:
        conf["acks"] = 1
    delivered = produce(broker.bootstrap, topic, recs, **conf)
    assert [e for e, _ in delivered] == [None] * len(recs)
    assert sorted(o for _, o in delivered) == list(range(len(recs)))

    msgs = consume_all(broker.bootstrap, topic, len(recs))
    assert [m.offset() for m in msgs] == list(range(len(recs)))
    for m, r in zip(msgs, recs, strict=True):
        assert m.topic() == topic and m.partition() == 0
        assert m.key() == r["key"]
        assert m.value() == r["value"]
        assert (m.headers() or []) == r["headers"]
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, r["timestamp"])

    stored = dump_segments(broker, topic)
    assert sum(b["count"] for b in stored) == len(recs)
    codecs = {b["compression"] for b in stored}
    # librdkafka sends a batch uncompressed when compressing would not shrink it
    # (tiny batches), so "none" may appear beside the codec; the codec must appear.
    assert codec in codecs and codecs <= {codec, "none"}, codecs
    assert all(b["timestampType"] == "CreateTime" for b in stored)
    if idempotent:
        assert all(b["producerId"] >= 0 for b in stored), stored
        assert stored[0]["baseSequence"] == 0
    else:
        assert all(b["producerId"] == -1 for b in stored), stored


def _produce_stamps(broker: TestCluster, topic: str) -> list[int]:
    """12 records, timestamps 1000 ms apart, in 3 batches (4 + 5 + 3 records)."""
    from tests.batches import build_batch
    from tests.integration.test_recovery import produce as produce_batch

    broker.create_topic(topic, 1, 1)
    stamps = [BASE_TS + 1000 * i for i in range(12)]
    # Batches built exactly (a client under load may split them differently).
    port = next(iter(broker.brokers.values())).port
    for chunk in (stamps[:4], stamps[4:9], stamps[9:]):
        r = produce_batch(port, topic, bytes(build_batch([b"v"] * len(chunk), timestamp=chunk)))
        assert r["error_code"] == 0, r
    assert [b["count"] for b in dump_segments(broker, topic)] == [4, 5, 3]
    return stamps


def _offset_at(c: Consumer, topic: str, ts: int) -> int:
    [tp] = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
    assert tp.error is None, tp.error
    return tp.offset


def test_list_offsets_earliest_latest_and_batch_boundaries(broker: TestCluster) -> None:
    topic = "list-offsets"
    stamps = _produce_stamps(broker, topic)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        assert (low, high) == (0, 12)
        assert _offset_at(c, topic, stamps[0]) == 0
        assert _offset_at(c, topic, stamps[0] - 10_000) == 0  # before everything: the first record
        assert _offset_at(c, topic, stamps[4]) == 4  # first record of the second batch
        assert _offset_at(c, topic, stamps[9]) == 9  # first record of the third batch
        assert _offset_at(c, topic, stamps[3] + 1) == 4  # between batches: the next one
        assert _offset_at(c, topic, stamps[11] + 1) == -1  # after everything: no offset (END)
        assert _offset_at(c, topic, -2) == 0  # OFFSET_BEGINNING
        assert _offset_at(c, topic, -1) == 12  # OFFSET_END
    finally:
        c.close()


def test_list_offsets_by_timestamp_inside_a_batch(broker: TestCluster) -> None:
    """Kafka answers with the first RECORD whose timestamp >= target, also in the
    middle of a batch (LogSegment.findOffsetByTimestamp walks the batch's records)."""
    topic = "list-offsets-mid"
    stamps = _produce_stamps(broker, topic)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo2"})
    try:
        assert _offset_at(c, topic, stamps[5]) == 5  # exact hit inside the second batch
        assert _offset_at(c, topic, stamps[5] + 1) == 6  # next record with timestamp >= target
        assert _offset_at(c, topic, stamps[11]) == 11  # last record of the third batch
    finally:
        c.close()


def test_fetch_long_poll_wakes_on_produce(broker: TestCluster) -> None:
    """A consumer parked in a long Fetch (fetch.wait.max.ms = 20 s, min bytes 1) gets a
    record produced after it started waiting long before that wait would expire."""
    topic = "long-poll"
    broker.create_topic(topic, 1, 1)
    one = [{"key": b"k", "value": b"first", "headers": [], "timestamp": BASE_TS}]
    produce(broker.bootstrap, topic, one, acks=1)
    events: list[tuple[str, float]] = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lp", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 20000, "fetch.min.bytes": 1, "socket.timeout.ms": 60000})
    got: list = []

    def poll_loop() -> None:
        deadline = time.monotonic() + 40
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            events.append((m.value().decode(), time.monotonic()))
            got.append(m)

    try:
        c.assign([TopicPartition(topic, 0, 0)])
        t = threading.Thread(target=poll_loop)
        t.start()
        # Once the consumer holds offset 0, its next Fetch (offset 1 = HW) is the long poll.
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got, "the first record never arrived"
        time.sleep(0.5)  # let the next Fetch reach the broker and park
        produced_at = time.monotonic()
        events.append(("produce", produced_at))
        produce(broker.bootstrap, topic, [{**one[0], "value": b"wake"}], acks=1)
        t.join(40)
        assert [m.value() for m in got] == [b"first", b"wake"]
        assert [m.offset() for m in got] == [0, 1]
        assert [e for e, _ in events] == ["first", "produce", "wake"]
        # Generous bound: well under the 20 s fetch.wait.max.ms (not a speed test).
        waited = events[-1][1] - produced_at
        assert waited < 10, f"record arrived {waited:.1f}s after produce: the long poll did not wake"
    finally:
        c.close()


def test_fetch_error_partition_reaches_librdkafka(broker: TestCluster) -> None:
    """A Fetch answered with an error carries an empty record set, not a null one: librdkafka
    rejects null in the flexible versions (v12 here) as a parse failure and refetches in a
    loop, so the consumer would never see OFFSET_OUT_OF_RANGE."""
    from confluent_kafka import KafkaError

    topic = "fetch-error"
    broker.create_topic(topic, 1, 1)
    produce(broker.bootstrap, topic, records(1), acks=1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fe", "enable.auto.commit": False,
                  "auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, 0, 1000)])  # past the log end
        err = None
        deadline = time.monotonic() + 20
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is not None:
                err = m.error()
        assert err is not None, "no error reached the consumer"
        assert err.code() == KafkaError._AUTO_OFFSET_RESET, err
        assert "out of range" in err.str().lower(), err
    finally:
        c.close()
