"""ReplicaManager: the one owner of this broker's local replicas (sans-I/O).

Everything that changes a local replica goes through here, and the same code runs in
the broker (over storage.Log, asyncio and sockets) and in the deterministic simulator
(over MemoryLog, a simulated clock and network):

- controller orders: LeaderAndIsr (become leader / follower / offline), StopReplica,
  fenced in one place by controller epoch, broker epoch and leader epoch;
- the leader's data path: append (acks 0/1/all, the commit queue is the produce
  purgatory), fetch by consumers and followers (the fetch purgatory is min.bytes /
  max.wait), OffsetForLeaderEpoch;
- the follower's data path: answers of the replica fetcher handed to the partition's
  FollowerFetcher state machine;
- the ISR: expiry tick, proposals handed to an IsrChangeSender, the controller's answers.

Nothing here does I/O. The caller supplies the storage (ReplicaStorage), where ISR
proposals go (IsrChangeSender), who fetches from leaders (FetcherControl) and a clock;
answers come back through callbacks, possibly later (from the purgatories, when a
partition changes or at `poll(now)` for deadlines).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, Protocol, cast

from kafkarepl.errors import ErrorCode, KafkaError

from .follower import EpochRequest, FetcherOutcome, FetchRequest, FetchResponse, FollowerFetcher
from .log import UNDEFINED, EpochEndOffset, ReplicaLog
from .metrics import ReplicationMetrics
from .partition import IsrChange, PartitionConfig, PartitionState
from .purgatory import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedProduce,
    FetchWait,
    ProduceWait,
    Purgatory,
)
from .topic_stats import BrokerTopicStats

log = logging.getLogger(__name__)


class TopicPartition(NamedTuple):
    topic: str
    partition: int


# -- what the ReplicaManager needs from its host ------------------------------------------


class Clock(Protocol):
    def monotonic_ms(self) -> int:
        """For durations: ISR lag, deadlines (immune to wall-clock steps)."""
        ...

    def wall_ms(self) -> int:
        """For record timestamps (LogAppendTime)."""
        ...


class AppendedRange(Protocol):
    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def log_append_time(self) -> int: ...


class ReadSlice(Protocol):
    @property
    def size(self) -> int: ...


class LeaderLog(ReplicaLog, Protocol):
    """ReplicaLog plus what a leader needs: append client batches, read for fetches."""

    def append_as_leader(self, records: Any, leader_epoch: int, now_ms: int, *,
                         client: bool = False) -> AppendedRange: ...

    def read(
        self, from_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = False
    ) -> ReadSlice: ...


class EpochSync(NamedTuple):
    """A LeaderAndIsr's new leader epochs, written but not yet durable, and its leaders."""

    pending: Any  # has run(): blocking, off the event loop
    partitions: frozenset[TopicPartition]


class ReplicaStorage(Protocol):
    """Logs and per-topic settings (topic config overrides: Kafka's property names)."""

    def open_log(self, tp: TopicPartition, overrides: Mapping[str, str], is_new: bool = True) -> LeaderLog: ...

    def reconfigure_log(self, tp: TopicPartition, overrides: Mapping[str, str]) -> None: ...

    def delete_log(self, tp: TopicPartition) -> None: ...

    def partition_config(self, overrides: Mapping[str, str]) -> PartitionConfig: ...

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int: ...


@dataclass(frozen=True)
class IsrChangeResult:
    """The controller's answer to an AlterPartition item (or why none came)."""

    error: ErrorCode
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


class IsrChangeSender(Protocol):
    """Sends AlterPartition to the controller and calls `callback` with its answer
    (NETWORK_EXCEPTION and the like when it could not be sent)."""

    def submit(
        self, tp: TopicPartition, change: IsrChange, callback: Callable[[IsrChangeResult], None]
    ) -> None: ...


class FetcherControl(Protocol):
    """The replica fetchers: which partitions to pull, from which leader."""

    def add_partition(self, tp: TopicPartition, leader_id: int) -> None: ...

    def remove_partition(self, tp: TopicPartition) -> None: ...


# -- controller orders, as domain values -----------------------------------------------------


@dataclass(frozen=True)
class PartitionOrder:
    """One partition of a LeaderAndIsr request."""

    tp: TopicPartition
    leader: int  # -1: offline (no eligible leader)
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int
    # Chosen by an unclean election (KIP-704's RECOVERING); also inferred when this
    # broker leads without being in the ISR.
    unclean: bool = False
    # A new partition or replica (LeaderAndIsr's IsNew): its log may be created even while
    # a log dir is offline here; any other missing log may be on that dir.
    is_new: bool = False


@dataclass(frozen=True)
class StopOrder:
    """One partition of a StopReplica request."""

    tp: TopicPartition
    leader_epoch: int  # -1: no epoch given; -2: the topic is being deleted (Kafka's sentinel)
    delete: bool


DELETE_SENTINEL_EPOCH = -2
VERBOSE_ORDERS = 100  # LeaderAndIsr partitions logged one by one at INFO up to this many


# -- produce and fetch, as domain values ------------------------------------------------------


@dataclass
class PartitionResponse:
    """One partition's produce answer."""

    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)  # KIP-467 and such
    error_message: str | None = None


ProduceCallback = Callable[[dict[TopicPartition, PartitionResponse]], None]


@dataclass(frozen=True)
class FetchParams:
    replica_id: int  # >= 0: a follower broker; -1: a consumer
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    client_rack: str = ""
    follower_reads: bool = True  # the client knows KIP-392 (Fetch v11+)
    read_committed: bool = False  # isolation_level 1: read to the LSO, with aborted txns

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True)
class PartitionFetch:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start (Fetch v5+)


@dataclass
class FetchPartitionData:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None  # the log's read slice (storage: a file range), or None
    size: int = 0
    diverging_epoch: EpochEndOffset | None = None
    preferred_read_replica: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None  # (producer id, first offset)


FetchCallback = Callable[[list[FetchPartitionData]], None]
# DeleteRecords: partition -> (error, low watermark)
DeleteRecordsCallback = Callable[[dict[TopicPartition, tuple[ErrorCode, int]]], None]
ChangeListener = Callable[[TopicPartition, PartitionState], None]


class LeaderThrottle(Protocol):
    """Replication throttle of the leader side (leader.replication.throttled.*)."""

    def is_throttled(self, topic: str, partition: int) -> bool: ...

    def should_throttle(self, topic: str, partition: int, in_sync: bool) -> bool: ...

    def record(self, nbytes: int) -> None: ...


@dataclass
class _DeleteRecordsContext:
    results: dict[TopicPartition, tuple[ErrorCode, int]]
    callback: DeleteRecordsCallback


@dataclass
class _ProduceContext:
    results: dict[TopicPartition, PartitionResponse]
    callback: ProduceCallback


@dataclass
class _FetchContext:
    params: FetchParams
    fetches: list[PartitionFetch]
    callback: FetchCallback
    racks: Mapping[int, str | None] = field(default_factory=dict)


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        storage: ReplicaStorage,
        isr_sender: IsrChangeSender,
        fetchers: FetcherControl,
        clock: Clock,
        metrics: ReplicationMetrics | None = None,
        *,
        known_partition: Callable[[TopicPartition], bool] = lambda _tp: False,
        internal_topics: frozenset[str] = frozenset(),
        wakeup_at: Callable[[int], None] | None = None,
        partition_factory: Callable[..., PartitionState] = PartitionState,
        fetcher_factory: Callable[[PartitionState, int, int], FollowerFetcher] | None = None,
        leader_throttle: LeaderThrottle | None = None,
        topic_stats: BrokerTopicStats | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.storage = storage
        self.isr_sender = isr_sender
        self.fetchers = fetchers
        self.clock = clock
        self.metrics = metrics or ReplicationMetrics()
        self.known_partition = known_partition  # in the metadata: not ours vs. unknown
        self.internal_topics = internal_topics  # clients may not produce to these
        self.wakeup_at = wakeup_at  # "call poll() at this monotonic ms"
        self.leader_throttle = leader_throttle
        self.topic_stats = topic_stats or BrokerTopicStats()
        # Mutation tests swap these for deliberately broken variants (tests/sim/mutants.py).
        self.partition_factory = partition_factory
        self.fetcher_factory = fetcher_factory
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.controller_epoch = -1
        self.broker_epoch = -1  # set when this broker's registration is created
        self.produce_purgatory: Purgatory[DelayedProduce] = Purgatory(self._produce_done)
        self.fetch_purgatory: Purgatory[DelayedFetch] = Purgatory(self._fetch_done)
        self.delete_records_purgatory: Purgatory[DelayedDeleteRecords] = Purgatory(self._delete_records_done)
        self._listeners: list[ChangeListener] = []
        # Large LeaderAndIsr requests' new leader epochs not yet durable (pop_epoch_sync):
        # how many pending syncs hold each partition, and the appends waiting for them.
        self._epoch_syncs: list[EpochSync] = []
        self._unsynced: dict[TopicPartition, int] = {}
        self._held_appends: list[tuple[frozenset[TopicPartition], Callable[[], None]]] = []
        # Replicas whose log dir failed (KIP-112): not served until this broker restarts.
        self.offline: set[TopicPartition] = set()

    # ------------------------------------------------------------------ views -----
    def get(self, tp: TopicPartition) -> PartitionState | None:
        return self.partitions.get(tp)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def add_listener(self, listener: ChangeListener) -> None:
        """Called after every LEO, HW, ISR or role change of a local partition."""
        self._listeners.append(listener)

    def log_flushed(self, tp: TopicPartition) -> None:
        """tp's log moved its recovery point: the produces parked behind its flush.messages
        flush (Log.flush_pending) are answered."""
        self.produce_purgatory.check(tp, self.clock.monotonic_ms())

    def partition_changed(self, tp: TopicPartition) -> None:
        """Something about tp moved: complete what waits on it, tell the listeners."""
        now = self.clock.monotonic_ms()
        self.produce_purgatory.check(tp, now)
        self.fetch_purgatory.check(tp, now)
        self.delete_records_purgatory.check(tp, now)
        p = self.partitions.get(tp)
        if p is not None:
            for listener in self._listeners:
                listener(tp, p)

    # ------------------------------------------------------- controller orders -----
    def check_controller_order(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """Fencing of every controller->broker request (LeaderAndIsr, StopReplica,
        UpdateMetadata): an older controller epoch, or a broker epoch of an earlier
        registration of this broker (KIP-380; -1: the request carries none)."""
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    def accept_controller_order(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """check_controller_order, and on success remember the controller epoch."""
        err = self.check_controller_order(controller_epoch, broker_epoch)
        if err is ErrorCode.NONE:
            self.controller_epoch = controller_epoch
        return err

    def become_leader_or_follower(
        self,
        controller_epoch: int,
        broker_epoch: int,
        orders: Sequence[PartitionOrder],
        topic_configs: Mapping[str, Mapping[str, str]],
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Apply a LeaderAndIsr request. Returns the request error and per-partition errors."""
        err = self.accept_controller_order(controller_epoch, broker_epoch)
        if err is not ErrorCode.NONE:
            return err, {}
        out: dict[TopicPartition, ErrorCode] = {}
        # Each partition's change at INFO, as Kafka's state-change log, unless the request
        # is a large one (thousands of new partitions): then DEBUG and one summary line.
        level = logging.INFO if len(orders) <= VERBOSE_ORDERS else logging.DEBUG
        started = self.clock.monotonic_ms()
        # A large request's new leader epochs made durable together afterwards rather than
        # with an fsync each, if storage offers it: its caller runs the sync off the loop
        # (pop_epoch_sync) and appends to those leaders wait for it; a small request keeps
        # the fsyncs (a file system sync also writes out unrelated data).
        deferred = getattr(self.storage, "deferred_syncs", None)
        with deferred() if deferred is not None and len(orders) > VERBOSE_ORDERS else nullcontext() as pending:
            for order in orders:
                try:
                    out[order.tp] = self._apply(order, topic_configs.get(order.tp.topic, {}), level)
                except KafkaError as exc:  # e.g. the log cannot be opened: this partition only
                    log.error("%s-%d: LeaderAndIsr not applied: %s", order.tp.topic, order.tp.partition, exc)
                    out[order.tp] = exc.code
                except (OSError, ValueError) as exc:
                    log.error("%s-%d: LeaderAndIsr not applied: %r", order.tp.topic, order.tp.partition, exc)
                    out[order.tp] = ErrorCode.KAFKA_STORAGE_ERROR
        if pending is not None and pending.dirs:
            led = frozenset(o.tp for o in orders if o.leader == self.broker_id and o.tp in self.partitions)
            for tp in led:
                self._unsynced[tp] = self._unsynced.get(tp, 0) + 1
            self._epoch_syncs.append(EpochSync(pending, led))
        if level != logging.INFO:
            leaders = sum(1 for o in orders if o.leader == self.broker_id and o.tp in self.partitions)
            log.info("LeaderAndIsr from controller epoch %d: %d partitions, %d led here, %d failed, "
                     "applied in %d ms", controller_epoch, len(orders), leaders,
                     sum(1 for code in out.values() if code is not ErrorCode.NONE),
                     self.clock.monotonic_ms() - started)
        return ErrorCode.NONE, out

    def _apply(self, order: PartitionOrder, overrides: Mapping[str, str], level: int = logging.INFO) -> ErrorCode:
        tp = order.tp
        if self.broker_id not in order.replicas:
            return ErrorCode.NONE
        if tp in self.offline:  # the controller learns from this that the replica is offline
            return ErrorCode.KAFKA_STORAGE_ERROR
        p = self.partitions.get(tp)
        if p is not None and order.leader_epoch < p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        config = self.storage.partition_config(overrides)
        now = self.clock.monotonic_ms()
        if p is None:
            lg = self.storage.open_log(tp, overrides, order.is_new)
            p = self.partition_factory(
                self.broker_id, lg, config,
                high_watermark=self.storage.checkpointed_high_watermark(tp), metrics=self.metrics,
            )
            self.partitions[tp] = p
        else:
            p.reconfigure(config)
        isr, replicas = list(order.isr), list(order.replicas)
        if order.leader == self.broker_id:
            self.fetchers.remove_partition(tp)
            unclean = order.unclean or self.broker_id not in isr
            if p.become_leader(order.leader_epoch, isr, replicas, order.partition_epoch, now, unclean=unclean):
                if unclean:
                    log.warning(
                        "%s-%d: UNCLEAN leader election of broker %d (ISR %s): "
                        "records acknowledged by the old leader may be lost",
                        tp.topic, tp.partition, self.broker_id, isr,
                    )
                log.log(level, "%s-%d: leader in epoch %d, LEO %d, HW %d, ISR %s", tp.topic, tp.partition,
                        order.leader_epoch, p.log.log_end_offset, p.high_watermark, sorted(isr))
        elif order.leader >= 0:
            fetcher = p.become_follower(order.leader, order.leader_epoch, isr, replicas, order.partition_epoch, now)
            if fetcher is not None:
                if self.fetcher_factory is not None:
                    p.fetcher = self.fetcher_factory(p, order.leader, order.leader_epoch)
                log.log(level, "%s-%d: follower of %d in epoch %d, LEO %d", tp.topic, tp.partition,
                        order.leader, order.leader_epoch, p.log.log_end_offset)
                self.fetchers.add_partition(tp, order.leader)
        else:
            # Offline (no eligible leader): stop serving it, keep the data.
            self.fetchers.remove_partition(tp)
            p.become_follower(-1, order.leader_epoch, isr, replicas, order.partition_epoch, now)
        self.partition_changed(tp)
        return ErrorCode.NONE

    def stop_replicas(
        self, controller_epoch: int, broker_epoch: int, orders: Sequence[StopOrder]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Apply a StopReplica request: stop serving (and maybe delete) partitions."""
        err = self.accept_controller_order(controller_epoch, broker_epoch)
        if err is not ErrorCode.NONE:
            return err, {}
        out: dict[TopicPartition, ErrorCode] = {}
        for order in orders:
            if order.tp in self.offline:
                # As Kafka (HostedPartition.Offline): its files, on the failed dir, are not
                # deleted; a topic deletion waits for this broker's restart.
                out[order.tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            p = self.partitions.get(order.tp)
            if (
                p is not None
                and order.leader_epoch not in (-1, DELETE_SENTINEL_EPOCH)
                and order.leader_epoch < p.leader_epoch
            ):
                out[order.tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            if p is not None:
                self.fetchers.remove_partition(order.tp)
                p.stop_replica()
                self.partition_changed(order.tp)
                del self.partitions[order.tp]
            if order.delete:
                self.storage.delete_log(order.tp)
            out[order.tp] = ErrorCode.NONE
        return ErrorCode.NONE, out

    def pop_epoch_sync(self) -> EpochSync | None:
        """The new leader epochs of the last LeaderAndIsr still to be made durable: the
        caller runs `sync.pending.run()` off the event loop, then epoch_synced(sync).
        Appends to those leaders wait until then (they are never refused for it)."""
        return self._epoch_syncs.pop() if self._epoch_syncs else None

    def epoch_synced(self, sync: EpochSync) -> None:
        """The epochs of `sync` are durable: its leaders take the appends held for them."""
        for tp in sync.partitions:
            n = self._unsynced.get(tp, 0) - 1
            if n > 0:
                self._unsynced[tp] = n
            else:
                self._unsynced.pop(tp, None)
        held, self._held_appends = self._held_appends, []
        blocked = set(self._unsynced)
        for tps, append in held:  # in arrival order
            if blocked.isdisjoint(tps):
                append()
            else:
                self._held_appends.append((tps, append))
                blocked |= tps

    def take_offline(self, tps: Iterable[TopicPartition]) -> None:
        """Replicas whose log dir failed (Kafka's handleLogDirFailure): no longer led or
        followed here; produce, fetch and LeaderAndIsr answer KAFKA_STORAGE_ERROR for
        them until this broker restarts, which tells the controller to elect elsewhere."""
        for tp in tps:
            self.offline.add(tp)
            self.fetchers.remove_partition(tp)
            p = self.partitions.pop(tp, None)
            if p is not None:
                p.stop_replica()
                self.partition_changed(tp)  # waiting produces and fetches give up now
                for listener in self._listeners:
                    listener(tp, p)

    def resign_all(self) -> None:
        """This broker lost its ZooKeeper session: the controller elects others; stop
        acting as leader so no acks=all write is acknowledged alone meanwhile."""
        for tp, p in list(self.partitions.items()):
            if p.is_leader:
                p.stop_replica()
                self.partition_changed(tp)

    def reconfigure_topic(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A topic config change: new settings for its local partitions and their logs."""
        config = self.storage.partition_config(overrides)
        for tp, p in list(self.partitions.items()):
            if tp.topic == topic:
                p.reconfigure(config)
                self.storage.reconfigure_log(tp, overrides)
                # Parked acks=all produces learn a raised min ISR now, not at their timeout.
                self.partition_changed(tp)

    # ------------------------------------------------------------------ produce -----
    def append_records(
        self,
        timeout_ms: int,
        acks: int,
        entries: Mapping[TopicPartition, Any],
        callback: ProduceCallback,
        *,
        internal_topics_allowed: bool = False,
        markers: bool = False,
        client: bool = True,
    ) -> None:
        """Append to the leaders of `entries` (`markers`: the broker's own transaction
        markers, control batches; `client`: the records come from a producer, as Kafka's
        AppendOrigin.CLIENT, so the log applies the client-only rules - one batch at base
        offset 0; the broker's coordinators pass False); `callback` gets every partition's answer,
        at once for acks 0/1 and errors, or once acks=all is committed (the HW passed
        the batch), refused or timed out (the produce purgatory: the commit queue)."""
        if self._held_appends or self._unsynced:
            blocked = set(self._unsynced).union(*(tps for tps, _ in self._held_appends))
            if blocked.isdisjoint(entries):
                blocked.clear()
        else:
            blocked = set()
        if blocked:
            # New leaders whose epoch is not durable yet (a large LeaderAndIsr's sync runs
            # off the loop, see pop_epoch_sync): the whole call waits for it, and later
            # calls to a partition of a waiting one too, so appends keep their order.
            self._held_appends.append((frozenset(entries), partial(
                self.append_records, timeout_ms, acks, entries, callback,
                internal_topics_allowed=internal_topics_allowed, markers=markers, client=client)))
            return
        now, wall = self.clock.monotonic_ms(), self.clock.wall_ms()
        results: dict[TopicPartition, PartitionResponse] = {}
        waits: dict[TopicPartition, ProduceWait] = {}
        stats = self.topic_stats
        for tp, records in entries.items():
            res = results[tp] = PartitionResponse()
            if tp.topic in self.internal_topics and not internal_topics_allowed:
                res.error = ErrorCode.INVALID_TOPIC_EXCEPTION  # Kafka: no client writes here
                continue
            p, res.error = self._leader(tp)
            if p is None:
                if tp in self.partitions:  # hosted here, not led: Kafka counts the request
                    stats.produce_failed(tp.topic, res.error, 0)
                continue
            if records is None or len(records) == 0:
                res.error = ErrorCode.CORRUPT_MESSAGE
                stats.produce_failed(tp.topic, res.error, 0)
                continue
            res.error = p.check_produce(acks, now)
            if res.error is not ErrorCode.NONE:
                stats.produce_failed(tp.topic, res.error, len(records))
                continue
            epoch = p.leader_epoch
            try:
                lg: Any = p.log
                info = (lg.append_as_leader(records, epoch, wall, control_allowed=True) if markers
                        else lg.append_as_leader(records, epoch, wall, client=client))
            except KafkaError as exc:
                res.error = exc.code
                errors = getattr(exc, "record_errors", None)
                if errors:
                    res.record_errors, res.error_message = list(errors), str(exc)
                stats.produce_failed(tp.topic, res.error, len(records))
                continue
            except Exception:  # noqa: BLE001 - a bug must answer an error, not kill the request
                log.exception("%s-%d: append failed", tp.topic, tp.partition)
                res.error = ErrorCode.UNKNOWN_SERVER_ERROR
                stats.produce_failed(tp.topic, res.error, len(records))
                continue
            stats.produce_appended(tp.topic, len(records), info.last_offset - info.first_offset + 1)
            res.base_offset, res.log_append_time = info.first_offset, info.log_append_time
            res.log_start_offset = p.log.log_start_offset
            p.on_leader_append(now)
            self.partition_changed(tp)
            if acks == -1 or (acks == 1 and lg.flush_pending(info.last_offset + 1)):
                waits[tp] = ProduceWait(p, info.last_offset + 1, p.leader_term, acks == -1)
        if not waits:
            callback(results)
            return
        op = DelayedProduce(waits, now + max(0, timeout_ms), context=_ProduceContext(results, callback))
        if self.produce_purgatory.try_complete_else_watch(op, now):
            self._produce_done(op)
        else:
            self._deadline(op.deadline_ms)

    def _produce_done(self, op: DelayedProduce) -> None:
        ctx: _ProduceContext = op.context  # type: ignore[assignment]
        for tp, code in op.results.items():
            if code is not ErrorCode.NONE:
                if code is ErrorCode.NOT_LEADER_OR_FOLLOWER and tp in self.offline:
                    code = ErrorCode.KAFKA_STORAGE_ERROR  # its dir failed (Kafka's getPartitionOrError)
                res = ctx.results[tp]  # type: ignore[index]
                res.error, res.base_offset = code, -1  # as Kafka: no offset with an error
        ctx.callback(ctx.results)

    def missing_error(self, tp: TopicPartition) -> ErrorCode:
        """The error for a partition not hosted here."""
        if tp in self.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if self.known_partition(tp) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def _leader(self, tp: TopicPartition) -> tuple[PartitionState | None, ErrorCode]:
        p = self.partitions.get(tp)
        if p is None:
            return None, self.missing_error(tp)
        if not p.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p, ErrorCode.NONE

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> tuple[PartitionState | None, ErrorCode]:
        """The local leader of tp, for reads that only a leader answers (ListOffsets)."""
        p, err = self._leader(tp)
        if p is not None:
            err = p.validate_leader_epoch(current_leader_epoch)
            if err is not ErrorCode.NONE:
                return None, err
        return p, err

    # -------------------------------------------------------------------- fetch -----
    def fetch_messages(
        self,
        params: FetchParams,
        fetches: Sequence[PartitionFetch],
        callback: FetchCallback,
        racks: Mapping[int, str | None] | None = None,
    ) -> None:
        """Serve a Fetch from a consumer (up to the HW) or a follower (up to the LEO,
        recording its progress for the HW and the ISR). `callback` gets the partitions'
        data at once when min_bytes is there, on an error, or with max_wait 0; else when
        enough arrives or max_wait passes (the fetch purgatory)."""
        ctx = _FetchContext(params, list(fetches), callback, racks or {})
        data, total, has_error, waits = self._read(ctx, record_progress=True)
        now = self.clock.monotonic_ms()
        if total >= params.min_bytes or has_error or params.max_wait_ms <= 0 or not waits:
            callback(data)
            return
        op = DelayedFetch(
            waits, params.min_bytes, now + params.max_wait_ms, self._available_bytes, context=ctx
        )
        if self.fetch_purgatory.try_complete_else_watch(op, now):
            self._fetch_done(op)
        else:
            self._deadline(op.deadline_ms)

    def read_for_fetch(
        self, params: FetchParams, fetches: Sequence[PartitionFetch], racks: Mapping[int, str | None] | None = None,
    ) -> tuple[list[FetchPartitionData], int, bool]:
        """Read `fetches` now, as a Fetch would (a follower's progress recorded), without
        waiting: (data per partition, total bytes, any error). For callers that wait
        themselves (incremental fetch sessions)."""
        ctx = _FetchContext(params, list(fetches), lambda _data: None, racks or {})
        data, total, has_error, _waits = self._read(ctx, record_progress=True)
        return data, total, has_error

    def _fetch_done(self, op: DelayedFetch) -> None:
        ctx: _FetchContext = op.context  # type: ignore[assignment]
        # As Kafka: the completing read records the follower's fetch state again.
        ctx.callback(self._read(ctx, record_progress=True)[0])

    def _available_bytes(self, tp: Any, w: FetchWait) -> int:
        if w.throttled:
            return 0  # as Kafka's DelayedFetch: a throttled replica's bytes do not complete it
        end = w.partition.fetch_upper_bound(w.from_follower, w.read_committed)
        log_: Any = w.partition.log
        return int(log_.read(w.fetch_offset, 1 << 30, end).size)

    def _read(
        self, ctx: _FetchContext, record_progress: bool
    ) -> tuple[list[FetchPartitionData], int, bool, dict[TopicPartition, FetchWait]]:
        params = ctx.params
        budget = params.max_bytes
        total = 0
        has_error = False
        waits: dict[TopicPartition, FetchWait] = {}
        out: list[FetchPartitionData] = []
        for f in ctx.fetches:
            data = self._read_partition(params, f, min(f.max_bytes, budget), total == 0, ctx.racks)
            out.append(data)
            if data.error is not ErrorCode.NONE:
                has_error = True
            elif data.diverging_epoch is None and data.preferred_read_replica < 0:
                p = self.partitions[f.tp]
                throttled = (params.from_follower and self.leader_throttle is not None
                             and self.leader_throttle.should_throttle(f.tp.topic, f.tp.partition,
                                                                      params.replica_id in p.isr))
                waits[f.tp] = FetchWait(p, f.fetch_offset, p.leader_epoch, params.from_follower,
                                        params.read_committed and not params.from_follower, throttled)
            total += data.size
            budget = max(0, budget - data.size)
        return out, total, has_error, waits

    def _read_partition(
        self, params: FetchParams, f: PartitionFetch, max_bytes: int, first: bool,
        racks: Mapping[int, str | None],
    ) -> FetchPartitionData:
        out = FetchPartitionData()
        tp = f.tp
        p = self.partitions.get(tp)
        if p is None:
            out.error = self.missing_error(tp)
            return out
        out.error = p.validate_leader_epoch(f.current_leader_epoch)
        if out.error is not ErrorCode.NONE:
            return out
        lg: Any = p.log
        if params.from_follower:
            remote = p.remotes.get(params.replica_id)
            start_before = remote.log_start_offset if remote is not None else -1
            r = p.on_follower_fetch(params.replica_id, f.fetch_offset, f.last_fetched_epoch,
                                    self.clock.monotonic_ms(), f.log_start_offset)
            if r.isr_change is not None:
                self._submit(tp, r.isr_change)
            if r.hw_changed:
                self.partition_changed(tp)
            elif remote is not None and remote.log_start_offset != start_before:
                self.delete_records_purgatory.check(tp, self.clock.monotonic_ms())
            out.high_watermark, out.log_start_offset = r.high_watermark, r.log_start_offset
            if r.error is not ErrorCode.NONE:
                out.error = r.error
                return out
            if r.diverging_epoch is not None:
                out.diverging_epoch = r.diverging_epoch
                return out
        else:
            if not p.is_leader and (not params.follower_reads or p.leader_id is None):
                out.error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # before KIP-392: leaders only
                return out
            if params.client_rack and p.is_leader:
                preferred = p.preferred_read_replica(params.client_rack, racks, f.fetch_offset)
                if preferred is not None:
                    out.preferred_read_replica = preferred
                    out.high_watermark, out.log_start_offset = p.high_watermark, lg.log_start_offset
                    return out
        read_committed = params.read_committed and not params.from_follower
        throttle = self.leader_throttle if params.from_follower else None
        in_sync = params.replica_id in p.isr
        if throttle is not None and throttle.should_throttle(tp.topic, tp.partition, in_sync):
            # Over leader.replication.throttled.rate: no records for a throttled replica
            # outside the ISR this time (Kafka's shouldLeaderThrottle).
            out.high_watermark, out.last_stable_offset = p.high_watermark, p.last_stable_offset
            out.log_start_offset = lg.log_start_offset
            return out
        out.high_watermark = p.high_watermark
        out.last_stable_offset = p.last_stable_offset
        upto = out.last_stable_offset if read_committed else p.fetch_upper_bound(params.from_follower)
        out.log_start_offset = lg.log_start_offset
        try:
            sl = lg.read(f.fetch_offset, max_bytes, upto, min_one_batch=first)
        except KafkaError as exc:
            out.error = exc.code
            return out
        except Exception:  # noqa: BLE001
            log.exception("%s-%d: read failed", tp.topic, tp.partition)
            out.error = ErrorCode.UNKNOWN_SERVER_ERROR
            return out
        out.records, out.size = (sl, sl.size) if sl.size else (None, 0)
        if throttle is not None and sl.size and throttle.is_throttled(tp.topic, tp.partition):
            # In-sync followers' bytes count too (Kafka's sizeOfThrottledPartitions): the
            # rate bounds all replication of the throttled partitions; only the
            # replicas outside the ISR are ever held back.
            throttle.record(sl.size)
        if read_committed:
            aborted = getattr(lg, "aborted_transactions", None)
            try:  # may read the log too (where the slice ends)
                txns = aborted(f.fetch_offset, upto, sl) if aborted is not None and sl.size else []
            except KafkaError as exc:
                out.records, out.size, out.error = None, 0, exc.code
                return out
            out.aborted_transactions = [(t[0], t[1]) for t in txns]
        return out

    # ------------------------------------------------------------ DeleteRecords -----
    def delete_records(
        self, offsets: Mapping[TopicPartition, int], timeout_ms: int, callback: DeleteRecordsCallback
    ) -> None:
        """Move each leader's log start up to its offset (-1: the HW); only committed
        records can go (offset <= HW). `callback` gets (error, low watermark) per partition
        once every live replica's log start reached the offset (followers follow the
        leader's log start in their next fetches), or REQUEST_TIMED_OUT after timeout_ms."""
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        targets: dict[TopicPartition, tuple[PartitionState, int]] = {}
        for tp, offset in offsets.items():
            p, err = self._leader(tp)
            if p is None:
                results[tp] = (err, -1)
                continue
            lg: Any = p.log
            target = p.high_watermark if offset == -1 else offset
            if target < 0 or target > p.high_watermark:
                results[tp] = (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
                continue
            if target > lg.log_start_offset:
                lg.maybe_increment_log_start_offset(target)
                self.partition_changed(tp)
            targets[tp] = (p, target)
        if not targets:
            callback(results)
            return
        now = self.clock.monotonic_ms()
        op = DelayedDeleteRecords(targets, now + max(0, timeout_ms), context=_DeleteRecordsContext(results, callback))
        if self.delete_records_purgatory.try_complete_else_watch(op, now):
            self._delete_records_done(op)
        else:
            self._deadline(op.deadline_ms)

    def _delete_records_done(self, op: DelayedDeleteRecords) -> None:
        ctx: _DeleteRecordsContext = op.context  # type: ignore[assignment]
        ctx.results.update(cast(dict[TopicPartition, tuple[ErrorCode, int]], op.results))
        ctx.callback(ctx.results)

    # ----------------------------------------------------- OffsetForLeaderEpoch -----
    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, leader_epoch: int, current_leader_epoch: int = -1
    ) -> tuple[ErrorCode, EpochEndOffset]:
        p, err = self._leader(tp)
        if p is None:
            return err, UNDEFINED
        return p.end_offset_for_epoch(leader_epoch, current_leader_epoch)

    # --------------------------------------------------------- follower side -----
    def follower_request(self, tp: TopicPartition) -> tuple[FollowerFetcher, EpochRequest | FetchRequest] | None:
        """The next request the replica fetcher should send for tp, if any."""
        p = self.partitions.get(tp)
        f = p.fetcher if p is not None else None
        if f is None:
            return None
        req = f.next_request(self.clock.monotonic_ms())
        return None if req is None else (f, req)

    def on_epoch_response(
        self, tp: TopicPartition, fetcher: FollowerFetcher, req: EpochRequest, error: ErrorCode, leader: EpochEndOffset
    ) -> FetcherOutcome:
        out = fetcher.on_epoch_end_offset(req, error, leader, self.clock.monotonic_ms())
        if out.truncated_to is not None:
            log.info("%s-%d: truncated to %d by leader epoch", tp.topic, tp.partition, out.truncated_to)
        self.partition_changed(tp)
        return out

    def on_fetch_response(
        self, tp: TopicPartition, fetcher: FollowerFetcher, req: FetchRequest, resp: FetchResponse
    ) -> FetcherOutcome:
        out = fetcher.on_fetch_response(req, resp, self.clock.monotonic_ms())
        if out.truncated_to is not None and resp.error is ErrorCode.NONE:
            log.info("%s-%d: truncated to %d by leader epoch", tp.topic, tp.partition, out.truncated_to)
        if out.appended:
            self.topic_stats.replicated_in(len(resp.records))
        if out.appended or out.hw_changed or out.truncated_to is not None:
            self.partition_changed(tp)
        return out

    def on_follower_request_failed(self, fetcher: FollowerFetcher, req: EpochRequest | FetchRequest) -> None:
        fetcher.on_request_failed(req, self.clock.monotonic_ms())

    def on_follower_request_abandoned(self, fetcher: FollowerFetcher, req: EpochRequest | FetchRequest) -> None:
        fetcher.on_request_abandoned(req)

    # ----------------------------------------------------------------------- ISR -----
    def maybe_shrink_isrs(self) -> None:
        """Timer (every replica.lag.time.max.ms / 2): drop followers that lag in time."""
        now = self.clock.monotonic_ms()
        for tp, p in list(self.partitions.items()):
            if p.is_leader:
                change = p.maybe_shrink_isr(now)
                if change is not None:
                    self._submit(tp, change)

    def _submit(self, tp: TopicPartition, change: IsrChange) -> None:
        self.isr_sender.submit(tp, change, lambda result: self.on_isr_change_result(tp, change, result))

    def on_isr_change_result(self, tp: TopicPartition, change: IsrChange, result: IsrChangeResult) -> None:
        """The controller's answer to `change`: apply the committed ISR, or retire the
        proposal so the next expiry tick or follower fetch proposes again."""
        p = self.partitions.get(tp)
        if p is None:
            return
        now = self.clock.monotonic_ms()
        if result.error is ErrorCode.NONE:
            before = sorted(p.isr)
            p.on_isr_change_committed(list(result.isr), result.partition_epoch, now)
            if sorted(p.isr) != before:
                log.info("%s-%d: ISR %s -> %s", tp.topic, tp.partition, before, sorted(p.isr))
        else:
            log.info("%s-%d: AlterPartition %s failed: %s", tp.topic, tp.partition, list(change.new_isr),
                     result.error.name)
            p.on_isr_change_failed(result.error, now, change)
        self.partition_changed(tp)

    # ------------------------------------------------------------------ timers -----
    def poll(self) -> None:
        """Expire purgatory deadlines (call at next_deadline())."""
        now = self.clock.monotonic_ms()
        self.produce_purgatory.poll(now)
        self.fetch_purgatory.poll(now)
        self.delete_records_purgatory.poll(now)

    def next_deadline(self) -> int | None:
        purgatories = (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory)
        ds = [d for d in (pg.next_deadline() for pg in purgatories) if d is not None]
        return min(ds) if ds else None

    def _deadline(self, at_ms: int) -> None:
        if self.wakeup_at is not None:
            self.wakeup_at(at_ms)
