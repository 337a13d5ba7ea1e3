"""The asyncio side of the group coordinator: wire bodies in and out of the sans-I/O
`kafkarepl.coordinator.GroupCoordinator`, one timer for its deadlines, futures for the
JoinGroup/SyncGroup responses it parks, and the `__consumer_offsets` log.

- FindCoordinator: group -> partition of `__consumer_offsets` (created on first use
  through the same ZooKeeper path as topic auto-creation); its leader is the coordinator.
- Leadership of a `__consumer_offsets` partition (ReplicaManager.partition_changed):
  becoming leader loads the partition's committed offsets from its log (requests for its
  groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile); losing it drops its groups
  (NOT_COORDINATOR). Membership is in the log too (group records, written as the core
  asks: `_store`; KIP-848 groups' records: `_write`), so after a failover the members
  carry on in their generation or epoch.
- OffsetCommit: validated by the core, written as records through the leader append
  path, answered once the HW passes them (acks=all), then applied to the cache.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kafkarepl import _core
from kafkarepl.aio import Pacer, more_partitions_than, paced
from kafkarepl.coordinator import (
    OFFSETS_TOPIC,
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResponse,
    OffsetAndMetadata,
    Parked,
    StoreRequest,
    SyncResponse,
    build_batch,
    encode_group_key,
    encode_group_value,
    encode_key,
    encode_value,
    iter_records,
    partition_for,
)
from kafkarepl.coordinator.assignors import ASSIGNORS
from kafkarepl.coordinator.consumer_group import (
    MIGRATION_POLICIES,
    ConsumerGroupConfig,
    HeartbeatRequest,
    TopicsView,
)
from kafkarepl.coordinator.offsets import decode_key, decode_value
from kafkarepl.coordinator.records import TRANSACTIONAL_BIT, BatchBuilder
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import Request
from kafkarepl.replication import TopicPartition
from kafkarepl.server.authorized_ops import ResourceType, authorized_operations
from kafkarepl.server.config import ConfigError
from kafkarepl.server.coordinator_log import (
    COORDINATOR_APPEND_ERRORS,
    append_as_coordinator,
    start_append_as_coordinator,
)
from kafkarepl.server.listeners import endpoint_for
from kafkarepl.storage.records import CONTROL_COMMIT, control_record_type

if TYPE_CHECKING:
    from kafkarepl.replication import Clock, PartitionState, ReplicaManager
    from kafkarepl.server.config import BrokerConfig
    from kafkarepl.server.metadata_cache import MetadataCache
    from kafkarepl.server.topics import TopicService

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
LOAD_CHUNK_BYTES = 1 << 20
WRITE_BATCH_BYTES = 512 << 10  # a KIP-848 group's records per batch: under message.max.bytes
LOAD_RETRY_S = 1.0
METADATA_WAIT_S = 5.0
_CHUNK = 1000  # partitions of a request handled between two yields
_T = TypeVar("_T")

# How a failed append of offset records is reported to the committer (Kafka's mapping):
# the coordinators' common one, and a batch too large is the commit's metadata.
_APPEND_ERRORS = {
    **COORDINATOR_APPEND_ERRORS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def consumer_group_config(cfg: BrokerConfig) -> ConsumerGroupConfig:
    """group.consumer.*: KIP-848 groups' timing, size and assignors (those kafkarepl has)."""
    names = tuple(a.strip().lower().rsplit(".", 1)[-1].removesuffix("assignor") for a in
                  cfg.group_consumer_assignors.split(",") if a.strip())
    known = tuple(a for a in names if a in ASSIGNORS)
    if not known:
        raise ConfigError(f"group.consumer.assignors: none of {cfg.group_consumer_assignors!r} is one of "
                          f"{', '.join(ASSIGNORS)}")
    policy = cfg.group_consumer_migration_policy.strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ConfigError(f"group.consumer.migration.policy: {cfg.group_consumer_migration_policy!r} is not one of "
                          f"{', '.join(MIGRATION_POLICIES)}")
    return ConsumerGroupConfig(session_timeout_ms=cfg.group_consumer_session_timeout_ms,
                               heartbeat_interval_ms=cfg.group_consumer_heartbeat_interval_ms,
                               max_size=cfg.group_consumer_max_size, assignors=known, migration_policy=policy)


def _chunks(records: Sequence[tuple[bytes, bytes | None]], limit: int) -> list[list[tuple[bytes, bytes | None]]]:
    out: list[list[tuple[bytes, bytes | None]]] = [[]]
    size = 0
    for key, value in records:
        n = len(key) + (len(value) if value is not None else 0) + 16
        if out[-1] and size + n > limit:
            out.append([])
            size = 0
        out[-1].append((key, value))
        size += n
    return out


async def _first_error(futures: list[asyncio.Future[ErrorCode]]) -> ErrorCode:
    codes = [await f for f in futures]
    return next((c for c in codes if c is not ErrorCode.NONE), ErrorCode.NONE)


class GroupCoordinatorService:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        topics: TopicService,
        clock: Clock,
        find_transaction_coordinator: Callable[[str], Awaitable[tuple[ErrorCode, str | None, int, str, int]]]
        | None = None,
        acl_version: Callable[[], int] = lambda: 0,
    ) -> None:
        # the authorizer's bindings' version: regexes of KIP-848 groups resolve to the
        # topics a member may describe, so they are resolved again when ACLs change
        self.acl_version = acl_version
        self.find_transaction_coordinator = find_transaction_coordinator
        self.config = cfg = config
        self.clock = clock  # group timers: monotonic; commit timestamps: wall
        self.metadata = metadata
        self.replicas = replicas
        self.topics = topics
        self.core = GroupCoordinator(
            GroupConfig(
                min_session_timeout_ms=cfg.group_min_session_timeout_ms,
                max_session_timeout_ms=cfg.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
                max_metadata_bytes=cfg.offset_metadata_max_bytes,
                max_size=cfg.group_max_size,
            ),
            cfg.offsets_topic_num_partitions,
            consumer_config=consumer_group_config(cfg),
        )
        self._waiters: dict[int, asyncio.Future] = {}
        # TxnOffsetCommit: offsets written in a producer's open transaction, applied when
        # its COMMIT marker reaches the group's partition, dropped at ABORT.
        # producer id -> group id -> offsets
        self._txn_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._topics: TopicsView | None = None  # for the KIP-848 groups' subscriptions
        self._topics_of: tuple[int, int] = (-1, -1)  # (metadata version, ACLs version) it was built at
        self._loads: dict[int, asyncio.Task] = {}
        self._stores: set[asyncio.Task] = set()
        self._writes: dict[str, asyncio.Future[ErrorCode]] = {}  # KIP-848 group -> its last write
        self._create_lock = asyncio.Lock()
        self._commit_order = asyncio.Lock()  # held by a large commit until its append starts

    # ------------------------------------------------------------- plumbing -----
    def _after(self) -> None:
        """Write the group records the core asked for, deliver what it completed, and
        re-arm the timer for its next deadline."""
        for store in self.core.drain_stores():
            task = asyncio.ensure_future(self._store(store))  # started in order: appended in order
            self._stores.add(task)
            task.add_done_callback(self._stores.discard)
        for group_id, records in self.core.drain_writes():
            self._write(group_id, records)
        for token, response in self.core.drain():
            fut = self._waiters.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(response)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline()
        if deadline is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(0, deadline - self.clock.monotonic_ms()) / 1000, self._on_timer)

    async def _store(self, req: StoreRequest) -> None:
        snap = req.snapshot
        value = None
        if snap is not None:
            ts = snap.state_timestamp_ms  # the core's clock; the record carries the wall clock
            if ts >= 0:
                snap = dataclasses.replace(snap, state_timestamp_ms=self.clock.wall_ms() - (self.clock.monotonic_ms() - ts))
            value = encode_group_value(snap)
        code = await self._append_to(self.core.partition_for(req.group_id), [(encode_group_key(req.group_id), value)],
                                     errors=COORDINATOR_APPEND_ERRORS)  # Kafka 4's, for group records
        if code is not ErrorCode.NONE:
            log.info("group %s: its record was not written: %s", req.group_id, code.name)
        self.core.store_done(req.group_id, req.store_id, code, self.clock.monotonic_ms())
        self._after()

    def _write(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append a KIP-848 group's records now (so in the order the core asked), in
        batches of at most WRITE_BATCH_BYTES; its heartbeats wait for the outcome."""
        tp = TopicPartition(OFFSETS_TOPIC, self.core.partition_for(group_id))
        futures = []
        for chunk in _chunks(records, WRITE_BATCH_BYTES):
            batch = memoryview(build_batch(chunk, self.clock.wall_ms()))
            futures.append(start_append_as_coordinator(self.replicas, tp, batch, self.config.offsets_commit_timeout_ms,
                                                       COORDINATOR_APPEND_ERRORS))
        fut = futures[0] if len(futures) == 1 else asyncio.ensure_future(_first_error(futures))
        self._writes[group_id] = fut

        def done(f: asyncio.Future[ErrorCode]) -> None:
            last = self._writes.get(group_id) is f
            if last:
                del self._writes[group_id]
            code = ErrorCode.UNKNOWN_SERVER_ERROR if f.cancelled() else f.result()
            if code is not ErrorCode.NONE:
                log.info("consumer group %s: its records were not written: %s", group_id, code.name)
                self.core.write_failed(group_id)
            elif last:
                self.core.write_done(group_id)

        fut.add_done_callback(done)

    async def _written(self, group_id: str) -> ErrorCode:
        """Once the group's last records are replicated (its own, or earlier ones the answer
        may tell of), as Kafka's coordinator runtime answers: their outcome."""
        written = self._writes.get(group_id)
        return ErrorCode.NONE if written is None else await asyncio.shield(written)

    def _on_timer(self) -> None:
        self._timer = None
        self.core.poll(self.clock.monotonic_ms())
        self._after()

    async def _outcome(self, result: Any) -> Any:
        if isinstance(result, Parked):
            fut = asyncio.get_running_loop().create_future()
            self._waiters[result.token] = fut
            self._after()  # may complete it at once
            return await fut
        self._after()
        return result

    def _sync_partition_count(self) -> None:
        # Kafka uses the topic's real partition count once it exists.
        info = self.metadata.topics.get(OFFSETS_TOPIC)
        if info is not None and info.partitions:
            self.core.num_partitions = len(info.partitions)

    def shutdown(self) -> None:
        """Broker stopping: parked JoinGroup/SyncGroup learn NOT_COORDINATOR now, so
        their clients look for the next coordinator instead of timing out."""
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
        for task in self._stores:
            task.cancel()
        for idx in self.core.owned_partitions():
            self.core.unload(idx)
        self._after()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ----------------------------------------------------------- leadership -----
    def on_partition_changed(self, tp: TopicPartition, p: PartitionState) -> None:
        """ReplicaManager listener: every change of a local partition (role, HW, LEO);
        leading a __consumer_offsets partition loads its groups, losing it drops them."""
        if tp.topic != OFFSETS_TOPIC:
            return
        idx = tp.partition
        if p.is_leader and not self.core.owns(idx):
            self._sync_partition_count()
            self.core.begin_loading(idx)
            self._loads[idx] = asyncio.ensure_future(self._load(idx, p))
        elif not p.is_leader and self.core.owns(idx):
            task = self._loads.pop(idx, None)
            if task is not None:
                task.cancel()
            self.core.unload(idx)
            self._after()
            log.info("group coordinator: resigned %s-%d", OFFSETS_TOPIC, idx)

    async def _load(self, idx: int, p: PartitionState) -> None:
        while True:
            try:
                records, open_txns = await self._read_offsets_log(p)
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("loading %s-%d failed; retrying", OFFSETS_TOPIC, idx)
                await asyncio.sleep(LOAD_RETRY_S)
        if self._loads.get(idx) is not asyncio.current_task():
            return
        n = self.core.load(idx, records, self.clock.monotonic_ms(), self.clock.wall_ms(), self._topics_view())
        for pid, held in open_txns.items():  # their markers may still come
            for key, value in held:
                k, o = decode_key(key) if key else None, decode_value(value) if value else None
                if k is not None and o is not None:
                    self._txn_offsets.setdefault(pid, {}).setdefault(k.group_id, {})[(k.topic, k.partition)] = o
        self.core.finish_loading(idx)
        self._loads.pop(idx, None)
        self._after()
        log.info("group coordinator: loaded %s-%d (%d group and offset records)", OFFSETS_TOPIC, idx, n)

    @staticmethod
    async def _read_offsets_log(p: PartitionState) -> tuple[list[tuple[bytes | None, bytes | None]],
                                                             dict[int, list[tuple[bytes | None, bytes | None]]]]:
        """The latest (key, value) of every key of the log up to its end as of now, in the
        order of those last records (nothing else appends to it while loading: commits are
        refused until the load finishes). Only a key's last record counts in the replay,
        so the superseded ones are never decoded: the active segment, which the cleaner
        never compacts, holds up to offsets.topic.segment.bytes of them (~1.6M commits)."""
        latest: dict[bytes, bytes | None] = {}
        pending: dict[int, list[tuple[bytes | None, bytes | None]]] = {}  # open transactions

        def keep(key: bytes | None, value: bytes | None) -> None:
            if key is not None:  # keyless: nothing a coordinator replays
                latest.pop(key, None)  # to the end: replay follows the last records' order
                latest[key] = value

        lg: Any = p.log
        offset, end = lg.log_start_offset, lg.log_end_offset
        while offset < end:
            sl = lg.read(offset, LOAD_CHUNK_BYTES, end, min_one_batch=True)
            if sl.size == 0:
                break
            buf = lg.read_bytes(sl.fd, sl.position, sl.size)  # a disk error fails the dir (the partition then resigns here)
            batches, _valid, _err, _pos = _core.scan_batches(buf)
            if not batches:
                break
            for b in batches:
                batch = buf[b.position : b.position + b.size]
                if b.attributes & 0x20:  # a marker: its producer's pending records count or go
                    held = pending.pop(b.producer_id, [])
                    if control_record_type(batch, 0, len(batch)) == CONTROL_COMMIT:
                        for key, value in held:
                            keep(key, value)
                elif b.attributes & 0x10:  # TxnOffsetCommit: pending until its marker
                    pending.setdefault(b.producer_id, []).extend(
                        (key, value) for o, key, value in iter_records(batch) if o >= offset)
                else:
                    for rec_offset, key, value in iter_records(batch):
                        if rec_offset >= offset:
                            keep(key, value)
                offset = b.base_offset + b.last_offset_delta + 1
            await asyncio.sleep(0)  # other requests run between chunks
        return list(latest.items()), pending

    # ------------------------------------------------------- FindCoordinator -----
    async def find_coordinator(self, req: Request) -> dict[str, Any]:
        body = req.body
        key_type = body.get("key_type", KEY_TYPE_GROUP)
        keys = (body.get("coordinator_keys") or []) if req.api_version >= 4 else [body.get("key") or ""]
        found = [await self._find(key, key_type) async for key in paced(keys)]  # v4+: the client sets how many
        if req.api_version >= 4:
            return {"throttle_time_ms": 0, "coordinators": [
                {"key": key, "node_id": n, "host": h, "port": p, "error_code": int(e), "error_message": m}
                async for key, (e, m, n, h, p) in paced(zip(keys, found, strict=True))
            ]}
        e, m, n, h, p = found[0]
        return {"throttle_time_ms": 0, "error_code": int(e), "error_message": m, "node_id": n, "host": h, "port": p}

    async def _find(self, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
        def error(code: ErrorCode, message: str) -> tuple[ErrorCode, str | None, int, str, int]:
            return code, message, -1, "", -1

        if key_type == KEY_TYPE_TRANSACTION:
            if self.find_transaction_coordinator is None:
                return error(ErrorCode.INVALID_REQUEST, "no transaction coordinator")
            return await self.find_transaction_coordinator(key)
        if key_type != KEY_TYPE_GROUP:
            return error(ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
        cache = self.metadata
        if OFFSETS_TOPIC not in cache.topics:
            await self._create_offsets_topic()
        info = cache.topics.get(OFFSETS_TOPIC)
        if info is None or not info.partitions:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created")
        part = info.partitions.get(partition_for(key, len(info.partitions)))
        broker = cache.broker(part.leader) if part is not None and part.leader >= 0 else None
        if broker is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group's coordinator has no leader yet")
        ep = endpoint_for(broker.endpoints, (broker.host, broker.port))
        if ep is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator has no endpoint on this listener")
        return ErrorCode.NONE, None, broker.broker_id, ep[0], ep[1]

    async def _create_offsets_topic(self) -> None:
        """Create __consumer_offsets as Kafka does on first use, then wait briefly for
        its leaders so the asking client need not retry."""
        cfg = self.config
        async with self._create_lock:
            if OFFSETS_TOPIC not in self.metadata.topics:
                try:
                    live = await self.topics.live_broker_count()
                except KafkaError as exc:
                    log.info("cannot create %s yet: %s", OFFSETS_TOPIC, exc)
                    return
                # Kafka refuses to create the topic while fewer brokers than
                # offsets.topic.replication.factor are alive; capping instead lets a
                # small (test) cluster have consumer groups.
                rf = max(1, min(cfg.offsets_topic_replication_factor, live))
                try:
                    await self.topics.create(
                        OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, rf, None,
                        {"cleanup.policy": "compact", "segment.bytes": str(cfg.offsets_topic_segment_bytes)},
                    )
                except KafkaError as exc:
                    if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                        log.warning("creating %s failed: %s %s", OFFSETS_TOPIC, exc.code.name, exc)
                        return
                log.info("creating %s: %d partitions, replication factor %d", OFFSETS_TOPIC,
                         cfg.offsets_topic_num_partitions, rf)
        deadline = time.monotonic() + METADATA_WAIT_S
        while time.monotonic() < deadline:
            info = self.metadata.topics.get(OFFSETS_TOPIC)
            if info is not None and info.partitions and all(p.leader >= 0 for p in info.partitions.values()):
                return
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------ membership -----
    async def join_group(self, req: Request, client_host: str = "") -> dict[str, Any]:
        b, v = req.body, req.api_version
        session = b["session_timeout_ms"]
        rebalance = b.get("rebalance_timeout_ms", -1)
        r = JoinRequest(
            member_id=b["member_id"] or "",
            client_id=req.client_id or "",
            session_timeout_ms=session,
            rebalance_timeout_ms=session if rebalance is None or rebalance < 0 else rebalance,
            protocol_type=b["protocol_type"] or "",
            protocols=[(p["name"], bytes(p["metadata"] or b"")) for p in b["protocols"] or []],
            group_instance_id=b.get("group_instance_id"),
            client_host=client_host,
            require_known_member_id=v >= 4,
        )
        gid = b["group_id"]
        res = await self._outcome(self.core.join(gid, r, self.clock.monotonic_ms(), self._topics_view()))
        self._sync_partition_count()
        if not res.error and (code := await self._written(gid)):
            res = JoinResponse(code, r.member_id)
        return {
            "throttle_time_ms": 0,
            "error_code": int(res.error),
            "generation_id": res.generation_id,
            "protocol_type": res.protocol_type,
            "protocol_name": res.protocol_name if res.protocol_name is not None or v >= 7 else "",
            "leader": res.leader_id,
            "member_id": res.member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in res.members],
        }

    async def sync_group(self, req: Request) -> dict[str, Any]:
        b = req.body
        assignments = {a["member_id"]: bytes(a["assignment"] or b"") for a in b.get("assignments") or []}
        res = await self._outcome(self.core.sync(
            b["group_id"], b["member_id"], b.get("group_instance_id"), b["generation_id"],
            b.get("protocol_type"), b.get("protocol_name"), assignments, self.clock.monotonic_ms(),
        ))
        if not res.error and (code := await self._written(b["group_id"])):
            res = SyncResponse(code)
        return {"throttle_time_ms": 0, "error_code": int(res.error), "protocol_type": res.protocol_type,
                "protocol_name": res.protocol_name, "assignment": res.assignment}

    # ------------------------------------------------- KIP-848 consumer groups -----
    def _topics_view(self) -> TopicsView:
        """The topics as this broker knows them, rebuilt only when its metadata or ACLs
        changed (a new version: the groups check their subscriptions and regexes again)."""
        view, seen = self._topics, (self.metadata.version, self.acl_version())
        if view is None or seen != self._topics_of:
            self._topics_of = seen
            view = self._topics = TopicsView(0 if view is None else view.version + 1, {
                name: (t.topic_id, len(t.partitions)) for name, t in self.metadata.topics.items() if t.partitions})
        return view

    async def consumer_group_heartbeat(self, req: Request, client_host: str = "",
                                       may_describe: Callable[[str], bool] | None = None) -> dict[str, Any]:
        b = req.body
        owned = b.get("topic_partitions")
        r = HeartbeatRequest(
            member_id=b["member_id"] or "", member_epoch=b["member_epoch"], instance_id=b.get("instance_id"),
            rack_id=b.get("rack_id"), rebalance_timeout_ms=b.get("rebalance_timeout_ms", -1),
            subscribed_topic_names=b.get("subscribed_topic_names"),
            subscribed_topic_regex=b.get("subscribed_topic_regex"), server_assignor=b.get("server_assignor"),
            owned=None if owned is None else {t["topic_id"]: frozenset(t["partitions"]) for t in owned},
            client_id=req.client_id or "", client_host=client_host, version=req.api_version,
            may_describe=may_describe)
        gid = b["group_id"] or ""
        res = self.core.consumer_heartbeat(gid, r, self._topics_view(), self.clock.monotonic_ms())
        self._after()
        self._sync_partition_count()
        if not res.error and (code := await self._written(gid)):
            return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
        assignment = None if res.assignment is None else {"topic_partitions": [
            {"topic_id": tid, "partitions": sorted(parts)} for tid, parts in res.assignment.items()]}
        return {"throttle_time_ms": 0, "error_code": int(res.error), "error_message": res.message,
                "member_id": res.member_id, "member_epoch": res.member_epoch,
                "heartbeat_interval_ms": res.heartbeat_interval_ms, "assignment": assignment}

    async def consumer_group_describe(self, req: Request) -> dict[str, Any]:
        ops = authorized_operations(ResourceType.GROUP, req.body.get("include_authorized_operations", False))
        names = {t.topic_id: name for name, t in self.metadata.topics.items()}
        out = []
        pace = Pacer()  # the client names the groups
        for gid in req.body["group_ids"] or []:
            if pace.due():
                await asyncio.sleep(0)
            empty = {"error_message": None, "group_id": gid, "group_state": "Dead", "group_epoch": -1,
                     "assignment_epoch": -1, "assignor_name": "", "members": [], "authorized_operations": ops}
            err = self.core.coordinator_error(gid) if gid else ErrorCode.INVALID_GROUP_ID
            cg = self.core.consumer_group(gid) if not err else None
            if err:
                out.append({**empty, "error_code": int(err)})
            elif cg is None:  # the admin client asks DescribeGroups next (a classic group)
                out.append({**empty, "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                            "error_message": f"Group {gid} is not a consumer group."})
            else:
                out.append({**empty, "error_code": 0, **cg.describe(names)})
        return {"throttle_time_ms": 0, "groups": out}

    async def heartbeat(self, req: Request) -> dict[str, Any]:
        b = req.body
        code = self.core.heartbeat(b["group_id"], b["member_id"], b.get("group_instance_id"),
                                   b["generation_id"], self.clock.monotonic_ms())
        self._after()
        if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
            code = await self._written(b["group_id"]) or code
        return {"throttle_time_ms": 0, "error_code": int(code)}

    async def leave_group(self, req: Request) -> dict[str, Any]:
        b, v = req.body, req.api_version
        if v >= 3:
            members = [(m["member_id"] or "", m.get("group_instance_id")) for m in b.get("members") or []]
        else:
            members = [(b["member_id"] or "", None)]
        top, codes = self.core.leave(b["group_id"], members, self.clock.monotonic_ms(), self._topics_view())
        self._after()
        if not top and (code := await self._written(b["group_id"])):
            top, codes = code, []
        if v < 3 and not top and codes:
            top = codes[0]
        # A group-level error (not the coordinator, loading, ...) comes with no member results.
        answered = zip(members, codes, strict=True) if codes else ()
        return {
            "throttle_time_ms": 0,
            "error_code": int(top),
            "members": [{"member_id": m, "group_instance_id": i, "error_code": int(c)} for (m, i), c in answered],
        }

    # --------------------------------------------------------------- offsets -----
    async def _requested_offsets(self, topics: list[dict[str, Any]] | None, client_timestamps: bool,
                                 pace: Pacer | None,
                                 ) -> tuple[dict[tuple[str, int], OffsetAndMetadata], dict[tuple[str, int], ErrorCode | None]]:
        """An (Txn)OffsetCommit's offsets of known partitions, and a code per requested
        partition in request order (UNKNOWN_TOPIC_OR_PARTITION for the others).
        client_timestamps: OffsetCommit v1's commit_timestamp, when set, is kept."""
        now = self.clock.wall_ms()
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        codes: dict[tuple[str, int], ErrorCode | None] = {}
        for t in topics or []:
            info = self.metadata.topics.get(t["name"])
            for p in t["partitions"] or []:
                if pace is not None and pace.due():
                    await asyncio.sleep(0)
                tp = (t["name"], p["partition_index"])
                codes[tp] = ErrorCode.NONE
                if info is None or tp[1] not in info.partitions:
                    codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                ts = p.get("commit_timestamp", -1) if client_timestamps else -1
                offsets[tp] = OffsetAndMetadata(p["committed_offset"], p.get("committed_leader_epoch", -1),
                                                p["committed_metadata"] or "", ts if ts >= 0 else now)
        return offsets, codes

    async def _commit_records(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata],
                              codes: dict[tuple[str, int], ErrorCode | None], pace: Pacer | None,
                              ) -> tuple[dict[tuple[str, int], OffsetAndMetadata], BatchBuilder]:
        """The offsets a commit may write and their records; the others' codes set."""
        to_write: dict[tuple[str, int], OffsetAndMetadata] = {}
        records = BatchBuilder()
        for tp, o in offsets.items():
            if pace is not None and pace.due():
                await asyncio.sleep(0)
            code = self.core.offset_error(o)
            if code:
                codes[tp] = code
                continue
            to_write[tp] = o
            records.add(encode_key(group_id, *tp), encode_value(o))
        return to_write, records

    async def _in_commit_order(self, topics: list[dict[str, Any]] | None,
                               start: Callable[[Pacer | None], Awaitable[_T]]) -> _T:
        """Runs `start` (a commit up to the start of its append) in arrival order. A commit
        must not be overtaken by a later one before its write, so nothing awaits before
        the append starts, except in a commit of more than _CHUNK partitions, whose loops
        let other tasks run; while one does, every commit waits its turn (FIFO)."""
        large = more_partitions_than(topics or [], _CHUNK)
        if large or self._commit_order.locked():
            async with self._commit_order:
                return await start(Pacer(_CHUNK) if large else None)
        return await start(None)

    async def _answer(self, codes: dict[tuple[str, int], ErrorCode | None], written: ErrorCode) -> list[dict[str, Any]]:
        """A commit's answer per topic, in request order; the written partitions (code
        None) get the write's outcome."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        pace = Pacer(_CHUNK)  # after the write: the next commit's order is settled
        for (topic, index), code in codes.items():
            if pace.due():
                await asyncio.sleep(0)
            by_topic.setdefault(topic, []).append(
                {"partition_index": index, "error_code": int(written if code is None else code)})
        return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    async def offset_commit(self, req: Request) -> dict[str, Any]:
        b, v = req.body, req.api_version
        group_id = b["group_id"]

        async def start(pace: Pacer | None) -> tuple[Awaitable[ErrorCode] | None, dict, dict]:
            offsets, codes = await self._requested_offsets(b["topics"], v == 1, pace)
            to_write, records = await self._commit_records(group_id, offsets, codes, pace)
            err = self.core.validate_commit(
                group_id, b.get("member_id") or "", b.get("group_instance_id"),
                b.get("generation_id_or_member_epoch", -1), self.clock.monotonic_ms(), v)
            self._after()
            if err:
                codes.update(dict.fromkeys(offsets, err))
                return None, {}, codes
            codes.update(dict.fromkeys(to_write))  # answered with the write's outcome
            return (self._start_append(group_id, records) if to_write else None), to_write, codes

        append, to_write, codes = await self._in_commit_order(b["topics"], start)
        code = ErrorCode.NONE
        if append is not None:
            code = await append
            if code is ErrorCode.NONE:
                code = self.core.apply_commit(group_id, to_write)
        return {"throttle_time_ms": 0, "topics": await self._answer(codes, code)}

    async def txn_offset_commit(self, req: Request) -> dict[str, Any]:
        """TxnOffsetCommit (send_offsets_to_transaction): the offsets are written to the
        group's partition inside the producer's transaction and become visible when its
        COMMIT marker arrives (on_txn_marker)."""
        b, v = req.body, req.api_version
        group_id = b["group_id"]
        pid, epoch = b["producer_id"], b["producer_epoch"]

        async def start(pace: Pacer | None) -> tuple[Awaitable[ErrorCode] | None, dict, dict]:
            offsets, codes = await self._requested_offsets(b["topics"], False, pace)
            to_write, records = await self._commit_records(group_id, offsets, codes, pace)
            err = self.core.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
            if not err and v >= 3 and b.get("generation_id", -1) >= 0:
                err = self.core.validate_commit(group_id, b.get("member_id") or "", b.get("group_instance_id"),
                                                b["generation_id"], self.clock.monotonic_ms())
                self._after()
            if err:
                codes.update(dict.fromkeys(offsets, err))
                return None, {}, codes
            codes.update(dict.fromkeys(to_write))  # answered with the write's outcome
            # part of the producer's transaction
            append = self._start_append(group_id, records, (pid, epoch)) if to_write else None
            return append, to_write, codes

        append, to_write, codes = await self._in_commit_order(b["topics"], start)
        code = ErrorCode.NONE
        if append is not None:
            code = await append
            if code is ErrorCode.NONE:
                self._txn_offsets.setdefault(pid, {}).setdefault(group_id, {}).update(to_write)
            elif code is ErrorCode.UNKNOWN_SERVER_ERROR:
                code = ErrorCode.INVALID_PRODUCER_EPOCH  # e.g. a fenced producer epoch
        return {"throttle_time_ms": 0, "topics": await self._answer(codes, code)}

    def _pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        return {tp for by_group in self._txn_offsets.values() for tp in by_group.get(group_id, {})}

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A COMMIT/ABORT marker was written to a partition (WriteTxnMarkers): for a
        __consumer_offsets partition, the producer's transactional offsets of the groups
        there become visible (commit) or are dropped (abort)."""
        if tp.topic != OFFSETS_TOPIC:
            return
        by_group = self._txn_offsets.get(producer_id)
        if not by_group:
            return
        for gid in [g for g in by_group if self.core.partition_for(g) == tp.partition]:
            offsets = by_group.pop(gid)
            if committed:
                self.core.apply_commit(gid, offsets)
        if not by_group:
            self._txn_offsets.pop(producer_id, None)

    def _start_append(self, group_id: str, records: BatchBuilder,
                      producer: tuple[int, int] | None = None) -> Awaitable[ErrorCode]:
        """A commit's append to the group's partition, issued before this returns."""
        if producer is None:
            batch = records.build(self.clock.wall_ms())
        else:  # a transactional offset commit: part of the producer's transaction
            batch = records.build(self.clock.wall_ms(), producer_id=producer[0], producer_epoch=producer[1],
                                  attributes=TRANSACTIONAL_BIT)
        tp = TopicPartition(OFFSETS_TOPIC, self.core.partition_for(group_id))
        return start_append_as_coordinator(self.replicas, tp, memoryview(batch),
                                           self.config.offsets_commit_timeout_ms, _APPEND_ERRORS)

    async def _append(self, group_id: str, records: Sequence[tuple[bytes | None, bytes | None]]) -> ErrorCode:
        return await self._append_to(self.core.partition_for(group_id), records)

    async def _append_to(self, partition: int, records: Sequence[tuple[bytes | None, bytes | None]],
                         errors: Mapping[ErrorCode, ErrorCode] = _APPEND_ERRORS) -> ErrorCode:
        return await append_as_coordinator(self.replicas, TopicPartition(OFFSETS_TOPIC, partition),
                                           memoryview(build_batch(records, self.clock.wall_ms())),
                                           self.config.offsets_commit_timeout_ms, errors)

    async def offset_fetch(self, req: Request) -> dict[str, Any]:
        b, v = req.body, req.api_version
        if v < 8:
            err, topics = await self._fetch_group(b["group_id"], b.get("topics"), None, -1, bool(b.get("require_stable")), v)
            return {"throttle_time_ms": 0, "error_code": int(err), "topics": topics}
        groups = []
        for g in b["groups"] or []:  # each group's partitions are paced in _fetch_group
            err, topics = await self._fetch_group(g["group_id"], g["topics"], g.get("member_id"),
                                                  g.get("member_epoch", -1), bool(b.get("require_stable")), v)
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": int(err)})
            await asyncio.sleep(0)
        return {"throttle_time_ms": 0, "groups": groups}

    async def _fetch_group(self, group_id: str, topics: list[dict[str, Any]] | None, member_id: str | None,
                           member_epoch: int, require_stable: bool, v: int) -> tuple[ErrorCode, list[dict[str, Any]]]:
        """One group's part of an OffsetFetch: its error and its topics' rows."""
        wanted = None if topics is None else [(t["name"], t["partition_indexes"]) async for t in paced(topics)]
        err, found = self.core.fetch_offsets(group_id, wanted, member_id, member_epoch)
        if err and (wanted is None or v >= 8):
            return err, []  # v8+: the group's error alone, as Kafka
        if err and wanted is not None:  # before v8, each partition answered (v0-1 carry the error there)
            found = {tp: None async for tp in paced((t, p) for t, parts in wanted for p in parts)}
        # KIP-447: a client asking for stable offsets learns that a transaction still has
        # offsets of the partition pending (UNSTABLE_OFFSET_COMMIT, retriable).
        unstable = self._pending_txn_partitions(group_id) if require_stable and not err else set()
        by_topic: dict[str, list[dict[str, Any]]] = {}
        pace = Pacer()  # the client names the partitions
        for (topic, index), o in found.items():
            if pace.due():
                await asyncio.sleep(0)
            pending = (topic, index) in unstable
            by_topic.setdefault(topic, []).append({
                "partition_index": index,
                "committed_offset": -1 if o is None or pending else o.offset,
                "committed_leader_epoch": -1 if o is None or pending else o.leader_epoch,
                "metadata": "" if o is None or pending else o.metadata,
                # Before v2 there is no top-level code: the group error goes per partition.
                "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT) if pending else (int(err) if v < 2 else 0),
            })
        return err, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    # ----------------------------------------------------------- describing -----
    async def describe_groups(self, req: Request) -> dict[str, Any]:
        out = []
        ops = authorized_operations(ResourceType.GROUP, req.body.get("include_authorized_operations", False))
        pace = Pacer()  # the client names the groups
        for gid in req.body["groups"] or []:
            if pace.due():
                await asyncio.sleep(0)
            err, d = self.core.describe(gid)
            if err is ErrorCode.GROUP_ID_NOT_FOUND and req.api_version < 6:
                err = ErrorCode.NONE  # a KIP-848 group: before v6 only its state says so (Dead), as Kafka
            out.append({"error_code": int(err), "group_id": gid, **d, "authorized_operations": ops})
        return {"throttle_time_ms": 0, "groups": out}

    async def list_groups(self, req: Request) -> dict[str, Any]:
        err, groups = self.core.list_groups(req.body.get("states_filter") or ())
        types = {t.lower() for t in req.body.get("types_filter") or ()}
        return {"throttle_time_ms": 0, "error_code": int(err), "groups": [
            {"group_id": g, "protocol_type": pt, "group_state": st, "group_type": gt}
            for g, pt, st, gt in groups if not types or gt in types
        ]}

    async def offset_delete(self, req: Request) -> dict[str, Any]:
        """OffsetDelete (kafka-consumer-groups.sh --delete-offsets): tombstones for the
        partitions no member consumes, replicated before the answer."""
        b = req.body
        gid = b["group_id"]
        wanted: list[tuple[str, int]] = []
        pace = Pacer(_CHUNK)
        for t in b.get("topics") or []:
            for p in t["partitions"] or []:
                if pace.due():
                    await asyncio.sleep(0)
                wanted.append((t["name"], p["partition_index"]))
        err, codes, deletable = ErrorCode.NONE, {}, []
        for i in range(0, max(len(wanted), 1), _CHUNK):  # the client names the partitions
            if i:
                await asyncio.sleep(0)
            err, chunk_codes, chunk_deletable = self.core.prepare_offset_delete(gid, wanted[i:i + _CHUNK])
            if err:
                break
            codes.update(chunk_codes)
            deletable += chunk_deletable
        if err is ErrorCode.NONE:
            deletable = list(dict.fromkeys(deletable))  # a partition named twice: one tombstone
            if deletable:
                err = await self._append(gid, [(encode_key(gid, t, i), None) for t, i in deletable])
            if err is ErrorCode.NONE:
                self.core.apply_offset_delete(gid, deletable)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for t, i in [] if err else wanted:
            if pace.due():
                await asyncio.sleep(0)
            by_topic.setdefault(t, []).append({"partition_index": i, "error_code": int(codes[(t, i)])})
        return {"error_code": int(err), "throttle_time_ms": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    async def expire_offsets(self) -> int:
        """offsets.retention.check.interval.ms: expire committed offsets as Kafka does
        (GroupCoordinator.expire_offsets) and write their tombstones, so the cleaner
        removes them from __consumer_offsets. Returns how many expired."""
        expired = self.core.expire_offsets(self.clock.monotonic_ms(), self.clock.wall_ms(),
                                           self.config.offsets_retention_ms)
        n = 0
        for partition, entries in expired.items():
            code = await self._append_to(partition, [(encode_key(g, t, i), None) for g, (t, i) in entries])
            if code is not ErrorCode.NONE:  # gone from the cache already; a later load replays them
                log.warning("tombstones of %d expired offsets not written: %s", len(entries), code.name)
            n += len(entries)
        if n:
            log.info("expired %d committed offsets (retention %d ms)", n, self.config.offsets_retention_ms)
        self._after()
        return n

    async def delete_groups(self, req: Request) -> dict[str, Any]:
        """DeleteGroups (kafka-consumer-groups.sh --delete): empty groups only; their
        committed offsets are deleted with tombstones, replicated before the answer."""
        results = []
        pace = Pacer()  # the client names the groups
        for gid in req.body.get("groups_names") or []:
            if pace.due():
                await asyncio.sleep(0)
            code, offsets = self.core.prepare_delete(gid)
            if code is ErrorCode.NONE:  # the group's records go with its offsets (Kafka's the same)
                code = await self._append(gid, [(encode_key(gid, t, i), None) for t, i in offsets]
                                          + [(encode_group_key(gid), None)] + self.core.consumer_group_tombstones(gid))
            if code is ErrorCode.NONE:
                code = self.core.finish_delete(gid)
            results.append({"group_id": gid, "error_code": int(code)})
        return {"throttle_time_ms": 0, "results": results}
