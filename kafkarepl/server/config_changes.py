"""Config change notifications: every broker applies a topic config change live.

Whoever writes a config (any broker handling AlterConfigs, or an operator tool) adds a
sequential /config/changes/config_change_<seq> node naming the entity, as Kafka's
ZooKeeper mode does. Each broker watches that directory and re-reads the overrides of
every topic named by a notification newer than the last one it handled, so its local
replicas of the topic (min.insync.replicas, retention, segment settings, ...) change at
once instead of at their next LeaderAndIsr. After handling, notifications older than 15
minutes are purged, as Kafka does, so /config/changes does not grow forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

from kafkarepl.replication import ReplicaManager
from kafkarepl.zk.client import AsyncZk, WatchHandle
from kafkarepl.zk.store import KafkaZkStore
from kafkarepl.zk.znodes import CONFIG_CHANGES

log = logging.getLogger(__name__)

PREFIX = "config_change_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener default


def new_sequences(children: list[str], prefix: str, last_seq: int) -> list[int]:
    """The sequence numbers of `prefix`<seq> notifications after `last_seq`, in order."""
    seqs = (c[len(prefix):] for c in children if c.startswith(prefix))
    return sorted(n for n in (int(q) for q in seqs if q.isdigit()) if n > last_seq)


class NotificationListener:
    """A directory of sequential change notifications, watched as Kafka's
    ZkNodeChangeNotificationListener: each new batch of them is handled once, in order
    (`_apply`, one batch at a time), then the ones older than change_expiration_ms are
    purged."""

    path = CONFIG_CHANGES
    prefix = PREFIX

    def __init__(self, zk: AsyncZk, store: KafkaZkStore, change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.zk = zk
        self.store = store
        self.change_expiration_ms = change_expiration_ms  # handled notifications are purged after it
        self._last_seq = -1  # notifications up to here are handled
        self._lock = asyncio.Lock()
        self._watch: WatchHandle | None = None

    async def start(self) -> None:
        self._watch = await self.zk.children_watch(self.path, self._on_children)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    def _on_children(self, children: list[str]) -> None:
        # The first call handles every notification still there (the last 15 minutes'),
        # as Kafka's listener does at start: one written after this broker's first
        # LeaderAndIsr read the configs but before this watch began is not lost.
        new = new_sequences(children, self.prefix, self._last_seq)
        if new:
            self._last_seq = new[-1]
            asyncio.ensure_future(self._handle(new))

    async def _handle(self, seqs: list[int]) -> None:
        async with self._lock:
            await self._apply(seqs)
            try:
                await self.store.purge_config_changes(int(time.time() * 1000) - self.change_expiration_ms, self.path)
            except Exception as exc:  # noqa: BLE001 - the next change purges them
                log.info("purging %s failed: %r", self.path, exc)

    async def _apply(self, seqs: list[int]) -> None:
        raise NotImplementedError


class ConfigChangeListener(NotificationListener):
    def __init__(
        self, zk: AsyncZk, store: KafkaZkStore, replicas: ReplicaManager,
        topic_overrides: Callable[[str], Awaitable[dict[str, str]]],
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
        on_broker_configs: Callable[[], Awaitable[None]] | None = None,
        on_user_change: Callable[[str], Awaitable[None]] | None = None,
        on_quota_change: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.on_quota_change = on_quota_change  # quotas of users/..., clients/... or ips/... changed
        self.on_user_change = on_user_change  # SCRAM credentials of a user changed
        self.on_broker_configs = on_broker_configs  # dynamic broker configs changed
        super().__init__(zk, store, change_expiration_ms)
        self.replicas = replicas
        self.topic_overrides = topic_overrides

    async def _entity_changed(self, entity: str) -> None:
        """users/<u> holds SCRAM credentials and quotas; users/<u>/clients/<c>,
        clients/<c> and ips/<ip> hold quotas only."""
        until_done = self.zk.until_done
        user = entity[len("users/"):] if entity.startswith("users/") else None
        if user is not None and "/" not in user and self.on_user_change is not None:
            try:
                await until_done(partial(self.on_user_change, user), "SCRAM credentials")
            except Exception as exc:  # noqa: BLE001 - e.g. a credential written badly by hand
                log.warning("user %s: credentials not reloaded: %r", entity, exc)
        if self.on_quota_change is not None:
            try:
                await until_done(partial(self.on_quota_change, entity), "client quotas")
            except Exception as exc:  # noqa: BLE001 - e.g. a quota written badly by hand
                log.warning("%s: client quotas not reloaded: %r", entity, exc)

    async def _apply(self, seqs: list[int]) -> None:
        # A read cut off by a ZooKeeper blip waits and runs again (as Kafka's
        # retryRequestsUntilConnected): a lost notification would leave this broker on an
        # old topic config, old SCRAM credentials or old throttle rates.
        until_done = self.zk.until_done
        topics: set[str] = set()
        brokers_changed = False
        for seq in seqs:
            try:
                entity = await until_done(
                    partial(self.store.config_change_entity, f"{PREFIX}{seq:010d}"), "config change")
            except Exception as exc:  # noqa: BLE001 - e.g. a notification written badly by hand
                log.warning("config change %d unreadable: %r", seq, exc)
                continue
            if entity and entity.startswith("topics/"):
                topics.add(entity[len("topics/"):])
            elif entity and entity.startswith("brokers/"):
                brokers_changed = True
            elif entity and entity.startswith(("users/", "clients/", "ips/")):
                await self._entity_changed(entity)
        if brokers_changed and self.on_broker_configs is not None:
            try:
                await until_done(self.on_broker_configs, "dynamic broker configs")
            except Exception as exc:  # noqa: BLE001 - e.g. an invalid value written by hand
                log.warning("broker config change not applied: %r", exc)
        local = {tp.topic for tp in self.replicas.partitions}
        for topic in sorted(topics & local):
            try:
                overrides = await until_done(partial(self.topic_overrides, topic), "topic configs")
                self.replicas.reconfigure_topic(topic, overrides)
                log.info("topic %s: configs changed to %s", topic, overrides)
            except Exception as exc:  # noqa: BLE001 - e.g. an invalid value written by hand
                log.warning("topic %s: config change not applied: %r", topic, exc)
