"""Real clients (librdkafka via confluent-kafka, kafka-python, aiokafka) read what our
codec writes and send what it reads: a stand-in broker built only on kafkarepl.protocol
answers ApiVersions, Metadata, InitProducerId, Produce, Fetch and FindCoordinator. This
checks the codec against the clients' own encoders; the real broker is tested elsewhere.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from kafkarepl.errors import ErrorCode, UnsupportedVersionError
from kafkarepl.protocol import (
    ApiKey,
    FrameReader,
    Request,
    decode_request,
    encode_response,
    supported_api_versions,
)

TOPIC = "hello"


class StandIn:
    def __init__(self) -> None:
        self.port = 0
        self.log: list[bytes] = []  # record batches of TOPIC partition 0, offsets assigned
        self.seen: list[tuple[str, int, str | None]] = []
        self.unsupported: list[tuple[int, int]] = []

    @property
    def next_offset(self) -> int:
        # lastOffsetDelta (batch header bytes 23..27) + 1 per batch
        return sum(int.from_bytes(b[23:27], "big") + 1 for b in self.log)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(1 << 20)
        try:
            while data := await reader.read(65536):
                for frame in frames.feed(data):
                    try:
                        req = decode_request(frame)
                    except UnsupportedVersionError as e:
                        self.unsupported.append((e.api_key, e.api_version))
                        writer.writelines(encode_response(ApiKey.API_VERSIONS, 0, e.correlation_id, {
                            "error_code": ErrorCode.UNSUPPORTED_VERSION,
                            "api_keys": supported_api_versions()}))
                        continue
                    self.seen.append((ApiKey(req.api_key).name, req.api_version, req.client_id))
                    body = await self.answer(req)
                    if body is not None:
                        writer.writelines(encode_response(req.api_key, req.api_version,
                                                          req.correlation_id, body))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def answer(self, req: Request) -> dict | None:
        b = req.body
        if req.api_key == ApiKey.API_VERSIONS:
            return {"api_keys": supported_api_versions()}
        if req.api_key == ApiKey.METADATA:
            return {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
                    "cluster_id": "standin", "controller_id": 1,
                    "topics": [{"name": TOPIC, "topic_id": uuid.UUID(int=7), "partitions": [
                        {"partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                         "replica_nodes": [1], "isr_nodes": [1]}]}]}
        if req.api_key == ApiKey.INIT_PRODUCER_ID:
            return {"producer_id": 4242, "producer_epoch": 0}
        if req.api_key == ApiKey.FIND_COORDINATOR:
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "node_id": -1,
                    "coordinators": [{"key": k, "node_id": -1, "error_code": 15}
                                     for k in b["coordinator_keys"]]}
        if req.api_key == ApiKey.PRODUCE:
            part = b["topic_data"][0]["partition_data"][0]
            base = self.next_offset
            batch = part["records"]
            batch[0:8] = base.to_bytes(8, "big")  # writable view into the request frame
            self.log.append(bytes(batch))
            if b["acks"] == 0:
                return None
            return {"responses": [{"name": TOPIC, "partition_responses": [
                {"index": part["index"], "base_offset": base}]}]}
        if req.api_key == ApiKey.FETCH:
            p = b["topics"][0]["partitions"][0]
            data = b"".join(self.log) if p["fetch_offset"] < self.next_offset else b""
            if not data:
                await asyncio.sleep(b["max_wait_ms"] / 1000)
            hw = self.next_offset
            return {"responses": [{"topic": TOPIC, "partitions": [
                {"partition_index": 0, "high_watermark": hw, "last_stable_offset": hw,
                 "log_start_offset": 0, "records": data}]}]}
        raise AssertionError(f"stand-in got an unexpected {req.api_key!r}")


def with_stand_in(client_fn) -> StandIn:
    stand_in = StandIn()

    async def main() -> None:
        server = await asyncio.start_server(stand_in.serve, "127.0.0.1", 0)
        stand_in.port = server.sockets[0].getsockname()[1]
        try:
            if asyncio.iscoroutinefunction(client_fn):
                await client_fn(stand_in.port)
            else:  # blocking clients run in a thread while the loop serves them
                await asyncio.get_running_loop().run_in_executor(None, client_fn, stand_in.port)
        finally:
            server.close()

    asyncio.run(asyncio.wait_for(main(), 30))
    return stand_in


def test_librdkafka_idempotent_produce_and_consume() -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumed = []
    delivered = []

    def client(port: int) -> None:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                             "enable.idempotence": True, "linger.ms": 5})
        for i in range(3):
            producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i,
                             on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 50})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 10
        while len(consumed) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                consumed.append((msg.offset(), msg.key(), msg.value()))
        consumer.close()

    stand_in = with_stand_in(client)
    assert delivered == [(None, 0), (None, 1), (None, 2)]
    assert consumed == [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2")]
    apis = {(name, version) for name, version, _ in stand_in.seen}
    assert {("API_VERSIONS", 3), ("METADATA", 12), ("INIT_PRODUCER_ID", 4), ("PRODUCE", 9),
            ("FETCH", 12)} <= apis
    assert all(client_id for _, _, client_id in stand_in.seen)


def test_kafka_python_metadata_after_api_versions_fallback() -> None:
    from kafka import KafkaAdminClient

    topics = []

    def client(port: int) -> None:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        topics.extend(admin.list_topics())
        admin.close()

    stand_in = with_stand_in(client)
    assert topics == [TOPIC]
    # kafka-python 3 opens with ApiVersions v4, which we lack: error 35 + ranges, retry v3
    assert (ApiKey.API_VERSIONS, 4) in stand_in.unsupported
    assert ("API_VERSIONS", 3, "kafka-python-3.0.12") in stand_in.seen


def test_aiokafka_bootstrap_metadata() -> None:
    from aiokafka import AIOKafkaClient

    partitions = []

    async def client(port: int) -> None:
        c = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{port}")
        await c.bootstrap()
        partitions.extend(c.cluster.partitions_for_topic(TOPIC))
        await c.close()

    with_stand_in(client)
    assert partitions == [0]
