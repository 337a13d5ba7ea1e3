"""A real kafkarepl cluster (ZooKeeper + broker processes) embedded in a Python program
or test suite: `kafkarepl.LocalCluster`. See docs/embedding.md."""

from kafkarepl.embedded.cluster import (
    DEFAULT_BROKER_PROPERTIES,
    LocalCluster,
    LocalClusterError,
)

__all__ = ["DEFAULT_BROKER_PROPERTIES", "LocalCluster", "LocalClusterError"]
