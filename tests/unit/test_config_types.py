"""DescribeConfigs' config_type: Kafka's ConfigDef types of topic and broker configs."""

from __future__ import annotations

import pytest

from kafkarepl.server.config import BrokerConfig, property_types
from kafkarepl.server.config_docs import BROKER_CONFIG_DOCS, TOPIC_CONFIG_DOCS, config_documentation
from kafkarepl.server.config_types import (
    TOPIC_CONFIG_TYPES,
    ConfigType,
    broker_config_type,
    topic_config_type,
)


@pytest.mark.parametrize("name, kind", [
    ("cleanup.policy", ConfigType.LIST), ("retention.ms", ConfigType.LONG), ("segment.bytes", ConfigType.INT),
    ("min.cleanable.dirty.ratio", ConfigType.DOUBLE), ("unclean.leader.election.enable", ConfigType.BOOLEAN),
    ("compression.type", ConfigType.STRING), ("leader.replication.throttled.replicas", ConfigType.LIST),
    ("no.such.config", ConfigType.UNKNOWN),
])
def test_topic_configs_have_kafkas_types(name: str, kind: ConfigType) -> None:
    assert topic_config_type(name) == kind


@pytest.mark.parametrize("name, kind", [
    ("broker.id", ConfigType.INT), ("log.retention.ms", ConfigType.LONG), ("log.segment.bytes", ConfigType.INT),
    ("offsets.topic.replication.factor", ConfigType.SHORT), ("auto.create.topics.enable", ConfigType.BOOLEAN),
    ("log.cleaner.min.cleanable.ratio", ConfigType.DOUBLE), ("listeners", ConfigType.LIST),
    ("log.dirs", ConfigType.LIST), ("zookeeper.connect", ConfigType.STRING),
    ("ssl.key.password", ConfigType.PASSWORD), ("sasl.jaas.config", ConfigType.PASSWORD),
    ("listener.name.sasl_plaintext.plain.sasl.jaas.config", ConfigType.PASSWORD),
    ("listener.name.internal.ssl.client.auth", ConfigType.STRING),
    ("leader.replication.throttled.rate", ConfigType.LONG), ("no.such.config", ConfigType.UNKNOWN),
    ("log.retention.hours", ConfigType.INT), ("log.dir", ConfigType.STRING),
])
def test_broker_configs_have_kafkas_types(name: str, kind: ConfigType) -> None:
    assert broker_config_type(name) == kind


def test_every_config_described_has_a_type() -> None:
    assert [n for n in BrokerConfig().topic_defaults() if topic_config_type(n) == ConfigType.UNKNOWN] == []
    assert [n for n in property_types() if broker_config_type(n) == ConfigType.UNKNOWN] == []


def test_dynamic_topic_defaults_use_kafkas_broker_names() -> None:
    from kafkarepl.server.configs import dynamic_topic_defaults

    assert dynamic_topic_defaults({
        "log.retention.ms": "1", "message.max.bytes": "2", "log.cleanup.policy": "compact",
        "unclean.leader.election.enable": "true", "min.insync.replicas": "2", "log.cleaner.min.compaction.lag.ms": "3",
        "leader.replication.throttled.rate": "10", "log.retention.hours": "1",  # not topic defaults here
    }) == {"retention.ms": "1", "max.message.bytes": "2", "cleanup.policy": "compact",
           "unclean.leader.election.enable": "true", "min.insync.replicas": "2", "min.compaction.lag.ms": "3"}


def test_every_topic_config_is_documented() -> None:
    """DescribeConfigs' documentation: each topic config Kafka defines has its line, and a
    broker's default of one is documented as that default."""
    from kafkarepl.server.configs import DYNAMIC_LOG_CONFIGS

    assert set(TOPIC_CONFIG_DOCS) == set(TOPIC_CONFIG_TYPES)
    assert all(doc.strip() for doc in TOPIC_CONFIG_DOCS.values())
    for broker_name, topic in DYNAMIC_LOG_CONFIGS.items():
        doc = config_documentation(broker_name, True, DYNAMIC_LOG_CONFIGS)
        assert doc == f"The default of the topic config {topic}: {TOPIC_CONFIG_DOCS[topic]}"
    assert config_documentation("no.such.config", True, DYNAMIC_LOG_CONFIGS) is None


def test_every_broker_config_is_documented() -> None:
    """The broker's own configs (not topic defaults) each have a line, under a listener
    prefix too; no line for a config the broker does not have."""
    from kafkarepl.server.configs import DYNAMIC_BROKER_CONFIGS, DYNAMIC_LOG_CONFIGS

    own = {name for name in {*property_types(), *DYNAMIC_BROKER_CONFIGS} if name not in DYNAMIC_LOG_CONFIGS}
    assert set(BROKER_CONFIG_DOCS) == own
    assert all(doc.strip() for doc in BROKER_CONFIG_DOCS.values())
    assert config_documentation("broker.id", True, DYNAMIC_LOG_CONFIGS) == BROKER_CONFIG_DOCS["broker.id"]
    assert config_documentation("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", True,
                                DYNAMIC_LOG_CONFIGS) == BROKER_CONFIG_DOCS["sasl.jaas.config"]
    assert config_documentation("listener.name.internal.ssl.client.auth", True,
                                DYNAMIC_LOG_CONFIGS) == BROKER_CONFIG_DOCS["ssl.client.auth"]
    assert config_documentation("broker.id", False, DYNAMIC_LOG_CONFIGS) is None  # not a topic config
