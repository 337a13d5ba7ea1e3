"""The asyncio side of DelayedProduce: acks=all requests parked until the HW passes them.

Which outcome a waiting produce gets (committed, not enough replicas after append, not
leader) is decided by the sans-I/O core (`PartitionState.produce_status`); this class
only parks futures per partition and re-asks the core whenever the partition changes
(HW move, ISR change, leadership change).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from kafkarepl.errors import ErrorCode

if TYPE_CHECKING:
    from kafkarepl.server.partition import Partition


class ProducePurgatory:
    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], list[tuple[int, int, asyncio.Future]]] = {}

    async def wait_for_commit(
        self, p: Partition, required_offset: int, leader_epoch: int, deadline: float
    ) -> ErrorCode:
        outcome = p.produce_outcome(required_offset, leader_epoch)
        if outcome is not None:
            return outcome
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        entry = (required_offset, leader_epoch, fut)
        self._waiting.setdefault(p.tp, []).append(entry)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            waiters = self._waiting.get(p.tp)
            if waiters is not None:
                try:
                    waiters.remove(entry)
                except ValueError:
                    pass
                if not waiters:
                    self._waiting.pop(p.tp, None)

    def on_partition_update(self, p: Partition) -> None:
        waiters = self._waiting.get(p.tp)
        if not waiters:
            return
        for required, epoch, fut in waiters:
            if fut.done():
                continue
            outcome = p.produce_outcome(required, epoch)
            if outcome is not None:
                fut.set_result(outcome)

    def waiting(self) -> int:
        return sum(len(w) for w in self._waiting.values())
