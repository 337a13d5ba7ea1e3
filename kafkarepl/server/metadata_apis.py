"""Request layer of Metadata and DescribeCluster, answered from the metadata cache (never
from ZooKeeper, so a client storm is no ZooKeeper storm)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kafkarepl.aio import Pacer
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ZERO_UUID, Request
from kafkarepl.server.authorized_ops import OMITTED, ResourceType, authorized_operations
from kafkarepl.server.listeners import endpoint_for
from kafkarepl.server.metadata_cache import MetadataCache
from kafkarepl.server.topics import TopicService, validate_topic_name

Body = dict[str, Any]


class MetadataApis:
    def __init__(
        self,
        metadata: MetadataCache,
        topics: TopicService,
        cluster_id: str,
        auto_create_topics: bool,
    ) -> None:
        self.metadata = metadata
        self.topics = topics
        self.cluster_id = cluster_id
        self.auto_create_topics = auto_create_topics

    def brokers(self) -> list[Body]:
        # Before the first UpdateMetadata none, as Kafka: were this broker listed before
        # the controller is known, with controller_id -1, librdkafka's admin client would
        # wait for a controller without asking again (CreateTopics hung 30 s+ against a
        # cluster just started, about one run in two).
        cache = self.metadata
        out = []
        for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id):
            ep = endpoint_for(b.endpoints, (b.host, b.port))
            if ep is not None:  # a broker without the client's listener is left out
                out.append({"node_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack})
        return out

    async def metadata_request(self, req: Request) -> Body:
        body = req.body
        cache = self.metadata
        requested = body.get("topics")
        if requested is not None and req.api_version == 0 and not requested:
            requested = None  # v0: an empty list means all topics
        if requested is None:
            asked: list[tuple[str | None, uuid.UUID]] = [(n, ZERO_UUID) for n in sorted(cache.topics)]
        else:
            asked = [(t.get("name"), t.get("topic_id") or ZERO_UUID) for t in requested]
        allow_auto = body.get("allow_auto_topic_creation", True) and self.auto_create_topics
        topic_ops = authorized_operations(ResourceType.TOPIC, body.get("include_topic_authorized_operations", False))
        topics_out = []
        pace = Pacer()  # a client may name any number of topics
        for name, topic_id in asked:
            if pace.due():
                await asyncio.sleep(0)
            if req.api_version >= 12 and topic_id != ZERO_UUID:
                # asked by topic id (KIP-516: kafka-topics.sh --topic-id); the name, null or
                # "" (the Java client's default), is not looked at, as in Kafka
                by_id = cache.topic_by_id(topic_id)
                if by_id is None:
                    topics_out.append(_topic_error(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                    continue
                name = by_id.name
            elif name is None:  # v10-11: an id, not looked up; the name is nullable only from v12
                topics_out.append(_topic_error(None if req.api_version >= 12 else "", ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            info = cache.topics.get(name)
            if info is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if validate_topic_name(name):
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif allow_auto:
                    code = await self.topics.auto_create(name)
                topics_out.append(_topic_error(name, code))
                continue
            parts = []
            for p in sorted(info.partitions.values(), key=lambda x: x.partition):
                parts.append({
                    "error_code": int(ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else ErrorCode.NONE),
                    "partition_index": p.partition,
                    "leader_id": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": p.replicas,
                    "isr_nodes": p.isr,
                    # dead brokers' replicas, and those on failed log dirs (KIP-112)
                    "offline_replicas": [r for r in p.replicas
                                         if r not in cache.brokers or r in p.offline_replicas],
                })
            topics_out.append({
                "error_code": 0,
                "name": name,
                "topic_id": info.topic_id,
                "is_internal": name.startswith("__"),
                "partitions": parts,
                "topic_authorized_operations": topic_ops,
            })
        return {
            "throttle_time_ms": 0,
            "brokers": self.brokers(),
            "cluster_id": self.cluster_id,
            "controller_id": cache.controller_id,
            "topics": topics_out,
            "cluster_authorized_operations": authorized_operations(
                ResourceType.CLUSTER, body.get("include_cluster_authorized_operations", False)),
        }

    async def describe_cluster(self, req: Request) -> Body:
        return {
            "throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": self.cluster_id, "controller_id": self.metadata.controller_id,
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                        for b in self.brokers()],
            "cluster_authorized_operations": authorized_operations(
                ResourceType.CLUSTER, req.body.get("include_cluster_authorized_operations", False)),
        }


def _topic_error(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> Body:
    return {"error_code": int(code), "name": name, "topic_id": topic_id, "is_internal": False, "partitions": [],
            "topic_authorized_operations": OMITTED}
