"""The replica manager's storage: partition logs from the LogManager, with settings from
the broker's topic defaults and the topic's overrides (Kafka's property names)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from kafkarepl.replication import PartitionConfig, TopicPartition
from kafkarepl.server.config import BrokerConfig
from kafkarepl.storage import Log
from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.epoch_cache import PendingEpochSync, deferred_syncs
from kafkarepl.storage.manager import LogManager


def log_config(config: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The broker's topic defaults with a topic's overrides. Raises ValueError (or
    KafkaError) for an invalid value."""
    props = config.topic_defaults()
    props.update(overrides)
    return LogConfig.from_props(props)


class LogStorage:
    def __init__(self, log_manager: LogManager, config: BrokerConfig) -> None:
        self.log_manager = log_manager
        self.config = config
        # Parsed configs by topic overrides (cleared when the dynamic defaults change): a
        # LeaderAndIsr of thousands of partitions of one topic parses them once. Both
        # types are treated as values: a change makes new objects, never edits these.
        self._log_configs: dict[frozenset[tuple[str, str]], LogConfig] = {}
        self._partition_configs: dict[frozenset[tuple[str, str]], PartitionConfig] = {}
        # Dynamic broker defaults of topic configs (kafka-configs.sh --entity-type brokers),
        # under the topic config names: between the static defaults and a topic's overrides.
        self._dynamic_defaults: dict[str, str] = {}

    def dynamic_defaults(self) -> dict[str, str]:
        return dict(self._dynamic_defaults)

    def set_dynamic_defaults(self, defaults: Mapping[str, str]) -> bool:
        """New dynamic defaults; True when they changed (every topic's config may have)."""
        if dict(defaults) == self._dynamic_defaults:
            return False
        self._dynamic_defaults = dict(defaults)
        self._log_configs.clear()
        self._partition_configs.clear()
        return True

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        key = frozenset(overrides.items())
        cfg = self._log_configs.get(key)
        if cfg is None:
            if len(self._log_configs) > 1000:
                self._log_configs.clear()
            cfg = self._log_configs[key] = log_config(self.config, {**self._dynamic_defaults, **overrides})
        return cfg

    def partition_config(self, overrides: Mapping[str, str]) -> PartitionConfig:
        key = frozenset(overrides.items())
        pc = self._partition_configs.get(key)
        if pc is None:
            cfg = self.log_config(overrides)
            if len(self._partition_configs) > 1000:
                self._partition_configs.clear()
            pc = self._partition_configs[key] = PartitionConfig(
                min_insync_replicas=cfg.min_insync_replicas,
                replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
                unclean_leader_election_enable=cfg.unclean_leader_election_enable,
                replica_fetch_backoff_ms=self.config.replica_fetch_backoff_ms,
            )
        return pc

    @contextmanager
    def deferred_syncs(self) -> Iterator[PendingEpochSync]:
        """For a LeaderAndIsr: new leader epochs made durable together afterwards, by one
        syncfs per file system (PendingEpochSync.run, off the loop); a file system that
        cannot be synced fails the log dirs of the partitions on it."""
        with deferred_syncs() as pending:
            pending.on_failure = self._epoch_sync_failed
            yield pending

    def _epoch_sync_failed(self, partition_dir: str, exc: OSError) -> None:
        self.log_manager.dir_failed(Path(partition_dir).parent, exc)

    def open_log(self, tp: TopicPartition, overrides: Mapping[str, str], is_new: bool = True) -> Log:
        return self.log_manager.get_or_create_log(tp.topic, tp.partition, self.log_config(overrides),
                                                  is_new=is_new)

    def reconfigure_log(self, tp: TopicPartition, overrides: Mapping[str, str]) -> None:
        lg = self.log_manager.get_log(tp.topic, tp.partition)
        if lg is not None:
            lg.reconfigure(self.log_config(overrides))

    def delete_log(self, tp: TopicPartition) -> None:
        self.log_manager.delete_log(tp.topic, tp.partition)

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return self.log_manager.high_watermarks.get((tp.topic, tp.partition), 0)
