"""The broker's composition root: every service is built here, given what it uses through
its constructor, and started and stopped here in order. Nothing else holds a Broker.

    ZooKeeper store ─┬─ Controller ── ControllerChannel ── AlterPartitionManager
                     ├─ TopicService, ConfigService, ProducerIdManager
    LogManager ── LogStorage ── ReplicaManager (sans-I/O) ─┬─ ReplicaFetcherManager
                                                           └─ GroupCoordinatorService
    request layer (ReplicaApis, MetadataApis, TopicApis, ConfigApis, ControllerApis,
    groups) ── RequestHandlers ── SocketServer

Where a LeaderAndIsr is applied: ReplicaApis.leader_and_isr -> ReplicaManager.
become_leader_or_follower (kafkarepl/replication/replica_manager.py), the only code
that changes a local replica's role; only the controller sends LeaderAndIsr.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from kafkarepl.aio import with_timeout
from kafkarepl.controller.channel import NetworkBrokerChannel
from kafkarepl.controller.controller import Controller
from kafkarepl.coordinator import OFFSETS_TOPIC
from kafkarepl.coordinator.txn_log import TXN_TOPIC
from kafkarepl.errors import KafkaError
from kafkarepl.replication import (
    BrokerTopicStats,
    ReplicaManager,
    ReplicationMetrics,
    TopicPartition,
)
from kafkarepl.server import listener_keystores, profiling
from kafkarepl.server.acl_apis import AclApis
from kafkarepl.server.acl_store import AclStore
from kafkarepl.server.alter_partition import AlterPartitionManager
from kafkarepl.server.authorizer import Authorizer
from kafkarepl.server.client_quota_apis import ClientQuotaApis
from kafkarepl.server.client_quotas import ClientQuotas
from kafkarepl.server.clock import SystemClock
from kafkarepl.server.config import (
    BrokerConfig,
    ConfigError,
    parse_bool,
    parse_connections_per_ip_overrides,
)
from kafkarepl.server.config_changes import ConfigChangeListener
from kafkarepl.server.configs import ConfigApis, ConfigService, dynamic_topic_defaults
from kafkarepl.server.controller_apis import ControllerApis, request_controlled_shutdown
from kafkarepl.server.controller_channel import ControllerChannel
from kafkarepl.server.delegation_tokens import (
    DelegationTokenApis,
    DelegationTokenCache,
    TokenChangeListener,
    TokenLogin,
    TokenPolicy,
)
from kafkarepl.server.fetch_session import FetchSessionCache
from kafkarepl.server.group_coordinator import GroupCoordinatorService
from kafkarepl.server.handlers import RequestHandlers
from kafkarepl.server.listener_keystores import ListenerKeystores
from kafkarepl.server.listeners import Listener
from kafkarepl.server.liveness import DeadBrokerFencer, Registration
from kafkarepl.server.log_cleaner import LogCleanerService
from kafkarepl.server.log_dir_apis import LogDirApis
from kafkarepl.server.log_dir_failure import LogDirFailureHandler
from kafkarepl.server.log_dir_mover import RATE_CONFIG as LOG_DIR_RATE
from kafkarepl.server.log_dir_mover import LogDirMover
from kafkarepl.server.log_flusher import LogFlusher
from kafkarepl.server.metadata_apis import MetadataApis
from kafkarepl.server.metadata_cache import MetadataCache
from kafkarepl.server.metrics import BrokerMetrics
from kafkarepl.server.network import SocketServer
from kafkarepl.server.password_encoder import PasswordEncoder
from kafkarepl.server.producer_ids import ProducerIdManager
from kafkarepl.server.quota_gate import ClientQuotaGate
from kafkarepl.server.replica_apis import ReplicaApis
from kafkarepl.server.replica_fetcher import ReplicaFetcherManager
from kafkarepl.server.replica_storage import LogStorage, log_config
from kafkarepl.server.replication_quota import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationThrottle,
)
from kafkarepl.server.request_authorization import RequestAuthorizer
from kafkarepl.server.request_metrics import RequestMetrics
from kafkarepl.server.scram_credentials import ScramCredentials
from kafkarepl.server.ssl_principal import SslPrincipalMapper
from kafkarepl.server.stall_dump import StallWatchdog
from kafkarepl.server.tls import client_security, listener_props, sasl_factory, server_context
from kafkarepl.server.topics import TopicApis, TopicService
from kafkarepl.server.txn_coordinator import TransactionCoordinatorService
from kafkarepl.server.txn_verification import TransactionVerifier
from kafkarepl.server.zk_guard import GuardedStore
from kafkarepl.storage.manager import LogManager
from kafkarepl.zk.client import AsyncZk, WatchHandle
from kafkarepl.zk.store import KafkaZkStore
from kafkarepl.zk.znodes import Endpoint

log = logging.getLogger(__name__)


# A shutdown still running after this long logs its threads' and tasks' stacks
# (stall_dump): a test harness or an init system kills a stuck broker after ~30 s.
SHUTDOWN_STALL_DUMP_S = 15.0

class Broker:
    def __init__(self, config: BrokerConfig, zk: AsyncZk, store: KafkaZkStore, cluster_id: str,
                 dynamic: Mapping[str, str] | None = None) -> None:
        """Build every service; nothing runs until start(). Use Broker.connect().
        `dynamic`: this broker's dynamic configs when it starts (its listeners' keystores)."""
        self.config = config
        self.broker_id = bid = config.broker_id
        self.zk, self.store, self.cluster_id = zk, store, cluster_id
        self.clock = clock = SystemClock()
        guarded = GuardedStore(store)
        self.metadata = metadata = MetadataCache(config.listener_name())
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start()
        # One thread for the checkpoints' writes: they never run concurrently with each
        # other, and never on the event loop.
        self._io_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-io")
        # The fdatasyncs of the logs' flushes (rolls, flush.messages, flush.ms): apart from
        # the checkpoints, which a long writeback would otherwise hold up (Kafka's
        # background threads).
        self._flush_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-flush")
        self.flusher = LogFlusher(self._flush_executor, self._background,
                                  lambda lg: self.replicas.log_flushed(TopicPartition(lg.topic, lg.partition)))
        self.log_manager = LogManager(config.log_dir_list(), log_config(config, {}),
                                      on_dir_failure=LogDirFailureHandler(bid, zk.client.stop,
                                                                          take_offline=self._dir_failed),
                                      on_flush=self.flusher.request)
        storage = LogStorage(self.log_manager, config)
        self.scram = ScramCredentials(store, guarded)  # SCRAM logins and Alter/DescribeUserScramCredentials
        self.token_cache = DelegationTokenCache()  # delegation tokens' SCRAM logins
        # client byte-rate quotas (quota.window.num windows of quota.window.size.seconds)
        self.client_quotas = ClientQuotas(clock.monotonic_ms, config.quota_window_num,
                                          config.quota_window_size_seconds, config.max_connection_creation_rate,
                                          config.listener_connection_rates())
        self.client_quota_apis = ClientQuotaApis(store, guarded, self.client_quotas)
        # ACLs (authorizer.class.name): cached on every broker from ZooKeeper (acl_store.py)
        self.authorizer = (Authorizer([u.strip() for u in config.super_users.split(";") if u.strip()],
                                      config.allow_everyone_if_no_acl_found)
                           if config.authorizer_class_name else None)
        self.acl_store = AclStore(zk, self.authorizer) if self.authorizer is not None else None
        encoder = PasswordEncoder.of(config)
        try:  # the listeners start with the keystores set dynamically, as Kafka's
            tls_config = listener_keystores.effective(config, dynamic or {}, encoder)
        except ConfigError as exc:
            log.error("broker %d: dynamic listener keystores not used: %s", bid, exc)
            tls_config = config
        security = client_security(tls_config)  # this broker's connections to the others
        served = listener_keystores.ServedIdentities(tls_config)
        self.fencer = fencer = DeadBrokerFencer(bid, self._registered_endpoint, store.fence_dead_broker,
                                                distrust_s=config.zookeeper_session_timeout_ms / 1000,
                                                enabled=config.fast_failover_enable)
        self.controller = Controller(
            bid, zk, NetworkBrokerChannel(client_id=f"controller-{bid}", on_connection_lost=fencer.suspect,
                                          security=security),
            config=config.as_props(), store=store,
        )
        self.controller_channel = channel = ControllerChannel(bid, metadata, self.controller,
                                                              on_connection_lost=fencer.suspect,
                                                              security=security)
        self.leader_throttle = ReplicationThrottle(bid, LEADER_REPLICAS, clock.monotonic_ms)
        self.follower_throttle = ReplicationThrottle(bid, FOLLOWER_REPLICAS, clock.monotonic_ms)
        self.fetchers = ReplicaFetcherManager(bid, config, self._endpoint_of, fencer.suspect, self.follower_throttle,
                                              security, self.flusher.flushed)
        alter_partition = AlterPartitionManager(bid, lambda: self.replicas.broker_epoch, channel, self._topic_id)
        self.topic_stats = BrokerTopicStats()  # Kafka's BrokerTopicMetrics
        self.request_metrics = RequestMetrics()  # Kafka's RequestMetrics
        self.replicas = replicas = ReplicaManager(
            bid,
            storage,
            alter_partition,
            self.fetchers,
            clock,
            ReplicationMetrics(),
            known_partition=lambda tp: metadata.partition(tp.topic, tp.partition) is not None,
            internal_topics=frozenset({OFFSETS_TOPIC, TXN_TOPIC}),
            wakeup_at=self._arm_purgatory,
            leader_throttle=self.leader_throttle,
            topic_stats=self.topic_stats,
        )
        self.fetchers.replicas = replicas
        slots = config.max_incremental_fetch_session_cache_slots
        # A session's follower fetch times (ISR, low watermark) stay fresher than a third
        # of replica.lag.time.max.ms (see fetch_session.py).
        self.fetch_sessions = FetchSessionCache(
            slots, refresh_ms=max(1000, min(10_000, config.replica_lag_time_max_ms // 3))
        ) if slots > 0 else None
        if self.fetch_sessions is not None:
            replicas.add_listener(self.fetch_sessions.on_partition_changed)
        self.cleaner = LogCleanerService(self.log_manager, config, self._partition_high_watermark, clock.wall_ms)
        self.log_dir_mover = LogDirMover(self.log_manager, replicas, self.cleaner.pause, self.cleaner.resume,
                                         on_swapped=self._checkpoints_after_move,
                                         known=lambda tp: metadata.partition(*tp) is not None)
        topics = TopicService(guarded, config, storage, metadata)
        configs = ConfigService(bid, guarded, config, storage, replicas, served)
        self._configs = configs
        self._storage = storage
        self.config_changes = ConfigChangeListener(zk, store, replicas, self._topic_overrides,
                                                   on_broker_configs=self._load_broker_configs,
                                                   on_user_change=self.scram.reload,
                                                   on_quota_change=self.client_quota_apis.reload)
        producer_ids = ProducerIdManager(bid, guarded)
        self.txn = TransactionCoordinatorService(config, metadata, replicas, topics, clock, producer_ids.next_id,
                                                 security)
        replicas.add_listener(self.txn.on_partition_changed)
        self.txn_verifier = TransactionVerifier(bid, metadata, self.txn, security)
        self.groups = GroupCoordinatorService(config, metadata, replicas, topics, clock, self.txn.find,
                                              acl_version=lambda: self.authorizer.version if self.authorizer else 0)
        replicas.add_listener(self.groups.on_partition_changed)
        quota_gate = ClientQuotaGate(self.client_quotas, self._topic_partitions, config.num_partitions)
        request_authorizer = RequestAuthorizer(
            self.authorizer, lambda tid: (t.name if (t := metadata.topic_by_id(tid)) is not None else None))
        self.tokens = DelegationTokenApis(
            store, guarded, self.token_cache, config.delegation_token_secret,
            TokenPolicy(config.delegation_token_max_lifetime_ms, config.delegation_token_expiry_time_ms),
            request_authorizer.allowed, clock.wall_ms)
        self.token_changes = TokenChangeListener(zk, store, self.tokens)
        self.producer_id_expiration_ms = config.producer_id_expiration_ms  # dynamic
        self.replica_apis = ReplicaApis(
            replicas, metadata, self._topic_overrides, self._checkpoint_log_starts,
            on_txn_marker=self.groups.on_txn_marker,
            verify_txn=self.txn_verifier.verify if config.transaction_partition_verification_enable else None,
            clock_ms=clock.wall_ms,
            marker_timeout_ms=config.request_timeout_ms,
            fetch_sessions=self.fetch_sessions, topic_stats=self.topic_stats,
            fetch_max_bytes=config.fetch_max_bytes, rack_aware_reads=config.rack_aware_reads)
        handlers = RequestHandlers(
            self.replica_apis,
            MetadataApis(metadata, topics, cluster_id, config.auto_create_topics_enable),
            TopicApis(topics, metadata),
            ConfigApis(configs),
            ControllerApis(channel),
            self.groups,
            producer_ids,
            AclApis(self.authorizer, self.acl_store),
            LogDirApis(self.log_manager, replicas, self.log_dir_mover),
            self.txn,
            self.scram,
            self.client_quota_apis,
            self.tokens,
            quota_gate,
            request_authorizer,
        )
        first, *more = self._listeners(tls_config)
        self.server = SocketServer(
            first.host, first.port, handlers.handle, handlers.on_unsupported_version,
            config.socket_request_max_bytes, config.max_connections,
            queued_max_request_bytes=config.queued_max_request_bytes,
            connections_max_idle_ms=config.connections_max_idle_ms,
            max_connections_per_ip=config.max_connections_per_ip,
            max_connections_per_ip_overrides=config.connections_per_ip_overrides(),
            max_decompressed_request_bytes=config.max_decompressed_request_bytes,
            max_request_entries=config.max_request_entries,
            ssl_context=first.ssl_context, sasl_factory=first.sasl_factory,
            failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
            sasl_max_receive_size=config.sasl_server_max_receive_size,
            listener_name=first.name, principal_name=first.principal_name, more_listeners=more,
            connection_throttle=self.client_quotas.record_connection,
            accept_throttle=self.client_quotas.record_broker_connection,
            protected_listener=config.inter_broker_listener().name,
            request_costs=quota_gate,
            request_metrics=self.request_metrics,
        )
        self.listener_keystores = ListenerKeystores(
            config, tls_config, self.server.listeners, {spec.name: spec.protocol for spec in config.listener_specs()},
            config.inter_broker_listener().name, security, encoder, served)
        self.metrics = BrokerMetrics(bid, replicas, self.server, self.controller, self.fetch_sessions,
                                     sources=(self.cleaner.metrics, self._replication_quota_metrics, fencer.metrics,
                                              self.client_quotas.metrics, self.log_manager.metrics,
                                              self._topic_metrics, self.request_metrics.snapshot))
        self._tasks: list[asyncio.Future] = []
        self._background_tasks: set[asyncio.Future] = set()
        self._purgatory_timer: asyncio.TimerHandle | None = None
        self._purgatory_at = -1
        self.started_at = 0.0
        self._stopping = False
        self._registration_watch: WatchHandle | None = None
        self._throttled_before = False

    @classmethod
    async def connect(cls, config: BrokerConfig) -> Broker:
        """Open the ZooKeeper session and the cluster layout, then build the broker."""
        zk = AsyncZk(config.zookeeper_connect, session_timeout_ms=config.zookeeper_session_timeout_ms)
        await zk.start(timeout=config.zookeeper_connection_timeout_ms / 1000)
        store = KafkaZkStore(zk)
        await zk.until_done(store.ensure_layout, "cluster layout")
        cluster_id = await zk.until_done(store.get_cluster_id, "cluster id")
        dynamic = await zk.until_done(lambda: store.get_broker_config(config.broker_id), "dynamic broker configs")
        return cls(config, zk, store, cluster_id, dynamic)

    # ------------------------------------------------------------- wiring helpers -----
    def _listeners(self, config: BrokerConfig) -> list[Listener]:
        """Every listener with its own security (Kafka's listener.security.protocol.map)."""
        out = []
        for spec in config.listener_specs():
            mapper = SslPrincipalMapper(listener_props(config, spec.name)["ssl.principal.mapping.rules"])
            out.append(Listener(
                spec.name, spec.host, spec.port,
                server_context(config, spec.name, spec.protocol) if spec.protocol in ("SSL", "SASL_SSL") else None,
                sasl_factory(config, self.scram, spec.name, self._token_login if config.delegation_token_secret
                             else None) if spec.protocol.startswith("SASL") else None,
                mapper.name))
        return out

    def _token_login(self, mechanism: str, token_id: str) -> TokenLogin | None:
        return self.token_cache.login(mechanism, token_id, self.clock.wall_ms())

    def _advertised(self) -> dict[str, tuple[str, int]]:
        """Each listener's advertised endpoint, with the bound port for port 0."""
        bound = self.server.bound_ports()
        return {name: (host, port or bound[name]) for name, (host, port) in self.config.advertised_specs().items()}

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        return self.metadata.replica_endpoint(broker_id)

    async def _registered_endpoint(self, broker_id: int) -> Registration | None:
        found = await self.store.get_registration(broker_id)
        if found is None:
            return None
        info, session = found
        return info.host, info.port, info.epoch, session

    def _topic_partitions(self, name: str | None, topic_id: Any) -> int:
        """A topic's partitions in this broker's metadata, by name or id (0: unknown)."""
        t = self.metadata.topics.get(name) if name else self.metadata.topic_by_id(topic_id)
        return len(t.partitions) if t is not None else 0

    def _partition_high_watermark(self, topic: str, partition: int) -> int | None:
        p = self.replicas.get(TopicPartition(topic, partition))
        return None if p is None else p.high_watermark

    async def _topic_overrides(self, topic: str) -> dict[str, str]:
        """A topic's overrides, as LeaderAndIsr and config changes read them; the
        replication throttles take their `*.replication.throttled.replicas` from here."""
        overrides = await self._configs.topic_overrides(topic)
        self.leader_throttle.update_topic(topic, overrides)
        self.follower_throttle.update_topic(topic, overrides)
        return overrides

    async def _load_broker_configs(self) -> None:
        """Dynamic broker configs in effect here (own over the cluster default): the
        replication throttle rates, and the topic defaults (log.retention.ms, ...), which
        every local partition of a topic without its own override takes at once."""
        own = await self.store.get_broker_config(self.broker_id)
        merged = {**await self.store.get_broker_config(), **own}
        self.listener_keystores.apply(own)
        defaults = dynamic_topic_defaults(merged)
        try:
            log_config(self.config, defaults)
        except (ValueError, KafkaError) as exc:  # each entity was checked alone; together they conflict
            log.error("broker %d: dynamic topic defaults %s not applied: %s", self.broker_id, defaults, exc)
            defaults = self._storage.dynamic_defaults()
        if self._storage.set_dynamic_defaults(defaults):
            topics = sorted({tp.topic for tp in self.replicas.partitions})
            for topic, overrides in (await self.store.get_topic_configs(topics)).items():
                self.replicas.reconfigure_topic(topic, overrides)
            log.info("broker %d: dynamic topic defaults %s", self.broker_id, defaults)
        self._apply_connection_limits(merged)
        self._apply_producer_state_configs(merged)
        self.leader_throttle.set_rate(merged.get(LEADER_RATE))
        self.follower_throttle.set_rate(merged.get(FOLLOWER_RATE))
        self.log_dir_mover.set_rate(merged.get(LOG_DIR_RATE))
        if LEADER_RATE in merged or FOLLOWER_RATE in merged or self._throttled_before:
            log.info("broker %d: replication throttle rates leader %s follower %s B/s", self.broker_id,
                     merged.get(LEADER_RATE, "unlimited"), merged.get(FOLLOWER_RATE, "unlimited"))
        self._throttled_before = LEADER_RATE in merged or FOLLOWER_RATE in merged

    def _apply_producer_state_configs(self, merged: dict[str, str]) -> None:
        """producer.id.expiration.ms and transaction.partition.verification.enable set
        dynamically (Kafka's ProducerStateManagerConfig reconfigurables), over
        server.properties."""
        cfg = self.config
        try:
            self.producer_id_expiration_ms = int(merged.get("producer.id.expiration.ms", cfg.producer_id_expiration_ms))
            verify = parse_bool(merged.get("transaction.partition.verification.enable",
                                           cfg.transaction_partition_verification_enable))
        except ValueError as exc:  # written by hand: Alter refuses it
            log.warning("broker %d: dynamic producer state configs not applied: %s", self.broker_id, exc)
            return
        self.replica_apis.verify_txn = self.txn_verifier.verify if verify else None

    def _apply_connection_limits(self, merged: dict[str, str]) -> None:
        """The connection limits set dynamically (Kafka's DynamicConnectionQuota), over
        server.properties; a value that does not parse keeps the static one."""
        cfg, server = self.config, self.server
        try:
            server.max_connections = int(merged.get("max.connections", cfg.max_connections))
            server.max_connections_per_ip = int(merged.get("max.connections.per.ip", cfg.max_connections_per_ip))
            self.client_quotas.max_connection_creation_rate = int(
                merged.get("max.connection.creation.rate", cfg.max_connection_creation_rate))
            server.max_connections_per_ip_overrides = parse_connections_per_ip_overrides(
                merged.get("max.connections.per.ip.overrides", cfg.max_connections_per_ip_overrides))
        except (ValueError, ConfigError) as exc:  # written by hand: Alter refuses it
            log.warning("broker %d: dynamic connection limits not applied: %s", self.broker_id, exc)

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.metadata.topics.get(topic)
        return None if info is None else info.topic_id

    def _arm_purgatory(self, at_ms: int) -> None:
        """The replica manager has a new purgatory deadline: make sure poll() runs by then."""
        if self._purgatory_timer is not None and self._purgatory_at <= at_ms:
            return
        if self._purgatory_timer is not None:
            self._purgatory_timer.cancel()
        self._purgatory_at = at_ms
        delay = max(0, at_ms - self.clock.monotonic_ms()) / 1000
        self._purgatory_timer = asyncio.get_running_loop().call_later(delay, self._poll_purgatory)

    def _poll_purgatory(self) -> None:
        self._purgatory_timer = None
        try:
            self.replicas.poll()
        finally:
            nxt = self.replicas.next_deadline()
            if nxt is not None:
                self._arm_purgatory(nxt)

    # --------------------------------------------------------------- lifecycle -----
    async def start(self) -> None:
        self.started_at = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self.flusher.active = True
        self.log_manager.startup()
        until_done = self.zk.until_done
        await until_done(self.scram.load, "SCRAM credentials")
        await until_done(self.client_quota_apis.load, "client quotas")
        await until_done(self.tokens.load, "delegation tokens")
        if self.acl_store is not None:
            await until_done(self.acl_store.start, "ACLs")
        await self.server.start()
        await until_done(self._register, "registration")
        # Another broker may delete it if it wrongly finds us dead (server/liveness.py).
        self._registration_watch = await until_done(
            lambda: self.store.watch_registration(self.broker_id, self._on_registration_deleted),
            "registration watch")
        self.zk.on_session_reestablished(self._on_session_reestablished)
        self.zk.on_session_lost(self._on_session_lost)
        await self.controller.start()
        await until_done(self._load_broker_configs, "dynamic broker configs")
        await self.config_changes.start()
        await self.token_changes.start()
        self.log_dir_mover.resume_interrupted()
        cfg = self.config
        self._tasks = [
            self._every(cfg.replica_lag_time_max_ms / 2000, self.replicas.maybe_shrink_isrs),
            self._every(cfg.hw_checkpoint_interval_ms / 1000, self._checkpoint_hw),
            self._every(cfg.log_retention_check_interval_ms / 1000, self._retention),
            self._every(cfg.producer_id_expiration_check_interval_ms / 1000, self._expire_producers),
            self._every(cfg.log_flush_scheduler_interval_ms / 1000, self._flush_dirty),
            self._every(cfg.log_flush_offset_checkpoint_interval_ms / 1000, self._checkpoint_recovery_points),
            self._every(cfg.log_flush_start_offset_checkpoint_interval_ms / 1000, self._checkpoint_log_starts),
            self._every(cfg.log_cleaner_backoff_ms / 1000, self.cleaner.run_once),
            self._every(cfg.offsets_retention_check_interval_ms / 1000, self.groups.expire_offsets),
            self._every(cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000,
                        self.txn.abort_timed_out),
            self._every(cfg.transaction_remove_expired_transaction_cleanup_interval_ms / 1000,
                        self.txn.expire_transactional_ids),
        ]
        if self.tokens.enabled:
            self._tasks.append(self._every(cfg.delegation_token_expiry_check_interval_ms / 1000,
                                           self.tokens.expire_tokens))
        if cfg.metrics_port >= 0:
            await self.metrics.serve(self.server.host, cfg.metrics_port)
        log.info("broker %d serving on %s", self.broker_id,
                 ", ".join(f"{lst.name}://{lst.host}:{lst.port}" for lst in self.server.listeners))

    async def _register(self) -> None:
        # Every listener's endpoint; host and port: the inter-broker listener's, which the
        # other brokers' controllers connect to.
        advertised = self._advertised()
        protocols = {s.name: s.protocol for s in self.config.listener_specs()}
        host, port = advertised[self.config.listener_name()]
        self.replicas.broker_epoch = await self.store.register_broker(
            self.broker_id, host, port, self.config.broker_rack or None,
            endpoints=[Endpoint(name, h, p, protocols[name]) for name, (h, p) in advertised.items()],
        )

    def _on_registration_deleted(self) -> None:
        if self._stopping or not self.zk.client.connected:
            return  # shutting down, or the session is gone: its own path re-registers
        log.warning("broker %d: registration deleted while alive; registering again", self.broker_id)
        asyncio.ensure_future(self.zk.until_done(self._register, "registration"))

    async def _on_session_reestablished(self) -> None:
        log.warning("broker %d: new ZooKeeper session, registering again", self.broker_id)
        # Cut off by another blip, it must run again: a broker alive but unregistered is
        # taken for dead by the controller for good.
        await self.zk.until_done(self._register, "registration")

    async def _on_session_lost(self) -> None:
        # Our registration is gone: the controller treats us as dead and elects other
        # leaders. Stop acting as leader so no acks=all write is acknowledged alone.
        if self._stopping:  # our own close at shutdown: expected, not an operator's warning
            log.info("broker %d: ZooKeeper session closed", self.broker_id)
        else:
            log.warning("broker %d: ZooKeeper session lost; giving up leadership locally", self.broker_id)
        self.replicas.resign_all()

    def _every(self, seconds: float, fn: Callable[[], Any]) -> asyncio.Future:
        async def loop() -> None:
            while True:
                await asyncio.sleep(max(0.05, seconds))
                try:
                    r = fn()
                    if asyncio.iscoroutine(r):
                        await r
                except Exception:
                    log.exception("background task %s failed", getattr(fn, "__name__", fn))

        return asyncio.ensure_future(loop())

    def _replication_quota_metrics(self) -> dict[str, float]:
        """Kafka's LeaderReplication / FollowerReplication byte-rate: bytes/s of the
        throttled partitions' replication over the quota windows."""
        return {"kafka_server_leaderreplication_byte_rate": self.leader_throttle.quota.rate(),
                "kafka_server_followerreplication_byte_rate": self.follower_throttle.quota.rate()}

    def _topic_metrics(self) -> dict[str, float]:
        """BrokerTopicMetrics, for the topics hosted here (a topic's go with its last
        partition, as Kafka's)."""
        self.topic_stats.retain({tp.topic for tp in self.replicas.partitions})
        return self.topic_stats.snapshot()

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        self._stopping = True
        if self._registration_watch is not None:
            self._registration_watch.cancel()
        if self.config.controlled_shutdown_enable:
            cfg = self.config
            try:
                # bounded by the attempts' backoffs plus a request timeout each
                await with_timeout(
                    request_controlled_shutdown(self.controller_channel, self.broker_id, self.replicas.broker_epoch,
                                                cfg.controlled_shutdown_max_retries,
                                                cfg.controlled_shutdown_retry_backoff_ms),
                    max(1, cfg.controlled_shutdown_max_retries)
                    * (cfg.controlled_shutdown_retry_backoff_ms + cfg.request_timeout_ms) / 1000,
                )
            except Exception as exc:  # noqa: BLE001 - shutdown goes on regardless
                log.warning("controlled shutdown did not complete: %s", exc)
        self.config_changes.stop()
        self.token_changes.stop()
        self.flusher.active = False  # flushes inline from here (the loop's tasks go)
        for t in [*self._tasks, *self._background_tasks]:
            t.cancel()
        if self._purgatory_timer is not None:
            self._purgatory_timer.cancel()
        self.groups.shutdown()
        self.txn.shutdown()
        self.txn_verifier.close()
        await self.log_dir_mover.shutdown()  # moves in flight: restarted at the next start
        self._io_executor.shutdown(wait=True)  # no checkpoint write in flight past here
        self._flush_executor.shutdown(wait=True)  # nor a flush (the log manager's own comes last)
        self.cleaner.shutdown()  # a cleaning in flight ends; its staged files are dropped at open
        await self.fetchers.shutdown()
        await self.server.stop()
        await self.controller.stop()
        self.controller_channel.close()
        self.log_manager.shutdown(dict(self._high_watermarks()))
        await self.zk.stop()

    # ---------------------------------------------------------- periodic work -----
    def _high_watermarks(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): hw for tp, hw in self.replicas.high_watermarks().items()}

    async def _checkpoint_hw(self) -> None:
        """replication-offset-checkpoint, written off the event loop: its fsyncs can take
        hundreds of ms on a busy file system (ext4 flushes the journal), which on the loop
        would stall every request of the broker (seen as acks=all p99 spikes)."""
        hws = self._high_watermarks()
        if hws:
            await asyncio.get_running_loop().run_in_executor(
                self._io_executor, self.log_manager.checkpoint_high_watermarks, hws
            )

    def _dir_failed(self, d: Path) -> bool:
        """A log dir failed and others are left (any thread): taken offline on the loop."""
        loop = self._loop
        if loop is None or self._stopping or loop.is_closed():
            return False  # not serving yet, or stopping: halting is the answer
        loop.call_soon_threadsafe(self._take_dir_offline, d)
        return True

    def _take_dir_offline(self, d: Path) -> None:
        tps = self.log_manager.take_offline(d)
        self.replicas.take_offline([TopicPartition(*tp) for tp in tps])
        log.error("broker %d: Stopped serving replicas in dir %s (%d partitions)", self.broker_id, d, len(tps))
        self._background(self.zk.until_done(lambda: self.store.notify_log_dir_failure(self.broker_id),
                                            "log dir failure notification"), "log dir failure notification")

    def _checkpoints_after_move(self, tp: TopicPartition, old_dir: Path, new_dir: Path) -> None:
        """A replica changed log dirs: both dirs' checkpoints without delay (off the loop),
        so that a restart finds its recovery point, HW and cleaner offset in the new dir."""
        async def write() -> None:
            await self.cleaner.alter_checkpoint_dir(tp, old_dir, new_dir)  # reports its own disk errors
            await self._checkpoint_recovery_points()
            await self._checkpoint_log_starts()
            await self._checkpoint_hw()

        if not self._stopping:
            self._background(write(), f"checkpoints after moving {tp.topic}-{tp.partition}")

    def _background(self, coro: Coroutine[Any, Any, Any], what: str) -> None:
        """A task nobody awaits: kept referenced until done, its failure logged (never
        "Task exception was never retrieved")."""
        task = asyncio.ensure_future(coro)
        self._background_tasks.add(task)

        def done(t: asyncio.Future) -> None:
            self._background_tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("broker %d: %s failed: %r", self.broker_id, what, t.exception())

        task.add_done_callback(done)

    async def _checkpoint_log_starts(self) -> None:
        """log-start-offset-checkpoint: after DeleteRecords, and every
        log.flush.start.offset.checkpoint.interval.ms (a follower's log start moves with
        its leader's, without a write of its own). Taken on the loop, written off it."""
        starts = self.log_manager.log_start_offsets()
        await asyncio.get_running_loop().run_in_executor(
            self._io_executor, self.log_manager.checkpoint_log_start_offsets, starts)

    async def _flush_dirty(self) -> None:
        """flush.ms (none by default): the due logs' flushes begun on the loop, their
        fdatasyncs off it, the recovery points moved and checkpointed."""
        due = self.log_manager.begin_due_flushes(self.clock.wall_ms())
        if due:
            for lg, pending in due:
                await self.flusher.run(lg, pending)
            await self._checkpoint_recovery_points()

    async def _checkpoint_recovery_points(self) -> None:
        """recovery-point-offset-checkpoint (log.flush.offset.checkpoint.interval.ms):
        the points taken on the loop, written off it."""
        points = self.log_manager.recovery_points()
        await asyncio.get_running_loop().run_in_executor(
            self._io_executor, self.log_manager.checkpoint_recovery_points, points)

    def _retention(self) -> None:
        self.log_manager.delete_old_segments(self.clock.wall_ms())

    def _expire_producers(self) -> None:
        n = self.log_manager.expire_producers(self.clock.wall_ms(), self.producer_id_expiration_ms)
        if n:
            log.info("broker %d: %d idle producer ids expired", self.broker_id, n)


async def run(config: BrokerConfig, ready: Any = None) -> None:
    """Run a broker until SIGTERM, SIGINT or SIGHUP (as a JVM's shutdown hooks: a broker
    whose terminal closes stops cleanly), then shut down cleanly. As the JVM, a SIGINT or
    SIGHUP ignored when the process started stays ignored (`nohup`, background jobs)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        if sig == signal.SIGTERM or signal.getsignal(sig) != signal.SIG_IGN:
            loop.add_signal_handler(sig, stop.set)
    started: list[Broker] = []

    async def start() -> None:
        started.append(await Broker.connect(config))
        await started[0].start()

    starting = asyncio.ensure_future(start())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        # Stopped while starting (waiting out a ZooKeeper outage): stop now, as a JVM's
        # shutdown hook would, not once ZooKeeper is back.
        log.warning("stopped during start-up")
        starting.cancel()
        try:
            if started:
                await with_timeout(started[0].stop(), 30)
        except Exception:  # noqa: BLE001 - a half-started broker: its logs recover at the next start
            log.exception("stop during start-up")
        finally:
            logging.shutdown()
            os._exit(0)
    stopped.cancel()
    starting.result()  # re-raises a failed start
    broker = started[0]
    # Start-up objects (schemas, compiled codecs, config) live forever: keep them out of
    # the collector's generations so full collections stay short.
    gc.freeze()
    if ready is not None:
        ready(broker)
    await stop.wait()
    try:
        with StallWatchdog(asyncio.get_running_loop(), SHUTDOWN_STALL_DUMP_S, "the broker's shutdown"):
            await with_timeout(broker.stop(), 60)
    finally:
        # Logs, checkpoints and the clean-shutdown marker are written by now. Leave at
        # once rather than risk asyncio's teardown waiting on a straggling task.
        profiling.dump_all()
        logging.shutdown()
        os._exit(0)


__all__ = ["Broker", "TopicPartition", "run"]
