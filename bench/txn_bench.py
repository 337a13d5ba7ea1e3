"""Transactions vs plain acks=all, and read_committed vs read_uncommitted, in one run on
one fresh 3-broker cluster (issue 13's speed figures). Prints one JSON line per figure.

    python bench/txn_bench.py [--records 200000]

produce-acks-all      confluent-kafka, acks=all, idempotent, 100-byte values, 6 partitions RF=3
produce-txn-10000     the same records in transactions of 10,000 records
produce-txn-100ms     the same records, a transaction committed every 100 ms
consume-uncommitted   one consumer reading the transactional topic, read_uncommitted
consume-committed     the same topic, read_committed (filtered by the LSO and aborted list)
"""

from __future__ import annotations

import argparse
import json
import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkarepl import LocalCluster

VALUE = os.urandom(100)


def produce(bootstrap: str, topic: str, n: int, txn_every: int | None = None, txn_ms: float | None = None) -> float:
    cfg = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
           "queue.buffering.max.messages": 500000}
    if txn_every or txn_ms:
        cfg["transactional.id"] = f"bench-{topic}"
    p = Producer(cfg)
    transactional = "transactional.id" in cfg
    # Start-up out of the figure: librdkafka's idempotent producer waits ~0.5 s for its
    # producer id timer before the first InitProducerId, a transactional one does not.
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, VALUE)
        p.commit_transaction(30)
        p.begin_transaction()
    else:
        p.produce(topic, VALUE)
        p.flush(30)
    t0 = last = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.01)
        if transactional:
            now = time.perf_counter() if txn_ms else 0.0
            if (txn_every and (i + 1) % txn_every == 0) or (txn_ms and (now - last) * 1000 >= txn_ms):
                p.commit_transaction(60)
                p.begin_transaction()
                last = now
    if transactional:
        p.commit_transaction(60)
    else:
        p.flush(60)
    return n / (time.perf_counter() - t0)


def consume(bootstrap: str, topic: str, partitions: int, isolation: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{isolation}-{time.time()}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 10})  # librdkafka backs off 1 s when its queue is full
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
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    args = ap.parse_args()
    n = args.records
    with LocalCluster(brokers=3, broker_properties={"transaction.state.log.num.partitions": "6",
                                                    "offsets.topic.num.partitions": "6"}) as cl:
        b = cl.bootstrap_servers
        for t in ("plain", "txn-10000", "txn-100ms"):
            cl.create_topic(t, partitions=6, replication_factor=3, configs={"min.insync.replicas": 2})
        figures = {
            "produce-acks-all": produce(b, "plain", n),
            "produce-txn-10000": produce(b, "txn-10000", n, txn_every=10_000),
            "produce-txn-100ms": produce(b, "txn-100ms", n, txn_ms=100),
            "consume-uncommitted": consume(b, "txn-10000", 6, "read_uncommitted", n),
            "consume-committed": consume(b, "txn-10000", 6, "read_committed", n),
        }
    base = figures["produce-acks-all"]
    for k, v in figures.items():
        ref = base if k.startswith("produce") else figures["consume-uncommitted"]
        print(json.dumps({"bench": k, "records": n, "rec_per_s": round(v), "ratio": round(v / ref, 3),
                          "load1": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
