"""DescribeConfigs of a topic (and CreateTopics' configs) list every topic config Kafka's
LogConfig lists that kafkarepl has, set or not, as a Java AdminClient or UI expects to
find them: the throttled replica lists and tiered storage's switches at LogConfig's
defaults (no broker setting); file.delete.delay.ms, preallocate, segment.jitter.ms, the
local retentions and message.downconversion.enable at their broker defaults with those as
synonyms; remote.storage.enable=true refused, as by a broker without tiered storage; message.timestamp.difference.max.ms only when a topic has it, as Kafka
4.0, which removed it and its broker default."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.configs import (
    CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER,
    CONFIG_SOURCE_STATIC_BROKER,
    DYNAMIC_LOG_CONFIGS,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigService,
)
from kafkarepl.server.topics import (
    CONFIG_SOURCE_DEFAULT,
    CONFIG_SOURCE_TOPIC,
    TopicService,
    validate_topic_configs,
)
from kafkarepl.storage import LogConfig

LISTED = {  # no broker setting: Kafka's LogConfig default, no synonyms
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "remote.storage.enable": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
}
BROKER_BACKED = {  # topic config -> (broker synonym, Kafka's default)
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", "60000"),
    "preallocate": ("log.preallocate", "false"),
    "segment.jitter.ms": ("log.roll.jitter.hours", "0"),  # Kafka: the ms form has no default
    "local.retention.ms": ("log.local.retention.ms", "-2"),
    "local.retention.bytes": ("log.local.retention.bytes", "-2"),
    "message.downconversion.enable": ("log.message.downconversion.enable", "true"),
}


class FakeStore:
    def __init__(self, overrides: dict[str, str], cluster_default: dict[str, str] | None = None,
                 broker: dict[str, str] | None = None) -> None:
        self.overrides = overrides
        self.cluster_default = cluster_default or {}
        self.broker = broker or {}

    async def topic_exists(self, name: str) -> bool:
        return name == "t"

    async def get_topic_config(self, name: str) -> dict[str, str]:
        return dict(self.overrides)

    async def get_broker_config(self, broker: object = None) -> dict[str, str]:
        return dict(self.cluster_default) if broker is None else dict(self.broker)


def describe(overrides: dict[str, str], config: BrokerConfig | None = None,
             cluster_default: dict[str, str] | None = None) -> dict:
    svc = ConfigService(1, FakeStore(overrides, cluster_default), config or BrokerConfig(),
                        None, None)  # type: ignore[arg-type]
    return asyncio.run(svc.describe_with_synonyms(RESOURCE_TOPIC, "t"))


def test_unset_topic_configs_are_listed_at_kafkas_defaults() -> None:
    entries = describe({})
    for name, value in LISTED.items():
        assert entries[name] == (value, CONFIG_SOURCE_DEFAULT, False, []), name
    for name, (broker, value) in BROKER_BACKED.items():
        assert entries[name] == (value, CONFIG_SOURCE_DEFAULT, False, [(broker, value, CONFIG_SOURCE_DEFAULT)]), name
    assert entries["retention.ms"][1] == CONFIG_SOURCE_DEFAULT  # the broker-backed ones as before


def test_message_timestamp_difference_max_ms_is_listed_only_when_a_topic_has_it() -> None:
    # Kafka 4.0 removed it and log.message.timestamp.difference.max.ms: its DescribeConfigs
    # does not list it; a topic that has it (from a 3.x cluster) shows its value, with
    # itself as the only synonym. A broker property of that name is no default for it.
    assert "message.timestamp.difference.max.ms" not in describe({})
    props = BrokerConfig.from_props({"log.message.timestamp.difference.max.ms": "1000"})
    assert "message.timestamp.difference.max.ms" not in describe({}, props)
    entries = describe({"message.timestamp.difference.max.ms": "5000"}, props)
    assert entries["message.timestamp.difference.max.ms"] == (
        "5000", CONFIG_SOURCE_TOPIC, False, [("message.timestamp.difference.max.ms", "5000", CONFIG_SOURCE_TOPIC)])


def test_file_delete_delay_synonyms_in_kafkas_order() -> None:
    cfg = BrokerConfig.from_props({"log.segment.delete.delay.ms": "5000"})
    entries = describe({"file.delete.delay.ms": "100"}, cfg, {"log.segment.delete.delay.ms": "7000"})
    assert entries["file.delete.delay.ms"] == ("100", CONFIG_SOURCE_TOPIC, False, [
        ("file.delete.delay.ms", "100", CONFIG_SOURCE_TOPIC),
        ("log.segment.delete.delay.ms", "7000", CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER),
        ("log.segment.delete.delay.ms", "5000", CONFIG_SOURCE_STATIC_BROKER),
        ("log.segment.delete.delay.ms", "60000", CONFIG_SOURCE_DEFAULT),
    ])
    # Without the override, the dynamic cluster default is the value.
    assert describe({}, cfg, {"log.segment.delete.delay.ms": "7000"})["file.delete.delay.ms"][:2] == (
        "7000", CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER)


def test_broker_defaults_are_dynamic_as_kafkas_log_configs() -> None:
    assert DYNAMIC_LOG_CONFIGS["log.segment.delete.delay.ms"] == "file.delete.delay.ms"
    assert DYNAMIC_LOG_CONFIGS["log.preallocate"] == "preallocate"
    assert "log.message.timestamp.difference.max.ms" not in DYNAMIC_LOG_CONFIGS


def test_overrides_show_as_topic_configs() -> None:
    entries = describe({"leader.replication.throttled.replicas": "0:1,", "preallocate": "true"})
    assert entries["leader.replication.throttled.replicas"][:2] == ("0:1,", CONFIG_SOURCE_TOPIC)
    assert entries["preallocate"][:2] == ("true", CONFIG_SOURCE_TOPIC)
    assert entries["file.delete.delay.ms"][:2] == ("60000", CONFIG_SOURCE_DEFAULT)


def test_create_topics_lists_them_too() -> None:
    svc = TopicService(None, BrokerConfig(), None, None)  # type: ignore[arg-type]
    configs = {n: (v, src) for n, v, src in svc.effective_configs({"file.delete.delay.ms": "1000"})}
    assert configs["file.delete.delay.ms"] == ("1000", CONFIG_SOURCE_TOPIC)
    assert configs["preallocate"] == ("false", CONFIG_SOURCE_DEFAULT)
    assert "message.timestamp.difference.max.ms" not in configs
    for name in LISTED:
        assert configs[name] == (LISTED[name], CONFIG_SOURCE_DEFAULT), name


@pytest.mark.parametrize(("configs", "error"), [
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    ({"local.retention.ms": "-3"}, "local.retention.ms"),
    ({"message.downconversion.enable": "sometimes"}, "message.downconversion.enable"),
])
def test_tiered_storage_settings_are_refused_as_a_broker_without_it_refuses_them(configs, error) -> None:
    storage = SimpleNamespace(log_config=lambda overrides: LogConfig.from_props(overrides))
    validate_topic_configs({"remote.storage.enable": "false", "local.retention.bytes": "-2"}, storage)
    with pytest.raises(KafkaError, match=error) as err:
        validate_topic_configs(configs, storage)
    assert err.value.code is ErrorCode.INVALID_CONFIG


def test_broker_ms_settings_are_null_with_kafkas_hours_as_their_synonyms() -> None:
    # Kafka keeps these defaults in hours: log.retention.ms reads null, its synonym the hours.
    def broker(cfg: BrokerConfig) -> dict:
        svc = ConfigService(1, FakeStore({}), cfg, None, None)  # type: ignore[arg-type]
        return asyncio.run(svc.describe_with_synonyms(RESOURCE_BROKER, "1"))

    hours = ("log.retention.hours", "168", CONFIG_SOURCE_DEFAULT)
    entries = broker(BrokerConfig())
    assert entries["log.retention.ms"] == (None, CONFIG_SOURCE_DEFAULT, False, [hours])
    assert entries["log.retention.hours"] == ("168", CONFIG_SOURCE_DEFAULT, True, [hours])
    assert entries["log.roll.ms"][:2] == (None, CONFIG_SOURCE_DEFAULT)
    entries = broker(BrokerConfig.from_props({"log.retention.hours": "1"}))
    assert entries["log.retention.ms"] == (None, CONFIG_SOURCE_STATIC_BROKER, False, [
        ("log.retention.hours", "1", CONFIG_SOURCE_STATIC_BROKER), hours])
    # and the topics' retention.ms, from the same settings
    assert describe({}, BrokerConfig.from_props({"log.retention.hours": "1"}))["retention.ms"] == (
        "3600000", CONFIG_SOURCE_STATIC_BROKER, False, [("log.retention.hours", "1", CONFIG_SOURCE_STATIC_BROKER), hours])


def test_a_brokers_dynamic_listener_stores_are_listed_as_alterable() -> None:
    """kafka-configs --describe --entity-type brokers --entity-name 1 after a keystore
    rotation: the listener-prefixed store settings are dynamic per-broker configs, not
    read-only, and their passwords are hidden."""
    from kafkarepl.server.configs import CONFIG_SOURCE_DYNAMIC_BROKER

    mine = {"listener.name.external.ssl.keystore.location": "/etc/kafka/b1.p12",
            "listener.name.external.ssl.keystore.password": "encoded"}
    svc = ConfigService(1, FakeStore({}, broker=mine), BrokerConfig(), None, None)  # type: ignore[arg-type]
    entries = asyncio.run(svc.describe_with_synonyms(RESOURCE_BROKER, "1"))
    value, source, read_only, _syn = entries["listener.name.external.ssl.keystore.location"]
    assert (value, source, read_only) == ("/etc/kafka/b1.p12", CONFIG_SOURCE_DYNAMIC_BROKER, False)
    assert entries["listener.name.external.ssl.keystore.password"][2] is False
    assert entries["log.dirs"][2] is True  # a static one stays read-only
