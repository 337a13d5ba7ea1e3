"""Cluster-aware admin client: bootstrap, Metadata, and the requests the admin CLI needs.

Helpers return the decoded response body (plain dicts, Kafka's snake_case names), so
callers see every per-topic/per-partition error code; ``raise_for_errors`` turns the
first non-zero one into a KafkaError. Controller-bound requests are retried once on
NOT_CONTROLLER after refreshing metadata.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ErrorCode, KafkaError
from ..protocol import ApiKey
from .connection import BrokerConnection, BrokerConnectionError
from .security import ClientSecurity

# DescribeConfigs / AlterConfigs resource types
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# IncrementalAlterConfigs operations
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1        # -1: the broker's num.partitions
    replication_factor: int = -1    # -1: the broker's default.replication.factor
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] | None = None  # partition -> replica broker ids

    def to_body(self) -> dict:
        return {
            "name": self.name,
            "num_partitions": -1 if self.assignments else self.num_partitions,
            "replication_factor": -1 if self.assignments else self.replication_factor,
            "assignments": [{"partition_index": p, "broker_ids": list(r)}
                            for p, r in sorted((self.assignments or {}).items())],
            "configs": [{"name": k, "value": v} for k, v in self.configs.items()],
        }


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """'host1:9092,host2:9093' -> [(host1, 9092), (host2, 9093)] ([v6]:port allowed)."""
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        item = item.split("://", 1)[-1]  # PLAINTEXT://host:port
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad bootstrap server {item!r}: expected host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("empty bootstrap server list")
    return out


def raise_for_errors(body: Any, path: str = "") -> None:
    """Raise KafkaError for the first non-zero error_code anywhere in a response body."""
    if isinstance(body, dict):
        code = body.get("error_code", 0)
        if code:
            msg = body.get("error_message") or ""
            name = body.get("name") or body.get("topic") or body.get("resource_name") or ""
            raise KafkaError(f"{path}{name}: {msg}".strip(": "), ErrorCode(code))
        for k, v in body.items():
            if isinstance(v, list | dict):
                raise_for_errors(v, f"{path}{k}.")
    elif isinstance(body, list):
        for item in body:
            raise_for_errors(item, path)


class ClusterClient:
    def __init__(self, bootstrap: str, client_id: str = "kafkarepl-admin", *,
                 request_timeout: float = 30.0, connect_timeout: float = 10.0,
                 security: ClientSecurity | None = None) -> None:
        self.security = security  # TLS / SASL of a secured listener
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self.topics: dict[str, dict] = {}  # name -> Metadata topic entry
        self._conns: dict[int | tuple[str, int], BrokerConnection] = {}
        self._any: BrokerConnection | None = None

    async def __aenter__(self) -> ClusterClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def start(self) -> None:
        """Connect to the first reachable bootstrap server and load cluster metadata.
        Again on a started client: its live connection is kept (a new one replaced it in
        _conns without closing it: one socket leaked per call, and a caller that starts
        again while the broker lists no broker yet, before its first UpdateMetadata, as
        the Spark fetcher does, calls it every retry)."""
        if self._any is not None and self._any.connected:
            await self.metadata()
            return
        errors = []
        for host, port in self.bootstrap:
            try:
                self._any = await self._open(host, port)
                break
            except KafkaError as e:
                errors.append(str(e))
        else:
            raise BrokerConnectionError("no bootstrap server reachable: " + "; ".join(errors))
        await self.metadata()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._any = None

    async def _open(self, host: str, port: int) -> BrokerConnection:
        conn = BrokerConnection(host, port, self.client_id, connect_timeout=self.connect_timeout, security=self.security,
                                request_timeout=self.request_timeout)
        await conn.connect()
        self._conns[(host, port)] = conn
        return conn

    async def connection(self, node_id: int | None = None) -> BrokerConnection:
        """A live connection to broker ``node_id`` (None: any broker)."""
        if node_id is None:
            if self._any is not None and self._any.connected:
                return self._any
            for c in self._conns.values():
                if c.connected:
                    self._any = c
                    return c
            await self.start()
            assert self._any is not None
            return self._any
        conn = self._conns.get(node_id)
        if conn is None or not conn.connected:
            if node_id not in self.brokers:
                await self.metadata()
            if node_id not in self.brokers:
                raise BrokerConnectionError(f"unknown broker id {node_id}")
            conn = self._conns.get(self.brokers[node_id])
            if conn is None or not conn.connected:
                conn = await self._open(*self.brokers[node_id])
            self._conns[node_id] = conn
        return conn

    async def send(self, api_key: int, body: dict, node_id: int | None = None,
                   api_version: int | None = None) -> dict:
        conn = await self.connection(node_id)
        resp = await conn.send(api_key, api_version, body)
        assert resp is not None
        return resp

    async def _send_to_controller(self, api_key: int, body: dict) -> dict:
        for attempt in range(2):
            if self.controller_id < 0 or attempt:
                await self.metadata()
            if self.controller_id < 0:
                raise KafkaError("no controller known", ErrorCode.NOT_CONTROLLER)
            resp = await self.send(api_key, body, self.controller_id)
            if not _has_error(resp, ErrorCode.NOT_CONTROLLER):
                return resp
        return resp

    # --- metadata ---------------------------------------------------------------------

    async def metadata(self, topics: Iterable[str] | None = None,
                       allow_auto_topic_creation: bool = False) -> dict:
        """Metadata for ``topics`` (None: all); refreshes brokers/controller/topics."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": allow_auto_topic_creation}
        conn = await self.connection()
        version = conn.pick_version(ApiKey.METADATA)
        if topics is None and version == 0:
            body["topics"] = []  # v0 has no null: an empty list means all topics
        resp = await conn.send(ApiKey.METADATA, version, body)
        assert resp is not None
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}
        self.controller_id = resp["controller_id"]
        self.cluster_id = resp["cluster_id"]
        for t in resp["topics"]:
            if t["error_code"] == ErrorCode.NONE:
                self.topics[t["name"]] = t
            else:
                self.topics.pop(t["name"], None)
        return resp

    async def leader_for(self, topic: str, partition: int) -> int:
        """The leader's broker id (refreshing metadata once if unknown); -1 if none."""
        for attempt in range(2):
            if attempt or topic not in self.topics:
                await self.metadata([topic])
            for p in self.topics.get(topic, {}).get("partitions", []):
                if p["partition_index"] == partition and p["leader_id"] >= 0:
                    return p["leader_id"]
        return -1

    async def describe_cluster(self) -> dict:
        return await self.send(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False})

    # --- topics -------------------------------------------------------------------------

    async def create_topics(self, topics: list[NewTopic], timeout_ms: int = 30000,
                            validate_only: bool = False) -> dict:
        return await self._send_to_controller(ApiKey.CREATE_TOPICS, {
            "topics": [t.to_body() for t in topics], "timeout_ms": timeout_ms,
            "validate_only": validate_only})

    async def delete_topics(self, names: list[str], timeout_ms: int = 30000) -> dict:
        return await self._send_to_controller(ApiKey.DELETE_TOPICS, {
            "topic_names": list(names), "topics": [{"name": n} for n in names],
            "timeout_ms": timeout_ms})

    async def create_partitions(self, new_totals: dict[str, int],
                                assignments: dict[str, list[list[int]]] | None = None,
                                timeout_ms: int = 30000, validate_only: bool = False) -> dict:
        """Grow topics to ``new_totals[topic]`` partitions (optionally with the replicas of
        each new partition)."""
        assignments = assignments or {}
        return await self._send_to_controller(ApiKey.CREATE_PARTITIONS, {
            "topics": [{"name": t, "count": n,
                        "assignments": None if t not in assignments else
                        [{"broker_ids": r} for r in assignments[t]]}
                       for t, n in new_totals.items()],
            "timeout_ms": timeout_ms, "validate_only": validate_only})

    # --- configs ------------------------------------------------------------------------

    async def describe_configs(self, resources: list[tuple[int, str]],
                               keys: list[str] | None = None,
                               include_synonyms: bool = False) -> dict:
        """resources: (RESOURCE_TOPIC | RESOURCE_BROKER, name). Broker resources go to that
        broker."""
        body = {"resources": [{"resource_type": rt, "resource_name": name,
                               "configuration_keys": keys} for rt, name in resources],
                "include_synonyms": include_synonyms, "include_documentation": False}
        return await self.send(ApiKey.DESCRIBE_CONFIGS, body, _broker_target(resources))

    async def alter_configs(self, resources: dict[tuple[int, str], dict[str, str | None]],
                            validate_only: bool = False) -> dict:
        """Replace the whole dynamic config of each resource (Kafka's AlterConfigs)."""
        body = {"resources": [{"resource_type": rt, "resource_name": name,
                               "configs": [{"name": k, "value": v} for k, v in cfg.items()]}
                              for (rt, name), cfg in resources.items()],
                "validate_only": validate_only}
        return await self.send(ApiKey.ALTER_CONFIGS, body, _broker_target(resources))

    async def incremental_alter_configs(
            self, resources: dict[tuple[int, str], list[tuple[str, int, str | None]]],
            validate_only: bool = False) -> dict:
        """resources: {(type, name): [(key, OP_SET | OP_DELETE | ..., value)]}."""
        body = {"resources": [{"resource_type": rt, "resource_name": name,
                               "configs": [{"name": k, "config_operation": op, "value": v}
                                           for k, op, v in ops]}
                              for (rt, name), ops in resources.items()],
                "validate_only": validate_only}
        return await self.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, body,
                               _broker_target(resources))

    # --- leaders and reassignments --------------------------------------------------------

    async def elect_leaders(self, partitions: dict[str, list[int]] | None = None,
                            election_type: int = 0, timeout_ms: int = 30000) -> dict:
        """election_type 0 = preferred, 1 = unclean; partitions None = all partitions."""
        return await self._send_to_controller(ApiKey.ELECT_LEADERS, {
            "election_type": election_type, "timeout_ms": timeout_ms,
            "topic_partitions": None if partitions is None else
            [{"topic": t, "partitions": ps} for t, ps in partitions.items()]})

    async def alter_partition_reassignments(
            self, reassignments: dict[tuple[str, int], list[int] | None],
            timeout_ms: int = 30000) -> dict:
        """{(topic, partition): target replicas, or None to cancel a reassignment}."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), replicas in reassignments.items():
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "replicas": replicas})
        return await self._send_to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})

    async def list_partition_reassignments(
            self, partitions: dict[str, list[int]] | None = None,
            timeout_ms: int = 30000) -> dict:
        return await self._send_to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, {
            "timeout_ms": timeout_ms,
            "topics": None if partitions is None else
            [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]})

    # --- partition offsets at their leaders ----------------------------------------------

    async def list_offsets(self, timestamps: dict[tuple[str, int], int], isolation_level: int = 0,
                           ) -> dict[tuple[str, int], tuple[ErrorCode, int]]:
        """ListOffsets at each partition's leader: {(topic, partition): timestamp} (-1
        latest, -2 earliest, -3 max timestamp, else the first offset at or after that
        time) -> (error, offset); offset -1 when no record is that late."""
        def body(topics: dict[str, list[int]]) -> dict:
            return {"replica_id": -1, "isolation_level": isolation_level, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                            "timestamp": timestamps[(t, p)]} for p in ps]}
                for t, ps in topics.items()]}
        found = await self._at_leaders(list(timestamps), ApiKey.LIST_OFFSETS, 7, body)
        return {tp: (code, part.get("offset", -1)) for tp, (code, part) in found.items()}

    async def delete_records(self, offsets: dict[tuple[str, int], int], timeout_ms: int = 30000,
                             ) -> dict[tuple[str, int], tuple[ErrorCode, int]]:
        """DeleteRecords at each partition's leader: {(topic, partition): offset} (-1: the
        high watermark) -> (error, the partition's new low watermark)."""
        # the broker's wait must end before this client gives up on the answer
        timeout_ms = max(0, min(timeout_ms, int(self.request_timeout * 1000) - 2000))

        def body(topics: dict[str, list[int]]) -> dict:
            return {"timeout_ms": timeout_ms, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "offset": offsets[(t, p)]} for p in ps]}
                for t, ps in topics.items()]}
        found = await self._at_leaders(list(offsets), ApiKey.DELETE_RECORDS, 2, body)
        return {tp: (code, part.get("low_watermark", -1)) for tp, (code, part) in found.items()}

    async def _at_leaders(self, tps: list[tuple[str, int]], api_key: int, version: int,
                          body: Any, attempts: int = 5,
                          ) -> dict[tuple[str, int], tuple[ErrorCode, dict]]:
        """One request per leader for its partitions of `tps`; a partition whose leader
        moved or is being elected is asked again (fresh metadata, backing off) up to
        `attempts` times, as the Admin client retries. -> (error, its response entry)."""
        out: dict[tuple[str, int], tuple[ErrorCode, dict]] = {}
        pending = sorted(set(tps))
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(0.1 * attempt)
            await self.metadata(sorted({t for t, _ in pending}))
            by_leader: dict[int, dict[str, list[int]]] = {}
            for t, p in pending:
                parts = {x["partition_index"]: x for x in self.topics.get(t, {}).get("partitions", [])}
                if t not in self.topics or p not in parts:
                    out[(t, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, {})
                elif parts[p]["leader_id"] < 0:
                    out[(t, p)] = (ErrorCode.LEADER_NOT_AVAILABLE, {})
                else:
                    by_leader.setdefault(parts[p]["leader_id"], {}).setdefault(t, []).append(p)
            for leader, topics in by_leader.items():
                try:
                    resp = await self.send(api_key, body(topics), leader, version)
                except (BrokerConnectionError, OSError, KafkaError) as exc:  # that leader's partitions only
                    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.NETWORK_EXCEPTION
                    for t, ps in topics.items():
                        out.update({(t, p): (code, {}) for p in ps})
                    continue
                for t in resp["topics"]:
                    for part in t["partitions"]:
                        out[(t["name"], part["partition_index"])] = (ErrorCode(part["error_code"]), part)
            pending = [tp for tp in pending if out[tp][0] in _RETRY_AT_LEADER]
            if not pending:
                break
        return out

    # --- log dirs (JBOD) -------------------------------------------------------------------

    async def alter_replica_log_dirs(self, broker: int, dirs: dict[tuple[str, int], str]) -> dict:
        """Move broker ``broker``'s replicas of {(topic, partition): log dir} between its
        log dirs (AlterReplicaLogDirs goes to the broker holding the replicas)."""
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, partition), path in sorted(dirs.items()):
            by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
        return await self.send(ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
            {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            for path, topics in by_dir.items()]}, broker)

    async def describe_log_dirs(self, broker: int, partitions: dict[str, list[int]] | None = None) -> dict:
        """Broker ``broker``'s log dirs and their replicas (``partitions`` None: all)."""
        return await self.send(ApiKey.DESCRIBE_LOG_DIRS, {
            "topics": None if partitions is None else
            [{"topic": t, "partitions": ps} for t, ps in partitions.items()]}, broker)


# Errors after which the Admin client asks a partition's (new) leader again.
# (Not REQUEST_TIMED_OUT: the leader waited its whole timeout, e.g. for lagging followers
# of a DeleteRecords; asking again would only multiply the wait.)
_RETRY_AT_LEADER = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NETWORK_EXCEPTION,
})


def _broker_target(resources: Iterable[tuple[int, str]]) -> int | None:
    """Broker config resources must go to that broker; anything else to any broker."""
    brokers = {name for rt, name in resources if rt == RESOURCE_BROKER and name}
    if len(brokers) > 1:
        raise ValueError("one request can address the config of one broker only")
    return int(brokers.pop()) if brokers else None


def _has_error(body: Any, code: ErrorCode) -> bool:
    if isinstance(body, dict):
        if body.get("error_code") == code:
            return True
        return any(_has_error(v, code) for v in body.values() if isinstance(v, list | dict))
    if isinstance(body, list):
        return any(_has_error(v, code) for v in body)
    return False
