"""The internal asyncio client against a tiny broker stand-in speaking our own codec."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from kafkarepl.client import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    BrokerConnection,
    BrokerConnectionError,
    ClusterClient,
    NewTopic,
    RequestTimeoutError,
    parse_bootstrap,
    raise_for_errors,
)
from kafkarepl.errors import ErrorCode, KafkaError, UnsupportedVersionError
from kafkarepl.protocol import (
    API,
    ApiKey,
    FrameReader,
    Request,
    decode_request,
    encode_response,
    supported_api_versions,
)

Handler = Callable[[Request], Awaitable[dict | None]]


class TinyBroker:
    """Answers requests in order with handler(request) (None = no response)."""

    def __init__(self, node_id: int = 1, ranges: dict[int, tuple[int, int]] | None = None) -> None:
        self.node_id = node_id
        self.ranges = {r["api_key"]: (r["min_version"], r["max_version"])
                       for r in supported_api_versions()}
        self.ranges.update(ranges or {})
        self.handlers: dict[int, Handler] = {}
        self.received: list[Request] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> TinyBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(1 << 20)
        queue: asyncio.Queue = asyncio.Queue()

        async def respond_in_order() -> None:
            while True:
                task = await queue.get()
                try:
                    parts = await task
                except ConnectionResetError:  # a handler asks to drop the connection
                    writer.transport.abort()
                    return
                if parts is not None:
                    writer.writelines(parts)
                    await writer.drain()

        responder = asyncio.create_task(respond_in_order())
        try:
            while data := await reader.read(65536):
                for frame in frames.feed(data):
                    queue.put_nowait(asyncio.ensure_future(self._answer(frame)))
        finally:
            responder.cancel()
            writer.close()

    async def _answer(self, frame: memoryview) -> list | None:
        try:
            req = decode_request(frame)
        except UnsupportedVersionError as e:
            assert e.api_key == ApiKey.API_VERSIONS
            return encode_response(ApiKey.API_VERSIONS, 0, e.correlation_id, {
                "error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self._api_keys()})
        self.received.append(req)
        lo, hi = self.ranges[req.api_key]
        if not lo <= req.api_version <= hi:
            if req.api_key == ApiKey.API_VERSIONS:
                return encode_response(ApiKey.API_VERSIONS, 0, req.correlation_id, {
                    "error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self._api_keys()})
            raise AssertionError(f"client used unsupported {req.api_key!r} v{req.api_version}")
        if req.api_key == ApiKey.API_VERSIONS:
            body = {"api_keys": self._api_keys()}
        else:
            body = await self.handlers[req.api_key](req)
            if body is None:
                return None
        return encode_response(req.api_key, req.api_version, req.correlation_id, body)

    def _api_keys(self) -> list[dict]:
        return [{"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in self.ranges.items()]


@pytest.fixture
async def broker():
    b = await TinyBroker().start()
    yield b
    await b.stop()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_negotiates_versions_and_picks_the_common_maximum() -> None:
    async def main() -> None:
        b = await TinyBroker(ranges={ApiKey.METADATA: (0, 7), ApiKey.FETCH: (0, 16)}).start()
        conn = BrokerConnection("127.0.0.1", b.port, "t")
        await conn.connect()
        assert b.received[0].api_key == ApiKey.API_VERSIONS
        assert b.received[0].api_version == API[ApiKey.API_VERSIONS].max_version
        assert b.received[0].body["client_software_name"] == "kafkarepl"
        assert conn.pick_version(ApiKey.METADATA) == 7
        assert conn.pick_version(ApiKey.FETCH) == 12  # ours
        assert conn.pick_version(ApiKey.FETCH, 10) == 10
        with pytest.raises(UnsupportedVersionError):
            conn.pick_version(ApiKey.PRODUCE, 2)  # below our Produce minimum (3)
        conn.close()
        await b.stop()
    run(main())


def test_api_versions_fallback_when_broker_lacks_our_version() -> None:
    async def main() -> None:
        b = await TinyBroker(ranges={ApiKey.API_VERSIONS: (0, 2)}).start()
        conn = BrokerConnection("127.0.0.1", b.port, "t")
        await conn.connect()  # broker answers error 35 with its ranges in a v0 body
        assert conn.api_versions[ApiKey.API_VERSIONS] == (0, 2)
        assert conn.pick_version(ApiKey.API_VERSIONS) == 2
        conn.close()
        await b.stop()
    run(main())


def test_pipelined_requests_match_their_responses() -> None:
    async def main() -> None:
        b = await TinyBroker().start()

        async def metadata(req: Request) -> dict:
            name = req.body["topics"][0]["name"]
            await asyncio.sleep(0.02 if name.endswith("0") else 0)  # slow ones stay in order
            return {"topics": [{"name": name, "error_code": 0}], "controller_id": 1}
        b.handlers[ApiKey.METADATA] = metadata
        conn = BrokerConnection("127.0.0.1", b.port, "t")
        await conn.connect()
        names = [f"topic-{i}" for i in range(60)]
        results = await asyncio.gather(*(conn.send(ApiKey.METADATA, None, {
            "topics": [{"name": n}]}) for n in names))
        assert [r["topics"][0]["name"] for r in results] == names
        assert len({r.correlation_id for r in b.received}) == len(b.received)
        conn.close()
        await b.stop()
    run(main())


def test_no_response_requests_do_not_disturb_matching() -> None:
    async def main() -> None:
        b = await TinyBroker().start()

        async def produce(req: Request) -> dict | None:
            if req.body["acks"] == 0:
                return None
            return {"responses": [{"name": "t", "partition_responses": [
                {"index": 0, "base_offset": 42}]}]}
        b.handlers[ApiKey.PRODUCE] = produce
        conn = BrokerConnection("127.0.0.1", b.port, "t")
        await conn.connect()
        data = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x"}]}]}
        assert await conn.send(ApiKey.PRODUCE, 9, dict(data, acks=0), expect_response=False) is None
        resp = await conn.send(ApiKey.PRODUCE, 9, dict(data, acks=1))
        assert resp["responses"][0]["partition_responses"][0]["base_offset"] == 42
        assert bytes(b.received[-1].body["topic_data"][0]["partition_data"][0]["records"]) == b"x"
        conn.close()
        await b.stop()
    run(main())


def test_request_timeout_fails_all_in_flight_and_closes() -> None:
    async def main() -> None:
        b = await TinyBroker().start()
        never = asyncio.Event()

        async def hang(req: Request) -> dict:
            await never.wait()
            return {}
        b.handlers[ApiKey.DESCRIBE_CLUSTER] = hang
        conn = BrokerConnection("127.0.0.1", b.port, "t", request_timeout=0.2)
        await conn.connect()
        first = asyncio.ensure_future(conn.send(ApiKey.DESCRIBE_CLUSTER, None, {}))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(conn.send(ApiKey.DESCRIBE_CLUSTER, None, {}))
        with pytest.raises(RequestTimeoutError, match="DescribeCluster"):
            await first
        with pytest.raises(KafkaError):
            await second
        assert not conn.connected
        with pytest.raises(RequestTimeoutError):
            await conn.send(ApiKey.DESCRIBE_CLUSTER, None, {})
        never.set()
        await b.stop()
    run(main())


def test_connect_errors_are_clear() -> None:
    async def main() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # bound but not listening: refused
            with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
                await BrokerConnection("127.0.0.1", port, connect_timeout=2).connect()
    run(main())


def test_connection_lost_fails_pending_requests() -> None:
    async def main() -> None:
        b = await TinyBroker().start()

        async def close_it(req: Request) -> dict:
            raise ConnectionResetError  # the stand-in's connection handler dies
        b.handlers[ApiKey.DESCRIBE_CLUSTER] = close_it
        conn = BrokerConnection("127.0.0.1", b.port, "t", request_timeout=5)
        await conn.connect()
        with pytest.raises(BrokerConnectionError, match="connection lost"):
            await conn.send(ApiKey.DESCRIBE_CLUSTER, None, {})
        await b.stop()
    run(main())


def test_reconnect_after_the_broker_dropped_the_connection() -> None:
    async def main() -> None:
        b = await TinyBroker().start()
        calls = []

        async def flaky(req: Request) -> dict:
            calls.append(req)
            if len(calls) == 1:
                raise ConnectionResetError
            return {"cluster_id": "back"}
        b.handlers[ApiKey.DESCRIBE_CLUSTER] = flaky
        conn = BrokerConnection("127.0.0.1", b.port, "t", request_timeout=5)
        await conn.connect()
        with pytest.raises(BrokerConnectionError):
            await conn.send(ApiKey.DESCRIBE_CLUSTER, None, {})
        assert not conn.connected
        await conn.connect()
        await asyncio.sleep(0.05)  # the old socket's late callbacks must not break the new one
        assert conn.connected
        assert (await conn.send(ApiKey.DESCRIBE_CLUSTER, None, {}))["cluster_id"] == "back"
        with pytest.raises(BrokerConnectionError, match="already connected"):
            await conn.connect()
        conn.close()
        await b.stop()
    run(main())


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, PLAINTEXT://b:2,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")


def test_raise_for_errors_finds_nested_codes() -> None:
    raise_for_errors({"topics": [{"name": "a", "error_code": 0}]})
    with pytest.raises(KafkaError) as info:
        raise_for_errors({"topics": [{"name": "a", "error_code": 0},
                                     {"name": "b", "error_code": 36, "error_message": "exists"}]})
    assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS and "b" in str(info.value)


class TinyCluster:
    """Two stand-in brokers; broker 2 is the controller until `move_controller`."""

    def __init__(self) -> None:
        self.brokers = [TinyBroker(1), TinyBroker(2)]
        self.controller = 2
        self.topics: dict[str, int] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}

    async def start(self) -> TinyCluster:
        for b in self.brokers:
            await b.start()
            for key, handler in self._handlers(b).items():
                b.handlers[key] = handler
        return self

    async def stop(self) -> None:
        for b in self.brokers:
            await b.stop()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.brokers[0].port}"

    def _handlers(self, b: TinyBroker) -> dict[int, Handler]:
        async def metadata(req: Request) -> dict:
            return {
                "brokers": [{"node_id": x.node_id, "host": "127.0.0.1", "port": x.port}
                            for x in self.brokers],
                "cluster_id": "tiny", "controller_id": self.controller,
                "topics": [{"name": t, "error_code": 0, "partitions": [
                    {"partition_index": p, "leader_id": 1 + p % 2, "replica_nodes": [1, 2],
                     "isr_nodes": [1, 2]} for p in range(n)]}
                    for t, n in self.topics.items()
                    if req.body["topics"] is None or t in {x["name"] for x in req.body["topics"]}],
            }

        def not_controller() -> bool:
            return b.node_id != self.controller

        async def create_topics(req: Request) -> dict:
            results = []
            for t in req.body["topics"]:
                code = ErrorCode.NOT_CONTROLLER if not_controller() else (
                    ErrorCode.TOPIC_ALREADY_EXISTS if t["name"] in self.topics else 0)
                if code == 0:
                    n = t["num_partitions"] if t["num_partitions"] > 0 else len(t["assignments"])
                    self.topics[t["name"]] = n
                    self.configs[(RESOURCE_TOPIC, t["name"])] = {
                        c["name"]: c["value"] for c in t["configs"]}
                results.append({"name": t["name"], "error_code": code})
            return {"topics": results}

        async def delete_topics(req: Request) -> dict:
            names = req.body["topic_names"] or [t["name"] for t in req.body["topics"]]
            for n in names:
                self.topics.pop(n, None)
            return {"responses": [{"name": n, "error_code": 0} for n in names]}

        async def create_partitions(req: Request) -> dict:
            for t in req.body["topics"]:
                self.topics[t["name"]] = t["count"]
            return {"results": [{"name": t["name"]} for t in req.body["topics"]]}

        async def describe_configs(req: Request) -> dict:
            return {"results": [{
                "resource_type": r["resource_type"], "resource_name": r["resource_name"],
                "configs": [{"name": k, "value": v} for k, v in
                            self.configs.get((r["resource_type"], r["resource_name"]),
                                             {"broker.id": str(b.node_id)}).items()]}
                for r in req.body["resources"]]}

        async def alter_configs(req: Request) -> dict:
            for r in req.body["resources"]:
                self.configs[(r["resource_type"], r["resource_name"])] = {
                    c["name"]: c["value"] for c in r["configs"]}
            return {"responses": [{"resource_type": r["resource_type"],
                                   "resource_name": r["resource_name"]}
                                  for r in req.body["resources"]]}

        async def elect_leaders(req: Request) -> dict:
            return {"replica_election_results": [
                {"topic": tp["topic"], "partition_result": [
                    {"partition_id": p, "error_code": ErrorCode.ELECTION_NOT_NEEDED}
                    for p in tp["partitions"]]} for tp in req.body["topic_partitions"]]}

        async def list_reassignments(req: Request) -> dict:
            return {"topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "replicas": [1, 2, 3], "adding_replicas": [3]}]}]}

        async def alter_reassignments(req: Request) -> dict:
            return {"responses": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"]} for p in t["partitions"]]}
                for t in req.body["topics"]]}

        async def describe_cluster(req: Request) -> dict:
            return {"cluster_id": "tiny", "controller_id": self.controller, "brokers": [
                {"broker_id": x.node_id, "host": "127.0.0.1", "port": x.port}
                for x in self.brokers]}

        return {ApiKey.METADATA: metadata, ApiKey.CREATE_TOPICS: create_topics,
                ApiKey.DELETE_TOPICS: delete_topics, ApiKey.CREATE_PARTITIONS: create_partitions,
                ApiKey.DESCRIBE_CONFIGS: describe_configs, ApiKey.ALTER_CONFIGS: alter_configs,
                ApiKey.ELECT_LEADERS: elect_leaders,
                ApiKey.LIST_PARTITION_REASSIGNMENTS: list_reassignments,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_reassignments,
                ApiKey.DESCRIBE_CLUSTER: describe_cluster}


def test_cluster_client_admin_round_trip() -> None:
    async def main() -> None:
        cluster = await TinyCluster().start()
        async with ClusterClient(cluster.bootstrap) as client:
            assert client.controller_id == 2 and set(client.brokers) == {1, 2}
            resp = await client.create_topics([
                NewTopic("orders", 3, 2, {"retention.ms": "1000"}),
                NewTopic("manual", assignments={0: [1, 2], 1: [2, 1]})])
            raise_for_errors(resp)
            # controller-bound requests went to broker 2 only
            assert [r.api_key for r in cluster.brokers[1].received].count(
                ApiKey.CREATE_TOPICS) == 1
            assert ApiKey.CREATE_TOPICS not in [r.api_key for r in cluster.brokers[0].received]
            sent = cluster.brokers[1].received[-1].body["topics"]
            assert sent[1]["assignments"] == [{"partition_index": 0, "broker_ids": [1, 2]},
                                              {"partition_index": 1, "broker_ids": [2, 1]}]
            again = await client.create_topics([NewTopic("orders", 1, 1)])
            with pytest.raises(KafkaError) as info:
                raise_for_errors(again)
            assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS

            await client.metadata()
            assert sorted(client.topics) == ["manual", "orders"]
            assert await client.leader_for("orders", 1) == 2
            assert await client.leader_for("nope", 0) == -1

            await client.create_partitions({"orders": 5})
            await client.metadata(["orders"])
            assert len(client.topics["orders"]["partitions"]) == 5

            cfg = await client.describe_configs([(RESOURCE_TOPIC, "orders")])
            assert cfg["results"][0]["configs"] == [
                {"name": "retention.ms", "value": "1000", "read_only": False,
                 "is_default": False, "config_source": -1, "is_sensitive": False,
                 "synonyms": [], "config_type": 0, "documentation": ""}]
            broker_cfg = await client.describe_configs([(RESOURCE_BROKER, "1")])
            assert broker_cfg["results"][0]["configs"][0]["value"] == "1"
            await client.alter_configs({(RESOURCE_TOPIC, "orders"): {"retention.ms": "5"}})
            assert cluster.configs[(RESOURCE_TOPIC, "orders")] == {"retention.ms": "5"}

            elected = await client.elect_leaders({"orders": [0, 1]})
            assert [p["error_code"] for p in elected["replica_election_results"][0][
                "partition_result"]] == [ErrorCode.ELECTION_NOT_NEEDED] * 2
            listed = await client.list_partition_reassignments()
            assert listed["topics"][0]["partitions"][0]["adding_replicas"] == [3]
            altered = await client.alter_partition_reassignments({("orders", 0): [2, 1],
                                                                  ("orders", 1): None})
            assert [p["partition_index"] for p in altered["responses"][0]["partitions"]] == [0, 1]
            assert cluster.brokers[1].received[-1].body["topics"][0]["partitions"][1][
                "replicas"] is None

            desc = await client.describe_cluster()
            assert desc["cluster_id"] == "tiny" and len(desc["brokers"]) == 2

            await client.delete_topics(["manual"])
            assert "manual" not in cluster.topics
        await cluster.stop()
    run(main())


def test_cluster_client_follows_a_moved_controller() -> None:
    async def main() -> None:
        cluster = await TinyCluster().start()
        async with ClusterClient(cluster.bootstrap) as client:
            cluster.controller = 1  # client still believes broker 2
            resp = await client.create_topics([NewTopic("t", 1, 1)])
            raise_for_errors(resp)
            assert client.controller_id == 1 and cluster.topics == {"t": 1}
        await cluster.stop()
    run(main())


def test_cluster_client_bootstrap_failure_lists_servers() -> None:
    async def main() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            with pytest.raises(BrokerConnectionError, match="no bootstrap server reachable"):
                await ClusterClient(f"127.0.0.1:{port}", connect_timeout=1).start()
    run(main())
