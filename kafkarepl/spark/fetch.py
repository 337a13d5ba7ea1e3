"""Executor side of a read on the native data plane: Fetch requests from the partition
leader with kafkarepl's client, record bytes decoded by C straight into Arrow buffers
(kafkarepl._core.ArrowRecordsBuilder), yielded to Spark as pyarrow.RecordBatch. No Python
object per record.

The next Fetch is in flight while Spark takes the previous batch (one request ahead), so
the broker's sendfile and Spark's Arrow transfer overlap. Same contract as consume.py:
exactly [start, end), gaps skipped, failOnDataLoss, kafkaConsumer.pollTimeoutMs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from typing import Any

from kafkarepl.errors import RETRIABLE, ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey

from .arrow_records import RecordsDecoder
from .native import NativeConfig, new_loop
from .offsets import DataLossError, OffsetRange

YIELD_ROWS = 131072          # rows per Arrow batch handed to Spark (at most about)
YIELD_BYTES = 16 << 20
PARTITION_MAX_BYTES = 8 << 20  # per Fetch; a larger first batch still comes whole (KIP-74)
MAX_WAIT_MS = 500
BACKOFF_S = 0.1


def _fetch_body(r: OffsetRange, offset: int, cfg: NativeConfig) -> dict:
    pmax = int(cfg.get("max.partition.fetch.bytes", str(PARTITION_MAX_BYTES)))
    return {
        "replica_id": -1,
        "max_wait_ms": int(cfg.get("fetch.wait.max.ms", str(MAX_WAIT_MS))),
        "min_bytes": 1,
        "max_bytes": int(cfg.get("fetch.max.bytes", str(max(pmax, 52428800)))),
        "isolation_level": 0,  # read_uncommitted: up to the high watermark, as Spark reads
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": r.topic, "partitions": [{
            "partition": r.partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": pmax}]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


class _Fetcher:
    """One partition's fetches on a private event loop (a Spark task is synchronous)."""

    def __init__(self, kafka: Mapping[str, str], r: OffsetRange) -> None:
        self.cfg = NativeConfig.of(kafka, "spark-kafkarepl")
        self.r = r
        self.loop = new_loop()
        self.client = self.cfg.client()
        self.leader = -1

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def _leader(self) -> int:
        if self.leader < 0:
            if not self.client.brokers:
                await self.client.start()
            else:  # after an error: ask again, the cached leader may be the one that failed
                await self.client.metadata([self.r.topic])
            self.leader = await self.client.leader_for(self.r.topic, self.r.partition)
            if self.leader < 0:
                raise KafkaError(f"no leader for {self.r.topic}-{self.r.partition}", ErrorCode.LEADER_NOT_AVAILABLE)
        return self.leader

    async def fetch(self, offset: int) -> dict:
        """The partition's Fetch response entry (error_code, high_watermark, records...);
        connection failures come back as a retriable error_code."""
        try:
            leader = await self._leader()
            resp = await self.client.send(ApiKey.FETCH, _fetch_body(self.r, offset, self.cfg), leader)
        except KafkaError as exc:
            code = exc.code if exc.code in RETRIABLE else ErrorCode.NETWORK_EXCEPTION
            return {"error_code": code, "detail": str(exc)}
        except OSError as exc:
            return {"error_code": ErrorCode.NETWORK_EXCEPTION, "detail": str(exc)}
        if resp.get("error_code"):
            return {"error_code": resp["error_code"], "detail": "fetch session"}
        for t in resp["responses"]:
            for p in t["partitions"]:
                if p["partition_index"] == self.r.partition:
                    return p
        return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "detail": "partition missing from the response"}

    def close(self) -> None:
        self.client.close()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


def read_range_native(kafka: Mapping[str, str], r: OffsetRange, schema: Any, fail_on_data_loss: bool,
                      poll_timeout_ms: int) -> Iterator[Any]:
    """Arrow batches of the records of r in offset order (see consume.read_range)."""
    if r.size <= 0:
        return
    f = _Fetcher(kafka, r)
    decoder = RecordsDecoder("headers" in schema.names)
    where = f"{r.topic}-{r.partition} [{r.start}, {r.end})"
    ahead: asyncio.Task | None = None  # the next Fetch, sent before yielding
    try:
        next_offset = r.start
        deadline = time.monotonic() + poll_timeout_ms / 1000.0
        while next_offset < r.end:
            if ahead is None:
                ahead = f.loop.create_task(f.fetch(next_offset))
            part = f.run(ahead)
            ahead = None
            err = part["error_code"]
            if err == ErrorCode.OFFSET_OUT_OF_RANGE:
                start, hw = part.get("log_start_offset", -1), part.get("high_watermark", -1)
                if fail_on_data_loss:
                    raise DataLossError(f"kafkarepl: reading {where} at offset {next_offset}: offset out of range "
                                        f"(the log holds [{start}, {hw})); set failOnDataLoss=false to skip lost records")
                if 0 <= next_offset < start < r.end:
                    next_offset = start  # deleted by retention since planning: read what is left
                    continue
                break
            if err:
                code = ErrorCode(err)
                if code not in RETRIABLE:
                    raise RuntimeError(f"kafkarepl: reading {where}: {code.name} ({part.get('detail', '')})")
                f.leader = -1  # refresh metadata: the leader may have moved
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kafkarepl: no records from {r.topic}-{r.partition} for {poll_timeout_ms} ms "
                                       f"(at offset {next_offset}; last error {code.name}); see kafkaConsumer.pollTimeoutMs")
                time.sleep(BACKOFF_S)
                continue
            before = next_offset
            records = part.get("records")
            if records:
                next_offset = decoder.add(records, r.start, r.end, next_offset)
            if next_offset > before:
                deadline = time.monotonic() + poll_timeout_ms / 1000.0
            else:
                hw = part["high_watermark"]
                if next_offset >= hw and hw < r.end:
                    # The log ends below the planned end: truncated since planning, or a new
                    # leader's high watermark still catching up. Wait unless loss is accepted.
                    if not fail_on_data_loss:
                        break
                    if time.monotonic() > deadline:
                        raise DataLossError(
                            f"kafkarepl: {r.topic}-{r.partition} ends at {hw}, below the planned end {r.end}: "
                            "the log was truncated (set failOnDataLoss=false to accept the loss)")
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"kafkarepl: no records from {r.topic}-{r.partition} for {poll_timeout_ms} ms "
                                       f"(at offset {next_offset}, reading up to {r.end}); see kafkaConsumer.pollTimeoutMs")
            if next_offset < r.end:
                ahead = f.loop.create_task(f.fetch(next_offset))
                f.run(asyncio.sleep(0))  # let the request go out before Spark takes the batch
            if decoder.rows and (decoder.rows >= YIELD_ROWS or decoder.data_bytes >= YIELD_BYTES
                                 or next_offset >= r.end):
                yield decoder.take(schema, r.topic, r.partition)
        if decoder.rows:
            yield decoder.take(schema, r.topic, r.partition)
    finally:
        if ahead is not None:
            ahead.cancel()
        f.close()
