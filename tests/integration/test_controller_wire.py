"""The controller's requests and responses on the wire: every body it builds encodes
with kafkarepl.protocol at the documented versions, and NetworkBrokerChannel delivers
them over real sockets, in order, retrying until the broker answers."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kafkarepl.controller.channel import (
    API_VERSIONS,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    BrokerGoneError,
    NetworkBrokerChannel,
    success_response,
)
from kafkarepl.controller.context import ControllerContext
from kafkarepl.controller.requests import RequestBatch
from kafkarepl.protocol import (
    ApiKey,
    FrameReader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    supported_api_versions,
)
from kafkarepl.zk.znodes import BrokerInfo, Endpoint, PartitionState, TopicAssignment, new_topic_id

pytestmark = pytest.mark.integration


def context() -> ControllerContext:
    ctx = ControllerContext()
    for b in (1, 2, 3):
        ctx.live[b] = BrokerInfo(
            b,
            "127.0.0.1",
            9000 + b,
            rack=f"r{b}",
            epoch=100 + b,
            endpoints=[Endpoint("PLAINTEXT", "127.0.0.1", 9000 + b)],
        )
    ctx.topics["t"] = TopicAssignment(
        "t", new_topic_id(), {0: [1, 2, 3], 1: [2, 3, 1]}, {1: [1]}, {}
    )
    ctx.states[("t", 0)] = PartitionState(1, 4, [1, 2], 7, zk_version=9)
    ctx.states[("t", 1)] = PartitionState(2, 0, [2, 3, 1], 7, zk_version=0)
    return ctx


def round_trip(api_key: int, body: dict) -> dict:
    version = API_VERSIONS[api_key]
    frame = encode_request(api_key, version, 42, "controller", body)
    req = decode_request(memoryview(frame)[4:])
    assert (req.api_key, req.api_version, req.correlation_id) == (api_key, version, 42)
    return req.body


def test_controller_request_bodies_encode_at_documented_versions():
    ctx = context()
    batch = RequestBatch(ctx, controller_id=3, controller_epoch=7)
    lai = round_trip(
        LEADER_AND_ISR, batch.leader_and_isr_body(2, {("t", 0): False, ("t", 1): True})
    )
    assert lai["controller_id"] == 3 and lai["controller_epoch"] == 7 and lai["broker_epoch"] == 102
    topic = lai["topic_states"][0]
    assert topic["topic_name"] == "t" and isinstance(topic["topic_id"], uuid.UUID)
    p0, p1 = topic["partition_states"]
    assert (p0["leader"], p0["leader_epoch"], p0["isr"], p0["partition_epoch"]) == (1, 4, [1, 2], 9)
    assert p0["replicas"] == [1, 2, 3] and not p0["is_new"]
    assert p1["is_new"] and p1["adding_replicas"] == [1]
    assert {x["broker_id"] for x in lai["live_leaders"]} == {1, 2}

    um = round_trip(UPDATE_METADATA, batch.update_metadata_body(1, [("t", 0), ("t", 1)]))
    assert [b["id"] for b in um["live_brokers"]] == [1, 2, 3]
    assert (
        um["live_brokers"][0]["endpoints"][0]["port"] == 9001
        and um["live_brokers"][0]["rack"] == "r1"
    )
    ps = um["topic_states"][0]["partition_states"]
    assert ps[0]["zk_version"] == 9 and ps[0]["offline_replicas"] == []

    ctx.deleting["t"] = None  # type: ignore[assignment] - only membership matters here
    um = round_trip(UPDATE_METADATA, batch.update_metadata_body(1, [("t", 0)]))
    assert um["topic_states"][0]["partition_states"][0]["leader"] == -2
    sr = round_trip(STOP_REPLICA, batch.stop_replica_body(3, {("t", 0): True, ("t", 1): True}))
    assert sr["broker_epoch"] == 103
    assert [p["delete_partition"] for p in sr["topic_states"][0]["partition_states"]] == [
        True,
        True,
    ]
    assert sr["topic_states"][0]["partition_states"][0]["leader_epoch"] == -2


class StandInBroker:
    """A socket server that answers ApiVersions and controller requests with success,
    recording what it received (the real broker is kafkarepl.server's)."""

    def __init__(self) -> None:
        self.received: list[tuple[int, dict]] = []
        self.silent = False  # a hung broker: reads requests, never answers
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(1 << 20)
        try:
            while data := await reader.read(65536):
                for frame in frames.feed(data):
                    req = decode_request(frame)
                    if self.silent:
                        continue
                    if req.api_key == ApiKey.API_VERSIONS:
                        body = {
                            "error_code": 0,
                            "api_keys": supported_api_versions(),
                            "throttle_time_ms": 0,
                        }
                    else:
                        self.received.append((req.api_key, req.body))
                        body = success_response(req.api_key, req.body)
                    for part in encode_response(
                        req.api_key, req.api_version, req.correlation_id, body
                    ):
                        writer.write(part)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def test_network_channel_delivers_in_order_and_retries_until_the_broker_is_up():
    async def main():
        broker = StandInBroker()
        await broker.start()
        port = broker.port
        await broker.stop()  # not listening yet: the channel must retry
        channel = NetworkBrokerChannel(retry_backoff_s=0.02, max_backoff_s=0.1)
        channel.set_brokers({1: ("127.0.0.1", port)})
        batch = RequestBatch(context(), 3, 7)
        sends = [
            asyncio.ensure_future(
                channel.send(
                    1, UPDATE_METADATA, {**batch.update_metadata_body(1, []), "controller_epoch": e}
                )
            )
            for e in range(5)
        ]
        await asyncio.sleep(0.3)
        assert not any(s.done() for s in sends)
        await broker.start(port)
        responses = await asyncio.wait_for(asyncio.gather(*sends), 10)
        assert all(r["error_code"] == 0 for r in responses)
        assert [b["controller_epoch"] for _, b in broker.received] == [0, 1, 2, 3, 4]
        stop = await channel.send(1, STOP_REPLICA, batch.stop_replica_body(1, {("t", 0): True}))
        assert stop["partition_errors"][0]["topic_name"] == "t"
        # The broker hangs, then leaves the cluster: the request in flight and new ones
        # fail with BrokerGoneError.
        broker.silent = True
        pending = asyncio.ensure_future(
            channel.send(1, UPDATE_METADATA, batch.update_metadata_body(1, []))
        )
        await asyncio.sleep(0.1)
        channel.set_brokers({})
        with pytest.raises(BrokerGoneError):
            await asyncio.wait_for(pending, 5)
        with pytest.raises(BrokerGoneError):
            await channel.send(1, UPDATE_METADATA, {})
        await channel.close()
        await broker.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_controller_response_bodies_encode():
    """What handle_* return must be encodable by the broker at every version it answers."""
    alter = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [
            {
                "topic_name": "t",
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "leader_id": 1,
                        "leader_epoch": 3,
                        "isr": [1, 2],
                        "leader_recovery_state": 0,
                        "partition_epoch": 5,
                    }
                ],
            }
        ],
    }
    shutdown = {
        "error_code": 0,
        "remaining_partitions": [{"topic_name": "t", "partition_index": 0}],
    }
    elect = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "replica_election_results": [
            {
                "topic": "t",
                "partition_result": [{"partition_id": 0, "error_code": 84, "error_message": "x"}],
            }
        ],
    }
    for key, versions, body in [
        (ApiKey.ALTER_PARTITION, range(0, 4), alter),
        (ApiKey.CONTROLLED_SHUTDOWN, range(0, 4), shutdown),
        (ApiKey.ELECT_LEADERS, range(0, 3), elect),
    ]:
        for v in versions:
            data = b"".join(bytes(p) for p in encode_response(key, v, 7, body))
            corr, decoded = decode_response(key, v, memoryview(data)[4:])
            assert corr == 7
            if key == ApiKey.ALTER_PARTITION:
                assert decoded["topics"][0]["partitions"][0]["partition_epoch"] == 5
