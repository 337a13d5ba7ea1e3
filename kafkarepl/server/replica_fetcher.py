"""Replica fetchers: followers pull from leaders with Fetch (replica_id = our broker id).

num.replica.fetchers tasks per source broker; a partition is pinned to one of them by
hash. Each round first settles truncation (OffsetForLeaderEpoch for partitions that
just became followers: KIP-101, never truncate to the HW), then sends one Fetch for all
its partitions. What to send and what an answer means is decided by the replica
manager's follower state machines; this module only moves requests and answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kafkarepl.client import BrokerConnection
from kafkarepl.client.security import ClientSecurity
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from kafkarepl.replication import (
    EpochEndOffset,
    EpochRequest,
    FetchRequest,
    FetchResponse,
    FollowerFetcher,
    ReplicaManager,
    TopicPartition,
)
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.replication_quota import ReplicationThrottle

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3

Endpoint = Callable[[int], "tuple[str, int] | None"]
Pending = list[tuple[TopicPartition, FollowerFetcher, Any]]


class ReplicaFetcher:
    def __init__(
        self, broker_id: int, leader_id: int, config: BrokerConfig, replicas: ReplicaManager, endpoint: Endpoint,
        on_connection_lost: Callable[[int], None] | None = None,
        throttle: ReplicationThrottle | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.security = security  # the inter-broker listener is SSL
        self.on_connection_lost = on_connection_lost  # the leader may be dead (server/liveness.py)
        self.throttle = throttle  # follower.replication.throttled.*
        self.leader_id = leader_id
        self.config = config
        self.replicas = replicas
        self.endpoint = endpoint
        self.partitions: set[TopicPartition] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Future | None = None
        self._conn: BrokerConnection | None = None
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

    def add(self, tp: TopicPartition) -> None:
        self.partitions.add(tp)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.discard(tp)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        ep = self.endpoint(self.leader_id)
        if ep is None:
            raise ConnectionError(f"leader {self.leader_id} is not in the metadata cache yet")
        conn = BrokerConnection(ep[0], ep[1], client_id=f"replica-fetcher-{self.broker_id}",
                                security=self.security)
        await conn.connect()
        self._conn = conn
        return conn

    async def _run(self) -> None:
        backoff_s = self.config.replica_fetch_backoff_ms / 1000
        while True:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            epoch_reqs: Pending = []
            fetch_reqs: Pending = []
            for tp in list(self.partitions):
                if self.throttle is not None and self.throttle.should_throttle(tp.topic, tp.partition,
                                                                               self._in_sync(tp)):
                    # Over follower.replication.throttled.rate: a throttled replica outside
                    # the ISR sits this round out (Kafka's shouldFollowerThrottle); asked
                    # before a request is taken, which would then await its answer.
                    continue
                nxt = self.replicas.follower_request(tp)
                if nxt is None:
                    continue
                f, req = nxt
                (epoch_reqs if isinstance(req, EpochRequest) else fetch_reqs).append((tp, f, req))
            if not epoch_reqs and not fetch_reqs:
                await self._sleep(backoff_s / 4)
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
                log.info("fetcher %d->%d: %s", self.broker_id, self.leader_id, exc)
                self._close()
                if self.on_connection_lost is not None:  # it probes: only a refusal counts
                    self.on_connection_lost(self.leader_id)
                for _tp, f, req in [*epoch_reqs, *fetch_reqs]:
                    self.replicas.on_follower_request_failed(f, req)
                await self._sleep(backoff_s)

    def _in_sync(self, tp: TopicPartition) -> bool:
        p = self.replicas.get(tp)
        return p is not None and self.broker_id in p.isr

    async def _sleep(self, seconds: float) -> None:
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _send_epoch_requests(self, conn: BrokerConnection, reqs: Pending) -> None:
        topics: dict[str, list[dict]] = {}
        for tp, _f, r in reqs:
            topics.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "current_leader_epoch": r.current_leader_epoch, "leader_epoch": r.leader_epoch}
            )
        body = {
            "replica_id": self.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        resp = await conn.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body)
        assert resp is not None
        answers = {TopicPartition(t["topic"], r["partition"]): r for t in resp["topics"] for r in t["partitions"]}
        for tp, f, req in reqs:
            r = answers.get(tp)
            if r is None:
                self.replicas.on_follower_request_failed(f, req)
                continue
            eo = EpochEndOffset(r["leader_epoch"], r["end_offset"])
            self.replicas.on_epoch_response(tp, f, req, ErrorCode(r["error_code"]), eo)

    async def _send_fetch(self, conn: BrokerConnection, reqs: Pending) -> None:
        cfg = self.config
        topics: dict[str, list[dict]] = {}
        for tp, _f, r in reqs:
            assert isinstance(r, FetchRequest)
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": r.current_leader_epoch,
                    "fetch_offset": r.fetch_offset,
                    "last_fetched_epoch": r.last_fetched_epoch,
                    "log_start_offset": r.log_start_offset,
                    "partition_max_bytes": cfg.replica_fetch_max_bytes,
                }
            )
        body = {
            "replica_id": self.broker_id,
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
        assert resp is not None
        if resp.get("error_code"):
            raise ConnectionError(f"fetch error {ErrorCode(resp['error_code']).name}")
        answers = {
            TopicPartition(t["topic"], r["partition_index"]): r for t in resp["responses"] for r in t["partitions"]
        }
        lag = 0
        for tp, f, req in reqs:
            r = answers.get(tp)
            if r is None:
                self.replicas.on_follower_request_failed(f, req)
                continue
            div = r.get("diverging_epoch")
            diverging = None
            if div is not None and div.get("epoch", -1) >= 0 and div.get("end_offset", -1) >= 0:
                diverging = EpochEndOffset(div["epoch"], div["end_offset"])
            fr = FetchResponse(
                ErrorCode(r["error_code"]), r["high_watermark"], r["log_start_offset"], r["records"] or None, diverging
            )
            if self.throttle is not None and r["records"] and self.throttle.is_throttled(tp.topic, tp.partition) \
                    and not self._in_sync(tp):
                self.throttle.record(len(r["records"]))
            out = self.replicas.on_fetch_response(tp, f, req, fr)
            if out.error and not out.stale:
                log.info("%s-%d: fetch from %d: %s", tp.topic, tp.partition, self.leader_id, out.error.name)
            p = self.replicas.get(tp)
            if p is not None:
                lag = max(lag, r["high_watermark"] - p.log.log_end_offset)
        self.max_lag = lag


class ReplicaFetcherManager:
    """FetcherControl for the replica manager: one fetcher task per (leader, index)."""

    def __init__(self, broker_id: int, config: BrokerConfig, endpoint: Endpoint,
                 on_connection_lost: Callable[[int], None] | None = None,
                 throttle: ReplicationThrottle | None = None,
                 security: ClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self.endpoint = endpoint
        self.on_connection_lost = on_connection_lost
        self.throttle = throttle
        self.security = security
        self.replicas: ReplicaManager | None = None  # bound once built (it needs us first)
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TopicPartition, ReplicaFetcher] = {}

    def add_partition(self, tp: TopicPartition, leader_id: int) -> None:
        self.remove_partition(tp)
        assert self.replicas is not None
        n = max(1, self.config.num_replica_fetchers)
        key = (leader_id, hash(tp) % n)
        f = self.fetchers.get(key)
        if f is None:
            f = self.fetchers[key] = ReplicaFetcher(self.broker_id, leader_id, self.config, self.replicas,
                                                    self.endpoint, self.on_connection_lost, self.throttle,
                                                    self.security)
            f.start()
        f.add(tp)
        self._assigned[tp] = f

    def remove_partition(self, tp: TopicPartition) -> None:
        f = self._assigned.pop(tp, None)
        if f is not None:
            f.remove(tp)

    def max_lag(self) -> int:
        return max((f.max_lag for f in self.fetchers.values()), default=0)

    async def shutdown(self) -> None:
        await asyncio.gather(*(f.stop() for f in self.fetchers.values()), return_exceptions=True)
        self.fetchers.clear()
        self._assigned.clear()
