"""Client quotas (kafka-configs.sh --entity-type users/clients): set and described with
Kafka's Java AdminClient, kept in ZooKeeper where Kafka keeps them, picked up by every
broker, and enforced on real producers and consumers (librdkafka), which see the throttle."""

from __future__ import annotations

import json
import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from tests import java_tools
from tests.integration.chaos import wait_until

pytestmark = pytest.mark.integration

PRODUCE_RATE, CONSUME_RATE = 1_000_000, 500_000  # bytes/s
VALUE = bytes(range(256)) * 40  # 10 KB


def alter(port: int, entity: dict[str, str | None], ops: dict[str, float | None]) -> dict:
    body = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                         "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()]}],
            "validate_only": False}
    return wire.call("127.0.0.1", port, ApiKey.ALTER_CLIENT_QUOTAS, 1, body)


def describe(port: int) -> dict[tuple, dict[str, float]]:
    resp = wire.call("127.0.0.1", port, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    assert resp["error_code"] == 0, resp
    return {tuple(sorted((e["entity_type"], e["entity_name"]) for e in entry["entity"])):
            {v["key"]: v["value"] for v in entry["values"]} for entry in resp["entries"]}


def test_java_admin_alters_and_describes_client_quotas(cluster_factory) -> None:
    c = cluster_factory(2)
    out = java_tools.run("client-quotas", f"127.0.0.1:{c.brokers[1].port}")
    assert out == ("bad=InvalidRequestException alice=1 defaults=1 "
                   "all=client-id=<default>:{consumer_byte_rate=2048.0};"
                   "client-id=app,user=alice:{producer_byte_rate=1024.0}"), out
    # where Kafka keeps them, so Kafka's own tools and brokers read the same
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=c.zk_connect)
    zk.start()
    try:
        data, _ = zk.get("/config/users/alice/clients/app")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
        data, _ = zk.get("/config/clients/<default>")
        assert json.loads(data)["config"] == {"consumer_byte_rate": "2048"}
    finally:
        zk.stop()
    # the other broker learned them from the change notifications
    want = {(("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1024.0},
            (("client-id", None),): {"consumer_byte_rate": 2048.0}}
    wait_until(lambda: describe(c.brokers[2].port) == want, 15, "broker 2 has the quotas")
    # and a restarted broker loads them from ZooKeeper
    c.restart(2)
    assert describe(c.brokers[2].port) == want


def _produce(c, topic: str, client_id: str, n: int) -> tuple[float, int]:
    """Seconds to produce and acknowledge n 10 KB records, and the largest throttle time
    librdkafka saw."""
    from confluent_kafka import Producer

    throttles: list[int] = []

    def stats(text: str) -> None:
        for b in json.loads(text)["brokers"].values():
            throttles.append(b.get("throttle", {}).get("max", 0))

    delivered: list[int] = []
    # 64 KB batches: the throttle is felt request by request, not after three of 1 MB
    p = Producer({"bootstrap.servers": c.bootstrap, "client.id": client_id, "linger.ms": 5, "batch.size": 65536,
                  "compression.type": "none", "statistics.interval.ms": 200, "stats_cb": stats,
                  "message.timeout.ms": 120_000})
    start = time.monotonic()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=0, on_delivery=lambda err, _m: delivered.append(0 if err else 1))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0
    elapsed = time.monotonic() - start
    time.sleep(0.5)
    p.poll(0)  # the last statistics
    assert sum(delivered) == n
    return elapsed, max(throttles, default=0)


def _consume(c, topic: str, client_id: str, n: int) -> tuple[float, int]:
    from confluent_kafka import Consumer, TopicPartition

    throttles: list[int] = []

    def stats(text: str) -> None:
        for b in json.loads(text)["brokers"].values():
            throttles.append(b.get("throttle", {}).get("max", 0))

    cons = Consumer({"bootstrap.servers": c.bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
                     "enable.auto.commit": False, "statistics.interval.ms": 200, "stats_cb": stats,
                     # small fetches, so the throttle is felt fetch by fetch; no prefetch far ahead
                     "max.partition.fetch.bytes": 65536, "queued.max.messages.kbytes": 1024})
    cons.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.monotonic()
    deadline = start + 120
    while got < n and time.monotonic() < deadline:
        for m in cons.consume(100, 0.5):
            assert m.error() is None, m.error()
            assert m.value() == VALUE
            got += 1
    elapsed = time.monotonic() - start
    cons.close()
    assert got >= n  # throttled answers are empty, never lossy
    return elapsed, max(throttles, default=0)


def test_producer_and_consumer_over_their_quotas_are_slowed_to_them(cluster_factory) -> None:
    # 3 windows of 1 s: a client may burst 2 s of its quota, then its rate is held to it
    c = cluster_factory(2, **{"quota.window.num": "3"})
    c.create_topic("q", 1, 2)
    leader = c.leader_of("q")
    other = next(b for b in c.brokers if b != leader)
    # set through the broker that does not lead: the leader learns it by notification
    for entity, key, rate in (({"client-id": "slow-p"}, "producer_byte_rate", PRODUCE_RATE),
                              ({"user": None, "client-id": "slow-c"}, "consumer_byte_rate", CONSUME_RATE)):
        resp = alter(c.brokers[other].port, entity, {key: float(rate)})
        assert resp["entries"][0]["error_code"] == 0, resp
    wait_until(lambda: len(describe(c.brokers[leader].port)) == 2, 15, "the leader has the quotas")

    # 5 MB: a burst of 2-3 s of the quota (the padded window), then 1 MB/s; the last
    # request's throttle is not waited for by the producer: about 2 s, at least 1
    n = 500
    free_s, free_throttle = _produce(c, "q", "free-p", n)
    slow_s, slow_throttle = _produce(c, "q", "slow-p", n)
    assert free_throttle == 0
    assert slow_throttle > 0, "librdkafka saw no throttle time"
    assert slow_s >= 1.0, (slow_s, free_s)  # unthrottled it takes a fraction of a second here

    # 5 MB to read at 0.5 MB/s after a burst of at most 1.5 MB and a last 1 MB fetch
    free_s, free_throttle = _consume(c, "q", "free-c", n)
    slow_s, slow_throttle = _consume(c, "q", "slow-c", n)
    assert free_throttle == 0
    assert slow_throttle > 0, "librdkafka saw no throttle time"
    assert slow_s >= 3.0, (slow_s, free_s)

    # removed: the next producer runs free again
    assert alter(c.brokers[leader].port, {"client-id": "slow-p"}, {"producer_byte_rate": None}
                 )["entries"][0]["error_code"] == 0
    wait_until(lambda: len(describe(c.brokers[leader].port)) == 1, 15, "the quota is gone")
    _, throttle = _produce(c, "q", "slow-p", n)
    assert throttle == 0


def test_request_percentage_throttles_a_client_flooding_cheap_requests(cluster_factory) -> None:
    """request_percentage (KIP-124): a client sending Metadata requests back to back uses
    more than its share of the broker's time; its answers carry a throttle time and the
    broker then waits that long before it serves the next one. Another client id does not."""
    import asyncio

    from kafkarepl.client import BrokerConnection

    c = cluster_factory(1, **{"quota.window.num": "2"})
    port = c.brokers[1].port
    resp = alter(port, {"client-id": "flood"}, {"request_percentage": 0.1})  # 1 ms per second
    assert resp["entries"][0]["error_code"] == 0, resp

    async def flood(client_id: str, limit: int) -> tuple[int, int, float]:
        """(requests sent, the first throttle time of 20 ms or more, seconds the next request
        took); (limit, the first throttle seen, 0) if none was that long."""
        first_throttle = 0
        conn = BrokerConnection("127.0.0.1", port, client_id=client_id)
        await conn.connect()
        try:
            for n in range(1, limit + 1):
                r = await conn.send(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False})
                if r["throttle_time_ms"] and not first_throttle:
                    first_throttle = r["throttle_time_ms"]
                # A first crossing can be over by a microsecond (a 1 ms throttle, less than the
                # answer's own trip); the hold-back is measured on one long enough to see.
                if r["throttle_time_ms"] >= 20:
                    t0 = time.monotonic()
                    await conn.send(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False})
                    return n, r["throttle_time_ms"], time.monotonic() - t0
            return limit, first_throttle, 0.0
        finally:
            conn.close()

    n, throttle, waited = asyncio.run(flood("flood", 50_000))
    assert throttle >= 20, f"{n} Metadata requests and no throttle of 20 ms or more ({throttle})"
    assert waited >= 0.8 * throttle / 1000, (throttle, waited)  # the broker held the next one back
    sent, free_throttle, _ = asyncio.run(flood("free", n + 100))
    assert free_throttle == 0 and sent == n + 100


def test_java_producer_waits_out_the_throttle(cluster_factory) -> None:
    """Kafka's Java producer (KIP-219 on the client side): it sees the throttle time in
    its produce-throttle-time metrics and its rate is held to the quota."""
    import re

    c = cluster_factory(1, **{"quota.window.num": "3"})
    c.create_topic("jq", 1, 1)
    port = c.brokers[1].port
    assert alter(port, {"client-id": "java-slow"}, {"producer_byte_rate": 1e6})["entries"][0]["error_code"] == 0
    out = java_tools.run("quota-produce", f"127.0.0.1:{port}", "jq", "java-slow", "500", timeout=120)
    m = re.fullmatch(r"acked=(\d+) seconds=([\d.]+) throttle_max=(\d+)", out)
    assert m, out
    acked, seconds, throttle_max = int(m[1]), float(m[2]), int(m[3])
    assert acked == 500 and throttle_max > 0, out
    assert seconds >= 1.0, out  # 5 MB at 1 MB/s after a burst of at most 3 s of it
    free = java_tools.run("quota-produce", f"127.0.0.1:{port}", "jq", "java-free", "500", timeout=120)
    assert free.endswith("throttle_max=0"), free



def _api_versions_from(source_ip: str, port: int) -> tuple[bool, float]:
    """(answered, seconds): one ApiVersions on a new connection from `source_ip`."""
    import socket

    from kafkarepl.protocol import encode_request

    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source_ip, 0)) as s:
        s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "conn-test", {}))
        try:
            answered = len(s.recv(4)) == 4
        except ConnectionResetError:
            answered = False
    return answered, time.monotonic() - t0


def test_connection_creation_rate_per_ip_address(cluster_factory) -> None:
    """KIP-612: connections from an address over its connection_creation_rate are closed
    unserved after a delay; another address (127.0.0.2 here) is not limited."""
    from concurrent.futures import ThreadPoolExecutor

    c = cluster_factory(1, **{"quota.window.num": "2"})
    port = c.brokers[1].port
    resp = alter(port, {"ip": "127.0.0.1"}, {"connection_creation_rate": 5.0})
    assert resp["entries"][0]["error_code"] == 0, resp
    assert describe(port) == {(("ip", "127.0.0.1"),): {"connection_creation_rate": 5.0}}
    # bad IP entities are refused (asked before the burst below, which leaves 127.0.0.1 over
    # its rate: an admin connection after it could itself be closed unserved)
    resp = alter(port, {"ip": "not-an-ip"}, {"connection_creation_rate": 5.0})
    assert resp["entries"][0]["error_code"] == 42, resp
    time.sleep(2.1)  # the windows that counted the admin connections have aged out
    with ThreadPoolExecutor(20) as pool:
        limited = list(pool.map(lambda _i: _api_versions_from("127.0.0.1", port), range(20)))
        other = list(pool.map(lambda _i: _api_versions_from("127.0.0.2", port), range(20)))
    served = [secs for ok_, secs in limited if ok_]
    refused = [secs for ok_, secs in limited if not ok_]
    # at most the rate over the padded window (5/s over 1-2 s); the rest closed unanswered
    # after their throttle time (its length depends on where in the window they came:
    # the unit tests check it)
    assert 1 <= len(served) <= 10 and refused, limited
    assert all(ok_ for ok_, _ in other), other


@pytest.mark.parametrize("limit, slowed", [
    ({"max.connection.creation.rate": "5"}, "PLAINTEXT"),
    ({"listener.name.replication.max.connection.creation.rate": "5"}, "REPLICATION"),
], ids=["broker-wide", "listener"])
def test_connection_creation_rate_of_the_broker_and_of_a_listener(cluster_factory, limit, slowed) -> None:
    """max.connection.creation.rate (KIP-612): past it, the broker waits before accepting
    more connections on its client listeners (all are served, later), not on the
    inter-broker one; a listener's own listener.name.<l>.max.connection.creation.rate
    applies to that listener, the inter-broker one included."""
    import socket
    from concurrent.futures import ThreadPoolExecutor

    from tests.fixtures.cluster import free_port

    c = cluster_factory(1, start=False, **{"quota.window.num": "2", **limit})
    b = c.brokers[1]
    replication = free_port()
    text = b.config.read_text().replace(f"listeners=PLAINTEXT://127.0.0.1:{b.port}",
                                        f"listeners=PLAINTEXT://127.0.0.1:{b.port},"
                                        f"REPLICATION://127.0.0.1:{replication}")
    b.config.write_text(text + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT\n"
                               "inter.broker.listener.name=REPLICATION\n")
    c.start()
    time.sleep(2.1)  # the start-up's connections have aged out of the windows

    def one(port: int) -> float:
        from kafkarepl.protocol import encode_request

        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "conn-test", {}))
            assert len(s.recv(4)) == 4
        return time.monotonic() - t0

    took = {}
    with ThreadPoolExecutor(20) as pool:
        for name, port in (("REPLICATION", replication), ("PLAINTEXT", b.port)):
            t0 = time.monotonic()
            list(pool.map(lambda _i, p=port: one(p), range(20)))  # every one answered, ...
            took[name] = time.monotonic() - t0
    # ... but 20 at 5/s (after the burst the padded window allows) take over a second
    fast = "PLAINTEXT" if slowed == "REPLICATION" else "REPLICATION"
    assert took[slowed] >= 1.0 and took[fast] < 1.0, took


def test_java_admin_topic_creation_under_controller_mutation_rate(cluster_factory) -> None:
    """controller_mutation_rate (KIP-599) with Kafka's Java AdminClient: with a burst of 4
    partitions (2/s, 2 windows) the third topic of 3 partitions is refused with
    ThrottlingQuotaExceededException when the client does not retry; by default it waits
    out the throttle and the creation goes through."""
    import re

    c = cluster_factory(1, **{"quota.window.num": "2"})
    port = c.brokers[1].port
    assert alter(port, {"client-id": "mutator"}, {"controller_mutation_rate": 2.0})["entries"][0]["error_code"] == 0
    out = java_tools.run("mutation-quota", f"127.0.0.1:{port}", "mq", timeout=120)
    m = re.fullmatch(r"a=ok b=ok c=ThrottlingQuotaExceededException\(throttle>0=true\) retried=ok\(([\d.]+)s\)", out)
    assert m, out
    assert float(m[1]) >= 0.5, out  # it waited for the bucket (2 tokens short at 2/s: 1 s)
    topics = {t["name"] for t in c.metadata(None)["topics"]}
    assert {"mq-a", "mq-b", "mq-d"} <= topics and "mq-c" not in topics



def test_a_throttled_connection_holds_no_request_memory_others_need(cluster_factory) -> None:
    """A muted connection is not read (as Kafka mutes a channel): a client over its quota
    that sends large produces on several connections while muted does not take the
    request memory pool (queued.max.request.bytes) the other clients' requests need."""
    import socket

    from kafkarepl.protocol import decode_response, encode_request
    from tests.batches import build_batch

    c = cluster_factory(1, **{"quota.window.num": "2", "queued.max.request.bytes": "3000000"})
    c.create_topic("pin", 1, 1)
    port = c.brokers[1].port
    assert alter(port, {"client-id": "pinner"}, {"producer_byte_rate": 100_000.0})["entries"][0]["error_code"] == 0
    big = build_batch(1, value_size=900_000)

    def produce_frame(client: str, cid: int) -> bytes:
        return encode_request(ApiKey.PRODUCE, 9, cid, client, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": "pin", "partition_data": [{"index": 0, "records": big}]}]})

    def answer(s: socket.socket) -> dict:
        size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
        data = s.recv(size, socket.MSG_WAITALL)
        return decode_response(ApiKey.PRODUCE, 9, memoryview(data))[1]

    pinners = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(3)]
    try:
        for n, s in enumerate(pinners):  # each answered with a throttle, then muted
            s.sendall(produce_frame("pinner", 1))
            assert answer(s)["throttle_time_ms"] >= 3000 or n > 0
        for s in pinners:  # 3 x 900 KB sent while muted: the whole pool, were they read
            s.sendall(produce_frame("pinner", 2))
        time.sleep(0.5)
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=60) as other:
            other.sendall(produce_frame("other", 1))
            r = answer(other)
        waited = time.monotonic() - t0
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0, r
        assert waited < 2.0, waited  # not behind the muted connections' requests
    finally:
        for s in pinners:
            s.close()
