"""Metadata answers before and after the broker's first UpdateMetadata."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from kafkarepl.protocol.api import Request
from kafkarepl.server.metadata_apis import MetadataApis
from kafkarepl.server.metadata_cache import MetadataCache


def metadata(apis: MetadataApis) -> dict[str, Any]:
    req = Request(ApiKey.METADATA, 9, 1, "c", {"topics": [], "allow_auto_topic_creation": False}, 0)
    return asyncio.run(apis.metadata_request(req))


def test_no_broker_listed_until_the_controller_sent_update_metadata() -> None:
    """As Kafka: a broker whose metadata has not arrived lists no broker (controller -1
    with a broker list makes librdkafka's admin client wait for a controller forever)."""
    cache = MetadataCache("PLAINTEXT")
    apis = MetadataApis(cache, None, "cid", False)  # type: ignore[arg-type]  # no topic is looked up
    before = metadata(apis)
    assert before["brokers"] == [] and before["controller_id"] == -1
    cache.update({"controller_id": 2, "controller_epoch": 1, "live_brokers": [
        {"id": 1, "endpoints": [{"listener": "PLAINTEXT", "host": "h1", "port": 9092}], "rack": None},
        {"id": 2, "endpoints": [{"listener": "PLAINTEXT", "host": "h2", "port": 9093}], "rack": "r"}]})
    after = metadata(apis)
    assert after["controller_id"] == 2
    assert [(b["node_id"], b["host"], b["port"], b["rack"]) for b in after["brokers"]] == [
        (1, "h1", 9092, None), (2, "h2", 9093, "r")]


def _topic_state(name: str, tid: uuid.UUID, leader: int = 1) -> dict[str, Any]:
    return {"topic_name": name, "topic_id": tid, "partition_states": [
        {"partition_index": 0, "leader": leader, "leader_epoch": 0, "isr": [1], "replicas": [1]}]}


def by_id(apis: MetadataApis, version: int, *ids: uuid.UUID) -> list[tuple[int, str | None, uuid.UUID, int]]:
    req = Request(ApiKey.METADATA, version, 1, "c", {"topics": [{"name": None, "topic_id": i} for i in ids],
                                                      "allow_auto_topic_creation": True}, 0)
    out = asyncio.run(apis.metadata_request(req))["topics"]
    return [(t["error_code"], t["name"], t["topic_id"], len(t["partitions"])) for t in out]


def test_topics_asked_by_id_from_v12() -> None:
    """Metadata v12 looks topics up by id (KIP-516: kafka-topics.sh --describe --topic-id,
    Admin.describeTopics(TopicCollection.ofTopicIds)); an unknown id is UNKNOWN_TOPIC_ID
    with the id echoed, never auto-created; before v12 ids are not looked up (nor
    echoed). Ids follow
    a topic deleted and created again under the same name."""
    cache = MetadataCache("PLAINTEXT")
    apis = MetadataApis(cache, None, "cid", True)  # type: ignore[arg-type]  # ids never auto-create
    a, b, gone = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    cache.update({"topic_states": [_topic_state("a", a), _topic_state("b", b)]})
    assert by_id(apis, 12, b, gone) == [(0, "b", b, 1), (ErrorCode.UNKNOWN_TOPIC_ID, None, gone, 0)]
    assert by_id(apis, 11, a) == [(ErrorCode.UNKNOWN_TOPIC_ID, "", uuid.UUID(int=0), 0)]
    # the Java client leaves the name "" (its default) beside the id: the id decides
    req = Request(ApiKey.METADATA, 12, 1, "c", {"topics": [{"name": "", "topic_id": a}],
                                                 "allow_auto_topic_creation": True}, 0)
    assert [(t["error_code"], t["name"]) for t in asyncio.run(apis.metadata_request(req))["topics"]] == [(0, "a")]
    cache.update({"topic_states": [_topic_state("a", a, leader=-2)]})  # deleted
    assert by_id(apis, 12, a) == [(ErrorCode.UNKNOWN_TOPIC_ID, None, a, 0)]
    a2 = uuid.uuid4()
    cache.update({"topic_states": [_topic_state("a", a2)]})  # created again: a new id
    assert by_id(apis, 12, a, a2) == [(ErrorCode.UNKNOWN_TOPIC_ID, None, a, 0), (0, "a", a2, 1)]
    assert cache.topic_by_id(b).name == "b"
