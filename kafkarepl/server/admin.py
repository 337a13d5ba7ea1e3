"""Admin and metadata APIs: topics, configs, producer ids, cluster description.

As in Kafka's ZooKeeper mode, any broker writes admin requests to ZooKeeper (the topic
znode, the delete marker, the config znode); the controller watches those paths and
does the rest. Metadata is answered from the broker's cache, fed by UpdateMetadata.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey, Request
from kafkarepl.server.partition import partition_config

if TYPE_CHECKING:
    from kafkarepl.replication import IsrChange
    from kafkarepl.server.broker import Broker
    from kafkarepl.server.partition import Partition

log = logging.getLogger(__name__)

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_STATIC_BROKER = 4
CONFIG_SOURCE_DEFAULT = 5
TOPIC_CONFIG_NAMES = frozenset(
    {
        "segment.bytes", "segment.ms", "retention.ms", "retention.bytes", "index.interval.bytes",
        "segment.index.bytes", "max.message.bytes", "message.timestamp.type", "min.insync.replicas",
        "unclean.leader.election.enable", "flush.messages", "flush.ms", "cleanup.policy",
        "compression.type", "message.timestamp.difference.max.ms", "preallocate",
        "file.delete.delay.ms", "delete.retention.ms", "min.cleanable.dirty.ratio",
        "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    }
)


def validate_topic_name(name: str) -> str | None:
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if not TOPIC_NAME.match(name or ""):
        return "topic name must be 1-249 characters of [a-zA-Z0-9._-]"
    return None


def _err(code: ErrorCode, message: str | None = None) -> tuple[int, str | None]:
    return int(code), message


class AdminManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._pid_block: tuple[int, int] | None = None  # (next, end)
        self._pid_lock = asyncio.Lock()
        self._config_cache: dict[str, tuple[float, dict[str, str]]] = {}

    @property
    def store(self) -> Any:
        return _StoreGuard(self.broker.store)

    # ---------------------------------------------------------------- metadata -----
    async def metadata(self, req: Request) -> dict[str, Any]:
        body = req.body
        cache = self.broker.metadata
        requested = body.get("topics")
        if requested is not None and req.api_version == 0 and not requested:
            requested = None  # v0: an empty list means all topics
        topics_out = []
        if requested is None:
            names = sorted(cache.topics)
        else:
            names = [t.get("name") for t in requested]
        allow_auto = body.get("allow_auto_topic_creation", True) and self.broker.config.auto_create_topics_enable
        for name in names:
            if name is None:
                topics_out.append(_topic_error(None, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            info = cache.topics.get(name)
            if info is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if validate_topic_name(name):
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif allow_auto:
                    code = await self._auto_create(name)
                topics_out.append(_topic_error(name, code))
                continue
            parts = []
            for p in sorted(info.partitions.values(), key=lambda x: x.partition):
                live = [r for r in p.replicas if r in cache.brokers]
                parts.append(
                    {
                        "error_code": int(ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else ErrorCode.NONE),
                        "partition_index": p.partition,
                        "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": [r for r in p.replicas if r not in live],
                    }
                )
            topics_out.append(
                {
                    "error_code": 0,
                    "name": name,
                    "topic_id": info.topic_id,
                    "is_internal": name.startswith("__"),
                    "partitions": parts,
                    "topic_authorized_operations": -2147483648,
                }
            )
        return {
            "throttle_time_ms": 0,
            "brokers": self._brokers(),
            "cluster_id": self.broker.cluster_id,
            "controller_id": cache.controller_id,
            "topics": topics_out,
            "cluster_authorized_operations": -2147483648,
        }

    def _brokers(self) -> list[dict[str, Any]]:
        cache = self.broker.metadata
        if cache.brokers:
            return [
                {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
            ]
        host, port = self.broker.config.advertised()
        port = port or self.broker.server.port
        return [{"node_id": self.broker.broker_id, "host": host, "port": port, "rack": self.broker.config.broker_rack or None}]

    async def _auto_create(self, name: str) -> ErrorCode:
        cfg = self.broker.config
        code, _msg, _tid = await self._create_topic(name, cfg.num_partitions, cfg.default_replication_factor, None, {})
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            return ErrorCode.LEADER_NOT_AVAILABLE
        return ErrorCode(code)

    # ------------------------------------------------------------------ topics -----
    async def _create_topic(
        self,
        name: str,
        partitions: int,
        rf: int,
        assignments: dict[int, list[int]] | None,
        configs: dict[str, str],
        validate_only: bool = False,
    ) -> tuple[int, str | None, Any]:
        from kafkarepl.controller.placement import assign_replicas, validate_assignment

        bad = validate_topic_name(name)
        if bad:
            return int(ErrorCode.INVALID_TOPIC_EXCEPTION), bad, None
        unknown = [k for k in configs if k not in TOPIC_CONFIG_NAMES]
        if unknown:
            return int(ErrorCode.INVALID_CONFIG), f"unknown topic config(s): {', '.join(unknown)}", None
        try:
            self.broker.log_config(configs)
        except (ValueError, KafkaError) as exc:
            return int(ErrorCode.INVALID_CONFIG), str(exc), None
        try:
            brokers = await self.store.get_brokers()
            racks = {bid: b.rack for bid, b in brokers.items()}
            if assignments:
                validate_assignment(assignments, set(brokers))
                assignment = assignments
            else:
                if partitions == -1:
                    partitions = self.broker.config.num_partitions
                if rf == -1:
                    rf = self.broker.config.default_replication_factor
                if partitions <= 0:
                    return int(ErrorCode.INVALID_PARTITIONS), "number of partitions must be > 0", None
                if rf <= 0:
                    return int(ErrorCode.INVALID_REPLICATION_FACTOR), "replication factor must be > 0", None
                if rf > len(brokers):
                    return (int(ErrorCode.INVALID_REPLICATION_FACTOR),
                            f"Replication factor: {rf} larger than available brokers: {len(brokers)}.", None)
                assignment = assign_replicas(racks, partitions, rf)
        except KafkaError as exc:
            return int(exc.code), str(exc), None
        if validate_only:
            return 0, None, None
        try:
            tid = await self.store.create_topic(name, assignment, configs)
        except KafkaError as exc:
            return int(exc.code), str(exc), None
        log.info("created topic %s: %d partitions, assignment %s", name, len(assignment), assignment)
        return 0, None, tid

    async def create_topics(self, req: Request) -> dict[str, Any]:
        body = req.body
        out = []
        for t in body["topics"]:
            assignments = {a["partition_index"]: list(a["broker_ids"]) for a in t.get("assignments") or []}
            configs = {c["name"]: c["value"] for c in t.get("configs") or [] if c["value"] is not None}
            code, msg, tid = await self._create_topic(
                t["name"], t["num_partitions"], t["replication_factor"], assignments or None, configs,
                body.get("validate_only", False),
            )
            out.append(
                {
                    "name": t["name"],
                    "topic_id": _uuid(tid),
                    "error_code": code,
                    "error_message": msg,
                    "num_partitions": t["num_partitions"] if not code else -1,
                    "replication_factor": t["replication_factor"] if not code else -1,
                    "configs": None,
                }
            )
        if not body.get("validate_only"):
            await self._wait_for_metadata([o["name"] for o in out if not o["error_code"]], body.get("timeout_ms", 0))
        return {"throttle_time_ms": 0, "topics": out}

    async def _wait_for_metadata(self, names: list[str], timeout_ms: int, present: bool = True) -> None:
        """Kafka answers CreateTopics/DeleteTopics once the change is visible; do the same
        (bounded by the request timeout) so a client can use the topic right away."""
        deadline = time.monotonic() + min(max(timeout_ms, 0), 30000) / 1000
        cache = self.broker.metadata
        while time.monotonic() < deadline:
            if all(((n in cache.topics) and all(p.leader >= 0 for p in cache.topics[n].partitions.values())) == present for n in names):
                return
            await asyncio.sleep(0.02)

    async def delete_topics(self, req: Request) -> dict[str, Any]:
        body = req.body
        names = list(body.get("topic_names") or [])
        for t in body.get("topics") or []:
            name = t.get("name")
            if name is None and t.get("topic_id") not in (None, ZERO_UUID):
                info = self.broker.metadata.topic_by_id(t["topic_id"])
                name = info.name if info else None
            names.append(name)
        out = []
        for name in names:
            res = {"name": name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None}
            if name is None:
                res["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_ID)
            elif not self.broker.config.delete_topic_enable:
                res["error_code"] = int(ErrorCode.TOPIC_DELETION_DISABLED)
            else:
                try:
                    await self.store.mark_topic_for_deletion(name)
                except KafkaError as exc:
                    res["error_code"], res["error_message"] = int(exc.code), str(exc)
            info = self.broker.metadata.topics.get(name) if name else None
            res["topic_id"] = info.topic_id if info else ZERO_UUID
            out.append(res)
        await self._wait_for_metadata([o["name"] for o in out if not o["error_code"]], body.get("timeout_ms", 0), present=False)
        return {"throttle_time_ms": 0, "responses": out}

    async def create_partitions(self, req: Request) -> dict[str, Any]:
        from kafkarepl.controller.placement import assign_new_partitions, validate_assignment

        body = req.body
        results = []
        for t in body["topics"]:
            name, count = t["name"], t["count"]
            res = {"name": name, "error_code": 0, "error_message": None}
            results.append(res)
            try:
                topic = await self.store.get_topic(name)
                if topic is None:
                    raise KafkaError(f"Topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                current = len(topic.partitions)
                if count <= current:
                    raise KafkaError(
                        f"Topic currently has {current} partitions, which is higher than or equal to the requested {count}.",
                        ErrorCode.INVALID_PARTITIONS,
                    )
                brokers = await self.store.get_brokers()
                rf = len(next(iter(topic.partitions.values())))
                if t.get("assignments"):
                    new = {current + i: list(a["broker_ids"]) for i, a in enumerate(t["assignments"])}
                    if len(new) != count - current:
                        raise KafkaError("assignment count does not match the new partitions", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
                    validate_assignment(new, set(brokers), start_partition_id=current, expected_replication_factor=rf)
                else:
                    racks = {bid: b.rack for bid, b in brokers.items()}
                    new = assign_new_partitions(racks, topic.partitions, count)
                if not body.get("validate_only"):
                    await self.store.add_partitions(name, new)
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
        return {"throttle_time_ms": 0, "results": results}

    # ----------------------------------------------------------------- configs -----
    async def topic_configs(self, name: str) -> dict[str, str]:
        return await self.store.get_topic_config(name)

    async def describe_configs(self, req: Request) -> dict[str, Any]:
        results = []
        for r in req.body["resources"]:
            keys = r.get("configuration_keys")
            res: dict[str, Any] = {
                "error_code": 0, "error_message": None, "resource_type": r["resource_type"],
                "resource_name": r["resource_name"], "configs": [],
            }
            results.append(res)
            try:
                entries = await self._describe_resource(r["resource_type"], r["resource_name"])
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
                continue
            for name, (value, source, read_only) in sorted(entries.items()):
                if keys is not None and name not in keys:
                    continue
                res["configs"].append(
                    {
                        "name": name, "value": value, "read_only": read_only,
                        "is_default": source == CONFIG_SOURCE_DEFAULT, "config_source": source,
                        "is_sensitive": False, "synonyms": [], "config_type": 0, "documentation": None,
                    }
                )
        return {"throttle_time_ms": 0, "results": results}

    async def _describe_resource(self, rtype: int, rname: str) -> dict[str, tuple[str, int, bool]]:
        if rtype == RESOURCE_TOPIC:
            if not await self.store.topic_exists(rname):
                raise KafkaError(f"Topic '{rname}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            overrides = await self.store.get_topic_config(rname)
            entries = {k: (v, CONFIG_SOURCE_DEFAULT, False) for k, v in self.broker.config.topic_defaults().items()}
            entries.update({k: (v, CONFIG_SOURCE_TOPIC, False) for k, v in overrides.items()})
            return entries
        if rtype == RESOURCE_BROKER:
            if rname not in ("", str(self.broker.broker_id)):
                raise KafkaError(f"broker {rname} is not this broker", ErrorCode.INVALID_REQUEST)
            return {k: (v, CONFIG_SOURCE_STATIC_BROKER, True) for k, v in self.broker.config.as_props().items()}
        raise KafkaError(f"unsupported resource type {rtype}", ErrorCode.INVALID_REQUEST)

    async def _alter_topic_config(self, name: str, new: dict[str, str], validate_only: bool) -> None:
        if not await self.store.topic_exists(name):
            raise KafkaError(f"Topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        unknown = [k for k in new if k not in TOPIC_CONFIG_NAMES]
        if unknown:
            raise KafkaError(f"unknown topic config(s): {', '.join(unknown)}", ErrorCode.INVALID_CONFIG)
        try:
            self.broker.log_config(new)
        except ValueError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None
        if not validate_only:
            await self.store.set_topic_config(name, new)
            log_cfg = self.broker.log_config(new)
            pcfg = partition_config(log_cfg, self.broker.config)
            for p in self.broker.partitions.values():
                if p.topic == name:
                    p.reconfigure(pcfg, log_cfg)

    async def alter_configs(self, req: Request) -> dict[str, Any]:
        out = []
        for r in req.body["resources"]:
            res = {"error_code": 0, "error_message": None, "resource_type": r["resource_type"], "resource_name": r["resource_name"]}
            out.append(res)
            try:
                if r["resource_type"] != RESOURCE_TOPIC:
                    raise KafkaError("only topic configs can be altered", ErrorCode.INVALID_REQUEST)
                new = {c["name"]: c["value"] for c in r["configs"] if c["value"] is not None}
                await self._alter_topic_config(r["resource_name"], new, req.body.get("validate_only", False))
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
        return {"throttle_time_ms": 0, "responses": out}

    async def incremental_alter_configs(self, req: Request) -> dict[str, Any]:
        out = []
        for r in req.body["resources"]:
            res = {"error_code": 0, "error_message": None, "resource_type": r["resource_type"], "resource_name": r["resource_name"]}
            out.append(res)
            try:
                if r["resource_type"] != RESOURCE_TOPIC:
                    raise KafkaError("only topic configs can be altered", ErrorCode.INVALID_REQUEST)
                current = dict(await self.store.get_topic_config(r["resource_name"]))
                for c in r["configs"]:
                    op = c["config_operation"]
                    if op == 0:  # SET
                        current[c["name"]] = c["value"]
                    elif op == 1:  # DELETE
                        current.pop(c["name"], None)
                    else:
                        raise KafkaError("APPEND/SUBTRACT apply to list configs only", ErrorCode.INVALID_CONFIG)
                await self._alter_topic_config(r["resource_name"], current, req.body.get("validate_only", False))
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
        return {"throttle_time_ms": 0, "responses": out}

    # ------------------------------------------------------------ producer ids -----
    async def init_producer_id(self, req: Request) -> dict[str, Any]:
        if req.body.get("transactional_id") is not None:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "producer_id": -1, "producer_epoch": -1}
        async with self._pid_lock:
            if self._pid_block is None or self._pid_block[0] > self._pid_block[1]:
                try:
                    start, end = await self.store.allocate_producer_id_block(self.broker.broker_id)
                except KafkaError as exc:
                    return {"throttle_time_ms": 0, "error_code": int(exc.code), "producer_id": -1, "producer_epoch": -1}
                self._pid_block = (start, end)
            pid = self._pid_block[0]
            self._pid_block = (pid + 1, self._pid_block[1])
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}

    # ---------------------------------------------------------------- cluster -----
    async def describe_cluster(self, req: Request) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": self.broker.cluster_id, "controller_id": self.broker.metadata.controller_id,
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]} for b in self._brokers()],
            "cluster_authorized_operations": -2147483648,
        }

    async def find_coordinator(self, req: Request) -> dict[str, Any]:
        # Groups live in __consumer_offsets; the group coordinator knows the placement.
        return await self.broker.group_coordinator.find_coordinator(req)

    # ------------------------------------------------- controller-routed APIs -----
    def _active_controller(self) -> Any:
        c = self.broker.controller
        return c if c is not None and c.is_active else None

    async def elect_leaders(self, req: Request) -> dict[str, Any]:
        return await self._to_controller(req.api_key, req.api_version, req.body)

    async def alter_partition_reassignments(self, req: Request) -> dict[str, Any]:
        return await self._to_controller(req.api_key, req.api_version, req.body)

    async def list_partition_reassignments(self, req: Request) -> dict[str, Any]:
        c = self._active_controller()
        if c is None:
            return await self._to_controller(req.api_key, req.api_version, req.body)
        wanted = req.body.get("topics")
        found = c.list_partition_reassignments()
        topics: dict[str, list[dict]] = {}
        for (t, p), (replicas, adding, removing) in sorted(found.items()):
            if wanted is not None and not any(w["name"] == t and p in w["partition_indexes"] for w in wanted):
                continue
            topics.setdefault(t, []).append({"partition_index": p, "replicas": list(replicas),
                                             "adding_replicas": list(adding), "removing_replicas": list(removing)})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    async def alter_partition(self, req: Request) -> dict[str, Any]:
        c = self._active_controller()
        if c is None:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "topics": []}
        return await c.handle_alter_partition(req.body)

    async def controlled_shutdown(self, req: Request) -> dict[str, Any]:
        c = self._active_controller()
        if c is None:
            return {"error_code": int(ErrorCode.NOT_CONTROLLER), "remaining_partitions": []}
        return await c.handle_controlled_shutdown(req.body)

    async def _to_controller(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """Run a controller API on the active controller: in this process when it is us,
        else relayed to it (Kafka's clients find the controller themselves; kcat, simple
        tools and our own brokers may ask any broker)."""
        c = self._active_controller()
        if c is not None:
            local = {
                ApiKey.ALTER_PARTITION: c.handle_alter_partition,
                ApiKey.CONTROLLED_SHUTDOWN: c.handle_controlled_shutdown,
                ApiKey.ELECT_LEADERS: c.handle_elect_leaders,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: c.handle_alter_partition_reassignments,
            }[api_key]
            return await local(body)
        conn = await self._controller_connection()
        try:
            return await conn.send(api_key, version, body)
        finally:
            conn.close()

    async def _controller_connection(self) -> Any:
        from kafkarepl.client import BrokerConnection

        cid = self.broker.metadata.controller_id
        info = self.broker.metadata.broker(cid)
        if info is None:
            raise KafkaError("no controller known yet", ErrorCode.NOT_CONTROLLER)
        conn = BrokerConnection(info.host, info.port, client_id=f"broker-{self.broker.broker_id}")
        await conn.connect()
        return conn

    async def send_alter_partition(self, p: Partition, change: IsrChange) -> None:
        """Ask the controller to change p's ISR (AlterPartition); apply its answer."""
        info = self.broker.metadata.topics.get(p.topic)
        body = {
            "broker_id": self.broker.broker_id,
            "broker_epoch": -1,
            "topics": [
                {
                    "topic_name": p.topic,
                    "topic_id": info.topic_id if info else ZERO_UUID,
                    "partitions": [
                        {
                            "partition_index": p.partition,
                            "leader_epoch": change.leader_epoch,
                            "new_isr": list(change.new_isr),
                            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in change.new_isr],
                            "leader_recovery_state": 0,
                            "partition_epoch": change.partition_epoch,
                        }
                    ],
                }
            ],
        }
        t = int(time.time() * 1000)
        try:
            resp = await self._to_controller(ApiKey.ALTER_PARTITION, 1, body)
        except Exception as exc:  # noqa: BLE001 - retried at the next ISR check
            log.info("AlterPartition for %s-%d failed: %s", p.topic, p.partition, exc)
            p.state.on_isr_change_failed(ErrorCode.NETWORK_EXCEPTION, t, change)
            return
        code = resp.get("error_code", 0)
        part = resp["topics"][0]["partitions"][0] if resp.get("topics") else {"error_code": code}
        if code or part["error_code"]:
            log.info("AlterPartition for %s-%d rejected: %s", p.topic, p.partition,
                     ErrorCode(code or part["error_code"]).name)
            p.state.on_isr_change_failed(ErrorCode(code or part["error_code"]), t, change)
            return
        log.info("%s-%d: ISR %s -> %s", p.topic, p.partition, sorted(p.isr), sorted(part["isr"]))
        p.state.on_isr_change_committed(list(part["isr"]), part["partition_epoch"], t)
        self.broker.replica_manager.partition_changed(p)

    async def request_controlled_shutdown(self) -> None:
        """SIGTERM path: ask the controller to move leadership off this broker first."""
        body = {"broker_id": self.broker.broker_id, "broker_epoch": -1}
        for _ in range(max(1, self.broker.config.controlled_shutdown_max_retries)):
            resp = await self._to_controller(ApiKey.CONTROLLED_SHUTDOWN, 3, body)
            if not resp["error_code"] and not resp["remaining_partitions"]:
                return
            await asyncio.sleep(0.2)


ZERO_UUID = uuid.UUID(int=0)


class _StoreGuard:
    """The ZooKeeper store, with ZooKeeper trouble (connection loss, session expiry)
    turned into a retriable Kafka error the handlers answer with, not a closed socket."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return await attr(*args, **kwargs)
            except (KazooException, ConnectionError) as exc:
                raise KafkaError(f"ZooKeeper unavailable: {exc!r}", ErrorCode.REQUEST_TIMED_OUT) from None

        return call


def _topic_error(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": [], "topic_authorized_operations": -2147483648}


def _uuid(tid: Any) -> Any:
    if tid is None:
        return ZERO_UUID
    from kafkarepl.zk.store import topic_id_to_uuid

    return topic_id_to_uuid(tid) if isinstance(tid, str) else tid
