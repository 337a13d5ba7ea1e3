"""Broker lifecycle: storage, ZooKeeper registration, controller, network, background tasks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
import signal
import time
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import ReplicationMetrics
from kafkarepl.server.admin import AdminManager
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.fetcher import ReplicaFetcherManager
from kafkarepl.server.group_coordinator import GroupCoordinatorService
from kafkarepl.server.handlers import RequestHandlers
from kafkarepl.server.metadata_cache import MetadataCache
from kafkarepl.server.metrics import BrokerMetrics
from kafkarepl.server.network import SocketServer
from kafkarepl.server.partition import Partition, partition_config
from kafkarepl.server.purgatory import ProducePurgatory
from kafkarepl.server.replica_manager import ReplicaManager, now_ms
from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.manager import LogManager

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = MetadataCache()
        self.purgatory = ProducePurgatory()
        self.replication_metrics = ReplicationMetrics()
        self.metrics = BrokerMetrics(self)
        self.log_manager = LogManager(config.log_dir_list(), self.log_config({}))
        self.broker_epoch = -1
        self.replica_manager = ReplicaManager(self)
        self.fetchers = ReplicaFetcherManager(self)
        self.admin = AdminManager(self)
        self.group_coordinator = GroupCoordinatorService(self)
        self.handlers = RequestHandlers(self)
        host, port = config.listener()
        self.server = SocketServer(
            host,
            port,
            self.handlers.handle,
            self.handlers.on_unsupported_version,
            config.socket_request_max_bytes,
            config.max_connections,
            queued_max_request_bytes=config.queued_max_request_bytes,
            max_connections_per_ip=config.max_connections_per_ip,
            max_decompressed_request_bytes=config.max_decompressed_request_bytes,
        )
        self.zk = None
        self.store = None
        self.controller = None
        self.cluster_id = ""
        self._tasks: list[asyncio.Task] = []
        # One thread for checkpoint and flush fsyncs: they never run concurrently with
        # each other, and never on the event loop.
        self._io_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-io")
        self._stopping = asyncio.Event()
        self.started_at = 0.0

    # ------------------------------------------------------------------ config -----
    def log_config(self, topic_overrides: dict[str, str]) -> LogConfig:
        props = self.config.topic_defaults()
        props.update(topic_overrides)
        return LogConfig.from_props(props)

    @property
    def partitions(self) -> dict[tuple[str, int], Partition]:
        return self.replica_manager.partitions

    # --------------------------------------------------------------- lifecycle -----
    async def start(self) -> None:
        from kafkarepl.controller.channel import NetworkBrokerChannel
        from kafkarepl.controller.controller import Controller
        from kafkarepl.zk.client import AsyncZk
        from kafkarepl.zk.store import KafkaZkStore

        self.started_at = time.monotonic()
        self.log_manager.startup()
        self.zk = AsyncZk(
            self.config.zookeeper_connect,
            session_timeout_ms=self.config.zookeeper_session_timeout_ms,
        )
        await self.zk.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
        self.store = KafkaZkStore(self.zk)
        await self.store.ensure_layout()
        self.cluster_id = await self.store.get_cluster_id()
        await self.server.start()
        await self._register()
        self.zk.on_session_reestablished(self._on_session_reestablished)
        self.zk.on_session_lost(self._on_session_lost)
        self.controller = Controller(
            self.broker_id,
            self.zk,
            NetworkBrokerChannel(client_id=f"controller-{self.broker_id}"),
            config=self.config.as_props(),
            store=self.store,
        )
        await self.controller.start()
        self._tasks = [
            asyncio.ensure_future(self._every(self.config.replica_lag_time_max_ms / 2000, self._isr_expiry)),
            asyncio.ensure_future(self._every(self.config.hw_checkpoint_interval_ms / 1000, self._checkpoint_hw)),
            asyncio.ensure_future(
                self._every(self.config.log_retention_check_interval_ms / 1000, self._retention)
            ),
            asyncio.ensure_future(self._every(1.0, self._flush_dirty)),
        ]
        if self.config.metrics_port >= 0:
            await self.metrics.serve(self.server.host, self.config.metrics_port)
        log.info("broker %d serving on %s:%d", self.broker_id, self.server.host, self.server.port)

    async def _register(self) -> None:
        host, port = self.config.advertised()
        self.broker_epoch = await self.store.register_broker(
            self.broker_id, host, self.server.port if port == 0 else port, self.config.broker_rack or None
        )

    async def _on_session_reestablished(self) -> None:
        log.warning("broker %d: new ZooKeeper session, registering again", self.broker_id)
        await self._register()

    async def _on_session_lost(self) -> None:
        # Our registration is gone: the controller treats us as dead and elects other
        # leaders. Stop acting as leader so no acks=all write is acknowledged alone.
        log.warning("broker %d: ZooKeeper session lost; giving up leadership locally", self.broker_id)
        for p in list(self.partitions.values()):
            if p.is_leader:
                p.resign()
                self.replica_manager.partition_changed(p)

    async def _every(self, seconds: float, fn: Any) -> None:
        while True:
            await asyncio.sleep(max(0.05, seconds))
            try:
                r = fn()
                if asyncio.iscoroutine(r):
                    await r
            except Exception:
                log.exception("background task %s failed", getattr(fn, "__name__", fn))

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        if self.config.controlled_shutdown_enable and self.controller is not None:
            try:
                await asyncio.wait_for(self.admin.request_controlled_shutdown(), 10)
            except Exception as exc:  # noqa: BLE001 - shutdown goes on regardless
                log.warning("controlled shutdown did not complete: %s", exc)
        for t in self._tasks:
            t.cancel()
        self.group_coordinator.shutdown()
        self._io_executor.shutdown(wait=True)  # no checkpoint write in flight past here
        await self.fetchers.shutdown()
        await self.server.stop()
        if self.controller is not None:
            await self.controller.stop()
        self.log_manager.shutdown({tp: p.high_watermark for tp, p in self.partitions.items()})
        if self.zk is not None:
            await self.zk.stop()

    # ---------------------------------------------------------- periodic work -----
    def _isr_expiry(self) -> None:
        t = now_ms()
        for p in list(self.partitions.values()):
            if p.is_leader:
                change = p.maybe_shrink_isr(t)
                if change is not None:
                    asyncio.ensure_future(self.admin.send_alter_partition(p, change))

    async def _checkpoint_hw(self) -> None:
        """replication-offset-checkpoint, written off the event loop: its fsyncs can take
        hundreds of ms on a busy file system (ext4 flushes the journal), which on the loop
        would stall every request of the broker (seen as acks=all p99 spikes)."""
        hws = {tp: p.high_watermark for tp, p in self.partitions.items()}
        if hws:
            await asyncio.get_running_loop().run_in_executor(
                self._io_executor, self.log_manager.checkpoint_high_watermarks, hws
            )

    async def _flush_dirty(self) -> None:
        # flush.ms / flush.messages fsyncs (none by default): off the loop as well.
        await asyncio.get_running_loop().run_in_executor(self._io_executor, self.log_manager.flush_dirty)

    def _retention(self) -> None:
        self.log_manager.delete_old_segments(now_ms())

    # ------------------------------------------------------- controller orders ----
    async def become_leader_or_follower(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["controller_epoch"] < self.replica_manager.controller_epoch:
            return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH), "topics": []}
        self.replica_manager.controller_epoch = body["controller_epoch"]
        t = now_ms()
        out_topics = []
        for ts in body.get("topic_states") or []:
            name = ts["topic_name"]
            configs = await self.admin.topic_configs(name)
            errors = []
            for ps in ts["partition_states"]:
                code = self._apply_partition_state(name, ps, configs, t)
                errors.append({"topic_name": name, "partition_index": ps["partition_index"], "error_code": int(code)})
            out_topics.append({"topic_id": ts.get("topic_id"), "partition_errors": errors})
        return {"error_code": 0, "topics": out_topics}

    def _apply_partition_state(self, topic: str, ps: dict, configs: dict[str, str], t: int) -> ErrorCode:
        index = ps["partition_index"]
        replicas = list(ps["replicas"])
        if self.broker_id not in replicas:
            return ErrorCode.NONE
        p = self.partitions.get((topic, index))
        if p is not None and ps["leader_epoch"] < p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        log_cfg = self.log_config(configs)
        pcfg = partition_config(log_cfg, self.config)
        if p is None:
            lg = self.log_manager.get_or_create_log(topic, index, log_cfg)
            hw = self.log_manager.high_watermarks.get((topic, index), 0)
            p = Partition(topic, index, self.broker_id, lg, pcfg, self.replication_metrics, initial_hw=hw)
            self.partitions[(topic, index)] = p
        else:
            p.reconfigure(pcfg)
        isr = list(ps["isr"])
        if ps["leader"] == self.broker_id:
            self.fetchers.remove_partition(p)
            p.become_leader(ps["leader_epoch"], isr, replicas, ps["partition_epoch"], t)
        elif ps["leader"] >= 0:
            if p.become_follower(ps["leader"], ps["leader_epoch"], isr, replicas, ps["partition_epoch"], t):
                self.fetchers.add_partition(p, ps["leader"])
        else:
            # Offline partition (no eligible leader): stop serving it, keep the data.
            self.fetchers.remove_partition(p)
            p.resign()
        self.replica_manager.partition_changed(p)
        return ErrorCode.NONE

    async def stop_replicas(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["controller_epoch"] < self.replica_manager.controller_epoch:
            return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH), "partition_errors": []}
        self.replica_manager.controller_epoch = body["controller_epoch"]
        errors = []
        for ts in body.get("topic_states") or []:
            name = ts["topic_name"]
            for ps in ts["partition_states"]:
                index = ps["partition_index"]
                p = self.partitions.pop((name, index), None)
                if p is not None:
                    self.fetchers.remove_partition(p)
                    p.resign()
                    self.replica_manager.partition_changed(p)
                if ps.get("delete_partition"):
                    self.log_manager.delete_log(name, index)
                errors.append({"topic_name": name, "partition_index": index, "error_code": 0})
        return {"error_code": 0, "partition_errors": errors}

async def run(config: BrokerConfig, ready: Any = None) -> None:
    """Run a broker until SIGTERM/SIGINT, then shut down cleanly."""
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    # Start-up objects (schemas, compiled codecs, config) live forever: keep them out of
    # the collector's generations so full collections stay short.
    gc.freeze()
    if ready is not None:
        ready(broker)
    await stop.wait()
    try:
        await asyncio.wait_for(broker.stop(), 60)
    finally:
        # Logs, checkpoints and the clean-shutdown marker are written by now. Leave at
        # once rather than risk asyncio's teardown waiting on a straggling task.
        logging.shutdown()
        os._exit(0)
