"""Executor side of a write on the native data plane: Arrow batches from Spark are routed
to partitions (C partitioner over the key buffers, or the partition column), encoded by C
into record batches v2 (kafkarepl._core.RecordEncoder) and sent as Produce requests with
kafkarepl's client. No Python object per record.

Same contract as produce.py: acks=all and an idempotent producer id by default, the task
fails unless every record was acknowledged. A sender thread owns the event loop, so
Produce requests fly while the next Arrow rows are encoded. Per partition, batches carry
consecutive sequence numbers, at most 5 in flight (the window a broker dedupes) and all to
one broker at a time; a retriable error (NOT_LEADER_OR_FOLLOWER, a dead connection) drains
that partition's in-flight batches, refreshes metadata and resends them in order to the
leader it names (the leader drops duplicates by sequence). A batch still unacknowledged
after delivery.timeout.ms fails the task.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import pyarrow as pa

from kafkarepl import _core
from kafkarepl.errors import RETRIABLE, ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey

from .arrow_records import CODECS, bin_column, encode_batches, headers_column, partitions_of, seal
from .native import NativeConfig, new_loop
from .produce import SINK_COLUMNS, DeliveryError

CHUNK_ROWS = 262144          # Arrow rows gathered before routing and encoding
CHUNK_BYTES = 16 << 20
BATCH_BYTES = 1_000_000      # librdkafka's batch.size default; below max.message.bytes
MAX_BUFFERED = 64 << 20      # unacknowledged bytes before the encoder waits
MAX_IN_FLIGHT = 5            # Produce requests per broker (the idempotence window)
MAX_REQUEST_BYTES = 16 << 20
TP = tuple[str, int]


@dataclass(eq=False)
class _Batch:
    tp: TP
    data: bytearray
    count: int
    born: float
    in_flight: bool = False


@dataclass
class _Partition:
    queue: deque = field(default_factory=deque)
    in_flight: int = 0
    leader: int = -1         # where the in-flight batches went
    recovering: bool = False
    not_before: float = 0.0


class Sender:
    """Produce requests from a thread of its own. submit() from the encoding thread,
    flush() at the end."""

    def __init__(self, cfg: NativeConfig, acks: int, idempotent: bool, timeout_s: float, backoff_s: float) -> None:
        self.cfg, self.acks, self.idempotent = cfg, acks, idempotent
        self.timeout_s, self.backoff_s = timeout_s, backoff_s
        self.loop = new_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="kafkarepl-sender", daemon=True)
        self.thread.start()
        self.client: Any = None
        self.cond = threading.Condition()
        self.buffered = 0
        self.queued_records = 0
        self.acked: dict[str, int] = {}
        self.failures: list[str] = []
        self.failed_records = 0
        self.fatal = False
        self.parts: dict[TP, _Partition] = {}
        self.in_flight: dict[int, int] = {}
        self.seq: dict[TP, int] = {}  # next sequence per partition (encoding thread)
        self.producer_id, self.producer_epoch = -1, -1
        self._refreshing = False
        self._wake: tuple[float, asyncio.TimerHandle] | None = None
        try:
            self._call(self._start())
        except BaseException:
            self.close()
            raise

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _start(self) -> None:
        self.client = self.cfg.client()
        await self.client.start()
        if self.idempotent:
            resp = await self.client.send(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
            if resp["error_code"]:
                raise KafkaError("kafkarepl: InitProducerId failed", ErrorCode(resp["error_code"]))
            self.producer_id, self.producer_epoch = resp["producer_id"], resp["producer_epoch"]

    # ---- encoding thread -------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        return self._call(self._partition_count(topic))

    async def _partition_count(self, topic: str) -> int:
        deadline = time.monotonic() + self.timeout_s
        while True:
            t = self.client.topics.get(topic)
            if t is not None and t["partitions"]:
                return len(t["partitions"])
            resp = await self.client.metadata([topic], allow_auto_topic_creation=True)
            codes = [e["error_code"] for e in resp["topics"] if e["name"] == topic]
            if topic in self.client.topics and self.client.topics[topic]["partitions"]:
                continue
            code = ErrorCode(codes[0]) if codes else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if code not in RETRIABLE or time.monotonic() > deadline:
                raise DeliveryError(f"kafkarepl: topic {topic!r}: {code.name}")
            await asyncio.sleep(self.backoff_s)

    def submit(self, topic: str, partition: int, data: bytearray, count: int, codec: int) -> None:
        tp = (topic, partition)
        with self.cond:
            while self.buffered > MAX_BUFFERED and not self.fatal:
                self.cond.wait()
            if self.fatal:
                return
            self.buffered += len(data)
            self.queued_records += count
        seq = self.seq.get(tp, 0)
        if self.producer_id >= 0:
            self.seq[tp] = (seq + count) & 0x7FFFFFFF
        seal(data, count, codec, self.producer_id, self.producer_epoch, seq if self.producer_id >= 0 else -1)
        self.loop.call_soon_threadsafe(self._enqueue, _Batch(tp, data, count, time.monotonic()))

    def fail_local(self, topic: str, partition: int, count: int, reason: str) -> None:
        with self.cond:
            self.failures.append(f"{topic}-{partition}: {reason}")
            self.failed_records += count
            self.fatal = True
            self.cond.notify_all()

    def flush(self, timeout_s: float) -> int:
        """Waits until every submitted record is acknowledged or failed, or timeout_s;
        returns the number of records still unacknowledged."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while self.queued_records and not self.fatal:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 1.0))
            return self.queued_records

    def close(self) -> None:
        async def stop() -> None:
            if self.client is not None:
                self.client.close()

        try:
            self._call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            if not self.thread.is_alive():
                self.loop.close()

    # ---- sender thread ---------------------------------------------------------------------

    def _enqueue(self, b: _Batch) -> None:
        self.parts.setdefault(b.tp, _Partition()).queue.append(b)
        self._pump()

    def _leader(self, tp: TP) -> int:
        t = self.client.topics.get(tp[0])
        for p in t["partitions"] if t else ():
            if p["partition_index"] == tp[1]:
                return p["leader_id"]
        return -1

    def _pump(self) -> None:
        if self.fatal:
            return
        now = time.monotonic()
        ready: dict[int, list[deque]] = {}
        stale = False
        wake = float("inf")
        for tp, part in self.parts.items():
            if part.recovering or not part.queue:
                continue
            if part.not_before > now:
                wake = min(wake, part.not_before)
                continue
            leader = self._leader(tp)
            if leader < 0:
                stale = True
                continue
            if part.in_flight and part.leader != leader:
                # The leader moved under in-flight batches: let them come back first, so a
                # partition's batches go to one broker at a time, in sequence order.
                continue
            room = MAX_IN_FLIGHT - part.in_flight  # the broker dedupes the last 5 batches only
            if room > 0:
                ready.setdefault(leader, []).append(deque(
                    islice((b for b in part.queue if not b.in_flight), room)))
        for leader, queues in ready.items():
            while self.in_flight.get(leader, 0) < MAX_IN_FLIGHT:
                batch: list[_Batch] = []
                size = 0
                for q in queues:  # one batch per partition per request
                    if q and size + len(q[0].data) <= MAX_REQUEST_BYTES or (q and not batch):
                        b = q.popleft()
                        batch.append(b)
                        size += len(b.data)
                if not batch:
                    break
                for b in batch:
                    b.in_flight = True
                    part = self.parts[b.tp]
                    part.in_flight += 1
                    part.leader = leader
                self.in_flight[leader] = self.in_flight.get(leader, 0) + 1
                self.loop.create_task(self._send(leader, batch))
        if stale:
            self._refresh_later()
        if wake < float("inf"):
            self._wake_at(wake)

    def _wake_at(self, when: float) -> None:
        """Pump again once `when` (time.monotonic) has passed. The loop's own clock may run
        its timers a little early (uvloop keeps milliseconds), so add a margin."""
        if self._wake is not None and self._wake[0] <= when:
            return
        if self._wake is not None:
            self._wake[1].cancel()
        delay = max(0.0, when - time.monotonic()) + 0.002

        def fire() -> None:
            self._wake = None
            self._pump()

        self._wake = (when, self.loop.call_later(delay, fire))

    def _refresh_later(self) -> None:
        if not self._refreshing:
            self._refreshing = True
            self.loop.call_later(self.backoff_s, lambda: self.loop.create_task(self._refresh()))

    async def _refresh(self) -> None:
        try:
            await self.client.metadata(sorted({tp[0] for tp in self.parts}))
        except Exception:  # noqa: BLE001, S110 - the next pump finds the leader still unknown and asks again
            pass
        finally:
            self._refreshing = False
        self._pump()

    async def _send(self, leader: int, batch: list[_Batch]) -> None:
        topics: dict[str, list[dict]] = {}
        for b in batch:
            topics.setdefault(b.tp[0], []).append({"index": b.tp[1], "records": memoryview(b.data)})
        body = {"transactional_id": None, "acks": self.acks, "timeout_ms": int(self.cfg.request_timeout_s * 1000),
                "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}
        results: dict[TP, tuple[int, str]] = {}
        try:
            resp = await self.client.send(ApiKey.PRODUCE, body, leader)
            for t in resp["responses"]:
                for p in t["partition_responses"]:
                    results[(t["name"], p["index"])] = (p["error_code"], p.get("error_message") or "")
        except Exception as exc:  # noqa: BLE001 - any failure to get an answer is retried, never lost
            results = {b.tp: (ErrorCode.NETWORK_EXCEPTION, str(exc) or type(exc).__name__) for b in batch}
        finally:
            self.in_flight[leader] -= 1
        now = time.monotonic()
        for b in batch:
            part = self.parts[b.tp]
            part.in_flight -= 1
            b.in_flight = False
            code, msg = results.get(b.tp, (ErrorCode.NETWORK_EXCEPTION, "no answer for the partition"))
            if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self._finish(b, None)
            elif (code in RETRIABLE or (code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and part.recovering)) \
                    and now - b.born < self.timeout_s:
                part.recovering = True
            else:
                why = "Local: Message timed out" if code in RETRIABLE else ErrorCode(code).name
                self._finish(b, f"{why}{': ' + msg if msg else ''}")
        for part in self.parts.values():
            if part.recovering and part.in_flight == 0:
                # Everything sent is back: resend what is left, in order, to the new leader.
                part.recovering = False
                part.not_before = now + self.backoff_s
                self._wake_at(part.not_before)
                self._refresh_later()
        self._pump()

    def _finish(self, b: _Batch, error: str | None) -> None:
        part = self.parts[b.tp]
        part.queue.remove(b)
        with self.cond:
            self.buffered -= len(b.data)
            self.queued_records -= b.count
            if error is None:
                self.acked[b.tp[0]] = self.acked.get(b.tp[0], 0) + b.count
            else:
                self.failures.append(f"{b.tp[0]}-{b.tp[1]}: {error}")
                self.failed_records += b.count
                self.fatal = True
            self.cond.notify_all()


# ---- routing and encoding (encoding thread) -----------------------------------------------

def _chunks(items: Iterable[Any]) -> Iterator[Any]:
    """Spark's Arrow batches (or Rows) gathered into RecordBatches of about CHUNK_ROWS,
    column names lowercased, only the sink's columns kept."""
    pending: list = []
    rows = size = 0

    def combined() -> Any:
        b = pending[0] if len(pending) == 1 else pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
        names = [n.lower() for n in b.schema.names]
        b = b.rename_columns(names)
        return b.select([n for n in SINK_COLUMNS if n in names])

    row_buf: list = []
    for item in items:
        if not isinstance(item, pa.RecordBatch):
            row_buf.append(item.asDict(recursive=True))
            if len(row_buf) < 4096:
                continue
            item, row_buf = pa.RecordBatch.from_pylist(row_buf), []
        pending.append(item)
        rows += item.num_rows
        size += item.nbytes
        if rows >= CHUNK_ROWS or size >= CHUNK_BYTES:
            yield combined()
            pending, rows, size = [], 0, 0
    if row_buf:
        pending.append(pa.RecordBatch.from_pylist(row_buf))
    if pending and sum(b.num_rows for b in pending):
        yield combined()


def _by_topic(batch: Any, topic_option: str | None) -> list[tuple[str, Any]]:
    if topic_option:
        return [(topic_option, batch)]
    import pyarrow.compute as pc  # ~25 ms to import: only rows with a topic column need it

    topics = batch.column("topic")
    if topics.null_count:
        raise ValueError("kafkarepl: a row has a null topic and no 'topic' option is set")
    enc = topics.dictionary_encode()
    names = enc.dictionary.to_pylist()
    if len(names) == 1:
        return [(names[0], batch)]
    return [(t, batch.filter(pc.equal(enc.indices, i))) for i, t in enumerate(names)]


_PARTITIONERS = {  # librdkafka name -> (algorithm, null key as empty key; else sticky random)
    "consistent_random": (_core.PARTITIONER_CRC32, False),
    "consistent": (_core.PARTITIONER_CRC32, True),
    "murmur2_random": (_core.PARTITIONER_MURMUR2, False),
    "murmur2": (_core.PARTITIONER_MURMUR2, True),
}


def route_and_send(sender: Sender, batch: Any, topic_option: str | None, partitioner: str,
                   max_bytes: int, codec: int, rng: random.Random) -> int:
    """Sends the rows of one chunk; returns how many were submitted."""
    sent = 0
    for topic, b in _by_topic(batch, topic_option):
        n = b.num_rows
        count = sender.partition_count(topic)
        names = b.schema.names
        key = bin_column(b.column("key")) if "key" in names else None
        algo, null_as_empty = _PARTITIONERS.get(partitioner, (_core.PARTITIONER_CRC32, False))
        parts = partitions_of(None if partitioner == "random" else key, n, count, algo, null_as_empty)
        if "partition" in names:
            import pyarrow.compute as pc

            explicit = b.column("partition")
            given = pc.fill_null(explicit, -1).to_numpy(zero_copy_only=False).astype(np.int32)
            set_ = pc.is_valid(explicit).to_numpy(zero_copy_only=False)
            parts = np.where(set_, given, parts)
            bad = set_ & ((given < 0) | (given >= count))
            if bad.any():
                p = int(given[np.argmax(bad)])
                sender.fail_local(topic, p, int(bad.sum()), "Local: Unknown partition")
                return sent
        unassigned = parts == -1
        if unassigned.any():  # sticky: one random partition per chunk, as librdkafka's sticky partitioner
            parts[unassigned] = rng.randrange(count)
        order = np.argsort(parts, kind="stable")
        if (order[1:] < order[:-1]).any():  # group each partition's rows (Arrow take, in C++)
            b = b.take(pa.array(order))
            parts = parts[order]
            key = bin_column(b.column("key")) if "key" in names else None
        bounds = np.searchsorted(parts, np.arange(count + 1), side="left")
        headers = headers_column(b.column("headers")) if "headers" in names else None
        encoder = _core.RecordEncoder(bin_column(b.column("value")), key, headers)
        for p in range(count):
            lo, hi = int(bounds[p]), int(bounds[p + 1])
            for data, k in encode_batches(encoder, lo, hi, max_bytes, codec):
                sender.submit(topic, p, data, k, codec)
                sent += k
            if sender.fatal:
                return sent
    return sent


def produce_native(kafka: Mapping[str, str], topic_option: str | None, items: Iterable[Any],
                   flush_timeout_ms: int) -> dict[str, int]:
    """Send every row; return {topic: records acknowledged}. Raises DeliveryError if any
    record failed or is still unacknowledged after flush_timeout_ms."""
    cfg = NativeConfig.of(kafka, "spark-kafkarepl")
    acks = 1 if cfg.get("acks", cfg.get("request.required.acks", "all")) == "1" else -1
    idempotent = acks == -1 and cfg.get("enable.idempotence", "true").lower() == "true"
    timeout_ms = int(cfg.get("message.timeout.ms", cfg.get("delivery.timeout.ms", "300000")))
    codec = CODECS[cfg.get("compression.type", cfg.get("compression.codec", "none")).lower()]
    partitioner = cfg.get("partitioner", "consistent_random").lower()
    max_bytes = int(cfg.get("batch.size", str(BATCH_BYTES)))
    sender = Sender(cfg, acks, idempotent, timeout_ms / 1000.0, int(cfg.get("retry.backoff.ms", "100")) / 1000.0)
    rng = random.Random()
    sent = 0
    try:
        for chunk in _chunks(items):
            sent += route_and_send(sender, chunk, topic_option, partitioner, max_bytes, codec, rng)
            if sender.fatal:
                break
        remaining = sender.flush(flush_timeout_ms / 1000.0)
    finally:
        sender.close()
    failures = sender.failures
    if failures or remaining:
        detail = "; ".join(failures[:5]) + (f" (and {len(failures) - 5} more)" if len(failures) > 5 else "")
        raise DeliveryError(
            f"kafkarepl: {sender.failed_records} record(s) failed, {remaining} unacknowledged after flush, "
            f"of {sent} sent: {detail or 'flush timed out (flushTimeoutMs)'}")
    return sender.acked
