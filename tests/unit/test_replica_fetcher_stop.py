"""ReplicaFetcher.stop() ends the fetcher even when a partition is added (a wakeup) in
the same loop turns as the stop: a broker made follower of a partition by its own
controlled shutdown stops right after. With asyncio.wait_for as the fetcher's sleep
(before Python 3.12 it swallows a cancellation that arrives as the wait ends, gh-86296)
the fetcher went on fetching and the broker's shutdown hung."""

from __future__ import annotations

import asyncio

import pytest

from kafkarepl.replication import TopicPartition
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.replica_fetcher import ReplicaFetcher


class NeverReady:
    """A replica manager whose partitions have nothing to fetch yet: the fetcher sleeps."""

    def follower_request(self, tp: TopicPartition) -> None:
        return None


@pytest.mark.parametrize("ticks", [0, 1, 2, 3])
def test_stop_right_after_a_partition_is_added_ends_the_fetcher(ticks: int) -> None:
    async def scenario() -> None:
        fetcher = ReplicaFetcher(3, 1, BrokerConfig(), NeverReady(), lambda broker_id: None)  # type: ignore[arg-type]
        fetcher.add(TopicPartition("a", 0))
        fetcher.start()
        for _ in range(5):
            await asyncio.sleep(0)  # in its backoff sleep
        fetcher.add(TopicPartition("b", 0))  # LeaderAndIsr: one more to follow (wakes it)
        for _ in range(ticks):
            await asyncio.sleep(0)
        await asyncio.wait_for(fetcher.stop(), 2)
        assert fetcher._task is None

    asyncio.run(scenario())
