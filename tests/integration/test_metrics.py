"""The metrics operators watch first, scraped from real brokers after real clients'
traffic: Kafka's BrokerTopicMetrics (bytes and messages in and out per topic, the
replication bytes, rejected bytes) and RequestMetrics (requests by version, errors by
code, TotalTimeMs quantiles for Produce, FetchConsumer and FetchFollower)."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.integration.chaos import wait_until

pytestmark = pytest.mark.integration

N = 2000
VALUE = b"v" * 200


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {m.group(1) + ("{" + m.group(2) + "}" if m.group(2) else ""): float(m.group(3)) for m in
            re.finditer(r'^(kafka_\w+)\{broker="\d+",?(.*?)\} (\S+)$', text, re.M)}


def test_topic_and_request_metrics_after_real_traffic(cluster_factory) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer
    from confluent_kafka import TopicPartition as TP

    c = cluster_factory(2, start=False)
    ports = c.serve_metrics()
    c.start()
    c.create_topic("m", 1, 2, configs={"max.message.bytes": "10000"})
    leaders = c.wait_for_leaders("m", 1, isr=2)
    leader = c.leader_of("m")
    follower = next(b for b in c.brokers if b != leader)
    before = scrape(ports[leader])
    assert before.get('kafka_server_brokertopicmetrics_bytesin_total{topic="m"}', 0) == 0, leaders

    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 4000,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})
    for i in range(N):
        p.produce("m", key=b"k%d" % i, value=VALUE)
    assert p.flush(20) == 0 and not errors, errors[:3]
    # One record over max.message.bytes: refused, its bytes counted as rejected.
    p.produce("m", value=b"x" * 20_000)
    p.flush(20)
    assert len(errors) == 1 and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g", "enable.auto.commit": False})
    cons.assign([TP("m", 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < N and time.monotonic() < deadline:
        got += len([m for m in cons.consume(500, 1) if m.error() is None])
    cons.close()
    assert got == N

    wait_until(lambda: scrape(ports[follower]).get("kafka_server_brokertopicmetrics_replicationbytesin_total", 0)
               > N * len(VALUE), 20, "the follower's replication bytes")
    lm, fm = scrape(ports[leader]), scrape(ports[follower])
    t = "kafka_server_brokertopicmetrics_"
    assert lm[f'{t}messagesin_total{{topic="m"}}'] == N
    assert N * len(VALUE) < lm[f'{t}bytesin_total{{topic="m"}}'] < 2 * N * (len(VALUE) + 20)
    assert lm[f"{t}bytesin_total"] >= lm[f'{t}bytesin_total{{topic="m"}}']  # all topics
    assert lm[f'{t}bytesrejected_total{{topic="m"}}'] > 20_000
    assert lm[f'{t}bytesout_total{{topic="m"}}'] >= N * len(VALUE)  # the consumer's reads
    assert lm[f"{t}replicationbytesout_total"] >= N * len(VALUE)  # served to the follower
    assert fm.get(f'{t}bytesin_total{{topic="m"}}', 0) == 0  # a follower appends no produce
    assert lm[f'{t}totalproducerequests_total{{topic="m"}}'] >= 2
    assert lm[f'{t}failedproducerequests_total{{topic="m"}}'] == 0  # too large is not a failure

    r = "kafka_network_requestmetrics_"
    produce_versions = {k: v for k, v in lm.items() if k.startswith(f'{r}requests_total{{request="Produce"')}
    assert produce_versions and sum(produce_versions.values()) >= 2
    assert lm[f'{r}errors_total{{request="Produce",error="NONE"}}'] >= 1
    assert lm[f'{r}errors_total{{request="Produce",error="MESSAGE_TOO_LARGE"}}'] >= 1
    for name, m in (("Produce", lm), ("FetchConsumer", lm), ("FetchFollower", lm), ("Metadata", lm),
                    ("LeaderAndIsr", fm)):
        assert m[f'{r}totaltimems_count{{request="{name}"}}'] >= 1, name
        q99 = m[f'{r}totaltimems{{request="{name}",quantile="0.99"}}']
        assert 0 < q99 <= 60_000, (name, q99)
        assert m[f'{r}totaltimems{{request="{name}",quantile="0.5"}}'] <= q99
