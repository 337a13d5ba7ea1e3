"""Broker configuration with Kafka's property names (server.properties)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A bad configuration value; the message names the property."""


def _bool(v: str) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


# property name -> (attribute, type, default)
_PROPS: dict[str, tuple[str, Any, Any]] = {
    "broker.id": ("broker_id", int, 0),
    "listeners": ("listeners", str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": ("advertised_listeners", str, ""),
    "log.dirs": ("log_dirs", str, "/tmp/kafkarepl-logs"),
    "zookeeper.connect": ("zookeeper_connect", str, "127.0.0.1:2181"),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", int, 18000),
    "zookeeper.connection.timeout.ms": ("zookeeper_connection_timeout_ms", int, 18000),
    "broker.rack": ("broker_rack", str, ""),
    "num.partitions": ("num_partitions", int, 1),
    "default.replication.factor": ("default_replication_factor", int, 1),
    "auto.create.topics.enable": ("auto_create_topics_enable", _bool, True),
    "delete.topic.enable": ("delete_topic_enable", _bool, True),
    "message.max.bytes": ("message_max_bytes", int, 1048588),
    "socket.request.max.bytes": ("socket_request_max_bytes", int, 104857600),
    "max.connections": ("max_connections", int, 10000),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", int, 30000),
    "min.insync.replicas": ("min_insync_replicas", int, 1),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool, False),
    "num.replica.fetchers": ("num_replica_fetchers", int, 1),
    "replica.fetch.min.bytes": ("replica_fetch_min_bytes", int, 1),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", int, 1048576),
    "replica.fetch.response.max.bytes": ("replica_fetch_response_max_bytes", int, 10485760),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", int, 500),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", int, 1000),
    "replica.high.watermark.checkpoint.interval.ms": ("hw_checkpoint_interval_ms", int, 5000),
    "replica.selector.class": ("replica_selector_class", str, ""),
    "log.segment.bytes": ("log_segment_bytes", int, 1073741824),
    "log.roll.ms": ("log_roll_ms", int, 7 * 24 * 3600 * 1000),
    "log.retention.ms": ("log_retention_ms", int, 7 * 24 * 3600 * 1000),
    "log.retention.bytes": ("log_retention_bytes", int, -1),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", int, 300000),
    "log.index.interval.bytes": ("log_index_interval_bytes", int, 4096),
    "log.index.size.max.bytes": ("log_index_size_max_bytes", int, 10485760),
    "log.flush.interval.messages": ("log_flush_interval_messages", int, 2**63 - 1),
    "log.flush.interval.ms": ("log_flush_interval_ms", int, 2**63 - 1),
    "log.flush.offset.checkpoint.interval.ms": ("log_flush_offset_checkpoint_interval_ms", int, 60000),
    "log.message.timestamp.type": ("log_message_timestamp_type", str, "CreateTime"),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", _bool, True),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", int, 300),
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", int, 10),
    "controlled.shutdown.enable": ("controlled_shutdown_enable", _bool, True),
    "controlled.shutdown.max.retries": ("controlled_shutdown_max_retries", int, 3),
    "controlled.shutdown.retry.backoff.ms": ("controlled_shutdown_retry_backoff_ms", int, 5000),
    "request.timeout.ms": ("request_timeout_ms", int, 30000),
    "metrics.port": ("metrics_port", int, -1),
    "cluster.name": ("cluster_name", str, "kafkarepl"),
}


@dataclass
class BrokerConfig:
    broker_id: int = 0
    listeners: str = "PLAINTEXT://127.0.0.1:9092"
    advertised_listeners: str = ""
    log_dirs: str = "/tmp/kafkarepl-logs"
    zookeeper_connect: str = "127.0.0.1:2181"
    zookeeper_session_timeout_ms: int = 18000
    zookeeper_connection_timeout_ms: int = 18000
    broker_rack: str = ""
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 104857600
    max_connections: int = 10000
    replica_lag_time_max_ms: int = 30000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    num_replica_fetchers: int = 1
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1000
    hw_checkpoint_interval_ms: int = 5000
    replica_selector_class: str = ""
    log_segment_bytes: int = 1073741824
    log_roll_ms: int = 7 * 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300000
    log_index_interval_bytes: int = 4096
    log_index_size_max_bytes: int = 10485760
    log_flush_interval_messages: int = 2**63 - 1
    log_flush_interval_ms: int = 2**63 - 1
    log_flush_offset_checkpoint_interval_ms: int = 60000
    log_message_timestamp_type: str = "CreateTime"
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    request_timeout_ms: int = 30000
    metrics_port: int = -1
    cluster_name: str = "kafkarepl"
    # Properties we do not interpret are kept, so topic-level defaults can be derived.
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_props(cls, props: dict[str, str]) -> BrokerConfig:
        kwargs: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for key, raw in props.items():
            spec = _PROPS.get(key)
            if spec is None:
                extra[key] = raw
                continue
            attr, conv, _default = spec
            try:
                kwargs[attr] = conv(raw)
            except ValueError as exc:
                raise ConfigError(f"invalid value for {key}: {raw!r} ({exc})") from None
        cfg = cls(**kwargs, extra=extra)
        cfg.validate()
        return cfg

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] | None = None) -> BrokerConfig:
        props: dict[str, str] = {}
        if path:
            props.update(parse_properties(Path(path).read_text()))
        for item in overrides or []:
            if "=" not in item:
                raise ConfigError(f"override must be key=value, got {item!r}")
            k, v = item.split("=", 1)
            props[k.strip()] = v.strip()
        return cls.from_props(props)

    def validate(self) -> None:
        if self.broker_id < 0:
            raise ConfigError("broker.id must be >= 0")
        if self.min_insync_replicas < 1:
            raise ConfigError("min.insync.replicas must be >= 1")
        if self.message_max_bytes <= 0 or self.socket_request_max_bytes <= 0:
            raise ConfigError("message.max.bytes and socket.request.max.bytes must be > 0")
        self.listener()  # raises on a malformed listener

    def listener(self) -> tuple[str, int]:
        """(host, port) of the first PLAINTEXT listener."""
        return parse_listener(self.listeners)

    def advertised(self) -> tuple[str, int]:
        host, port = parse_listener(self.advertised_listeners or self.listeners)
        if host in ("", "0.0.0.0"):
            host = socket.gethostname()
        return host, port

    def log_dir_list(self) -> list[str]:
        return [d.strip() for d in self.log_dirs.split(",") if d.strip()]

    def as_props(self) -> dict[str, str]:
        out = {}
        for key, (attr, _conv, _d) in _PROPS.items():
            v = getattr(self, attr)
            out[key] = str(v).lower() if isinstance(v, bool) else str(v)
        out.update(self.extra)
        return out

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level defaults of topic configs, under the topic config names."""
        return {
            "segment.bytes": str(self.log_segment_bytes),
            "segment.ms": str(self.log_roll_ms),
            "retention.ms": str(self.log_retention_ms),
            "retention.bytes": str(self.log_retention_bytes),
            "index.interval.bytes": str(self.log_index_interval_bytes),
            "segment.index.bytes": str(self.log_index_size_max_bytes),
            "max.message.bytes": str(self.message_max_bytes),
            "message.timestamp.type": self.log_message_timestamp_type,
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election_enable).lower(),
            "flush.messages": str(self.log_flush_interval_messages),
            "flush.ms": str(self.log_flush_interval_ms),
            "cleanup.policy": "delete",
            "compression.type": "producer",
        }


def parse_listener(spec: str) -> tuple[str, int]:
    first = spec.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, sep, port = first.rpartition(":")
    if not sep:
        raise ConfigError(f"listener must be [PLAINTEXT://]host:port, got {spec!r}")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise ConfigError(f"listener port is not a number: {spec!r}") from None


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                props[k.strip()] = v.strip()
                break
        else:
            raise ConfigError(f"line {n}: expected key=value, got {line!r}")
    return props


def config_field_names() -> list[str]:
    return [f.name for f in fields(BrokerConfig)]
