"""What every service of the controller acts through, given to it at construction.

The context (the controller's view of the cluster), the ZooKeeper store, whether this
broker is the active controller now (and its epoch fence, raising when it is not), and
request batches to brokers stamped with that epoch. A narrow, immutable set: services
never see the Controller itself, and only ever run as events of its queue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkarepl.controller.context import ControllerContext
from kafkarepl.controller.requests import RequestBatch
from kafkarepl.zk.store import KafkaZkStore
from kafkarepl.zk.znodes import ControllerEpochFence


@dataclass(frozen=True)
class ControllerScope:
    ctx: ControllerContext
    store: KafkaZkStore
    is_active: Callable[[], bool]
    require_active: Callable[[], ControllerEpochFence]  # the fence; raises when not active
    new_batch: Callable[[], RequestBatch]
    send_batch: Callable[[RequestBatch], None]  # dropped when no longer active
