"""ReplicaManager: the broker's data path for produce, fetch and the controller's orders.

Produce: decode keeps records as memoryviews -> Log.append_as_leader (C validation,
in-place offsets, one write) -> acks=0/1 answer at once, acks=all waits in the
purgatory (the commit queue) until the HW passes the batch.
Fetch: consumers read up to the HW, followers up to the LEO; bytes leave by sendfile.
The replication decisions come from kafkarepl.replication (sans-I/O).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from kafkarepl.coordinator import OFFSETS_TOPIC
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import FileRange, Request
from kafkarepl.server.partition import Partition

if TYPE_CHECKING:
    from kafkarepl.server.broker import Broker

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


def now_ms() -> int:
    return int(time.time() * 1000)


def _code(exc: BaseException) -> int:
    if isinstance(exc, KafkaError):
        return int(exc.code)
    log.exception("unexpected error in the data path", exc_info=exc)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)


class ReplicaManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.local_id = broker.config.broker_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = -1

    # ---------------------------------------------------------------- produce ------
    async def handle_produce(self, req: Request) -> dict[str, Any] | None:
        body = req.body
        acks = body["acks"]
        timeout_ms = body["timeout_ms"]
        t_now = now_ms()
        results: dict[tuple[str, int], dict[str, Any]] = {}
        waits: list[tuple[Partition, int, dict[str, Any]]] = []
        for topic in body["topic_data"]:
            name = topic["name"]
            for pd in topic["partition_data"]:
                res = {
                    "index": pd["index"],
                    "error_code": 0,
                    "base_offset": -1,
                    "log_append_time_ms": -1,
                    "log_start_offset": -1,
                }
                results[(name, pd["index"])] = res
                if acks not in (0, 1, -1):
                    res["error_code"] = int(ErrorCode.INVALID_REQUIRED_ACKS)
                    continue
                if body.get("transactional_id") is not None:
                    res["error_code"] = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    continue
                p = self._leader_partition(name, pd["index"], res)
                if p is None:
                    continue
                records = pd["records"]
                if records is None or len(records) == 0:
                    res["error_code"] = int(ErrorCode.CORRUPT_MESSAGE)
                    continue
                err = p.state.check_produce(acks, t_now)
                if err:
                    res["error_code"] = int(err)
                    continue
                try:
                    info = p.log.append_as_leader(records, p.leader_epoch, t_now)
                except Exception as exc:  # noqa: BLE001 - every failure maps to a code
                    res["error_code"] = _code(exc)
                    continue
                res["base_offset"] = info.first_offset
                res["log_append_time_ms"] = info.log_append_time
                res["log_start_offset"] = p.log.log_start_offset
                self._after_local_append(p, t_now)
                if acks == -1:
                    waits.append((p, info.last_offset + 1, p.leader_epoch, res))
        if waits:
            await self._await_commit(waits, timeout_ms)
        if acks == 0:
            return None
        return {
            "responses": _group(results, "name", "partition_responses"),
            "throttle_time_ms": 0,
        }

    def _leader_partition(self, topic: str, index: int, res: dict[str, Any]) -> Partition | None:
        p = self.partitions.get((topic, index))
        if p is None:
            known = self.broker.metadata.partition(topic, index) is not None
            res["error_code"] = int(
                ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            return None
        if not p.is_leader:
            res["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return None
        return p

    def _after_local_append(self, p: Partition, t_now: int) -> None:
        p.on_leader_append(t_now)
        self.partition_changed(p)

    def partition_changed(self, p: Partition) -> None:
        """LEO, HW, ISR or role moved: re-check parked produces and wake parked fetches."""
        self.broker.purgatory.on_partition_update(p)
        p.notify_changed()
        if p.topic == OFFSETS_TOPIC:
            # The group coordinator loads/drops the groups of partitions it starts/stops leading.
            self.broker.group_coordinator.on_offsets_partition_changed(p)

    async def _await_commit(self, waits: list[tuple[Partition, int, int, dict]], timeout_ms: int) -> None:
        """DelayedProduce: park until every partition's HW passes its batch."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        codes = await asyncio.gather(
            *(self.broker.purgatory.wait_for_commit(p, required, epoch, deadline) for p, required, epoch, _ in waits)
        )
        for (_p, _r, _e, res), code in zip(waits, codes, strict=True):
            if code:
                res["error_code"] = int(code)
                res["base_offset"] = -1  # as Kafka: no offset with an error

    # ------------------------------------------------------------------ fetch ------
    async def handle_fetch(self, req: Request) -> dict[str, Any]:
        body = req.body
        replica_id = body.get("replica_id", -1)
        if replica_id is None:
            replica_id = -1
        max_wait = max(0, body["max_wait_ms"])
        min_bytes = body["min_bytes"]
        deadline = time.monotonic() + max_wait / 1000.0
        while True:
            resp, total, waitable, has_error = self._read_fetch(body, replica_id, req.api_version)
            if total >= min_bytes or has_error or max_wait == 0 or not waitable:
                return resp
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return resp
            # DelayedFetch: wait on the partitions' shared change futures directly (one
            # per partition, replaced once resolved): no task per waiter to leak.
            done, _ = await asyncio.wait(
                {p.changed() for p in waitable}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                return self._read_fetch(body, replica_id, req.api_version)[0]

    def _read_fetch(
        self, body: dict[str, Any], replica_id: int, version: int
    ) -> tuple[dict[str, Any], int, list[Partition], bool]:
        t_now = now_ms()
        budget = body.get("max_bytes", 0x7FFFFFFF)
        total = 0
        has_error = False
        waitable: list[Partition] = []
        topics_out = []
        rack = body.get("rack_id") or ""
        for topic in body["topics"]:
            name = topic["topic"]
            parts_out = []
            for fp in topic["partitions"]:
                out, size, p = self._read_partition(name, fp, replica_id, rack, budget, total == 0, t_now, version)
                parts_out.append(out)
                if out["error_code"]:
                    has_error = True
                if p is not None:
                    waitable.append(p)
                total += size
                budget = max(0, budget - size)
            topics_out.append({"topic": name, "partitions": parts_out})
        resp = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics_out}
        return resp, total, waitable, has_error

    def _read_partition(
        self,
        topic: str,
        fp: dict[str, Any],
        replica_id: int,
        rack: str,
        budget: int,
        first: bool,
        t_now: int,
        version: int,
    ) -> tuple[dict[str, Any], int, Partition | None]:
        index = fp["partition"]
        out: dict[str, Any] = {
            "partition_index": index,
            "error_code": 0,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            # empty, never null, also with an error: librdkafka rejects a null record set in
            # the flexible versions (MessageSetSize -1) and refetches in a tight loop
            "records": b"",
        }
        p = self.partitions.get((topic, index))
        if p is None:
            known = self.broker.metadata.partition(topic, index) is not None
            out["error_code"] = int(
                ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            return out, 0, None
        state = p.state
        err = state.validate_leader_epoch(fp.get("current_leader_epoch", -1))
        if err:
            out["error_code"] = int(err)
            return out, 0, None
        offset = fp["fetch_offset"]
        if replica_id >= 0:
            r = state.on_follower_fetch(replica_id, offset, fp.get("last_fetched_epoch", -1), t_now)
            if r.isr_change is not None:
                asyncio.ensure_future(self.broker.admin.send_alter_partition(p, r.isr_change))
            if r.hw_changed:
                self.partition_changed(p)
            out["high_watermark"] = r.high_watermark
            out["log_start_offset"] = r.log_start_offset
            if r.error:
                out["error_code"] = int(r.error)
                return out, 0, None
            if r.diverging_epoch is not None:
                out["diverging_epoch"] = {"epoch": r.diverging_epoch.epoch, "end_offset": r.diverging_epoch.end_offset}
                return out, 0, None
            upto = state.fetch_upper_bound(True)
        else:
            if not p.is_leader and (version < 11 or state.leader_id is None):
                # Before KIP-392 (v11) consumers read from the leader only.
                out["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                return out, 0, None
            upto = state.fetch_upper_bound(False)
            if rack and p.is_leader:
                racks = {b.broker_id: b.rack for b in self.broker.metadata.brokers.values()}
                preferred = p.select_read_replica(rack, racks, offset)
                if preferred is not None:
                    out["preferred_read_replica"] = preferred
                    out["high_watermark"] = state.high_watermark
                    out["log_start_offset"] = p.log.log_start_offset
                    return out, 0, None
        out["high_watermark"] = state.high_watermark
        out["last_stable_offset"] = state.high_watermark
        out["log_start_offset"] = p.log.log_start_offset
        max_bytes = min(fp["partition_max_bytes"], budget)
        try:
            sl = p.log.read(offset, max_bytes, upto, min_one_batch=first)
        except Exception as exc:  # noqa: BLE001
            out["error_code"] = _code(exc)
            return out, 0, None
        if sl.size:
            out["records"] = FileRange(sl.fd, sl.position, sl.size)
        else:
            out["records"] = b""
        return out, sl.size, p

    # ------------------------------------------------------------ list offsets -----
    async def handle_list_offsets(self, req: Request) -> dict[str, Any]:
        body = req.body
        replica_id = body.get("replica_id", -1)
        topics_out = []
        for topic in body["topics"]:
            parts = []
            for lp in topic["partitions"]:
                parts.append(self._list_offset(topic["name"], lp, replica_id))
            topics_out.append({"name": topic["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics_out}

    def _list_offset(self, topic: str, lp: dict[str, Any], replica_id: int) -> dict[str, Any]:
        out = {
            "partition_index": lp["partition_index"],
            "error_code": 0,
            "old_style_offsets": [],
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
        p = self._leader_partition(topic, lp["partition_index"], out)
        if p is None:
            return out
        err = p.state.validate_leader_epoch(lp.get("current_leader_epoch", -1))
        if err:
            out["error_code"] = int(err)
            return out
        ts = lp["timestamp"]
        hw = p.state.high_watermark if replica_id < 0 else p.log.log_end_offset
        if ts == EARLIEST_TIMESTAMP:
            out["offset"] = p.log.log_start_offset
        elif ts == LATEST_TIMESTAMP:
            out["offset"] = hw
        elif ts == MAX_TIMESTAMP:
            pass  # ListOffsets v7 MAX_TIMESTAMP is not tracked: answer "none" (-1, -1)
        elif ts >= 0:
            found = self._offset_for_timestamp(p, ts)
            if found is not None and found[0] < hw:
                out["offset"], out["timestamp"] = found
        else:
            out["error_code"] = int(ErrorCode.INVALID_REQUEST)
        out["leader_epoch"] = p.leader_epoch
        out["old_style_offsets"] = [out["offset"]]
        return out

    @staticmethod
    def _offset_for_timestamp(p: Partition, ts: int) -> tuple[int, int] | None:
        """Kafka's answer: the first RECORD with timestamp >= ts. The log finds the batch
        by its headers and time index; the records of that one batch are then walked."""
        from kafkarepl import _core
        from kafkarepl.storage.timestamps import first_record_at_or_after

        found = p.log.offset_for_timestamp(ts)
        if found is None:
            return None
        sl = p.log.read(found[0], 1, None, min_one_batch=True)
        if sl.size:
            exact = first_record_at_or_after(_core.file_pread(sl.fd, sl.size, sl.position), ts)
            if exact is not None and exact[0] >= found[0]:
                return exact
        return found

    # ------------------------------------------------- offset for leader epoch -----
    async def handle_offset_for_leader_epoch(self, req: Request) -> dict[str, Any]:
        topics_out = []
        for topic in req.body["topics"]:
            parts = []
            for op in topic["partitions"]:
                out = {"error_code": 0, "partition": op["partition"], "leader_epoch": -1, "end_offset": -1}
                p = self._leader_partition(topic["topic"], op["partition"], out)
                if p is not None:
                    err, eo = p.state.end_offset_for_epoch(op["leader_epoch"], op.get("current_leader_epoch", -1))
                    out["error_code"] = int(err)
                    out["leader_epoch"], out["end_offset"] = eo.epoch, eo.end_offset
                parts.append(out)
            topics_out.append({"topic": topic["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics_out}

    # ------------------------------------------------------ controller orders ------
    async def handle_update_metadata(self, req: Request) -> dict[str, Any]:
        if req.body["controller_epoch"] < self.controller_epoch:
            return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH)}
        self.controller_epoch = req.body["controller_epoch"]
        self.broker.metadata.update(req.body)
        return {"error_code": 0}

    async def handle_leader_and_isr(self, req: Request) -> dict[str, Any]:
        return await self.broker.become_leader_or_follower(req.body)

    async def handle_stop_replica(self, req: Request) -> dict[str, Any]:
        return await self.broker.stop_replicas(req.body)


def _group(results: dict[tuple[str, int], dict[str, Any]], name_key: str, parts_key: str) -> list[dict]:
    grouped: dict[str, list[dict]] = {}
    for (topic, _p), res in results.items():
        grouped.setdefault(topic, []).append(res)
    return [{name_key: t, parts_key: parts} for t, parts in grouped.items()]
