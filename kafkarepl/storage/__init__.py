"""Partition logs in Kafka's on-disk format (see docs/interfaces.md, "kafkarepl.storage").

Log: one partition directory of segments; LogManager: every log under log.dirs and the
broker-level checkpoints; LeaderEpochCache and ProducerStateTable: per-log state that
replication and idempotence need.
"""

from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.epoch_cache import LeaderEpochCache
from kafkarepl.storage.log import CLEAN_SHUTDOWN_FILE, AppendInfo, FetchSlice, Log, PendingFlush
from kafkarepl.storage.manager import LogManager
from kafkarepl.storage.producer_state import BatchMetadata, ProducerStateTable

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "AppendInfo",
    "BatchMetadata",
    "FetchSlice",
    "LeaderEpochCache",
    "Log",
    "LogConfig",
    "LogManager",
    "PendingFlush",
    "ProducerStateTable",
]
