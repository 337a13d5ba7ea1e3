"""ZooKeeper access: an asyncio adapter over kazoo and Kafka's ZooKeeper-mode layout."""

from kafkarepl.zk.client import CONNECTED, LOST, SUSPENDED, AsyncZk, WatchHandle, ZkTransactionError
from kafkarepl.zk.store import KafkaZkStore
from kafkarepl.zk.znodes import (
    BrokerInfo,
    ControllerEpochFence,
    PartitionState,
    TopicAssignment,
    new_topic_id,
    topic_id_from_uuid,
    topic_id_to_uuid,
)

__all__ = [
    "AsyncZk",
    "BrokerInfo",
    "CONNECTED",
    "ControllerEpochFence",
    "KafkaZkStore",
    "LOST",
    "PartitionState",
    "SUSPENDED",
    "TopicAssignment",
    "WatchHandle",
    "ZkTransactionError",
    "new_topic_id",
    "topic_id_from_uuid",
    "topic_id_to_uuid",
]
