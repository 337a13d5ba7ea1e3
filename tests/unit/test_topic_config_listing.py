"""DescribeConfigs of a topic (and CreateTopics' configs) list every topic config Kafka's
LogConfig lists that kafkarepl has, set or not: the throttled replica lists empty,
message.timestamp.difference.max.ms, file.delete.delay.ms and preallocate at Kafka's
defaults, as a Java AdminClient or UI expects to find them."""

from __future__ import annotations

import asyncio

from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.configs import RESOURCE_TOPIC, ConfigService
from kafkarepl.server.topics import CONFIG_SOURCE_DEFAULT, CONFIG_SOURCE_TOPIC, TopicService

LISTED = {
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "message.timestamp.difference.max.ms": "9223372036854775807",
    "file.delete.delay.ms": "60000",
    "preallocate": "false",
}


class FakeStore:
    def __init__(self, overrides: dict[str, str]) -> None:
        self.overrides = overrides

    async def topic_exists(self, name: str) -> bool:
        return name == "t"

    async def get_topic_config(self, name: str) -> dict[str, str]:
        return dict(self.overrides)

    async def get_broker_config(self, broker: object = None) -> dict[str, str]:
        return {}


def describe(overrides: dict[str, str]) -> dict:
    svc = ConfigService(1, FakeStore(overrides), BrokerConfig(), None, None)  # type: ignore[arg-type]
    return asyncio.run(svc.describe_with_synonyms(RESOURCE_TOPIC, "t"))


def test_unset_topic_configs_are_listed_at_kafkas_defaults() -> None:
    entries = describe({})
    for name, value in LISTED.items():
        assert entries[name] == (value, CONFIG_SOURCE_DEFAULT, False, []), name
    assert entries["retention.ms"][1] == CONFIG_SOURCE_DEFAULT  # the broker-backed ones as before


def test_overrides_show_as_topic_configs() -> None:
    entries = describe({"leader.replication.throttled.replicas": "0:1,", "preallocate": "true"})
    assert entries["leader.replication.throttled.replicas"][:2] == ("0:1,", CONFIG_SOURCE_TOPIC)
    assert entries["preallocate"][:2] == ("true", CONFIG_SOURCE_TOPIC)
    assert entries["file.delete.delay.ms"][:2] == ("60000", CONFIG_SOURCE_DEFAULT)


def test_create_topics_lists_them_too() -> None:
    svc = TopicService(None, BrokerConfig(), None, None)  # type: ignore[arg-type]
    configs = {n: (v, src) for n, v, src in svc.effective_configs({"file.delete.delay.ms": "1000"})}
    assert configs["file.delete.delay.ms"] == ("1000", CONFIG_SOURCE_TOPIC)
    for name in LISTED.keys() - {"file.delete.delay.ms"}:
        assert configs[name] == (LISTED[name], CONFIG_SOURCE_DEFAULT), name
