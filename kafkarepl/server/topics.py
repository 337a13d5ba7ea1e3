"""Topics: the TopicService (validate, place and write new topics and partitions to
ZooKeeper, as any broker does in Kafka's ZooKeeper mode; the controller does the rest)
and the request layer of CreateTopics, DeleteTopics and CreatePartitions."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kafkarepl.aio import Pacer
from kafkarepl.controller.placement import (
    assign_new_partitions,
    assign_replicas,
    validate_assignment,
)
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ZERO_UUID, Request
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.metadata_cache import MetadataCache
from kafkarepl.server.replica_storage import LogStorage
from kafkarepl.server.replication_quota import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    validate_throttled_replicas,
)
from kafkarepl.server.zk_guard import GuardedStore

log = logging.getLogger(__name__)

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
TOPIC_CONFIG_NAMES = frozenset(
    {
        "segment.bytes", "segment.ms", "segment.jitter.ms", "retention.ms", "retention.bytes",
        "index.interval.bytes", "segment.index.bytes", "max.message.bytes", "message.timestamp.type", "min.insync.replicas",
        "unclean.leader.election.enable", "flush.messages", "flush.ms", "cleanup.policy",
        "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
        "message.timestamp.difference.max.ms", "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms", "preallocate",
        "file.delete.delay.ms", "delete.retention.ms", "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms", "max.compaction.lag.ms",
        "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
        "kafkarepl.validate.uncompressed.records",
        "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable",
        "local.retention.ms", "local.retention.bytes", "message.downconversion.enable",
    }
)
# Topic configs without a broker setting that Kafka's DescribeConfigs (and CreateTopics
# v5+) still lists for every topic, with LogConfig's default: the throttled replica lists
# (empty: none) and tiered storage's switches (off; it is not built). file.delete.delay.ms
# and preallocate have their broker defaults (log.segment.delete.delay.ms,
# log.preallocate; BrokerConfig.topic_defaults): the first
# is honoured per topic (how long a retired segment's data stays for readers, storage/
# log.py), the second accepted and not honoured (segments are never preallocated;
# docs/operations.md says why). message.timestamp.difference.max.ms is not listed unless a
# topic has it, as Kafka 4.0, which removed it and its broker default
# log.message.timestamp.difference.max.ms (KIP-937); a topic that has it is still bound by
# it, as Kafka 3.x bound it (storage/config.py).
TOPIC_ONLY_DEFAULTS: dict[str, str] = {LEADER_REPLICAS: "", FOLLOWER_REPLICAS: "", "remote.storage.enable": "false",
                                       "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false"}
Body = dict[str, Any]


def validate_topic_name(name: str | None) -> str | None:
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if not TOPIC_NAME.match(name or ""):
        return "topic name must be 1-249 characters of [a-zA-Z0-9._-]"
    return None


def validate_topic_configs(configs: dict[str, str], storage: LogStorage) -> None:
    """Raises KafkaError(INVALID_CONFIG) for an unknown name or a bad value."""
    unknown = [k for k in configs if k not in TOPIC_CONFIG_NAMES]
    if unknown:
        raise KafkaError(f"unknown topic config(s): {', '.join(unknown)}", ErrorCode.INVALID_CONFIG)
    for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        if configs.get(name) is not None:
            validate_throttled_replicas(name, configs[name])
    try:
        storage.log_config(configs)
    except (ValueError, KafkaError) as exc:
        raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None


def require_valid_topic_name(name: str | None) -> str:
    """A name that may reach a ZooKeeper path, or KafkaError(INVALID_TOPIC_EXCEPTION)."""
    bad = validate_topic_name(name)
    if bad or name is None:
        raise KafkaError(bad or "no topic name", ErrorCode.INVALID_TOPIC_EXCEPTION)
    return name


CONFIG_SOURCE_TOPIC = 1  # DescribeConfigs / CreateTopics config sources (Kafka's)
CONFIG_SOURCE_DEFAULT = 5


@dataclass
class CreatedTopic:
    topic_id: Any
    partitions: int
    replication_factor: int
    configs: list[tuple[str, str, int]]  # (name, value, config source)


class TopicService:
    def __init__(self, store: GuardedStore, config: BrokerConfig, storage: LogStorage, metadata: MetadataCache) -> None:
        self.store = store
        self.config = config
        self.storage = storage
        self.metadata = metadata

    async def create(
        self,
        name: str,
        partitions: int,
        rf: int,
        assignments: dict[int, list[int]] | None,
        configs: dict[str, str],
        validate_only: bool = False,
    ) -> CreatedTopic:
        """Validate, place and write a new topic (topic_id None when validate_only).
        Raises KafkaError with Kafka's code and message."""
        require_valid_topic_name(name)
        validate_topic_configs(configs, self.storage)
        self.check_partition_budget(len(assignments) if assignments else max(partitions, 0))
        brokers = await self.store.get_brokers()
        if assignments:
            validate_assignment(assignments, set(brokers))
            assignment = assignments
        else:
            if partitions == -1:
                partitions = self.config.num_partitions
            if rf == -1:
                rf = self.config.default_replication_factor
            if partitions <= 0:
                raise KafkaError("number of partitions must be > 0", ErrorCode.INVALID_PARTITIONS)
            if rf <= 0:
                raise KafkaError("replication factor must be > 0", ErrorCode.INVALID_REPLICATION_FACTOR)
            if rf > len(brokers):
                raise KafkaError(f"Replication factor: {rf} larger than available brokers: {len(brokers)}.",
                                 ErrorCode.INVALID_REPLICATION_FACTOR)
            assignment = assign_replicas({bid: b.rack for bid, b in brokers.items()}, partitions, rf,
                                         hosts=_hosts(brokers))
        created = CreatedTopic(None, len(assignment), len(next(iter(assignment.values()))), self.effective_configs(configs))
        if validate_only:
            return created
        created.topic_id = await self.store.create_topic(name, assignment, configs)
        log.info("created topic %s: %d partitions, assignment %s", name, len(assignment), assignment)
        return created

    def effective_configs(self, overrides: dict[str, str]) -> list[tuple[str, str, int]]:
        """Every topic config as (name, value, source): the override or the broker default."""
        merged = {k: (v, CONFIG_SOURCE_DEFAULT) for k, v in {**TOPIC_ONLY_DEFAULTS, **self.config.topic_defaults()}.items()}
        merged.update({k: (v, CONFIG_SOURCE_TOPIC) for k, v in overrides.items()})
        return [(k, v, src) for k, (v, src) in sorted(merged.items())]

    async def auto_create(self, name: str) -> ErrorCode:
        """Metadata for an unknown topic with auto.create.topics.enable."""
        try:
            await self.create(name, self.config.num_partitions, self.config.default_replication_factor, None, {})
        except KafkaError as exc:
            if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                return exc.code
        return ErrorCode.LEADER_NOT_AVAILABLE

    async def live_broker_count(self) -> int:
        return len(await self.store.get_brokers())

    def check_partition_budget(self, new_partitions: int) -> None:
        """Before any placement work (whose cost the client controls): at most
        max.partitions.per.request new partitions at once, max.partitions in the cluster."""
        if new_partitions > self.config.max_partitions_per_request:
            raise KafkaError(
                f"Excessively large number of partitions per request ({new_partitions} > "
                f"max.partitions.per.request {self.config.max_partitions_per_request}).",
                ErrorCode.POLICY_VIOLATION,
            )
        existing = sum(len(t.partitions) for t in self.metadata.topics.values())
        if existing + new_partitions > self.config.max_partitions:
            raise KafkaError(
                f"The cluster would have {existing + new_partitions} partitions, more than "
                f"max.partitions {self.config.max_partitions}.",
                ErrorCode.POLICY_VIOLATION,
            )

    async def add_partitions(self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool) -> None:
        require_valid_topic_name(name)
        if assignments and len(assignments) > self.config.max_partitions_per_request:
            self.check_partition_budget(len(assignments))
        topic = await self.store.get_topic(name) if name in self.metadata.topics else None
        if topic is None:
            raise KafkaError(f"Topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = len(topic.partitions)
        if count <= current:
            raise KafkaError(
                f"Topic currently has {current} partitions, which is higher than or equal to the requested {count}.",
                ErrorCode.INVALID_PARTITIONS,
            )
        self.check_partition_budget(count - current)
        brokers = await self.store.get_brokers()
        rf = len(next(iter(topic.partitions.values())))
        if assignments:
            new = {current + i: list(a) for i, a in enumerate(assignments)}
            if len(new) != count - current:
                raise KafkaError("assignment count does not match the new partitions", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            validate_assignment(new, set(brokers), start_partition_id=current, expected_replication_factor=rf)
        else:
            new = assign_new_partitions({bid: b.rack for bid, b in brokers.items()}, topic.partitions, count,
                                        hosts=_hosts(brokers))
        if not validate_only:
            await self.store.add_partitions(name, new)

    async def delete(self, name: str) -> None:
        require_valid_topic_name(name)
        if not self.config.delete_topic_enable:
            raise KafkaError("topic deletion is disabled", ErrorCode.TOPIC_DELETION_DISABLED)
        if name not in self.metadata.topics:
            # As Kafka: a topic the broker's metadata does not know is not looked up in
            # ZooKeeper (100,000 such names in one request took 70-80 s of lookups).
            raise KafkaError(f"Topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        await self.store.mark_topic_for_deletion(name)

    async def wait_for_metadata(self, names: list[str], timeout_ms: int, present: bool = True) -> None:
        """Kafka answers CreateTopics/DeleteTopics once the change is visible; do the same
        (bounded by the request timeout) so a client can use the topic right away."""
        deadline = time.monotonic() + min(max(timeout_ms, 0), 30000) / 1000
        cache = self.metadata
        while time.monotonic() < deadline:
            if all(((n in cache.topics) and all(p.leader >= 0 for p in cache.topics[n].partitions.values())) == present
                   for n in names):
                return
            await asyncio.sleep(0.02)


class TopicApis:
    def __init__(self, topics: TopicService, metadata: MetadataCache) -> None:
        self.topics = topics
        self.metadata = metadata

    async def create_topics(self, req: Request) -> Body:
        body = req.body
        validate_only = body.get("validate_only", False)
        total = sum(len(t.get("assignments") or []) or max(t["num_partitions"], 0) for t in body["topics"])
        try:
            self.topics.check_partition_budget(total)
            too_many: KafkaError | None = None
        except KafkaError as exc:  # as Kafka 4.0: the whole request fails, no topic is created
            too_many = exc
        out = []
        pace = Pacer()  # the client sets how many topics
        for t in body["topics"]:
            if pace.due():
                await asyncio.sleep(0)
            assignments = {a["partition_index"]: list(a["broker_ids"]) for a in t.get("assignments") or []}
            configs = {c["name"]: c["value"] for c in t.get("configs") or [] if c["value"] is not None}
            code, msg, created = ErrorCode.NONE, None, None
            try:
                if too_many is not None:
                    raise too_many
                created = await self.topics.create(t["name"], t["num_partitions"], t["replication_factor"],
                                                   assignments or None, configs, validate_only)
            except KafkaError as exc:
                code, msg = exc.code, str(exc)
            out.append({
                "name": t["name"],
                "topic_id": _uuid(created.topic_id if created else None),
                "error_code": int(code),
                "error_message": msg,
                # v5+: what was created (defaults resolved) and its configs; Kafka's Java
                # admin client (kafka-topics.sh, Streams, Connect) reads both, never null
                "num_partitions": created.partitions if created else -1,
                "replication_factor": created.replication_factor if created else -1,
                "configs": [
                    {"name": k, "value": v, "read_only": False, "config_source": src, "is_sensitive": False}
                    for k, v, src in (created.configs if created else [])
                ],
            })
        if not validate_only:
            await self.topics.wait_for_metadata([o["name"] for o in out if not o["error_code"]], body.get("timeout_ms", 0))
        return {"throttle_time_ms": 0, "topics": out}

    async def delete_topics(self, req: Request) -> Body:
        body = req.body
        asked: list[tuple[str | None, uuid.UUID]] = [(n, ZERO_UUID) for n in body.get("topic_names") or []]
        for t in body.get("topics") or []:
            tid = t.get("topic_id") or ZERO_UUID
            if tid != ZERO_UUID:  # by id, whatever the name (Kafka's rule)
                info = self.metadata.topic_by_id(tid)
                asked.append((info.name if info else None, tid))
            else:
                asked.append((t.get("name"), tid))
        out = []
        pace = Pacer()  # the client names the topics
        for name, tid in asked:
            if pace.due():
                await asyncio.sleep(0)
            info = self.metadata.topics.get(name) if name else None
            # the id asked by, or the topic's: the Java client matches answers by id
            res: Body = {"name": name, "topic_id": tid if tid != ZERO_UUID else (info.topic_id if info else ZERO_UUID),
                         "error_code": 0, "error_message": None}
            if name is None:
                res["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_ID)
            else:
                try:
                    await self.topics.delete(name)
                except KafkaError as exc:
                    res["error_code"], res["error_message"] = int(exc.code), str(exc)
            out.append(res)
        await self.topics.wait_for_metadata([o["name"] for o in out if not o["error_code"]], body.get("timeout_ms", 0),
                                            present=False)
        return {"throttle_time_ms": 0, "responses": out}

    async def create_partitions(self, req: Request) -> Body:
        body = req.body
        results = []
        pace = Pacer()  # the client names the topics
        for t in body["topics"]:
            if pace.due():
                await asyncio.sleep(0)
            res: Body = {"name": t["name"], "error_code": 0, "error_message": None}
            results.append(res)
            assignments = [list(a["broker_ids"]) for a in t.get("assignments") or []] or None
            try:
                await self.topics.add_partitions(t["name"], t["count"], assignments, body.get("validate_only", False))
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
        return {"throttle_time_ms": 0, "results": results}


def _hosts(brokers: dict[int, Any]) -> dict[int, str]:
    """The registered host of each broker: a failure domain below the rack (kafkarepl node
    runs one broker per core, so several brokers share a host)."""
    return {bid: b.host for bid, b in brokers.items()}


def _uuid(tid: Any) -> Any:
    if tid is None:
        return ZERO_UUID
    from kafkarepl.zk.znodes import topic_id_to_uuid

    return topic_id_to_uuid(tid) if isinstance(tid, str) else tid
