"""Replica fetchers: followers pull from leaders with Fetch (replica_id = our broker id).

num.replica.fetchers tasks per source broker; a partition is pinned to one of them by
hash. Each round first settles truncation (OffsetForLeaderEpoch for partitions that
just became followers: KIP-101, never truncate to the HW), then sends one Fetch for
all its partitions and appends the leader's batches verbatim. What to send and how to
react is decided by the sans-I/O follower state machine inside each Partition.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from kafkarepl.replication import (
    EpochEndOffset,
    EpochRequest,
    FetchRequest,
    FetchResponse,
    FollowerFetcher,
)
from kafkarepl.server.replica_manager import now_ms

if TYPE_CHECKING:
    from kafkarepl.server.broker import Broker
    from kafkarepl.server.partition import Partition

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3


class ReplicaFetcher:
    def __init__(self, broker: Broker, leader_id: int, index: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.index = index
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._conn = None
        self.max_lag = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._close()

    def add(self, p: Partition) -> None:
        self.partitions[p.tp] = p
        self._wakeup.set()

    def remove(self, p: Partition) -> None:
        self.partitions.pop(p.tp, None)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _connection(self) -> Any:
        from kafkarepl.client import BrokerConnection

        if self._conn is not None and self._conn.connected:
            return self._conn
        info = self.broker.metadata.broker(self.leader_id)
        if info is None:
            raise ConnectionError(f"leader {self.leader_id} is not in the metadata cache yet")
        conn = BrokerConnection(info.host, info.port, client_id=f"replica-fetcher-{self.broker.broker_id}")
        await conn.connect()
        self._conn = conn
        return conn

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            t = now_ms()
            epoch_reqs: list[tuple[Partition, FollowerFetcher, EpochRequest]] = []
            fetch_reqs: list[tuple[Partition, FollowerFetcher, FetchRequest]] = []
            for p in list(self.partitions.values()):
                f = p.fetcher
                req = f.next_request(t) if f is not None else None
                if isinstance(req, EpochRequest):
                    epoch_reqs.append((p, f, req))
                elif isinstance(req, FetchRequest):
                    fetch_reqs.append((p, f, req))
            if not epoch_reqs and not fetch_reqs:
                await self._sleep(self.broker.config.replica_fetch_backoff_ms / 1000 / 4)
                continue
            try:
                conn = await self._connection()
                if epoch_reqs:
                    await self._send_epoch_requests(conn, epoch_reqs)
                    epoch_reqs = []
                if fetch_reqs:
                    await self._send_fetch(conn, fetch_reqs)
                    fetch_reqs = []
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - leader down/moving: back off, retry
                log.info("fetcher %d->%d: %s", self.broker.broker_id, self.leader_id, exc)
                self._close()
                t = now_ms()
                for _p, f, req in [*epoch_reqs, *fetch_reqs]:
                    f.on_request_failed(req, t)
                await self._sleep(self.broker.config.replica_fetch_backoff_ms / 1000)

    async def _sleep(self, seconds: float) -> None:
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _send_epoch_requests(
        self, conn: Any, reqs: list[tuple[Partition, FollowerFetcher, EpochRequest]]
    ) -> None:
        topics: dict[str, list[dict]] = {}
        for p, _f, r in reqs:
            topics.setdefault(p.topic, []).append(
                {"partition": p.partition, "current_leader_epoch": r.current_leader_epoch, "leader_epoch": r.leader_epoch}
            )
        body = {
            "replica_id": self.broker.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        resp = await conn.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body)
        answers = {(t["topic"], r["partition"]): r for t in resp["topics"] for r in t["partitions"]}
        t_now = now_ms()
        for p, f, req in reqs:
            r = answers.get(p.tp)
            if r is None:
                f.on_request_failed(req, t_now)
                continue
            out = f.on_epoch_end_offset(req, ErrorCode(r["error_code"]), EpochEndOffset(r["leader_epoch"], r["end_offset"]), t_now)
            if out.truncated_to is not None:
                log.info("%s-%d: truncated to %d by leader epoch", p.topic, p.partition, out.truncated_to)
            self.broker.replica_manager.partition_changed(p)

    async def _send_fetch(self, conn: Any, reqs: list[tuple[Partition, FollowerFetcher, FetchRequest]]) -> None:
        cfg = self.broker.config
        topics: dict[str, list[dict]] = {}
        for p, _f, r in reqs:
            topics.setdefault(p.topic, []).append(
                {
                    "partition": p.partition,
                    "current_leader_epoch": r.current_leader_epoch,
                    "fetch_offset": r.fetch_offset,
                    "last_fetched_epoch": r.last_fetched_epoch,
                    "log_start_offset": r.log_start_offset,
                    "partition_max_bytes": cfg.replica_fetch_max_bytes,
                }
            )
        body = {
            "replica_id": self.broker.broker_id,
            "max_wait_ms": cfg.replica_fetch_wait_max_ms,
            "min_bytes": cfg.replica_fetch_min_bytes,
            "max_bytes": cfg.replica_fetch_response_max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        resp = await conn.send(ApiKey.FETCH, FETCH_VERSION, body)
        if resp.get("error_code"):
            raise ConnectionError(f"fetch error {ErrorCode(resp['error_code']).name}")
        answers = {(t["topic"], r["partition_index"]): r for t in resp["responses"] for r in t["partitions"]}
        t_now = now_ms()
        lag = 0
        for p, f, req in reqs:
            r = answers.get(p.tp)
            if r is None:
                f.on_request_failed(req, t_now)
                continue
            div = r.get("diverging_epoch")
            diverging = None
            if div is not None and div.get("epoch", -1) >= 0 and div.get("end_offset", -1) >= 0:
                diverging = EpochEndOffset(div["epoch"], div["end_offset"])
            fr = FetchResponse(
                ErrorCode(r["error_code"]), r["high_watermark"], r["log_start_offset"], r["records"] or None, diverging
            )
            out = f.on_fetch_response(req, fr, t_now)
            if out.error and not out.stale:
                log.info("%s-%d: fetch from %d: %s", p.topic, p.partition, self.leader_id, out.error.name)
            if out.appended or out.hw_changed or out.truncated_to is not None:
                self.broker.replica_manager.partition_changed(p)
            lag = max(lag, max(0, r["high_watermark"] - p.log.log_end_offset))
        self.max_lag = lag


class ReplicaFetcherManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[tuple[str, int], ReplicaFetcher] = {}

    def add_partition(self, p: Partition, leader_id: int) -> None:
        """Fetch p from leader_id (p.fetcher holds the follower state machine)."""
        self.remove_partition(p)
        n = max(1, self.broker.config.num_replica_fetchers)
        key = (leader_id, hash(p.tp) % n)
        f = self.fetchers.get(key)
        if f is None:
            f = self.fetchers[key] = ReplicaFetcher(self.broker, leader_id, key[1])
            f.start()
        f.add(p)
        self._assigned[p.tp] = f

    def remove_partition(self, p: Partition) -> None:
        f = self._assigned.pop(p.tp, None)
        if f is not None:
            f.remove(p)

    def max_lag(self) -> int:
        return max((f.max_lag for f in self.fetchers.values()), default=0)

    async def shutdown(self) -> None:
        await asyncio.gather(*(f.stop() for f in self.fetchers.values()), return_exceptions=True)
        self.fetchers.clear()
        self._assigned.clear()
