"""Replica fetchers: followers pull from leaders with Fetch (replica_id = our broker id).

num.replica.fetchers tasks per source broker; a partition is pinned to one of them by
hash. Each round first settles truncation (OffsetForLeaderEpoch for partitions that
just became followers: KIP-101, never truncate to the HW), then sends one Fetch. What to
send and what an answer means is decided by the replica manager's follower state
machines; this module only moves requests and answers.

The Fetch uses an incremental fetch session (KIP-227, the leader's side in
fetch_session.py): the first one lists every partition, later ones only the partitions
whose fetch state changed, and the answers carry only partitions with news. A
partition's request then stays in flight until the leader answers for it, so a round
touches only the partitions answered, added or waiting out a backoff: an idle fetcher
of thousands of partitions costs next to nothing. A partition that stops fetching
(truncation by epoch, a backoff) leaves the session and comes back as a new one. A
leader that declines sessions (session id 0), a follower throttle in force, or a
session error make the fetcher send full Fetches (all partitions, every round) instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafkarepl.aio import wait_event
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
from kafkarepl.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, next_epoch
from kafkarepl.server.replication_quota import ReplicationThrottle

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3

Endpoint = Callable[[int], "tuple[str, int] | None"]
Pending = list[tuple[TopicPartition, FollowerFetcher, Any]]
Flushed = Callable[[list[Any]], Awaitable[None]]


class ReplicaFetcher:
    def __init__(
        self, broker_id: int, leader_id: int, config: BrokerConfig, replicas: ReplicaManager, endpoint: Endpoint,
        on_connection_lost: Callable[[int], None] | None = None,
        throttle: ReplicationThrottle | None = None,
        security: ClientSecurity | None = None,
        flushed: Flushed | None = None,
    ) -> None:
        self.broker_id = broker_id
        # flush.messages here: the next fetch waits for the flushes of what this one
        # appended (LogFlusher.flushed), as Kafka's fetcher thread flushes in its append.
        self.flushed = flushed
        self._unflushed: list[Any] = []  # logs of this round's answers awaiting their flush
        self.security = security  # the inter-broker listener is SSL
        self.on_connection_lost = on_connection_lost  # the leader may be dead (server/liveness.py)
        self._failures = 0  # failed rounds in a row (logged once, then at DEBUG)
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
        # The fetch session (KIP-227)
        self.sessions_declined = False  # the leader answered session id 0: full fetches
        self._session_id = 0
        self._session_epoch = INITIAL_EPOCH
        self._dirty: set[TopicPartition] = set()  # ask the replica manager for a request
        self._sent: dict[TopicPartition, tuple[FollowerFetcher, FetchRequest]] = {}  # in flight
        self._told: dict[TopicPartition, tuple[int, int, int, int]] = {}  # the leader's view
        self._forgotten: set[TopicPartition] = set()  # to leave the session next request

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
        self._dirty.add(tp)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.discard(tp)
        self._dirty.discard(tp)
        self._sent.pop(tp, None)
        self._forget(tp)

    def _forget(self, tp: TopicPartition) -> None:
        if self._told.pop(tp, None) is not None:
            self._forgotten.add(tp)

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

    def _use_session(self) -> bool:
        return not self.sessions_declined and not (self.throttle is not None and self.throttle.active)

    async def _run(self) -> None:
        backoff_s = self.config.replica_fetch_backoff_ms / 1000
        while True:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self._use_session():
                await self._session_round(backoff_s)
                continue
            if self._sent or self._session_id:
                self._reset_session(failed=False)  # leaving session mode
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
                wait = True
                if epoch_reqs:
                    await self._send_epoch_requests(conn, epoch_reqs)
                    epoch_reqs = []
                    wait = False  # they fetch next round: no long poll before it
                if fetch_reqs:
                    await self._send_fetch(conn, fetch_reqs, wait)
                    fetch_reqs = []
                self._succeeded()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - leader down/moving: back off, retry
                self._failed(exc)
                for _tp, f, req in [*epoch_reqs, *fetch_reqs]:
                    self.replicas.on_follower_request_failed(f, req)
                await self._sleep(backoff_s)

    # -- fetch sessions ---------------------------------------------------------------
    async def _session_round(self, backoff_s: float) -> None:
        epoch_reqs: Pending = []
        updates: Pending = []
        opening = self._session_epoch == INITIAL_EPOCH
        for tp in list(self._dirty):
            if tp in self._forgotten:
                continue  # back in the session once the leader dropped it
            nxt = self.replicas.follower_request(tp)
            if nxt is None:  # backing off: out of the session meanwhile
                self._forget(tp)
                continue
            f, req = nxt
            self._dirty.discard(tp)
            if isinstance(req, EpochRequest):
                self._forget(tp)
                epoch_reqs.append((tp, f, req))
                continue
            assert isinstance(req, FetchRequest)
            self._sent[tp] = (f, req)
            state = (req.fetch_offset, req.last_fetched_epoch, req.current_leader_epoch, req.log_start_offset)
            if opening or self._told.get(tp) != state:
                updates.append((tp, f, req))
        if opening:
            updates = [(tp, f, r) for tp, (f, r) in self._sent.items()]
        if not epoch_reqs and not self._sent and not self._forgotten:
            await self._sleep(backoff_s / 4)
            return
        try:
            conn = await self._connection()
            wait = True
            if epoch_reqs:
                await self._send_epoch_requests(conn, epoch_reqs)
                self._dirty.update(tp for tp, _f, _r in epoch_reqs)
                epoch_reqs = []
                wait = False  # they fetch next round: no long poll before it
            if self._sent or self._forgotten:
                await self._send_session_fetch(conn, updates, wait)
            self._succeeded()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - leader down/moving: back off, retry
            self._failed(exc)
            for _tp, f, req in epoch_reqs:
                self.replicas.on_follower_request_failed(f, req)
            self._reset_session(failed=True)
            await self._sleep(backoff_s)

    def _failed(self, exc: Exception) -> None:
        """A round failed: drop the connection and have the leader probed (only a refusal
        counts). Logs the first failure in a row at INFO, the retries (one per
        replica.fetch.backoff.ms while the leader is down) at DEBUG, and the recovery with
        their count."""
        self._failures += 1
        log.log(logging.INFO if self._failures == 1 else logging.DEBUG, "fetcher %d->%d: %s%s",
                self.broker_id, self.leader_id, exc, "; retrying every replica.fetch.backoff.ms"
                if self._failures == 1 else "")
        self._close()
        if self.on_connection_lost is not None:
            self.on_connection_lost(self.leader_id)

    def _succeeded(self) -> None:
        if self._failures:
            log.info("fetcher %d->%d: fetching again after %d failed attempt%s", self.broker_id, self.leader_id,
                     self._failures, "" if self._failures == 1 else "s")
            self._failures = 0

    def _reset_session(self, failed: bool) -> None:
        """Drop the session: requests in flight failed (backoff) or are abandoned (asked
        again at once); the next round opens a new session with every partition."""
        for f, req in self._sent.values():
            if failed:
                self.replicas.on_follower_request_failed(f, req)
            else:
                self.replicas.on_follower_request_abandoned(f, req)
        self._sent.clear()
        self._told.clear()
        self._forgotten.clear()
        self._dirty = set(self.partitions)
        self._session_id, self._session_epoch = 0, INITIAL_EPOCH

    async def _send_session_fetch(self, conn: BrokerConnection, updates: Pending, wait: bool = True) -> None:
        forgotten: dict[str, list[int]] = {}
        sent_forgotten = set(self._forgotten)
        for tp in sent_forgotten:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        body = self._fetch_body(updates, self._session_id, self._session_epoch)
        if not wait:
            body["max_wait_ms"] = 0
        body["forgotten_topics_data"] = [{"topic": t, "partitions": ps} for t, ps in forgotten.items()]
        opening = self._session_epoch == INITIAL_EPOCH
        resp = await conn.send(ApiKey.FETCH, FETCH_VERSION, body)
        assert resp is not None
        code = ErrorCode(resp.get("error_code", 0))
        if code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            log.info("fetcher %d->%d: fetch session %d: %s; opening a new one", self.broker_id,
                     self.leader_id, self._session_id, code.name)
            self._reset_session(failed=False)
            return
        if code is not ErrorCode.NONE:
            raise ConnectionError(f"fetch error {code.name}")
        if opening:
            self._session_id = resp.get("session_id", 0)
            if self._session_id:
                log.info("fetcher %d->%d: fetch session %d opened with %d partitions", self.broker_id,
                         self.leader_id, self._session_id, len(updates))
            else:
                self.sessions_declined = True  # answered in full: full fetches from now on
                log.info("fetcher %d->%d: the leader declined a fetch session; full fetches",
                         self.broker_id, self.leader_id)
        self._forgotten -= sent_forgotten
        for tp, _f, r in updates:
            self._told[tp] = (r.fetch_offset, r.last_fetched_epoch, r.current_leader_epoch, r.log_start_offset)
        self._session_epoch = next_epoch(self._session_epoch) if self._session_id else INITIAL_EPOCH
        answers = {
            TopicPartition(t["topic"], r["partition_index"]): r for t in resp["responses"] for r in t["partitions"]
        }
        lag = self.max_lag if not opening else 0
        for tp, r in answers.items():
            entry = self._sent.pop(tp, None)
            if entry is None:
                continue  # not in flight here any more (moved or forgotten meanwhile)
            lag = max(lag, self._on_answer(tp, entry[0], entry[1], r))
            if tp in self.partitions:
                self._dirty.add(tp)
        if self.sessions_declined:  # a full answer: what it left out failed
            for tp, (f, req) in self._sent.items():
                self.replicas.on_follower_request_failed(f, req)
                self._dirty.add(tp)
            self._sent.clear()
            self._told.clear()
        self.max_lag = lag
        await self._await_flushes()

    def _in_sync(self, tp: TopicPartition) -> bool:
        p = self.replicas.get(tp)
        return p is not None and self.broker_id in p.isr

    async def _sleep(self, seconds: float) -> None:
        """Until `seconds` pass or a wakeup (a partition added). Its stop may come in the
        same loop turn as a wakeup (a broker made follower by its own controlled shutdown):
        wait_event never loses that cancellation, as asyncio.wait_for did."""
        self._wakeup.clear()
        await wait_event(self._wakeup, seconds)

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

    def _fetch_body(self, reqs: Pending, session_id: int, session_epoch: int) -> dict[str, Any]:
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
        return {
            "replica_id": self.broker_id,
            "max_wait_ms": cfg.replica_fetch_wait_max_ms,
            "min_bytes": cfg.replica_fetch_min_bytes,
            "max_bytes": cfg.replica_fetch_response_max_bytes,
            "isolation_level": 0,
            "session_id": session_id,
            "session_epoch": session_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def _on_answer(self, tp: TopicPartition, f: FollowerFetcher, req: FetchRequest, r: dict[str, Any]) -> int:
        """One partition of a Fetch answer to the replica manager; returns its lag."""
        div = r.get("diverging_epoch")
        diverging = None
        if div is not None and div.get("epoch", -1) >= 0 and div.get("end_offset", -1) >= 0:
            diverging = EpochEndOffset(div["epoch"], div["end_offset"])
        fr = FetchResponse(
            ErrorCode(r["error_code"]), r["high_watermark"], r["log_start_offset"], r["records"] or None, diverging
        )
        if self.throttle is not None and r["records"] and self.throttle.is_throttled(tp.topic, tp.partition):
            # Traffic of in-sync replicas counts as well (Kafka's ReplicaFetcherThread), so
            # all replication of the throttled partitions stays within the rate.
            self.throttle.record(len(r["records"]))
        out = self.replicas.on_fetch_response(tp, f, req, fr)
        if out.error and not out.stale:
            log.info("%s-%d: fetch from %d: %s", tp.topic, tp.partition, self.leader_id, out.error.name)
        p = self.replicas.get(tp)
        if p is None:
            return 0
        leo = p.log.log_end_offset
        if r["records"] and self.flushed is not None and p.log.flush_pending(leo):
            self._unflushed.append(p.log)
        return int(r["high_watermark"]) - leo

    async def _await_flushes(self) -> None:
        """The flushes flush.messages asked for in this round's appends, before the next
        fetch tells the leader (for its HW) that this replica has those records."""
        if self._unflushed:
            logs, self._unflushed = self._unflushed, []
            assert self.flushed is not None
            await self.flushed(logs)

    async def _send_fetch(self, conn: BrokerConnection, reqs: Pending, wait: bool = True) -> None:
        body = self._fetch_body(reqs, 0, FINAL_EPOCH)
        if not wait:
            body["max_wait_ms"] = 0
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
            assert isinstance(req, FetchRequest)
            lag = max(lag, self._on_answer(tp, f, req, r))
        self.max_lag = lag
        await self._await_flushes()


class ReplicaFetcherManager:
    """FetcherControl for the replica manager: one fetcher task per (leader, index)."""

    def __init__(self, broker_id: int, config: BrokerConfig, endpoint: Endpoint,
                 on_connection_lost: Callable[[int], None] | None = None,
                 throttle: ReplicationThrottle | None = None,
                 security: ClientSecurity | None = None, flushed: Flushed | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self.endpoint = endpoint
        self.on_connection_lost = on_connection_lost
        self.throttle = throttle
        self.security = security
        self.flushed = flushed
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
                                                    self.security, self.flushed)
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
