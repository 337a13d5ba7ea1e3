"""Metadata answers before and after the broker's first UpdateMetadata."""

from __future__ import annotations

import asyncio
from typing import Any

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
