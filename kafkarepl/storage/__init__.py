"""Partition logs in Kafka's on-disk format (see docs/interfaces.md, "kafkarepl.storage").

Log: one partition directory of segments; LogManager: every log under log.dirs and the
broker-level checkpoints; LeaderEpochCache and ProducerStateTable: per-log state that
replication and idempotence need.

The names below load on first use, so that importing one light submodule (validation,
records: the Spark executors' record codec) does not load the whole log layer.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkarepl.storage.config import LogConfig
    from kafkarepl.storage.epoch_cache import LeaderEpochCache
    from kafkarepl.storage.log import CLEAN_SHUTDOWN_FILE, AppendInfo, FetchSlice, Log, PendingFlush
    from kafkarepl.storage.manager import LogManager
    from kafkarepl.storage.producer_state import BatchMetadata, ProducerStateTable

_WHERE = {
    "CLEAN_SHUTDOWN_FILE": "log",
    "AppendInfo": "log",
    "BatchMetadata": "producer_state",
    "FetchSlice": "log",
    "LeaderEpochCache": "epoch_cache",
    "Log": "log",
    "LogConfig": "config",
    "LogManager": "manager",
    "PendingFlush": "log",
    "ProducerStateTable": "producer_state",
}

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


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{where}"), name)
