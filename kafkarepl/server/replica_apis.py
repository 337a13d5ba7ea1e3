"""Request layer for the replica APIs: wire bodies in, ReplicaManager calls, wire bodies out.

Produce, Fetch, ListOffsets and OffsetForLeaderEpoch from clients and followers;
LeaderAndIsr, StopReplica and UpdateMetadata from the controller. Holds no replication
state: the ReplicaManager decides, this layer translates and waits for its callbacks.
Controller orders are applied one at a time, in arrival order (a LeaderAndIsr that
awaits topic configs must not be overtaken by a later one).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from kafkarepl.aio import Pacer, more_partitions_than, paced, wait_event
from kafkarepl.coordinator.records import build_marker
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import FileRange, Request
from kafkarepl.replication import (
    BrokerTopicStats,
    FetchParams,
    FetchPartitionData,
    PartitionFetch,
    PartitionOrder,
    PartitionResponse,
    ReplicaManager,
    StopOrder,
    TopicPartition,
)
from kafkarepl.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSession,
    FetchSessionCache,
    next_epoch,
)
from kafkarepl.server.metadata_cache import MetadataCache
from kafkarepl.storage.records import produce_records_error
from kafkarepl.storage.timestamps import first_record_at_or_after

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
# A Fetch of more partitions outside a session takes the paced path (_large_fetch); every
# loop over a client's list of partitions lets other tasks run each _CHUNK steps.
_LARGE_FETCH = 1000
_CHUNK = 1000
Body = dict[str, Any]
T = TypeVar("T")
# (partition, producer id, producer epoch, committed): a marker was written and committed
TxnMarkerListener = Callable[[TopicPartition, int, int, bool], None]
# (transactional id, producer id, epoch, partitions) -> error per partition
TxnVerify = Callable[[str, int, int, set[tuple[str, int]]], Awaitable[dict[tuple[str, int], ErrorCode]]]


def _batch_head(records: Any) -> tuple[int, int, bool] | None:
    """(producer id, producer epoch, transactional) of the first batch, or None."""
    if records is None or len(records) < 61:
        return None
    head = bytes(memoryview(records)[:61])
    attrs = int.from_bytes(head[21:23], "big")
    return (int.from_bytes(head[43:51], "big", signed=True), int.from_bytes(head[51:53], "big", signed=True),
            bool(attrs & 0x10))


def _done_future(value: T) -> asyncio.Future:
    fut: asyncio.Future = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


def _callback_future() -> tuple[asyncio.Future, Callable[[Any], None]]:
    """A future and a callback that resolves it once; a request whose connection closed
    (future cancelled) must not break the replica manager's completion of others."""
    fut: asyncio.Future = asyncio.get_running_loop().create_future()

    def done(value: Any) -> None:
        if not fut.done():
            fut.set_result(value)

    return fut, done


class _Gate:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class ReplicaApis:
    def __init__(
        self,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        topic_overrides: Callable[[str], Awaitable[dict[str, str]]],
        checkpoint_log_starts: Callable[[], Awaitable[None]] | None = None,
        on_txn_marker: TxnMarkerListener | None = None,
        verify_txn: TxnVerify | None = None,
        clock_ms: Callable[[], int] | None = None,
        marker_timeout_ms: int = 30_000,
        fetch_sessions: FetchSessionCache | None = None,
        topic_stats: BrokerTopicStats | None = None,
        fetch_max_bytes: int = 0x7FFFFFFF,
        rack_aware_reads: bool = False,
    ) -> None:
        self.replicas = replicas
        self.rack_aware_reads = rack_aware_reads  # replica.selector.class: the rack-aware one
        self.fetch_max_bytes = fetch_max_bytes  # KIP-541's broker cap on every Fetch answer
        self.topic_stats = topic_stats or BrokerTopicStats()
        self.sessions = fetch_sessions  # KIP-227 sessions for followers (None: never)
        self.on_txn_marker = on_txn_marker  # e.g. the group coordinator's txn offsets
        self.verify_txn = verify_txn  # KIP-890: the coordinator confirms a transaction's partitions
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.marker_timeout_ms = marker_timeout_ms  # Kafka: request.timeout.ms
        self.metadata = metadata
        self.topic_overrides = topic_overrides
        self.checkpoint_log_starts = checkpoint_log_starts  # off the loop: fsyncs
        self._orders = asyncio.Lock()
        self._produce_order = asyncio.Lock()  # held by a large Produce until its append starts
        self._txn_gates: dict[str, _Gate] = {}  # transactional id -> produce order

    # ------------------------------------------------------------------ produce -----
    async def produce(self, req: Request) -> Body | None:
        # A producer's pipelined requests must append in the order they came: nothing
        # awaits before the append starts, except in a request naming more than _CHUNK
        # partitions, whose loops let other tasks run; while one does, every Produce
        # waits its turn on _produce_order (FIFO), so none overtakes it.
        large = more_partitions_than(req.body["topic_data"], _CHUNK, "partition_data")
        if large or self._produce_order.locked():
            async with self._produce_order:
                fut, refused, invalid = await self._start_produce(req, Pacer(_CHUNK) if large else None)
        else:
            fut, refused, invalid = await self._start_produce(req, None)
        results = {**await fut, **refused, **invalid}
        if req.body["acks"] == 0:
            return None
        by_topic: dict[str, list[Body]] = {}
        pace = Pacer(_CHUNK)
        for tp, r in results.items():
            if pace.due():
                await asyncio.sleep(0)
            by_topic.setdefault(tp.topic, []).append({
                "index": tp.partition,
                "error_code": int(r.error),
                "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time,
                "log_start_offset": r.log_start_offset,
                "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in r.record_errors],
                "error_message": r.error_message,
            })
        return {
            "responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()],
            "throttle_time_ms": 0,
        }

    async def _start_produce(self, req: Request, pace: Pacer | None) -> tuple[
            Awaitable[dict[TopicPartition, PartitionResponse]], dict[TopicPartition, PartitionResponse],
            dict[TopicPartition, PartitionResponse]]:
        """Validates the request and starts its append: (the appends' answers, partitions
        refused by the transaction coordinator, partitions answered without the log). With
        `pace` None it does not await before the append starts (but for a transaction's
        verification, ordered by its own gate)."""
        body = req.body
        acks = body["acks"]
        entries: dict[TopicPartition, Any] = {}
        # As Kafka's KafkaApis: a known partition whose records are not exactly one v2
        # batch (ProduceRequest.validateRecords, headers only) is answered INVALID_RECORD
        # without a message and never reaches the log. A partition not hosted here gets the
        # replica manager's answer for it without the trip (the client sets how many).
        invalid: dict[TopicPartition, PartitionResponse] = {}
        hosted, internal = self.replicas.partitions, self.replicas.internal_topics
        for topic in body["topic_data"]:
            for pd in topic["partition_data"]:
                tp = TopicPartition(topic["name"], pd["index"])
                err = (produce_records_error(pd["records"], req.api_version)
                       if self.metadata.partition(tp.topic, tp.partition) is not None else None)
                if err is not None:
                    invalid[tp] = PartitionResponse(err.code)
                    log.debug("%s-%d: produce refused: %s", tp.topic, tp.partition, err)
                elif tp not in hosted and tp.topic not in internal and acks in (0, 1, -1):
                    invalid[tp] = PartitionResponse(self.replicas.missing_error(tp))
                else:
                    entries[tp] = pd["records"]
                if pace is not None and pace.due():
                    await asyncio.sleep(0)
        refused: dict[TopicPartition, PartitionResponse] = {}
        tid = body.get("transactional_id")
        if acks not in (0, 1, -1):
            results: Awaitable[dict[TopicPartition, PartitionResponse]] = _done_future(
                {tp: PartitionResponse(ErrorCode.INVALID_REQUIRED_ACKS) for tp in entries})
        elif tid is not None and self.verify_txn is not None:
            # One transactional producer's pipelined requests are verified and appended
            # in arrival order: a request waiting on its coordinator must not let a
            # later one (next sequence numbers) append first.
            gate = self._txn_gates.get(tid)
            if gate is None:
                gate = self._txn_gates[tid] = _Gate()
            gate.users += 1
            try:
                async with gate.lock:
                    refused = await self._verify_transactional(tid, entries)
                    fut = self._append({tp: r for tp, r in entries.items() if tp not in refused},
                                       body["timeout_ms"], acks)
            finally:
                gate.users -= 1
                if gate.users == 0:
                    del self._txn_gates[tid]
            results = fut
        else:
            results = self._append(entries, body["timeout_ms"], acks)
        return results, refused, invalid

    def _append(self, entries: dict[TopicPartition, Any], timeout_ms: int, acks: int
                ) -> asyncio.Future:
        """Starts the append now (log order is decided here); the future gets the answers."""
        fut, done = _callback_future()
        if entries:
            self.replicas.append_records(timeout_ms, acks, entries, done)
        else:
            done({})
        return fut

    async def _verify_transactional(self, tid: str, entries: dict[TopicPartition, Any]
                                    ) -> dict[TopicPartition, PartitionResponse]:
        """KIP-890: partitions where this producer has no transaction open yet are
        confirmed with the coordinator first; the refused ones answer with its error."""
        need: dict[tuple[int, int], set[tuple[str, int]]] = {}
        for tp, records in entries.items():
            head = _batch_head(records)
            if head is None:
                continue  # validation answers it
            pid, epoch, transactional = head
            if not transactional or pid < 0:
                continue
            p = self.replicas.get(tp)
            table: Any = getattr(p.log, "producer_state", None) if p is not None else None
            entry = table.producers.get(pid) if table is not None else None
            if entry is not None and entry.producer_epoch == epoch and entry.current_txn_first_offset >= 0:
                continue  # its transaction is open here already: verified before
            need.setdefault((pid, epoch), set()).add((tp.topic, tp.partition))
        refused: dict[TopicPartition, PartitionResponse] = {}
        assert self.verify_txn is not None
        for (pid, epoch), parts in need.items():
            for (t, i), code in (await self.verify_txn(tid, pid, epoch, parts)).items():
                if code is not ErrorCode.NONE:
                    refused[TopicPartition(t, i)] = PartitionResponse(code)
        return refused

    # -------------------------------------------------------------------- fetch -----
    async def fetch(self, req: Request) -> Body:
        body = req.body
        replica_id = body.get("replica_id")
        # a consumer's rack matters only with the rack-aware selector (else: leaders only)
        rack = (body.get("rack_id") or "") if self.rack_aware_reads else ""
        params = FetchParams(
            replica_id=-1 if replica_id is None else replica_id,
            max_wait_ms=max(0, body["max_wait_ms"]),
            min_bytes=body["min_bytes"],
            max_bytes=min(body.get("max_bytes", 0x7FFFFFFF), self.fetch_max_bytes),
            client_rack=rack,
            follower_reads=req.api_version >= 11,  # KIP-392
            read_committed=body.get("isolation_level", 0) == 1,
        )
        racks = {b.broker_id: b.rack for b in self.metadata.brokers.values()} if rack else None
        in_session = params.from_follower and self.sessions is not None and req.api_version >= 7
        if not in_session and more_partitions_than(body["topics"], _LARGE_FETCH):
            return await self._large_fetch(body["topics"], params, racks)
        fetches = [_partition_fetch(TopicPartition(topic["topic"], fp["partition"]), fp)
                   for topic in body["topics"] for fp in topic["partitions"]]
        session: FetchSession | None = None
        if in_session and self.sessions is not None:
            sid, epoch = body.get("session_id", 0), body.get("session_epoch", FINAL_EPOCH)
            if epoch > INITIAL_EPOCH:
                return await self._session_fetch(body, params, fetches, racks, sid, epoch)
            if sid:
                self.sessions.remove(sid)  # closed (FINAL_EPOCH) or replaced (INITIAL_EPOCH)
            if epoch == INITIAL_EPOCH:
                session = self.sessions.create(params.replica_id, fetches, _monotonic_ms())
        fut, done = _callback_future()
        self.replicas.fetch_messages(params, fetches, done, racks)
        data: list[FetchPartitionData] = await fut
        if session is not None:
            for f, d in zip(fetches, data, strict=True):
                self._told(session, f.tp, d)
        parts = [(f.tp, d) for f, d in zip(fetches, data, strict=True)]
        self._count(parts, params.from_follower)
        return _fetch_response(parts, session.id if session is not None else 0)

    async def _large_fetch(self, topics: list[Body], params: FetchParams,
                           racks: dict[int, str | None] | None) -> Body:
        """A Fetch of more than _LARGE_FETCH partitions outside a fetch session, whose
        size the client sets. Each partition is answered once (Kafka's fetch map keeps one
        entry per partition, the last one asked, at the place of the first); partitions
        not hosted here get their error without the replica manager, which reads only the
        hosted ones (as many as this broker has at most); every loop over the client's
        list lets other tasks run every _CHUNK steps. As in any Fetch, an error answers at
        once."""
        pace = Pacer(_CHUNK)
        wanted: dict[TopicPartition, PartitionFetch] = {}
        for topic in topics:
            name = topic["topic"]
            for fp in topic["partitions"]:
                tp = TopicPartition(name, fp["partition"])
                wanted[tp] = _partition_fetch(tp, fp)
                if pace.due():
                    await asyncio.sleep(0)
        hosted = self.replicas.partitions
        local: list[PartitionFetch] = []
        for tp, f in wanted.items():
            if tp in hosted:
                local.append(f)
            if pace.due():
                await asyncio.sleep(0)
        if len(local) < len(wanted):
            params = replace(params, max_wait_ms=0)
        fut, done = _callback_future()
        self.replicas.fetch_messages(params, local, done, racks)
        data = dict(zip((f.tp for f in local), await fut, strict=True))
        topics_out: list[Body] = []
        chunk: list[tuple[TopicPartition, FetchPartitionData]] = []
        for tp in wanted:
            d = data.get(tp)
            chunk.append((tp, d if d is not None else FetchPartitionData(error=self.replicas.missing_error(tp))))
            if len(chunk) == _CHUNK:
                self._count(chunk, params.from_follower)
                _add_partitions(topics_out, chunk)
                chunk = []
                await asyncio.sleep(0)
        self._count(chunk, params.from_follower)
        _add_partitions(topics_out, chunk)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics_out}

    async def _session_fetch(self, body: Body, params: FetchParams, fetches: list[PartitionFetch],
                             racks: dict[int, str | None] | None, session_id: int, epoch: int) -> Body:
        """An incremental Fetch of a KIP-227 session (server/fetch_session.py): read what
        can have changed, answer with what did, wait up to max_wait for records."""
        assert self.sessions is not None
        now = _monotonic_ms()
        s = self.sessions.get(session_id, params.replica_id, now)
        if s is None or epoch != s.epoch:
            code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND if s is None else ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return {"throttle_time_ms": 0, "error_code": int(code), "session_id": 0, "responses": []}
        s.epoch = next_epoch(epoch)
        forgotten = [TopicPartition(t["topic"], p) for t in body.get("forgotten_topics_data") or []
                     for p in t["partitions"]]
        updated: list[TopicPartition] = self.sessions.update(s, fetches, forgotten)
        deadline = now + params.max_wait_ms
        news: dict[TopicPartition, FetchPartitionData] = {}
        while True:
            s.wakeup.clear()
            examine = s.to_examine(updated, now)
            updated = []
            urgent = False
            if examine:
                data, _total, has_error = self.replicas.read_for_fetch(
                    params, [s.parts[tp].fetch for tp in examine], racks)
                urgent = has_error
                for tp, d in zip(examine, data, strict=True):
                    if self._told(s, tp, d):
                        news[tp] = d
                        urgent = urgent or d.diverging_epoch is not None
            if (urgent or sum(d.size for d in news.values()) >= max(params.min_bytes, 1) or now >= deadline
                    or s.id not in self.sessions.sessions):
                break
            await wait_event(s.wakeup, max(0.0, (deadline - now) / 1000))  # a lost cancellation: see wait_event
            now = _monotonic_ms()
        parts = sorted(news.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
        self._count(parts, params.from_follower)
        return _fetch_response(parts, s.id)

    def _count(self, parts: list[tuple[TopicPartition, FetchPartitionData]], follower: bool) -> None:
        """BrokerTopicMetrics of a Fetch answer. A partition the cluster does not have is
        not counted, as Kafka's handleFetchRequest answers it UNKNOWN_TOPIC_OR_PARTITION
        before ReplicaManager.readFromLocalLog counts anything: its topic name is the
        client's, and counting it kept a counter set per name a client made up (memory
        until the next scrape of the metrics endpoint; forever without one)."""
        fetched = self.topic_stats.fetched
        hosted, known = self.replicas.partitions, self.metadata.partition
        for tp, d in parts:
            if d.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and tp not in hosted \
                    and known(tp.topic, tp.partition) is None:
                continue
            fetched(tp.topic, d.error, d.size, follower)

    def _told(self, s: FetchSession, tp: TopicPartition, d: FetchPartitionData) -> bool:
        """Whether d is news for the session's follower; keeps `lagging` current."""
        cached = s.parts.get(tp)
        if cached is None:
            return False
        p = self.replicas.get(tp)
        if d.error is ErrorCode.NONE and p is not None and cached.fetch.fetch_offset < p.log.log_end_offset:
            s.lagging.add(tp)
        else:
            s.lagging.discard(tp)
        return cached.changed_by(d)

    # ------------------------------------------------------------- list offsets -----
    async def list_offsets(self, req: Request) -> Body:
        replica_id = req.body.get("replica_id", -1)
        committed = req.body.get("isolation_level", 0) == 1
        pace = Pacer(_CHUNK)  # the client sets how many partitions
        topics_out = []
        for topic in req.body["topics"]:
            parts = []
            for lp in topic["partitions"]:
                parts.append(self._list_offset(TopicPartition(topic["name"], lp["partition_index"]), lp,
                                               replica_id, committed))
                if pace.due():
                    await asyncio.sleep(0)
            topics_out.append({"name": topic["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics_out}

    def _list_offset(self, tp: TopicPartition, lp: Body, replica_id: int, read_committed: bool) -> Body:
        out: Body = {
            "partition_index": tp.partition, "error_code": 0, "old_style_offsets": [],
            "timestamp": -1, "offset": -1, "leader_epoch": -1,
        }
        p, err = self.replicas.leader_partition(tp, lp.get("current_leader_epoch", -1))
        if p is None:
            out["error_code"] = int(err)
            return out
        lg: Any = p.log
        ts = lp["timestamp"]
        # Consumers read to the HW (read_uncommitted) or the LSO (read_committed), replicas to the LEO.
        if replica_id >= 0:
            hw = lg.log_end_offset
        elif read_committed:
            hw = p.last_stable_offset
        else:
            hw = p.high_watermark
        if ts == EARLIEST_TIMESTAMP:
            out["offset"] = lg.log_start_offset
        elif ts == LATEST_TIMESTAMP:
            out["offset"] = hw
        elif ts == MAX_TIMESTAMP or ts >= 0:
            try:  # these read the log: a disk error is this partition's (Kafka's handleListOffsetRequest)
                if ts == MAX_TIMESTAMP:
                    # KIP-734: the (first) record with the largest timestamp, if it is readable.
                    latest = max((seg.max_timestamp for seg in lg.segments), default=-1)
                    found = _offset_for_timestamp(lg, latest) if latest >= 0 else None
                else:
                    found = _offset_for_timestamp(lg, ts)
            except KafkaError as exc:
                out["error_code"] = int(exc.code)
                return out
            if found is not None and found[0] < hw:
                out["offset"], out["timestamp"] = found
        else:
            out["error_code"] = int(ErrorCode.INVALID_REQUEST)
        out["leader_epoch"] = p.leader_epoch
        out["old_style_offsets"] = [out["offset"]]
        return out

    # ------------------------------------------------------ write txn markers -----
    async def write_txn_markers(self, req: Request) -> Body:
        """From a transaction coordinator: append each COMMIT/ABORT marker to its
        partitions as their leader and answer once every ISR member has it (acks=all,
        as Kafka's). A marker of an older producer epoch is refused
        (INVALID_PRODUCER_EPOCH); a marker on `__consumer_offsets` completes the
        producer's transactional offset commits there."""
        jobs: list[tuple[int, str, int, asyncio.Future]] = []  # (marker index, topic, partition, result)
        # Whoever sends it sets how many partitions: appended _CHUNK at a time, every loop
        # paced (the markers of different partitions are independent of each other).
        pace = Pacer(_CHUNK)
        for i, m in enumerate(req.body["markers"]):
            batch = build_marker(m["producer_id"], m["producer_epoch"], m["transaction_result"],
                                 m["coordinator_epoch"], self.clock_ms())
            named: dict[TopicPartition, None] = {}  # each partition once
            for t in m["topics"]:
                if pace.due():
                    await asyncio.sleep(0)
                for pi in t["partition_indexes"]:
                    if pace.due():
                        await asyncio.sleep(0)
                    named[TopicPartition(t["name"], pi)] = None
            if pace.due():
                await asyncio.sleep(0)
            tps = list(named)
            for start in range(0, len(tps), _CHUNK):
                chunk = tps[start:start + _CHUNK]
                fut, done = _callback_future()
                self.replicas.append_records(self.marker_timeout_ms, -1, {tp: bytearray(batch) for tp in chunk},
                                             done, internal_topics_allowed=True, markers=True, client=False)
                jobs.extend((i, tp.topic, tp.partition, fut) for tp in chunk)
                if start + _CHUNK < len(tps):  # more to append: others run between chunks
                    await asyncio.sleep(0)
        results: dict[tuple[int, str, int], int] = {}
        async for i, topic, partition, fut in paced(jobs):
            answers: dict[TopicPartition, PartitionResponse] = await fut
            res = answers[TopicPartition(topic, partition)]
            results[(i, topic, partition)] = int(res.error)
            m = req.body["markers"][i]
            if res.error is ErrorCode.NONE and self.on_txn_marker is not None:
                try:
                    self.on_txn_marker(TopicPartition(topic, partition), m["producer_id"],
                                       m["producer_epoch"], m["transaction_result"])
                except Exception:  # noqa: BLE001 - the marker is written; report, go on
                    log.exception("%s-%d: txn marker listener failed", topic, partition)
        markers_out = []
        for i, m in enumerate(req.body["markers"]):
            if pace.due():
                await asyncio.sleep(0)
            topics_out = []
            for t in m["topics"]:
                if pace.due():
                    await asyncio.sleep(0)
                parts = []
                for pi in t["partition_indexes"]:
                    if pace.due():
                        await asyncio.sleep(0)
                    parts.append({"partition_index": pi, "error_code": results[(i, t["name"], pi)]})
                topics_out.append({"name": t["name"], "partitions": parts})
            markers_out.append({"producer_id": m["producer_id"], "topics": topics_out})
        return {"markers": markers_out}

    # ------------------------------------------------------- describe producers -----
    async def describe_producers(self, req: Request) -> Body:
        """kafka-transactions.sh describe-producers: the idempotent producers the leader's
        log knows, with the start offset of each one's open transaction."""
        topics_out = []
        pace = Pacer(_CHUNK)  # the client sets how many partitions
        for t in req.body["topics"]:
            parts = []
            for i in t["partition_indexes"]:
                if pace.due():
                    await asyncio.sleep(0)
                p, err = self.replicas.leader_partition(TopicPartition(t["name"], i))
                out: Body = {"partition_index": i, "error_code": int(err), "error_message": None,
                             "active_producers": []}
                if p is not None:
                    table: Any = getattr(p.log, "producer_state", None)
                    for e in (table.producers.values() if table is not None else ()):
                        out["active_producers"].append({
                            "producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
                            "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                            "coordinator_epoch": -1, "current_txn_start_offset": e.current_txn_first_offset,
                        })
                parts.append(out)
            topics_out.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics_out}

    # ----------------------------------------------------------- delete records -----
    async def delete_records(self, req: Request) -> Body:
        """kafka-delete-records.sh. The leader's log start moves (and is checkpointed) at
        once; the answer waits, as Kafka's, until every live replica's log start reached
        the offset (the low watermark), or timeout_ms."""
        offsets: dict[TopicPartition, int] = {}
        elsewhere: dict[TopicPartition, tuple[ErrorCode, int]] = {}  # not hosted: answered here
        pace = Pacer(_CHUNK)  # the client sets how many partitions
        hosted = self.replicas.partitions
        for t in req.body["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                if tp in hosted:
                    offsets[tp] = p["offset"]
                else:
                    elsewhere[tp] = (self.replicas.missing_error(tp), -1)
                if pace.due():
                    await asyncio.sleep(0)
        fut, done = _callback_future()
        self.replicas.delete_records(offsets, req.body["timeout_ms"], done)
        if self.checkpoint_log_starts is not None:
            await self.checkpoint_log_starts()
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {**await fut, **elsewhere}
        topics_out = []
        for t in req.body["topics"]:
            parts = []
            for p in t["partitions"]:
                if pace.due():
                    await asyncio.sleep(0)
                err, low = results[TopicPartition(t["name"], p["partition_index"])]
                parts.append({"partition_index": p["partition_index"], "low_watermark": low, "error_code": int(err)})
            topics_out.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics_out}

    # --------------------------------------------------- offset for leader epoch -----
    async def offset_for_leader_epoch(self, req: Request) -> Body:
        topics_out = []
        pace = Pacer(_CHUNK)  # the client sets how many partitions
        for topic in req.body["topics"]:
            parts = []
            for op in topic["partitions"]:
                if pace.due():
                    await asyncio.sleep(0)
                err, eo = self.replicas.last_offset_for_leader_epoch(
                    TopicPartition(topic["topic"], op["partition"]), op["leader_epoch"], op.get("current_leader_epoch", -1)
                )
                parts.append({"error_code": int(err), "partition": op["partition"],
                              "leader_epoch": eo.epoch, "end_offset": eo.end_offset})
            topics_out.append({"topic": topic["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics_out}

    # -------------------------------------------------------- controller orders -----
    async def leader_and_isr(self, req: Request) -> Body:
        body = req.body
        orders: list[PartitionOrder] = []
        topic_ids: dict[str, Any] = {}
        for ts in body.get("topic_states") or []:
            name = ts["topic_name"]
            topic_ids[name] = ts.get("topic_id")
            for ps in ts["partition_states"]:
                orders.append(PartitionOrder(
                    TopicPartition(name, ps["partition_index"]), ps["leader"], ps["leader_epoch"],
                    tuple(ps["isr"]), tuple(ps["replicas"]), ps["partition_epoch"],
                    is_new=bool(ps.get("is_new")),
                ))
        async with self._orders:
            err = self.replicas.check_controller_order(body["controller_epoch"], body.get("broker_epoch", -1))
            if err is not ErrorCode.NONE:
                return {"error_code": int(err), "topics": []}
            self.metadata.note_live_leaders(body.get("live_leaders") or [])
            configs = await self._configs_of({o.tp.topic for o in orders if self.replicas.broker_id in o.replicas})
            err, results = self.replicas.become_leader_or_follower(
                body["controller_epoch"], body.get("broker_epoch", -1), orders, configs
            )
            sync = self.replicas.pop_epoch_sync()
            if sync is not None:  # answered once the new epochs are durable, as before
                try:
                    await asyncio.get_running_loop().run_in_executor(None, sync.pending.run)
                except OSError as exc:
                    log.error("LeaderAndIsr: new leader epochs of %d partitions not made durable: %r",
                              len(sync.partitions), exc)
                finally:
                    self.replicas.epoch_synced(sync)
        by_topic: dict[str, list[Body]] = {}
        for tp, code in results.items():
            by_topic.setdefault(tp.topic, []).append(
                {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": int(code)}
            )
        return {
            "error_code": int(err),
            "topics": [{"topic_id": topic_ids.get(t), "partition_errors": ps} for t, ps in by_topic.items()],
        }

    async def _configs_of(self, topics: set[str]) -> Mapping[str, Mapping[str, str]]:
        names = sorted(topics)
        values = await asyncio.gather(*(self.topic_overrides(t) for t in names))
        return dict(zip(names, values, strict=True))

    async def stop_replica(self, req: Request) -> Body:
        body = req.body
        orders: list[StopOrder] = []
        for ts in body.get("topic_states") or []:  # v3+
            for ps in ts["partition_states"]:
                orders.append(StopOrder(TopicPartition(ts["topic_name"], ps["partition_index"]),
                                        ps.get("leader_epoch", -1), bool(ps.get("delete_partition"))))
        delete = bool(body.get("delete_partitions"))
        for t in body.get("topics") or []:  # v1-v2
            orders.extend(StopOrder(TopicPartition(t["name"], i), -1, delete) for i in t["partition_indexes"])
        for up in body.get("ungrouped_partitions") or []:  # v0
            orders.append(StopOrder(TopicPartition(up["topic_name"], up["partition_index"]), -1, delete))
        async with self._orders:
            err, results = self.replicas.stop_replicas(body["controller_epoch"], body.get("broker_epoch", -1), orders)
        return {
            "error_code": int(err),
            "partition_errors": [
                {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": int(code)}
                for tp, code in results.items()
            ],
        }

    async def update_metadata(self, req: Request) -> Body:
        async with self._orders:
            err = self.replicas.accept_controller_order(req.body["controller_epoch"], req.body.get("broker_epoch", -1))
            if err is ErrorCode.NONE:
                self.metadata.update(req.body)
        return {"error_code": int(err)}


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _fetch_response(parts: list[tuple[TopicPartition, FetchPartitionData]], session_id: int) -> Body:
    topics_out: list[Body] = []
    _add_partitions(topics_out, parts)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": topics_out}


def _partition_fetch(tp: TopicPartition, fp: Body) -> PartitionFetch:
    """A Fetch request's partition entry."""
    return PartitionFetch(tp, fp["fetch_offset"], fp["partition_max_bytes"], fp.get("current_leader_epoch", -1),
                          fp.get("last_fetched_epoch", -1), fp.get("log_start_offset", -1))


def _add_partitions(topics_out: list[Body], parts: list[tuple[TopicPartition, FetchPartitionData]]) -> None:
    """The Fetch answer's entries of `parts`, after those in `topics_out` (a topic's run
    of partitions under one topic entry)."""
    last_topic = topics_out[-1]["topic"] if topics_out else None
    for tp, d in parts:
        if tp.topic != last_topic:
            topics_out.append({"topic": tp.topic, "partitions": []})
            last_topic = tp.topic
        out: Body = {
            "partition_index": tp.partition,
            "error_code": int(d.error),
            "high_watermark": d.high_watermark,
            "last_stable_offset": d.last_stable_offset,
            "log_start_offset": d.log_start_offset,
            # null unless read_committed (Kafka's FetchResponse: "null if not provided")
            "aborted_transactions": None if d.aborted_transactions is None else [
                {"producer_id": pid, "first_offset": first} for pid, first in d.aborted_transactions],
            "preferred_read_replica": d.preferred_read_replica,
            # empty, never null, also with an error: librdkafka rejects a null record set
            # in the flexible versions (MessageSetSize -1) and refetches in a tight loop
            "records": FileRange(d.records.fd, d.records.position, d.size) if d.size else b"",
        }
        if d.diverging_epoch is not None:
            out["diverging_epoch"] = {"epoch": d.diverging_epoch.epoch, "end_offset": d.diverging_epoch.end_offset}
        topics_out[-1]["partitions"].append(out)


def _offset_for_timestamp(lg: Any, ts: int) -> tuple[int, int] | None:
    """Kafka's answer: the first RECORD with timestamp >= ts. The log finds the batch by
    its headers and time index; the records of that one batch are then walked."""
    found = lg.offset_for_timestamp(ts)
    if found is None:
        return None
    sl = lg.read(found[0], 1, None, min_one_batch=True)
    if sl.size:
        exact = first_record_at_or_after(lg.read_bytes(sl.fd, sl.position, sl.size), ts)
        if exact is not None and exact[0] >= found[0]:
            return exact
    return found
