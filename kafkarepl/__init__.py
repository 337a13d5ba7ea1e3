"""kafkarepl: a Kafka-compatible, replicated, partitioned commit log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kafkarepl.embedded import LocalCluster, LocalClusterError

__all__ = ["LocalCluster", "LocalClusterError", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy: every broker process imports kafkarepl; only embedders need LocalCluster.
    if name in ("LocalCluster", "LocalClusterError"):
        from kafkarepl import embedded

        return getattr(embedded, name)
    raise AttributeError(f"module 'kafkarepl' has no attribute {name!r}")
