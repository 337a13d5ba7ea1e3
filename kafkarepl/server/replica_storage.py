"""The replica manager's storage: partition logs from the LogManager, with settings from
the broker's topic defaults and the topic's overrides (Kafka's property names)."""

from __future__ import annotations

from collections.abc import Mapping

from kafkarepl.replication import PartitionConfig, TopicPartition
from kafkarepl.server.config import BrokerConfig
from kafkarepl.storage import Log
from kafkarepl.storage.config import LogConfig
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

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        return log_config(self.config, overrides)

    def partition_config(self, overrides: Mapping[str, str]) -> PartitionConfig:
        cfg = self.log_config(overrides)
        return PartitionConfig(
            min_insync_replicas=cfg.min_insync_replicas,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            unclean_leader_election_enable=cfg.unclean_leader_election_enable,
            replica_fetch_backoff_ms=self.config.replica_fetch_backoff_ms,
        )

    def open_log(self, tp: TopicPartition, overrides: Mapping[str, str]) -> Log:
        return self.log_manager.get_or_create_log(tp.topic, tp.partition, self.log_config(overrides))

    def reconfigure_log(self, tp: TopicPartition, overrides: Mapping[str, str]) -> None:
        lg = self.log_manager.get_log(tp.topic, tp.partition)
        if lg is not None:
            lg.reconfigure(self.log_config(overrides))

    def delete_log(self, tp: TopicPartition) -> None:
        self.log_manager.delete_log(tp.topic, tp.partition)

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return self.log_manager.high_watermarks.get((tp.topic, tp.partition), 0)
