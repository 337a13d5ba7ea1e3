"""One partition on this broker: its Log, its replication state, and the asyncio waiters.

The replication decisions (HW, ISR, epochs, commit of acks=all) are made by the sans-I/O
`kafkarepl.replication` core; this class only feeds it events from the network and the
log, applies what it decides (AlterPartition requests, waking waiters), and owns the
asyncio objects the core must not know about.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkarepl.errors import ErrorCode

if TYPE_CHECKING:
    from kafkarepl.storage import Log

log = logging.getLogger(__name__)


class Partition:
    def __init__(self, topic: str, partition: int, local_id: int, log_: Log) -> None:
        self.topic = topic
        self.partition = partition
        self.local_id = local_id
        self.log = log_
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.state = None  # kafkarepl.replication PartitionState, set by become_*
        # Woken on every LEO or HW change: delayed fetches park on it.
        self._changed: asyncio.Future | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    # -- delayed fetch wake-ups -------------------------------------------------------
    def changed(self) -> asyncio.Future:
        """A future resolved at the next LEO/HW change (DelayedFetch waits on it)."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        return self._changed

    def notify_changed(self) -> None:
        fut = self._changed
        if fut is not None and not fut.done():
            fut.set_result(None)

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320 fencing of a request's view of the leader epoch (-1 = no check)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH
