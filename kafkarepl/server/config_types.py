"""Kafka's config types (ConfigDef.Type), as DescribeConfigs v3+ reports them in
`config_type`: admin clients and UIs render and edit a config by its type (a switch for
a boolean, items for a list, a masked field for a password)."""

from __future__ import annotations

from enum import IntEnum

from kafkarepl.server.config import PASSWORD_CONFIGS, config_candidates, property_types


class ConfigType(IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


T = ConfigType
# Kafka's topic configs (TopicConfig / LogConfig).
TOPIC_CONFIG_TYPES: dict[str, ConfigType] = {
    "cleanup.policy": T.LIST, "compression.type": T.STRING, "compression.gzip.level": T.INT,
    "compression.lz4.level": T.INT, "compression.zstd.level": T.INT, "delete.retention.ms": T.LONG,
    "file.delete.delay.ms": T.LONG, "flush.messages": T.LONG, "flush.ms": T.LONG,
    "follower.replication.throttled.replicas": T.LIST, "index.interval.bytes": T.INT,
    "leader.replication.throttled.replicas": T.LIST, "local.retention.bytes": T.LONG,
    "local.retention.ms": T.LONG, "max.compaction.lag.ms": T.LONG, "max.message.bytes": T.INT,
    "message.downconversion.enable": T.BOOLEAN, "message.format.version": T.STRING,
    "message.timestamp.after.max.ms": T.LONG, "message.timestamp.before.max.ms": T.LONG,
    "message.timestamp.difference.max.ms": T.LONG, "message.timestamp.type": T.STRING,
    "min.cleanable.dirty.ratio": T.DOUBLE, "min.compaction.lag.ms": T.LONG, "min.insync.replicas": T.INT,
    "preallocate": T.BOOLEAN, "remote.storage.enable": T.BOOLEAN, "remote.log.copy.disable": T.BOOLEAN,
    "remote.log.delete.on.disable": T.BOOLEAN, "retention.bytes": T.LONG,
    "retention.ms": T.LONG, "segment.bytes": T.INT, "segment.index.bytes": T.INT, "segment.jitter.ms": T.LONG,
    "segment.ms": T.LONG, "unclean.leader.election.enable": T.BOOLEAN,
}
# Broker configs whose type its default's Python type does not tell (an int is INT
# unless listed here; a string is STRING unless listed).
_BROKER_LONG = frozenset({
    "connections.max.idle.ms", "connections.max.reauth.ms", "queued.max.request.bytes", "replica.lag.time.max.ms",
    "replica.high.watermark.checkpoint.interval.ms", "log.roll.ms", "log.roll.jitter.ms", "log.retention.ms",
    "log.local.retention.ms", "log.local.retention.bytes",
    "log.retention.bytes", "log.retention.check.interval.ms", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.backoff.ms", "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms", "log.segment.delete.delay.ms", "leader.imbalance.check.interval.seconds",
    "controlled.shutdown.retry.backoff.ms", "offsets.retention.check.interval.ms",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "delegation.token.max.lifetime.ms", "delegation.token.expiry.time.ms",
    "delegation.token.expiry.check.interval.ms",
})
_BROKER_SHORT = frozenset({"offsets.topic.replication.factor", "transaction.state.log.replication.factor"})
_BROKER_LIST = frozenset({
    "listeners", "advertised.listeners", "log.dirs", "log.cleanup.policy", "sasl.enabled.mechanisms",
    "ssl.enabled.protocols", "ssl.cipher.suites",
})
_BY_PYTHON_TYPE: dict[type, ConfigType] = {bool: T.BOOLEAN, int: T.INT, float: T.DOUBLE, str: T.STRING}


def topic_config_type(name: str) -> ConfigType:
    return TOPIC_CONFIG_TYPES.get(name, T.UNKNOWN)


def broker_config_type(name: str) -> ConfigType:
    """A broker config's type; `listener.name.<l>.[<mechanism>.]<config>` is its config's."""
    types = property_types()
    for c in config_candidates(name):
        if c in PASSWORD_CONFIGS:
            return T.PASSWORD
        if c in _BROKER_LONG:
            return T.LONG
        if c in _BROKER_SHORT:
            return T.SHORT
        if c in _BROKER_LIST:
            return T.LIST
        if c in types:
            return _BY_PYTHON_TYPE[types[c]]
    return T.UNKNOWN
