"""The transaction coordinator of one broker (Kafka's TransactionCoordinator, ZooKeeper
mode): the transactional ids hashed to the `__transaction_state` partitions this broker
leads.

- FindCoordinator(key_type 1): the leader of partition abs(hash(id)) % partitions
  (`__transaction_state` is created, compacted, on first use).
- InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn:
  decided by coordinator/txn.py; every state change is written to the partition
  (acks=all) before it counts or is answered.
- EndTxn: PrepareCommit/PrepareAbort is written and answered, then the COMMIT/ABORT
  markers go to every partition's leader (WriteTxnMarkers, retried until written), then
  CompleteCommit/CompleteAbort is written. A coordinator that takes a partition over
  (leadership moved) reloads it and finishes what was prepared.
- Transactions open longer than their timeout are aborted with an epoch bump, fencing
  the producer (transaction.abort.timed.out.transaction.cleanup.interval.ms).
- DescribeTransactions, ListTransactions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kafkarepl import _core
from kafkarepl.aio import Pacer, paced
from kafkarepl.client import BrokerConnection
from kafkarepl.coordinator.offsets import OFFSETS_TOPIC, java_string_hash
from kafkarepl.coordinator.records import build_batch, iter_records
from kafkarepl.coordinator.txn import Decision, TxnDecisions, epoch_exhausted
from kafkarepl.coordinator.txn_log import (
    STATE_BY_NAME,
    TXN_TOPIC,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey, Request
from kafkarepl.replication import (
    Clock,
    PartitionState,
    ReplicaManager,
    TopicPartition,
)
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.coordinator_log import append_as_coordinator
from kafkarepl.server.listeners import endpoint_for
from kafkarepl.server.metadata_cache import MetadataCache
from kafkarepl.server.topics import TopicService

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1 << 20
MARKER_RETRY_S = 0.1
METADATA_WAIT_S = 5.0
Body = dict[str, Any]
# Markers done with: written, or superseded (a later epoch wrote one), or the topic is gone.
_MARKER_DONE = {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH,
                ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_TOPIC_EXCEPTION}


def txn_partition_for(transactional_id: str, partitions: int) -> int:
    return (java_string_hash(transactional_id) & 0x7FFFFFFF) % partitions


class TransactionCoordinatorService:
    def __init__(self, config: BrokerConfig, metadata: MetadataCache, replicas: ReplicaManager,
                 topics: TopicService, clock: Clock, new_producer_id: Callable[[], Awaitable[int]],
                 security: Any = None) -> None:
        self.security = security  # ssl.SSLContext of an SSL inter-broker listener
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self.topics = topics
        self.clock = clock
        self.new_producer_id = new_producer_id  # the broker's producer id blocks (ZooKeeper)
        self.decisions = TxnDecisions(config.transaction_max_timeout_ms)
        self.num_partitions = config.transaction_state_log_num_partitions
        self.txns: dict[str, TxnMetadata] = {}
        self._creating: set[str] = set()  # transactional ids whose first state is being written
        self._owned: dict[int, bool] = {}  # partition -> loaded
        self._epochs: dict[int, int] = {}  # partition -> its leader epoch (the coordinator epoch)
        self._loads: dict[int, asyncio.Task] = {}
        self._completions: set[asyncio.Task] = set()
        self._conns: dict[int, BrokerConnection] = {}
        self._create_lock = asyncio.Lock()

    # ------------------------------------------------------------- ownership -----
    def partition_for(self, transactional_id: str) -> int:
        info = self.metadata.topics.get(TXN_TOPIC)
        if info is not None and info.partitions:
            self.num_partitions = len(info.partitions)
        return txn_partition_for(transactional_id, self.num_partitions)

    def _coordinator_error(self, transactional_id: str) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        loaded = self._owned.get(self.partition_for(transactional_id))
        if loaded is None:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE if loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def on_partition_changed(self, tp: TopicPartition, p: PartitionState) -> None:
        """ReplicaManager listener: leading a __transaction_state partition loads its
        transactions, losing it drops them."""
        if tp.topic != TXN_TOPIC:
            return
        idx = tp.partition
        if p.is_leader and (idx not in self._owned or self._epochs.get(idx) != p.leader_epoch):
            self._unload(idx)
            self._owned[idx] = False
            self._epochs[idx] = p.leader_epoch
            self._loads[idx] = asyncio.ensure_future(self._load(idx, p))
        elif not p.is_leader and idx in self._owned:
            self._unload(idx)
            log.info("transaction coordinator: resigned %s-%d", TXN_TOPIC, idx)

    def _unload(self, idx: int) -> None:
        task = self._loads.pop(idx, None)
        if task is not None:
            task.cancel()
        self._owned.pop(idx, None)
        for tid in [t for t in self.txns if self.partition_for(t) == idx]:
            del self.txns[tid]

    async def _load(self, idx: int, p: PartitionState) -> None:
        lg: Any = p.log
        loaded: dict[str, TxnMetadata | None] = {}
        offset, end = lg.log_start_offset, lg.log_end_offset
        while offset < end:
            sl = lg.read(offset, LOAD_CHUNK_BYTES, end, min_one_batch=True)
            if sl.size == 0:
                break
            buf = lg.read_bytes(sl.fd, sl.position, sl.size)
            batches = _core.scan_batches(buf)[0]
            if not batches:
                break
            for b in batches:
                for rec_offset, key, value in iter_records(buf[b.position : b.position + b.size]):
                    tid = decode_key(key) if key is not None and rec_offset >= offset else None
                    if tid is None:
                        continue
                    try:
                        loaded[tid] = None if value is None else decode_value(tid, value)
                    except (ValueError, IndexError, UnicodeDecodeError):
                        log.warning("%s-%d: unreadable state of %s skipped", TXN_TOPIC, idx, tid)
                offset = b.base_offset + b.last_offset_delta + 1
            await asyncio.sleep(0)
        if self._loads.get(idx) is not asyncio.current_task():
            return
        for tid, m in loaded.items():
            if m is not None and m.state is not TxnState.DEAD:
                self.txns[tid] = m
        self._owned[idx] = True
        self._loads.pop(idx, None)
        log.info("transaction coordinator: loaded %s-%d (%d transactional ids)", TXN_TOPIC, idx,
                 sum(1 for m in loaded.values() if m is not None))
        for m in list(self.txns.values()):  # finish what the previous coordinator prepared
            if self.partition_for(m.transactional_id) == idx and m.state in (
                    TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._complete_later(m)

    # ------------------------------------------------------------ persistence -----
    async def _write(self, m: TxnMetadata, value: bytes | None = b"") -> ErrorCode:
        """Append the transactional id's new state (acks=all) to its partition."""
        record = encode_value(m) if value == b"" else value
        batch = memoryview(build_batch([(encode_key(m.transactional_id), record)], self.clock.wall_ms()))
        tp = TopicPartition(TXN_TOPIC, self.partition_for(m.transactional_id))
        return await append_as_coordinator(self.replicas, tp, batch, self.config.request_timeout_ms)

    async def _apply(self, current: TxnMetadata | None, d: Decision) -> ErrorCode:
        """Persist d.next, then make it current (the pending flag holds others off)."""
        if d.next is None:
            return d.error
        if current is not None:
            current.pending = True
        try:
            code = await self._write(d.next)
        finally:
            if current is not None:
                current.pending = False
        if code is not ErrorCode.NONE:
            return code
        tid = d.next.transactional_id
        if self.txns.get(tid) is not current:  # unloaded meanwhile
            return ErrorCode.NOT_COORDINATOR
        self.txns[tid] = d.next
        return d.error

    # ------------------------------------------------------------------ markers -----
    def _complete_later(self, m: TxnMetadata) -> None:
        task = asyncio.ensure_future(self._complete(m))
        self._completions.add(task)
        task.add_done_callback(self._completions.discard)

    async def _complete(self, prepared: TxnMetadata) -> None:
        """Markers to every partition of a prepared transaction, then its completion."""
        commit = prepared.state is TxnState.PREPARE_COMMIT
        idx = self.partition_for(prepared.transactional_id)
        pending = set(prepared.partitions)
        while pending:
            if self.txns.get(prepared.transactional_id) is not prepared or idx not in self._owned:
                return  # no longer ours: the next coordinator finishes it
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for t, i in pending:
                part = self.metadata.partition(t, i)
                if part is None:
                    if t not in self.metadata.topics:
                        pending.discard((t, i))  # deleted topic: nothing to mark
                    continue
                if part.leader >= 0:
                    by_leader.setdefault(part.leader, []).append((t, i))
            results = await asyncio.gather(*(
                self._send_markers(b, prepared, commit, parts, self._epochs.get(idx, 0))
                for b, parts in by_leader.items()))
            for done in results:
                pending -= done
            if pending:
                await asyncio.sleep(MARKER_RETRY_S)
        if self.txns.get(prepared.transactional_id) is not prepared:
            return
        nxt = self.decisions.completed(prepared, self.clock.wall_ms())
        code = await self._apply(prepared, Decision(ErrorCode.NONE, nxt))
        if code is not ErrorCode.NONE:
            log.warning("transaction %s: completion not written (%s); retrying", prepared.transactional_id,
                        code.name)
            await asyncio.sleep(MARKER_RETRY_S)
            if self.txns.get(prepared.transactional_id) is prepared:
                self._complete_later(prepared)

    async def _send_markers(self, broker: int, m: TxnMetadata, commit: bool, parts: list[tuple[str, int]],
                            coordinator_epoch: int) -> set[tuple[str, int]]:
        by_topic: dict[str, list[int]] = {}
        for t, i in parts:
            by_topic.setdefault(t, []).append(i)
        body = {"markers": [{"producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
                             "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        try:
            conn = await self._connection(broker)
            resp = await conn.send(ApiKey.WRITE_TXN_MARKERS, 1, body)
        except Exception as exc:  # noqa: BLE001 - the leader moved or died: retried
            self._drop_connection(broker)
            log.info("markers of %s to broker %d: %s", m.transactional_id, broker, exc)
            return set()
        done: set[tuple[str, int]] = set()
        for t in (resp or {}).get("markers", [{}])[0].get("topics", []):
            for r in t["partitions"]:
                if ErrorCode(r["error_code"]) in _MARKER_DONE:
                    done.add((t["name"], r["partition_index"]))
        return done

    async def _connection(self, broker: int) -> BrokerConnection:
        conn = self._conns.get(broker)
        if conn is not None and conn.connected:
            return conn
        info = self.metadata.broker(broker)
        if info is None:
            raise KafkaError(f"broker {broker} unknown", ErrorCode.LEADER_NOT_AVAILABLE)
        conn = BrokerConnection(info.host, info.port, client_id="txn-coordinator", security=self.security)
        await conn.connect()
        self._conns[broker] = conn
        return conn

    def _drop_connection(self, broker: int) -> None:
        conn = self._conns.pop(broker, None)
        if conn is not None:
            conn.close()

    # ---------------------------------------------------------- FindCoordinator -----
    async def find(self, transactional_id: str) -> tuple[ErrorCode, str | None, int, str, int]:
        def error(code: ErrorCode, message: str) -> tuple[ErrorCode, str | None, int, str, int]:
            return code, message, -1, "", -1

        if not transactional_id:
            return error(ErrorCode.INVALID_REQUEST, "empty transactional id")
        if TXN_TOPIC not in self.metadata.topics:
            await self._create_topic()
        info = self.metadata.topics.get(TXN_TOPIC)
        if info is None or not info.partitions:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{TXN_TOPIC} is being created")
        part = info.partitions.get(txn_partition_for(transactional_id, len(info.partitions)))
        broker = self.metadata.broker(part.leader) if part is not None and part.leader >= 0 else None
        if broker is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator has no leader yet")
        ep = endpoint_for(broker.endpoints, (broker.host, broker.port))
        if ep is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator has no endpoint on this listener")
        return ErrorCode.NONE, None, broker.broker_id, ep[0], ep[1]

    async def _create_topic(self) -> None:
        cfg = self.config
        async with self._create_lock:
            if TXN_TOPIC not in self.metadata.topics:
                try:
                    live = await self.topics.live_broker_count()
                    rf = max(1, min(cfg.transaction_state_log_replication_factor, live))
                    await self.topics.create(TXN_TOPIC, cfg.transaction_state_log_num_partitions, rf, None, {
                        "cleanup.policy": "compact", "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
                        "min.insync.replicas": str(min(cfg.transaction_state_log_min_isr, rf)),
                        "unclean.leader.election.enable": "false"})
                    log.info("creating %s: %d partitions, replication factor %d", TXN_TOPIC,
                             cfg.transaction_state_log_num_partitions, rf)
                except KafkaError as exc:
                    if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                        log.warning("creating %s failed: %s %s", TXN_TOPIC, exc.code.name, exc)
                        return
        deadline = time.monotonic() + METADATA_WAIT_S
        while time.monotonic() < deadline:
            info = self.metadata.topics.get(TXN_TOPIC)
            if info is not None and info.partitions and all(p.leader >= 0 for p in info.partitions.values()):
                return
            await asyncio.sleep(0.05)

    # ----------------------------------------------------------------- requests -----
    @staticmethod
    def _compat(code: ErrorCode, old_client: bool) -> ErrorCode:
        # Clients before PRODUCER_FENCED (90) know it as INVALID_PRODUCER_EPOCH.
        return ErrorCode.INVALID_PRODUCER_EPOCH if old_client and code is ErrorCode.PRODUCER_FENCED else code

    async def init_producer_id(self, req: Request) -> Body:
        b = req.body
        tid = b["transactional_id"]

        def answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> Body:
            return {"throttle_time_ms": 0, "error_code": int(self._compat(code, req.api_version < 4)),
                    "producer_id": pid, "producer_epoch": epoch}

        err = self._coordinator_error(tid)
        if err is not ErrorCode.NONE:
            return answer(err)
        current = self.txns.get(tid)
        needs_id = current is None or epoch_exhausted(current.producer_epoch)
        try:
            new_pid = await self.new_producer_id() if needs_id else -1
        except KafkaError as exc:
            return answer(exc.code)
        current = self.txns.get(tid)
        d = self.decisions.init_producer_id(current, tid, b["transaction_timeout_ms"], new_pid,
                                            self.clock.wall_ms(), b.get("producer_id", -1),
                                            b.get("producer_epoch", -1))
        creating = current is None and d.next is not None
        if creating:
            if tid in self._creating:
                # Another InitProducerId is writing this id's first state: as Kafka, which
                # caches it (pending) before the write, this one retries.
                return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
            self._creating.add(tid)
        try:
            code = await self._apply(current, d)
        finally:
            if creating:
                self._creating.discard(tid)
        if d.abort_first and code is ErrorCode.CONCURRENT_TRANSACTIONS and d.next is not None:
            self._complete_later(self.txns[tid])
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if code is not ErrorCode.NONE or d.next is None:
            return answer(code)
        return answer(ErrorCode.NONE, d.next.producer_id, d.next.producer_epoch)

    def verify(self, tid: str, producer_id: int, epoch: int,
               partitions: set[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890 verification for a partition leader (local call or AddPartitionsToTxn v4)."""
        err = self._coordinator_error(tid)
        if err is not ErrorCode.NONE:
            return dict.fromkeys(partitions, err)
        return self.decisions.verify_partitions(self.txns.get(tid), producer_id, epoch, partitions)

    async def add_partitions_to_txn(self, req: Request) -> Body:
        b = req.body
        # The client sets how many transactions and partitions: every loop over them is paced.
        pace = Pacer()
        if req.api_version >= 4:  # from a broker: a batch of transactions (verify_only: KIP-890)
            results: list[Body] = []
            for t in b["transactions"] or []:
                if pace.due():
                    await asyncio.sleep(0)
                parts = await self._partitions(t["topics"], pace)
                if t["verify_only"]:
                    codes = self.verify(t["transactional_id"], t["producer_id"], t["producer_epoch"], parts)
                else:
                    codes = dict.fromkeys(parts, ErrorCode.INVALID_REQUEST)  # KIP-890 part 2: not served
                results.append({"transactional_id": t["transactional_id"],
                                "topic_results": await self._results(t["topics"], codes.__getitem__, pace)})
            return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}
        tid = b["v3_and_below_transactional_id"]
        topics = b["v3_and_below_topics"]
        parts = await self._partitions(topics, pace)
        code = self._coordinator_error(tid)
        if code is ErrorCode.NONE:
            unknown = {tp async for tp in paced(parts) if self.metadata.partition(*tp) is None}
            if unknown:
                return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": await self._results(
                    topics, lambda tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED, pace)}
            current = self.txns.get(tid)
            d = self.decisions.add_partitions(current, b["v3_and_below_producer_id"],
                                              b["v3_and_below_producer_epoch"], parts, self.clock.wall_ms())
            code = await self._apply(current, d)
        code = self._compat(code, req.api_version < 2)
        return {"throttle_time_ms": 0,
                "results_by_topic_v3_and_below": await self._results(topics, lambda _tp: code, pace)}

    @staticmethod
    async def _partitions(topics: list[Body], pace: Pacer) -> set[tuple[str, int]]:
        parts: set[tuple[str, int]] = set()
        for t in topics:
            if pace.due():
                await asyncio.sleep(0)
            for i in t["partitions"]:
                if pace.due():
                    await asyncio.sleep(0)
                parts.add((t["name"], i))
        return parts

    @staticmethod
    async def _results(topics: list[Body], code_of: Callable[[tuple[str, int]], ErrorCode],
                       pace: Pacer) -> list[Body]:
        """AddPartitionsToTxn's per-topic results, in the request's order."""
        out: list[Body] = []
        for t in topics:
            if pace.due():
                await asyncio.sleep(0)
            parts = []
            for i in t["partitions"]:
                if pace.due():
                    await asyncio.sleep(0)
                parts.append({"partition_index": i, "partition_error_code": int(code_of((t["name"], i)))})
            out.append({"name": t["name"], "results_by_partition": parts})
        return out

    async def add_offsets_to_txn(self, req: Request, offsets_partition: Callable[[str], int]) -> Body:
        b = req.body
        tid = b["transactional_id"]
        code = self._coordinator_error(tid)
        if code is ErrorCode.NONE:
            current = self.txns.get(tid)
            tp = (OFFSETS_TOPIC, offsets_partition(b["group_id"]))
            d = self.decisions.add_partitions(current, b["producer_id"], b["producer_epoch"], {tp},
                                              self.clock.wall_ms())
            code = await self._apply(current, d)
        return {"throttle_time_ms": 0, "error_code": int(self._compat(code, req.api_version < 2))}

    async def end_txn(self, req: Request) -> Body:
        b = req.body
        tid = b["transactional_id"]
        code = self._coordinator_error(tid)
        if code is ErrorCode.NONE:
            current = self.txns.get(tid)
            d = self.decisions.end_txn(current, b["producer_id"], b["producer_epoch"], b["committed"],
                                       self.clock.wall_ms())
            code = await self._apply(current, d)
            if code is ErrorCode.NONE and d.next is not None:
                self._complete_later(self.txns[tid])
        return {"throttle_time_ms": 0, "error_code": int(self._compat(code, req.api_version < 2))}

    # ------------------------------------------------------------------ timers -----
    async def abort_timed_out(self) -> int:
        """transaction.abort.timed.out.transaction.cleanup.interval.ms"""
        now = self.clock.wall_ms()
        n = 0
        for m in list(self.txns.values()):
            if not self._owned.get(self.partition_for(m.transactional_id)):
                continue
            nxt = self.decisions.timed_out_abort(m, now)
            if nxt is None:
                continue
            log.info("transaction %s timed out after %d ms: aborting (epoch %d -> %d)", m.transactional_id,
                     m.timeout_ms, m.producer_epoch, nxt.producer_epoch)
            if await self._apply(m, Decision(ErrorCode.NONE, nxt)) is ErrorCode.NONE:
                self._complete_later(self.txns[m.transactional_id])
                n += 1
        return n

    async def expire_transactional_ids(self) -> int:
        """transactional.id.expiration.ms: ids idle in a completed state go (tombstone)."""
        now = self.clock.wall_ms()
        n = 0
        for m in list(self.txns.values()):
            if (self._owned.get(self.partition_for(m.transactional_id)) and not m.pending
                    and m.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                    and now - m.last_update_ms >= self.config.transactional_id_expiration_ms):
                m.pending = True  # as Kafka's prepareDead: requests meanwhile retry
                try:
                    code = await self._write(m, None)
                finally:
                    m.pending = False
                if code is ErrorCode.NONE and self.txns.get(m.transactional_id) is m:
                    del self.txns[m.transactional_id]
                    n += 1
        return n

    # ----------------------------------------------------------------- describe -----
    async def describe_transactions(self, req: Request) -> Body:
        out = []
        async for tid in paced(req.body["transactional_ids"] or []):  # the client names them
            err = self._coordinator_error(tid)
            m = self.txns.get(tid) if err is ErrorCode.NONE else None
            if err is ErrorCode.NONE and m is None:
                err = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            by_topic: dict[str, list[int]] = {}
            for t, i in sorted(m.partitions if m else ()):
                by_topic.setdefault(t, []).append(i)
            out.append({
                "error_code": int(err), "transactional_id": tid,
                "transaction_state": m.state.display if m else "",
                "transaction_timeout_ms": m.timeout_ms if m else 0,
                "transaction_start_time_ms": m.start_ms if m else -1,
                "producer_id": m.producer_id if m else -1, "producer_epoch": m.producer_epoch if m else -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            })
        return {"throttle_time_ms": 0, "transaction_states": out}

    async def list_transactions(self, req: Request) -> Body:
        b = req.body
        states = b.get("state_filters") or []
        unknown = [s for s in states if s not in STATE_BY_NAME]
        wanted = {STATE_BY_NAME[s] for s in states if s in STATE_BY_NAME}
        pids = set(b.get("producer_id_filters") or [])
        min_age = b.get("duration_filter", -1)
        now = self.clock.wall_ms()
        err = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if any(v is False for v in self._owned.values()) \
            else ErrorCode.NONE
        found = [
            {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
             "transaction_state": m.state.display}
            for m in sorted(self.txns.values(), key=lambda x: x.transactional_id)
            if (not wanted or m.state in wanted) and (not pids or m.producer_id in pids)
            and (min_age is None or min_age < 0 or (m.start_ms >= 0 and now - m.start_ms >= min_age))
        ]
        return {"throttle_time_ms": 0, "error_code": int(err), "unknown_state_filters": unknown,
                "transaction_states": found}

    def shutdown(self) -> None:
        for task in [*self._loads.values(), *self._completions]:
            task.cancel()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
