"""Broker configuration with Kafka's property names (server.properties)."""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kafkarepl.errors import KafkaError
from kafkarepl.server.io_priority import parse_io_priority
from kafkarepl.storage.config import LogConfig

# replica.selector.class values (Kafka's shipped selectors; "" is Kafka's null default)
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = frozenset({"", RACK_AWARE_SELECTOR, "org.apache.kafka.common.replica.LeaderSelector"})


class ConfigError(ValueError):
    """A bad configuration value; the message names the property."""


def parse_bool(v: str | bool) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def prop(name: str, default: Any) -> Any:
    """A broker property: its Kafka name, default, and parser (from the default's type)."""
    conv = parse_bool if isinstance(default, bool) else type(default)
    return field(default=default, metadata={"prop": name, "conv": conv})


@dataclass
class BrokerConfig:
    broker_id: int = prop("broker.id", 0)
    listeners: str = prop("listeners", "PLAINTEXT://127.0.0.1:9092")
    advertised_listeners: str = prop("advertised.listeners", "")
    listener_security_protocol_map: str = prop(
        "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
    # The listener the broker's own connections use (replica fetchers, controller
    # requests, transaction markers); unset: the one named by security.inter.broker.protocol
    # if there is one (Kafka's default PLAINTEXT), else the first listener.
    inter_broker_listener_name: str = prop("inter.broker.listener.name", "")
    security_inter_broker_protocol: str = prop("security.inter.broker.protocol", "PLAINTEXT")
    # TLS (server/tls.py), Kafka's names; PEM files or inline PEM (ssl.keystore.type=PEM)
    ssl_keystore_type: str = prop("ssl.keystore.type", "PEM")
    ssl_keystore_location: str = prop("ssl.keystore.location", "")
    ssl_keystore_certificate_chain: str = prop("ssl.keystore.certificate.chain", "")
    ssl_keystore_key: str = prop("ssl.keystore.key", "")
    ssl_key_password: str = prop("ssl.key.password", "")
    ssl_truststore_type: str = prop("ssl.truststore.type", "PEM")
    ssl_truststore_location: str = prop("ssl.truststore.location", "")
    ssl_truststore_certificates: str = prop("ssl.truststore.certificates", "")
    ssl_client_auth: str = prop("ssl.client.auth", "none")
    ssl_enabled_protocols: str = prop("ssl.enabled.protocols", "TLSv1.2,TLSv1.3")
    ssl_cipher_suites: str = prop("ssl.cipher.suites", "")
    ssl_endpoint_identification_algorithm: str = prop("ssl.endpoint.identification.algorithm", "https")
    ssl_principal_mapping_rules: str = prop("ssl.principal.mapping.rules", "DEFAULT")
    # SASL (server/sasl.py): Kafka's names (Kafka's default mechanism is GSSAPI, not offered here)
    sasl_enabled_mechanisms: str = prop("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    sasl_mechanism_inter_broker_protocol: str = prop("sasl.mechanism.inter.broker.protocol", "PLAIN")
    sasl_jaas_config: str = prop("sasl.jaas.config", "")
    connection_failed_authentication_delay_ms: int = prop("connection.failed.authentication.delay.ms", 100)
    connections_max_reauth_ms: int = prop("connections.max.reauth.ms", 0)  # KIP-368; 0: never
    # Frames a SASL listener reads before the login is done: Kafka's bound on what an
    # unauthenticated client can make the broker buffer.
    sasl_server_max_receive_size: int = prop("sasl.server.max.receive.size", 524288)
    # Delegation tokens (server/delegation_tokens.py, KIP-48): on when a secret is set (the
    # same on every broker: each derives tokens' HMACs from it); master.key is its old name
    delegation_token_secret_key: str = prop("delegation.token.secret.key", "")
    delegation_token_master_key: str = prop("delegation.token.master.key", "")
    delegation_token_max_lifetime_ms: int = prop("delegation.token.max.lifetime.ms", 7 * 24 * 3600 * 1000)
    delegation_token_expiry_time_ms: int = prop("delegation.token.expiry.time.ms", 24 * 3600 * 1000)
    delegation_token_expiry_check_interval_ms: int = prop("delegation.token.expiry.check.interval.ms", 3600 * 1000)
    # ACLs (server/authorizer.py): any authorizer.class.name turns Kafka's ACL semantics on
    authorizer_class_name: str = prop("authorizer.class.name", "")
    super_users: str = prop("super.users", "")
    allow_everyone_if_no_acl_found: bool = prop("allow.everyone.if.no.acl.found", False)
    log_dirs: str = prop("log.dirs", "/tmp/kafkarepl-logs")
    zookeeper_connect: str = prop("zookeeper.connect", "127.0.0.1:2181")
    zookeeper_session_timeout_ms: int = prop("zookeeper.session.timeout.ms", 18000)
    zookeeper_connection_timeout_ms: int = prop("zookeeper.connection.timeout.ms", 18000)
    # A broker whose listener refuses connections is fenced at once (server/liveness.py)
    # instead of after its session timeout; false: wait for the session, as Kafka.
    fast_failover_enable: bool = prop("kafkarepl.fast.failover.enable", True)
    broker_rack: str = prop("broker.rack", "")
    num_partitions: int = prop("num.partitions", 1)
    default_replication_factor: int = prop("default.replication.factor", 1)
    auto_create_topics_enable: bool = prop("auto.create.topics.enable", True)
    delete_topic_enable: bool = prop("delete.topic.enable", True)
    message_max_bytes: int = prop("message.max.bytes", 1048588)
    socket_request_max_bytes: int = prop("socket.request.max.bytes", 104857600)
    max_connections: int = prop("max.connections", 10000)
    # A connection with no bytes read or written for this long is closed (Kafka's
    # Selector idle expiry); negative: never.
    connections_max_idle_ms: int = prop("connections.max.idle.ms", 600000)
    # Kafka's default; a connection beyond it is closed at accept (docs/operations.md)
    max_connections_per_ip: int = prop("max.connections.per.ip", 2147483647)
    # "host:count,..." (Kafka's): per-address exceptions to max.connections.per.ip
    max_connections_per_ip_overrides: str = prop("max.connections.per.ip.overrides", "")
    # client quotas' rate windows (Kafka's quota.window.num / quota.window.size.seconds)
    quota_window_num: int = prop("quota.window.num", 11)
    quota_window_size_seconds: int = prop("quota.window.size.seconds", 1)
    # KIP-612: new connections per second on the client listeners (Kafka's default: no limit)
    max_connection_creation_rate: int = prop("max.connection.creation.rate", 2147483647)
    # Bytes of requests read and not yet answered, over all connections; Kafka's default
    # is -1 (unbounded): bounded here, a full pool makes connections wait (backpressure).
    queued_max_request_bytes: int = prop("queued.max.request.bytes", 268435456)
    # kafkarepl's own: decompressed bytes the leader may inflate to validate the
    # compressed batches of one produce request (Kafka has no such bound).
    max_decompressed_request_bytes: int = prop("kafkarepl.max.decompressed.request.bytes",
                                               67108864)
    # kafkarepl's own: array entries (topics, partitions, ...) one request may hold. A
    # decoded entry and what its handling builds take ~1 KiB here, against a few bytes on
    # the wire (Kafka has no such bound); a request past it has its connection closed.
    # The controller's UpdateMetadata names every partition with its replica lists.
    max_request_entries: int = prop("kafkarepl.max.request.entries", 1000000)
    replica_lag_time_max_ms: int = prop("replica.lag.time.max.ms", 30000)
    min_insync_replicas: int = prop("min.insync.replicas", 1)
    unclean_leader_election_enable: bool = prop("unclean.leader.election.enable", False)
    num_replica_fetchers: int = prop("num.replica.fetchers", 1)
    replica_fetch_min_bytes: int = prop("replica.fetch.min.bytes", 1)
    replica_fetch_max_bytes: int = prop("replica.fetch.max.bytes", 1048576)
    replica_fetch_response_max_bytes: int = prop("replica.fetch.response.max.bytes", 10485760)
    # KIP-541: record bytes one Fetch answer may carry, whatever the request asks (55 MiB)
    fetch_max_bytes: int = prop("fetch.max.bytes", 57671680)
    replica_fetch_wait_max_ms: int = prop("replica.fetch.wait.max.ms", 500)
    replica_fetch_backoff_ms: int = prop("replica.fetch.backoff.ms", 1000)
    # KIP-227 incremental fetch sessions (replica fetches only); 0: none (server/fetch_session.py)
    max_incremental_fetch_session_cache_slots: int = prop("max.incremental.fetch.session.cache.slots", 1000)
    hw_checkpoint_interval_ms: int = prop("replica.high.watermark.checkpoint.interval.ms", 5000)
    replica_selector_class: str = prop("replica.selector.class", "")
    log_segment_bytes: int = prop("log.segment.bytes", 1073741824)
    log_roll_ms: int = prop("log.roll.ms", 7 * 24 * 3600 * 1000)
    log_roll_jitter_ms: int = prop("log.roll.jitter.ms", 0)
    # Tiered storage's local retention defaults (-2: the topic's retention), accepted for
    # topics to describe as Kafka's do; tiered storage itself is not built.
    log_local_retention_ms: int = prop("log.local.retention.ms", -2)
    log_local_retention_bytes: int = prop("log.local.retention.bytes", -2)
    log_message_downconversion_enable: bool = prop("log.message.downconversion.enable", True)
    log_retention_ms: int = prop("log.retention.ms", 7 * 24 * 3600 * 1000)
    log_retention_bytes: int = prop("log.retention.bytes", -1)
    log_retention_check_interval_ms: int = prop("log.retention.check.interval.ms", 300000)
    # Log compaction (server/log_cleaner.py), Kafka's names and defaults.
    log_cleanup_policy: str = prop("log.cleanup.policy", "delete")
    log_cleaner_enable: bool = prop("log.cleaner.enable", True)
    log_cleaner_threads: int = prop("log.cleaner.threads", 1)
    log_cleaner_dedupe_buffer_size: int = prop("log.cleaner.dedupe.buffer.size", 134217728)
    log_cleaner_io_buffer_load_factor: float = prop("log.cleaner.io.buffer.load.factor", 0.9)
    log_cleaner_io_max_bytes_per_second: float = prop("log.cleaner.io.max.bytes.per.second", float("inf"))
    log_cleaner_backoff_ms: int = prop("log.cleaner.backoff.ms", 15000)
    log_cleaner_delete_retention_ms: int = prop("log.cleaner.delete.retention.ms", 86400000)
    log_cleaner_min_cleanable_ratio: float = prop("log.cleaner.min.cleanable.ratio", 0.5)
    log_cleaner_min_compaction_lag_ms: int = prop("log.cleaner.min.compaction.lag.ms", 0)
    log_cleaner_max_compaction_lag_ms: int = prop("log.cleaner.max.compaction.lag.ms", 2**63 - 1)
    # The cleaner threads' segment passes give up their core this often (microseconds; 0:
    # never; not a Kafka setting), so the event loop, woken on that core, waits at most
    # about this long behind them. See csrc/kr_bulk.c and bench/RESULTS.md.
    log_cleaner_yield_interval_us: int = prop("kafkarepl.log.cleaner.yield.interval.us", 100)
    # The cleaner threads' Linux nice value (0-19; not a Kafka setting). See
    # docs/operations.md: measured worse than the default for the loop's latency.
    log_cleaner_thread_nice: int = prop("kafkarepl.log.cleaner.thread.nice", 0)
    # Or the SCHED_IDLE policy for them (wins over the nice value); measured worse too.
    log_cleaner_thread_sched_idle: bool = prop("kafkarepl.log.cleaner.thread.sched.idle", False)
    # The cleaner threads' Linux I/O priority, as ionice: "" (unchanged), "idle", or
    # "best-effort:N" (N 0-7). Block schedulers that honour it (mq-deadline, bfq) serve
    # the bios the cleaner's own writeback and fsyncs submit after everyone else's.
    log_cleaner_thread_io_priority: str = prop("kafkarepl.log.cleaner.thread.io.priority", "")
    # Test-only: hold each cleaning this long with its cleaned segments staged, before the
    # swap, so fault tests can kill a broker at that point. 0 (never) outside tests.
    log_cleaner_test_pause_before_swap_ms: int = prop("kafkarepl.log.cleaner.test.pause.before.swap.ms", 0)
    log_index_interval_bytes: int = prop("log.index.interval.bytes", 4096)
    log_index_size_max_bytes: int = prop("log.index.size.max.bytes", 10485760)
    log_flush_interval_messages: int = prop("log.flush.interval.messages", 2**63 - 1)
    log_flush_interval_ms: int = prop("log.flush.interval.ms", 2**63 - 1)
    log_flush_offset_checkpoint_interval_ms: int = prop("log.flush.offset.checkpoint.interval.ms", 60000)
    log_flush_start_offset_checkpoint_interval_ms: int = prop("log.flush.start.offset.checkpoint.interval.ms", 60000)
    # How often flush.ms is checked. Kafka's default (Long.MAX_VALUE) never checks it, so a
    # topic's flush.ms does nothing there unless this is set; kafkarepl checks every second.
    log_flush_scheduler_interval_ms: int = prop("log.flush.scheduler.interval.ms", 1000)
    # The broker defaults of file.delete.delay.ms (how long a retired segment's data stays
    # for readers, storage/log.py) and preallocate (accepted, not honoured), Kafka's names.
    log_segment_delete_delay_ms: int = prop("log.segment.delete.delay.ms", 60000)
    log_preallocate: bool = prop("log.preallocate", False)
    log_message_timestamp_type: str = prop("log.message.timestamp.type", "CreateTime")
    compression_type: str = prop("compression.type", "producer")
    compression_gzip_level: int = prop("compression.gzip.level", -1)
    compression_lz4_level: int = prop("compression.lz4.level", 9)
    compression_zstd_level: int = prop("compression.zstd.level", 3)
    log_message_timestamp_before_max_ms: int = prop("log.message.timestamp.before.max.ms", 2**63 - 1)
    log_message_timestamp_after_max_ms: int = prop("log.message.timestamp.after.max.ms", 3600000)
    auto_leader_rebalance_enable: bool = prop("auto.leader.rebalance.enable", True)
    leader_imbalance_check_interval_seconds: int = prop("leader.imbalance.check.interval.seconds", 300)
    leader_imbalance_per_broker_percentage: int = prop("leader.imbalance.per.broker.percentage", 10)
    controlled_shutdown_enable: bool = prop("controlled.shutdown.enable", True)
    controlled_shutdown_max_retries: int = prop("controlled.shutdown.max.retries", 3)
    controlled_shutdown_retry_backoff_ms: int = prop("controlled.shutdown.retry.backoff.ms", 5000)
    request_timeout_ms: int = prop("request.timeout.ms", 30000)
    # Partition limits: Kafka 4.0 refuses more than 10,000 new partitions in one request
    # (checked before placing replicas); max.partitions is KIP-578's cluster-wide cap,
    # at the partition count Kafka's docs advise as a cluster's practical maximum.
    max_partitions_per_request: int = prop("max.partitions.per.request", 10000)
    max_partitions: int = prop("max.partitions", 200000)
    # Group coordinator (Kafka's names and defaults).
    offsets_topic_num_partitions: int = prop("offsets.topic.num.partitions", 50)
    offsets_topic_replication_factor: int = prop("offsets.topic.replication.factor", 3)
    offsets_topic_segment_bytes: int = prop("offsets.topic.segment.bytes", 104857600)
    # Transactions (server/txn_coordinator.py), Kafka's names and defaults.
    transaction_state_log_num_partitions: int = prop("transaction.state.log.num.partitions", 50)
    transaction_state_log_replication_factor: int = prop("transaction.state.log.replication.factor", 3)
    transaction_state_log_min_isr: int = prop("transaction.state.log.min.isr", 2)
    transaction_state_log_segment_bytes: int = prop("transaction.state.log.segment.bytes", 104857600)
    transaction_max_timeout_ms: int = prop("transaction.max.timeout.ms", 900000)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = prop(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000)
    transactional_id_expiration_ms: int = prop("transactional.id.expiration.ms", 604800000)
    transaction_partition_verification_enable: bool = prop("transaction.partition.verification.enable", True)
    # KIP-854: a producer id idle this long (no batch, no open transaction) is forgotten
    producer_id_expiration_ms: int = prop("producer.id.expiration.ms", 86400000)
    producer_id_expiration_check_interval_ms: int = prop("producer.id.expiration.check.interval.ms", 600000)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = prop(
        "transaction.remove.expired.transaction.cleanup.interval.ms", 3600000)
    offsets_retention_minutes: int = prop("offsets.retention.minutes", 10080)
    offsets_retention_check_interval_ms: int = prop("offsets.retention.check.interval.ms", 600000)
    # kafkarepl's own, for tests: retention in ms, overriding offsets.retention.minutes when >= 0
    offsets_retention_ms_override: int = prop("kafkarepl.offsets.retention.ms", -1)

    @property
    def offsets_retention_ms(self) -> int:
        if self.offsets_retention_ms_override >= 0:
            return self.offsets_retention_ms_override
        return self.offsets_retention_minutes * 60_000
    offsets_commit_timeout_ms: int = prop("offsets.commit.timeout.ms", 5000)
    offset_metadata_max_bytes: int = prop("offset.metadata.max.bytes", 4096)
    group_max_size: int = prop("group.max.size", 2147483647)  # members of a classic group
    group_initial_rebalance_delay_ms: int = prop("group.initial.rebalance.delay.ms", 3000)
    group_min_session_timeout_ms: int = prop("group.min.session.timeout.ms", 6000)
    group_max_session_timeout_ms: int = prop("group.max.session.timeout.ms", 1800000)
    # KIP-848 consumer groups (ConsumerGroupHeartbeat): set by the broker, not the members
    group_consumer_session_timeout_ms: int = prop("group.consumer.session.timeout.ms", 45000)
    group_consumer_heartbeat_interval_ms: int = prop("group.consumer.heartbeat.interval.ms", 5000)
    group_consumer_max_size: int = prop("group.consumer.max.size", 2147483647)
    group_consumer_assignors: str = prop("group.consumer.assignors", "uniform,range")  # the first the default
    group_consumer_migration_policy: str = prop("group.consumer.migration.policy", "bidirectional")
    metrics_port: int = prop("metrics.port", -1)
    cluster_name: str = prop("cluster.name", "kafkarepl")
    # Properties we do not interpret are kept, so topic-level defaults can be derived.
    extra: dict[str, str] = field(default_factory=dict)
    explicit: frozenset[str] = field(default=frozenset(), compare=False)  # keys the properties set

    @classmethod
    def from_props(cls, props: dict[str, str]) -> BrokerConfig:
        kwargs: dict[str, Any] = {}
        extra: dict[str, str] = {}
        known = _properties()
        for key, raw in props.items():
            spec = known.get(key)
            if spec is None:
                extra[key] = raw
                continue
            attr, conv = spec
            try:
                kwargs[attr] = conv(raw)
            except ValueError as exc:
                raise ConfigError(f"invalid value for {key}: {raw!r} ({exc})") from None
        kwargs.update(_coarse_time_settings(props))
        if "log.dirs" not in props and "log.dir" in props:  # Kafka's single-directory form
            kwargs["log_dirs"] = props["log.dir"]
        cfg = cls(**kwargs, extra=extra, explicit=frozenset(props))
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
        if self.sasl_server_max_receive_size <= 0:
            raise ConfigError("sasl.server.max.receive.size must be > 0")
        if self.max_connection_creation_rate < 0:
            raise ConfigError("max.connection.creation.rate must be >= 0")
        if self.quota_window_num < 1 or self.quota_window_size_seconds < 1:
            raise ConfigError("quota.window.num and quota.window.size.seconds must be >= 1")
        if self.max_connections_per_ip < 1:
            raise ConfigError("max.connections.per.ip must be >= 1")
        self.connections_per_ip_overrides()  # raises on a malformed one
        self.listener_connection_rates()
        if self.producer_id_expiration_ms < 1 or self.producer_id_expiration_check_interval_ms < 1:
            raise ConfigError("producer.id.expiration.ms and producer.id.expiration.check.interval.ms must be >= 1")
        if self.fetch_max_bytes < 1024:
            raise ConfigError("fetch.max.bytes must be >= 1024")
        if self.queued_max_request_bytes == 0 or self.queued_max_request_bytes < -1:
            raise ConfigError("queued.max.request.bytes must be -1 (unbounded) or > 0")
        if self.log_segment_delete_delay_ms < 0:
            raise ConfigError("log.segment.delete.delay.ms must be >= 0")
        if self.max_request_entries < 1000:
            raise ConfigError("kafkarepl.max.request.entries must be >= 1000")
        if self.max_decompressed_request_bytes <= 0:
            raise ConfigError("kafkarepl.max.decompressed.request.bytes must be > 0")
        if self.log_cleaner_thread_io_priority:
            try:
                parse_io_priority(self.log_cleaner_thread_io_priority)
            except ValueError as exc:
                raise ConfigError(f"kafkarepl.log.cleaner.thread.io.priority: {exc}") from None
        if self.offsets_topic_num_partitions < 1 or self.offsets_topic_replication_factor < 1:
            raise ConfigError("offsets.topic.num.partitions and offsets.topic.replication.factor must be >= 1")
        if min(self.delegation_token_max_lifetime_ms, self.delegation_token_expiry_time_ms,
               self.delegation_token_expiry_check_interval_ms) < 1:
            raise ConfigError("delegation.token.max.lifetime.ms, delegation.token.expiry.time.ms and "
                              "delegation.token.expiry.check.interval.ms must be >= 1")
        if self.replica_selector_class not in REPLICA_SELECTORS:
            # Kafka fails to start on a class it cannot load; these are the ones it ships
            raise ConfigError(f"replica.selector.class: {self.replica_selector_class!r} is not one of "
                              + ", ".join(sorted(c for c in REPLICA_SELECTORS if c)) + " (or empty)")
        self.inter_broker_listener()  # raises on malformed listeners
        self.advertised_specs()

    @property
    def rack_aware_reads(self) -> bool:
        """KIP-392: consumers sent to an in-sync follower in their client.rack. Off unless
        replica.selector.class names the rack-aware selector (Kafka's default: none, so
        consumers read from leaders whatever their rack)."""
        return self.replica_selector_class == RACK_AWARE_SELECTOR

    @property
    def delegation_token_secret(self) -> str:
        """The secret tokens are signed with; empty: delegation tokens are off."""
        return self.delegation_token_secret_key or self.delegation_token_master_key

    def listener(self) -> tuple[str, int]:
        """(host, port) of the first listener."""
        first = self.listener_specs()[0]
        return first.host, first.port

    def connections_per_ip_overrides(self) -> dict[str, int]:
        return parse_connections_per_ip_overrides(self.max_connections_per_ip_overrides)

    def listener_specs(self) -> list[ListenerSpec]:
        """`listeners`, each with its security protocol (listener.security.protocol.map)."""
        mapping = {k.strip().upper(): v.strip().upper() for k, _, v in
                   (kv.partition(":") for kv in self.listener_security_protocol_map.split(",") if ":" in kv)}
        specs: list[ListenerSpec] = []
        for item in (x.strip() for x in self.listeners.split(",") if x.strip()):
            name = item.split("://", 1)[0].upper() if "://" in item else "PLAINTEXT"
            host, port = parse_listener(item)
            protocol = mapping.get(name, name)
            if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                raise ConfigError(f"listener {name}: unknown security protocol {protocol} "
                                  "(listener.security.protocol.map)")
            if any(s.name == name for s in specs):
                raise ConfigError(f"listeners: {name} appears twice")
            if port and any(s.port == port and s.host == host for s in specs):
                raise ConfigError(f"listeners: {host}:{port} appears twice")
            specs.append(ListenerSpec(name, host, port, protocol))
        if not specs:
            raise ConfigError("listeners is empty")
        return specs

    def advertised_specs(self) -> dict[str, tuple[str, int]]:
        """Each listener's advertised (host, port): advertised.listeners by name, else
        the listener's own; port 0 means the port it was bound to."""
        own = {s.name: (s.host, s.port) for s in self.listener_specs()}
        out = dict(own)
        for item in (x.strip() for x in self.advertised_listeners.split(",") if x.strip()):
            name = item.split("://", 1)[0].upper() if "://" in item else self.listener_specs()[0].name
            if name not in own:
                raise ConfigError(f"advertised.listeners: {name} is not in listeners")
            out[name] = parse_listener(item)
        for name, (host, port) in out.items():
            if host in ("", "0.0.0.0", "::"):
                out[name] = (socket.gethostname(), port)
        return out

    def inter_broker_listener(self) -> ListenerSpec:
        specs = self.listener_specs()
        wanted = self.inter_broker_listener_name.strip().upper()
        if wanted:
            for s in specs:
                if s.name == wanted:
                    return s
            raise ConfigError(f"inter.broker.listener.name {wanted} is not in listeners")
        by_protocol = self.security_inter_broker_protocol.strip().upper()
        return next((s for s in specs if s.name == by_protocol), specs[0])

    def security_protocol(self, listener: str | None = None) -> str:
        """The security protocol of a listener (default: the inter-broker one)."""
        if listener is None:
            return self.inter_broker_listener().protocol
        return next(s.protocol for s in self.listener_specs() if s.name == listener)

    def listener_name(self) -> str:
        return self.inter_broker_listener().name

    def jaas_config(self, mechanism: str, listener: str | None = None) -> str:
        """listener.name.<listener>.<mechanism>.sasl.jaas.config, else sasl.jaas.config
        (listener: default the inter-broker one)."""
        name = (listener or self.listener_name()).lower()
        key = f"listener.name.{name}.{mechanism.lower()}.sasl.jaas.config"
        return self.extra.get(key) or self.sasl_jaas_config or self._jaas_file_section(name)

    def listener_setting(self, key: str, listener: str | None = None, mechanism: str | None = None,
                         default: str | None = None) -> str | None:
        """A setting as Kafka looks it up for a listener: listener-and-mechanism-prefixed
        (`listener.name.<l>.<mechanism>.<key>`), listener-prefixed, then plain."""
        name = (listener or self.listener_name()).lower()
        keys = [f"listener.name.{name}.{key}", key]
        if mechanism:
            keys.insert(0, f"listener.name.{name}.{mechanism.lower()}.{key}")
        return next((self.extra[k] for k in keys if k in self.extra), default)

    def listener_connection_rates(self) -> dict[str, int]:
        """listener.name.<listener>.max.connection.creation.rate, by listener name."""
        out: dict[str, int] = {}
        for spec in self.listener_specs():
            value = self.extra.get(f"listener.name.{spec.name.lower()}.max.connection.creation.rate")
            if value is not None:
                if not value.strip().isdigit():
                    raise ConfigError(f"listener.name.{spec.name.lower()}.max.connection.creation.rate must be >= 0")
                out[spec.name] = int(value)
        return out

    def _jaas_file_section(self, listener: str) -> str:
        """The `<listener>.KafkaServer { ... };` or `KafkaServer { ... };` section of a JAAS
        file (java.security.auth.login.config, as Kafka's KAFKA_OPTS=-D... names it)."""
        path = self.extra.get("java.security.auth.login.config")
        if not path:
            return ""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"java.security.auth.login.config: {exc}") from None
        sections = dict(re.findall(r"([\w.-]+)\s*\{(.*?)\}\s*;", text, re.S))
        return sections.get(f"{listener}.KafkaServer") or sections.get("KafkaServer", "")

    def advertised(self) -> tuple[str, int]:
        """The inter-broker listener's advertised (host, port)."""
        return self.advertised_specs()[self.listener_name()]

    def log_dir_list(self) -> list[str]:
        return [d.strip() for d in self.log_dirs.split(",") if d.strip()]

    def as_props(self) -> dict[str, str]:
        out = {}
        for key, (attr, _conv) in _properties().items():
            v = getattr(self, attr)
            out[key] = str(v).lower() if isinstance(v, bool) else str(v)
        out.update(self.extra)
        return out

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level defaults of topic configs, under the topic config names."""
        return {
            "segment.bytes": str(self.log_segment_bytes),
            "segment.ms": str(self.log_roll_ms),
            "segment.jitter.ms": str(self.log_roll_jitter_ms),
            "retention.ms": str(self.log_retention_ms),
            "retention.bytes": str(self.log_retention_bytes),
            "index.interval.bytes": str(self.log_index_interval_bytes),
            "segment.index.bytes": str(self.log_index_size_max_bytes),
            "max.message.bytes": str(self.message_max_bytes),
            "message.timestamp.type": self.log_message_timestamp_type,
            "message.timestamp.before.max.ms": str(self.log_message_timestamp_before_max_ms),
            "message.timestamp.after.max.ms": str(self.log_message_timestamp_after_max_ms),
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election_enable).lower(),
            "flush.messages": str(self.log_flush_interval_messages),
            "flush.ms": str(self.log_flush_interval_ms),
            "cleanup.policy": self.log_cleanup_policy,
            "delete.retention.ms": str(self.log_cleaner_delete_retention_ms),
            "min.cleanable.dirty.ratio": str(self.log_cleaner_min_cleanable_ratio),
            "min.compaction.lag.ms": str(self.log_cleaner_min_compaction_lag_ms),
            "max.compaction.lag.ms": str(self.log_cleaner_max_compaction_lag_ms),
            "compression.type": self.compression_type,
            "compression.gzip.level": str(self.compression_gzip_level),
            "compression.lz4.level": str(self.compression_lz4_level),
            "compression.zstd.level": str(self.compression_zstd_level),
            "file.delete.delay.ms": str(self.log_segment_delete_delay_ms),
            "preallocate": str(self.log_preallocate).lower(),
            "local.retention.ms": str(self.log_local_retention_ms),
            "local.retention.bytes": str(self.log_local_retention_bytes),
            "message.downconversion.enable": str(self.log_message_downconversion_enable).lower(),
        }


@dataclass(frozen=True)
class ListenerSpec:
    name: str  # e.g. PLAINTEXT, SSL, or any name mapped by listener.security.protocol.map
    host: str
    port: int
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL


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


@functools.cache
def _properties() -> dict[str, tuple[str, Any]]:
    """Kafka property name -> (attribute, parser), from the field declarations (read-only)."""
    return {f.metadata["prop"]: (f.name, f.metadata["conv"]) for f in fields(BrokerConfig) if "prop" in f.metadata}


# Kafka settings read only as other settings' fallbacks: log.dir for log.dirs, and the
# coarser units of log.retention.ms, log.roll.ms and log.roll.jitter.ms (Kafka's own
# server.properties sets log.retention.hours=168).
ALIAS_PROPERTIES: dict[str, type] = {"log.retention.minutes": int, "log.retention.hours": int,
                                     "log.roll.hours": int, "log.roll.jitter.hours": int, "log.dir": str}
# attribute -> (its own property, the coarser ones standing for it when it is not set)
_COARSE_TIME_SETTINGS = {"log_retention_ms": ("log.retention.ms", ("log.retention.minutes", "log.retention.hours")),
                         "log_roll_ms": ("log.roll.ms", ("log.roll.hours",)),
                         "log_roll_jitter_ms": ("log.roll.jitter.ms", ("log.roll.jitter.hours",))}


def _coarse_time_settings(props: dict[str, str]) -> dict[str, int]:
    """The ms settings given only in coarser units, resolved by the log config's own units
    and precedence (storage/config.py: minutes over hours), as KafkaConfig's
    logRetentionTimeMillis and logRollTimeMillis; a negative retention is -1."""
    coarse = {n: props[n] for _ms, names in _COARSE_TIME_SETTINGS.values() for n in names if n in props}
    if not coarse:
        return {}
    try:
        resolved = LogConfig.from_props(coarse)
    except KafkaError as exc:
        raise ConfigError(str(exc)) from None
    values = {"log_retention_ms": max(resolved.retention_ms, -1), "log_roll_ms": resolved.segment_ms,
              "log_roll_jitter_ms": resolved.segment_jitter_ms}
    return {attr: values[attr] for attr, (ms, names) in _COARSE_TIME_SETTINGS.items()
            if ms not in props and any(n in props for n in names)}


@functools.cache
def property_types() -> dict[str, type]:
    """Kafka property name -> the Python type of its value (bool, int, float, str)."""
    out = {f.metadata["prop"]: type(f.default) for f in fields(BrokerConfig) if "prop" in f.metadata}
    return {**out, **ALIAS_PROPERTIES}


def jaas_options(jaas: str) -> dict[str, str]:
    """The key="value" (or key=value) options of a JAAS login module entry."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in re.finditer(r'([^\s=";]+)\s*=\s*(?:"([^"]*)"|([^\s;"]+))', jaas or "")}


def config_candidates(name: str) -> list[str]:
    """The config a broker setting is: itself, and for `listener.name.<listener>.[<mechanism>.]<config>`
    the names past the listener's name and past a SASL mechanism's."""
    if not name.startswith("listener.name."):
        return [name]
    rest = name[len("listener.name."):].partition(".")[2]
    return [name, rest, rest.partition(".")[2]]


# Kafka's PASSWORD-type broker configs (ConfigDef.Type.PASSWORD): never shown by
# DescribeConfigs, whether set plainly or under a listener (and mechanism) prefix.
PASSWORD_CONFIGS = frozenset({
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "sasl.jaas.config",
    "sasl.oauthbearer.client.credentials.client.secret", "delegation.token.secret.key",
    "delegation.token.master.key", "password.encoder.secret", "password.encoder.old.secret",
})


def config_is_sensitive(name: str, dynamic: Collection[str] = ()) -> bool:
    """As Kafka's KafkaConfig.maybeSensitive: a PASSWORD config, or one whose type is not
    known (to be safe): neither a property of this file nor in `dynamic` (the dynamic-only
    broker configs). `listener.name.<listener>.[<mechanism>.]<config>` is its config's."""
    known = property_types()
    candidates = config_candidates(name)
    for c in candidates:
        if c in PASSWORD_CONFIGS:
            return True
    return not any(c in known or c in dynamic for c in candidates)


def parse_connections_per_ip_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides ("host:count,...") as address -> limit; host
    names are resolved once, as Kafka's InetAddress.getByName does."""
    out: dict[str, int] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        host, sep, count = entry.strip().rpartition(":")  # rpartition: IPv6 addresses
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: {entry!r} is not host:count")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                address = socket.gethostbyname(host)
            except OSError as exc:
                raise ConfigError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None
        out[address] = int(count)
    return out
