"""Minimal asyncio Kafka-protocol client for internal use (replica fetcher, controller ->
broker channel, admin CLI), built on kafkarepl.protocol."""

from .cluster import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ClusterClient,
    NewTopic,
    parse_bootstrap,
    raise_for_errors,
)
from .connection import BrokerConnection, BrokerConnectionError, RequestTimeoutError

__all__ = [
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "BrokerConnection",
    "BrokerConnectionError",
    "ClusterClient",
    "NewTopic",
    "RequestTimeoutError",
    "parse_bootstrap",
    "raise_for_errors",
]
