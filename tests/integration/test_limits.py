"""Size limits on a real broker: a batch over message.max.bytes (broker) or
max.message.bytes (topic) is refused with MESSAGE_TOO_LARGE and nothing is written;
the limit applies to the batch as sent (compressed), as in Kafka."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer

from kafkarepl.errors import ErrorCode
from tests.batches import build_batch
from tests.integration.test_recovery import fetch_records, log_end_offset, produce

pytestmark = pytest.mark.integration

BROKER_LIMIT = 2000
TOPIC_LIMIT = 1000


@pytest.fixture
def limited(cluster_factory):
    c = cluster_factory(1, message_max_bytes=BROKER_LIMIT)
    c.create_topic("default-limit", 1, 1)
    c.create_topic("topic-limit", 1, 1, configs={"max.message.bytes": TOPIC_LIMIT})
    return c


def test_batch_over_broker_message_max_bytes(limited) -> None:
    port = limited.brokers[1].port
    small = bytes(build_batch(3, value_size=100))
    assert produce(port, "default-limit", small)["error_code"] == 0
    leo = log_end_offset(port, "default-limit")
    assert leo == 3

    big = bytes(build_batch(1, value_size=BROKER_LIMIT + 100))
    assert len(big) > BROKER_LIMIT
    r = produce(port, "default-limit", big)
    assert r["error_code"] == ErrorCode.MESSAGE_TOO_LARGE == 10, r
    assert log_end_offset(port, "default-limit") == leo
    assert [o for o, *_ in fetch_records(port, "default-limit")] == [0, 1, 2]

    # Just under the limit still goes in.
    fits = bytes(build_batch(1, value_size=BROKER_LIMIT - 200))
    assert len(fits) <= BROKER_LIMIT
    assert produce(port, "default-limit", fits)["error_code"] == 0
    assert log_end_offset(port, "default-limit") == leo + 1


def test_batch_over_topic_max_message_bytes(limited) -> None:
    port = limited.brokers[1].port
    mid = bytes(build_batch(1, value_size=TOPIC_LIMIT + 200))
    assert TOPIC_LIMIT < len(mid) <= BROKER_LIMIT
    r = produce(port, "topic-limit", mid)
    assert r["error_code"] == ErrorCode.MESSAGE_TOO_LARGE, r
    assert log_end_offset(port, "topic-limit") == 0
    # The same batch fits the broker-wide limit on a topic without its own.
    assert produce(port, "default-limit", mid)["error_code"] == 0


def test_limit_is_on_the_compressed_batch(limited) -> None:
    port = limited.brokers[1].port
    compressible = bytes(build_batch([b"\0" * 20_000], compression="gzip"))
    assert len(compressible) < TOPIC_LIMIT
    r = produce(port, "topic-limit", compressible)
    assert r["error_code"] == 0, r
    [(offset, _ts, _k, value)] = fetch_records(port, "topic-limit")
    assert (offset, value) == (0, b"\0" * 20_000)


def test_confluent_producer_sees_message_too_large(limited) -> None:
    errors: list = []
    p = Producer({"bootstrap.servers": limited.bootstrap, "acks": 1, "compression.type": "none",
                  "message.timeout.ms": 10000})
    p.produce("default-limit", value=b"y" * (BROKER_LIMIT * 2), partition=0,
              on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(15) == 0  # alone in its batch
    p.produce("default-limit", value=b"ok", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(15) == 0
    codes = {e.code() if e is not None else None for e in errors}
    assert KafkaError.MSG_SIZE_TOO_LARGE in codes, errors
    assert None in codes  # the small one went through
    port = limited.brokers[1].port
    assert [v for _o, _t, _k, v in fetch_records(port, "default-limit")] == [b"ok"]


def test_fetch_max_bytes_caps_every_fetch_answer(cluster_factory) -> None:
    """KIP-541's broker fetch.max.bytes: a Fetch asking for 64 MiB gets at most the
    broker's cap of record bytes (whole batches), the rest on the next fetches."""
    from kafkarepl.cli import wire
    from kafkarepl.protocol import ApiKey

    cap = 65536
    c = cluster_factory(1, fetch_max_bytes=cap)
    c.create_topic("capped", 3, 1)
    port = c.brokers[1].port
    batch = bytes(build_batch(1, value_size=20000))
    for p in range(3):
        for _ in range(4):
            assert produce(port, "capped", batch, partition=p)["error_code"] == 0

    def fetch(offsets: dict[int, int]) -> dict[int, int]:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "capped", "partitions": [{
                    "partition": p, "current_leader_epoch": -1, "fetch_offset": o,
                    "log_start_offset": -1, "partition_max_bytes": 64 << 20} for p, o in offsets.items()]}],
                "forgotten_topics_data": [], "rack_id": ""}
        resp = wire.call("127.0.0.1", port, ApiKey.FETCH, 11, body, timeout=15)
        return {p["partition_index"]: len(p["records"] or b"") for p in resp["responses"][0]["partitions"]}

    sizes = fetch({0: 0, 1: 0, 2: 0})
    assert 0 < sum(sizes.values()) <= cap, sizes
    assert sum(sizes.values()) > cap - 2 * len(batch), sizes  # filled with whole batches
    # Every byte comes, over more fetches: 4 batches per partition, 3 at most per answer.
    assert fetch({2: 3})[2] == len(batch)
