"""ReplicaManager (sans-I/O): controller-order fencing, internal topics, the purgatories."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    FetchParams,
    FetchPartitionData,
    IsrChange,
    IsrChangeResult,
    MemoryLog,
    PartitionConfig,
    PartitionFetch,
    PartitionOrder,
    PartitionResponse,
    ReplicaManager,
    StopOrder,
    TopicPartition,
)

TP = TopicPartition("t", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def monotonic_ms(self) -> int:
        return self.now

    def wall_ms(self) -> int:
        return self.now


class Storage:
    def __init__(self) -> None:
        self.logs: dict[TopicPartition, MemoryLog] = {}
        self.deleted: list[TopicPartition] = []

    def open_log(self, tp: TopicPartition, overrides: Mapping[str, str], is_new: bool = True) -> MemoryLog:
        return self.logs.setdefault(tp, MemoryLog())

    def reconfigure_log(self, tp: TopicPartition, overrides: Mapping[str, str]) -> None:
        pass

    def delete_log(self, tp: TopicPartition) -> None:
        self.deleted.append(tp)

    def partition_config(self, overrides: Mapping[str, str]) -> PartitionConfig:
        return PartitionConfig(min_insync_replicas=int(overrides.get("min.insync.replicas", 1)),
                               replica_lag_time_max_ms=100)

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return 0


class Outlets:
    def __init__(self) -> None:
        self.sent: list[tuple[TopicPartition, IsrChange, Callable[[IsrChangeResult], None]]] = []
        self.fetching: dict[TopicPartition, int] = {}

    def submit(self, tp: TopicPartition, change: IsrChange, callback: Callable[[IsrChangeResult], None]) -> None:
        self.sent.append((tp, change, callback))

    def add_partition(self, tp: TopicPartition, leader_id: int) -> None:
        self.fetching[tp] = leader_id

    def remove_partition(self, tp: TopicPartition) -> None:
        self.fetching.pop(tp, None)


def manager(broker_id: int = 1) -> tuple[ReplicaManager, Storage, Outlets, Clock]:
    storage, outlets, clock = Storage(), Outlets(), Clock()
    rm = ReplicaManager(broker_id, storage, outlets, outlets, clock, internal_topics=frozenset({"__consumer_offsets"}))
    rm.broker_epoch = 50
    return rm, storage, outlets, clock


def lead(rm: ReplicaManager, epoch: int = 1, isr: tuple[int, ...] = (1, 2), tp: TopicPartition = TP) -> None:
    err, res = rm.become_leader_or_follower(1, 50, [PartitionOrder(tp, 1, epoch, isr, (1, 2), epoch)], {})
    assert err is ErrorCode.NONE and res[tp] is ErrorCode.NONE


def test_stale_controller_and_broker_epochs_are_refused_before_any_change() -> None:
    rm, _s, outlets, _c = manager()
    lead(rm)
    order = PartitionOrder(TP, 2, 2, (2,), (1, 2), 2)
    err, res = rm.become_leader_or_follower(0, 50, [order], {})  # an older controller
    assert err is ErrorCode.STALE_CONTROLLER_EPOCH and not res
    err, _ = rm.become_leader_or_follower(1, 49, [order], {})  # meant for an earlier registration
    assert err is ErrorCode.STALE_BROKER_EPOCH
    err, _ = rm.stop_replicas(1, 49, [StopOrder(TP, -1, True)])
    assert err is ErrorCode.STALE_BROKER_EPOCH
    assert rm.partitions[TP].is_leader and TP not in outlets.fetching
    # The same order with current epochs is applied.
    err, res = rm.become_leader_or_follower(1, 50, [order], {})
    assert err is ErrorCode.NONE and not rm.partitions[TP].is_leader and outlets.fetching[TP] == 2


def test_older_leader_epoch_is_fenced_in_leader_and_isr_and_stop_replica() -> None:
    rm, storage, _o, _c = manager()
    lead(rm, epoch=5)
    _, res = rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 2, 4, (2,), (1, 2), 9)], {})
    assert res[TP] is ErrorCode.FENCED_LEADER_EPOCH and rm.partitions[TP].is_leader
    _, res = rm.stop_replicas(1, 50, [StopOrder(TP, 4, True)])
    assert res[TP] is ErrorCode.FENCED_LEADER_EPOCH and TP in rm.partitions and not storage.deleted
    _, res = rm.stop_replicas(1, 50, [StopOrder(TP, -2, True)])  # topic deletion: always
    assert res[TP] is ErrorCode.NONE and TP not in rm.partitions and storage.deleted == [TP]


def test_clients_cannot_produce_to_internal_topics() -> None:
    rm, _s, _o, _c = manager()
    internal = TopicPartition("__consumer_offsets", 0)
    lead(rm, tp=internal, isr=(1,))
    got: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(1000, 1, {internal: ["x"]}, got.append)
    assert got[-1][internal].error is ErrorCode.INVALID_TOPIC_EXCEPTION
    rm.append_records(1000, 1, {internal: ["x"]}, got.append, internal_topics_allowed=True)
    assert got[-1][internal].error is ErrorCode.NONE and got[-1][internal].base_offset == 0


def test_appends_are_client_appends_unless_the_caller_says_otherwise() -> None:
    """Produce gets the log's client-only rules (Kafka's AppendOrigin.CLIENT); the
    coordinators pass client=False, markers go as control batches."""
    rm, storage, _o, _c = manager()
    lead(rm, isr=(1,))
    seen: list[dict] = []
    log = storage.logs[TP]
    plain = log.append_as_leader

    def spy(values, epoch, now_ms=-1, **kw):
        seen.append(kw)
        return plain(values, epoch, now_ms, **{k: v for k, v in kw.items() if k == "client"})

    log.append_as_leader = spy  # type: ignore[method-assign]
    rm.append_records(1000, 1, {TP: ["a"]}, lambda _r: None)
    rm.append_records(1000, 1, {TP: ["b"]}, lambda _r: None, internal_topics_allowed=True, client=False)
    rm.append_records(1000, 1, {TP: ["c"]}, lambda _r: None, markers=True, client=False)
    assert seen == [{"client": True}, {"client": False}, {"control_allowed": True}]


def test_acks_all_waits_for_the_isr_then_answers_once() -> None:
    rm, _s, _o, clock = manager()
    lead(rm)
    got: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(1000, -1, {TP: ["a", "b"]}, got.append)
    assert not got and len(rm.produce_purgatory) == 1
    fetched: list[list[FetchPartitionData]] = []
    rm.fetch_messages(FetchParams(2, 0, 1, 1 << 20), [PartitionFetch(TP, 2, 1 << 20, 1, 1)], fetched.append)
    assert fetched[0][0].error is ErrorCode.NONE
    assert [r[TP].error for r in got] == [ErrorCode.NONE] and got[0][TP].base_offset == 0
    clock.now += 5_000
    rm.poll()
    assert len(got) == 1  # never twice


def test_acks_all_times_out_and_a_parked_fetch_expires() -> None:
    rm, _s, _o, clock = manager()
    lead(rm)
    got: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(500, -1, {TP: ["a"]}, got.append)
    fetched: list[list[FetchPartitionData]] = []
    rm.fetch_messages(FetchParams(-1, 300, 1, 1 << 20), [PartitionFetch(TP, 0, 1 << 20)], fetched.append)
    assert not fetched and rm.next_deadline() == clock.now + 300  # the HW is 0: nothing to read
    clock.now += 300
    rm.poll()
    assert fetched and fetched[0][0].size == 0
    clock.now += 200
    rm.poll()
    assert got[0][TP].error is ErrorCode.REQUEST_TIMED_OUT and got[0][TP].base_offset == -1


def test_isr_shrink_goes_to_the_sender_and_its_answer_applies() -> None:
    rm, _s, outlets, clock = manager()
    lead(rm)
    clock.now += 1_000
    rm.maybe_shrink_isrs()
    tp, change, callback = outlets.sent[-1]
    assert tp == TP and change.new_isr == (1,)
    callback(IsrChangeResult(ErrorCode.NONE, (1,), change.partition_epoch + 1))
    assert rm.partitions[TP].isr == {1}


def test_a_partition_whose_log_cannot_open_does_not_stop_the_others() -> None:
    rm, storage, _o, _c = manager()
    bad = TopicPartition("t", 1)
    real_open = storage.open_log

    def open_log(tp: TopicPartition, overrides: Mapping[str, str], is_new: bool = True) -> MemoryLog:
        if tp == bad:
            raise OSError("disk gone")
        return real_open(tp, overrides)

    storage.open_log = open_log  # type: ignore[method-assign]
    orders = [PartitionOrder(bad, 1, 1, (1,), (1,), 1), PartitionOrder(TP, 1, 1, (1,), (1,), 1)]
    err, res = rm.become_leader_or_follower(1, 50, orders, {})
    assert err is ErrorCode.NONE
    assert res == {bad: ErrorCode.KAFKA_STORAGE_ERROR, TP: ErrorCode.NONE}
    assert rm.partitions[TP].is_leader and bad not in rm.partitions


def test_delete_records_answers_once_every_live_replica_moved_its_log_start() -> None:
    rm, _s, _o, clock = manager()
    lead(rm)
    got: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(1000, -1, {TP: ["a", "b", "c"]}, got.append)
    follower = FetchParams(2, 0, 1, 1 << 20)
    rm.fetch_messages(follower, [PartitionFetch(TP, 3, 1 << 20, 1, 1, log_start_offset=0)], lambda _: None)
    assert rm.partitions[TP].high_watermark == 3
    deleted: list[dict[TopicPartition, tuple[ErrorCode, int]]] = []
    rm.delete_records({TP: 2}, 1_000, deleted.append)
    # The leader's log start moved at once; the follower's has not yet: Kafka waits.
    assert rm.partitions[TP].log.log_start_offset == 2 and not deleted
    rm.fetch_messages(follower, [PartitionFetch(TP, 3, 1 << 20, 1, 1, log_start_offset=2)], lambda _: None)
    assert deleted == [{TP: (ErrorCode.NONE, 2)}]
    # Past the HW: refused; a follower that stopped reporting times the request out.
    rm.delete_records({TP: 4}, 1_000, deleted.append)
    assert deleted[-1] == {TP: (ErrorCode.OFFSET_OUT_OF_RANGE, -1)}
    rm.delete_records({TP: 3}, 50, deleted.append)
    assert len(deleted) == 2 and rm.next_deadline() == clock.now + 50
    clock.now += 50
    rm.poll()
    assert deleted[-1] == {TP: (ErrorCode.REQUEST_TIMED_OUT, -1)}
    # A follower that has not fetched for replica.lag.time.max.ms is not waited for.
    clock.now += 200
    rm.delete_records({TP: 3}, 1_000, deleted.append)
    assert deleted[-1] == {TP: (ErrorCode.NONE, 3)}


def test_acks_all_survives_a_leader_epoch_bump_that_keeps_the_leader() -> None:
    # The controller drops a dead follower from the ISR with a new leader epoch (same
    # leader): the parked produce completes once the smaller ISR has it, instead of
    # failing with NOT_LEADER_OR_FOLLOWER (which a client retries into a duplicate).
    rm, _s, _o, _c = manager()
    lead(rm, epoch=1, isr=(1, 2))
    got: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(1000, -1, {TP: ["a"]}, got.append)
    assert not got
    err, res = rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 1, 2, (1,), (1, 2), 2)], {})
    assert err is ErrorCode.NONE and res[TP] is ErrorCode.NONE
    assert [r[TP].error for r in got] == [ErrorCode.NONE] and got[0][TP].base_offset == 0
    # Losing leadership in between is different: the offset may have been refilled.
    rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 1, 3, (1, 2), (1, 2), 3)], {})
    rm.append_records(1000, -1, {TP: ["b"]}, got.append)
    assert len(got) == 1  # parked: follower 2 is in the ISR again
    rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 2, 4, (1, 2), (1, 2), 4)], {})
    assert got[-1][TP].error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_leader_throttle_counts_in_sync_followers_bytes_and_never_holds_them_back() -> None:
    """As Kafka: every byte sent for a throttled partition counts against
    leader.replication.throttled.rate (sizeOfThrottledPartitions), so an in-sync
    follower's traffic leaves less for a catching-up one; only replicas outside the ISR
    are held back."""
    from kafkarepl.server.replication_quota import LEADER_REPLICAS, ReplicationThrottle

    storage, outlets, clock = Storage(), Outlets(), Clock()
    throttle = ReplicationThrottle(1, LEADER_REPLICAS, clock.monotonic_ms)
    throttle.set_rate("2")  # (MemoryLog reads are sized in records: 3 here)
    throttle.update_topic("t", {LEADER_REPLICAS: "0:1"})
    rm = ReplicaManager(1, storage, outlets, outlets, clock, leader_throttle=throttle)
    rm.broker_epoch = 50
    lead(rm)  # ISR {1, 2}
    rm.append_records(1000, 1, {TP: ["a", "b", "c"]}, lambda _r: None)
    fetched: list[list[FetchPartitionData]] = []
    rm.fetch_messages(FetchParams(2, 0, 1, 1 << 20), [PartitionFetch(TP, 0, 1 << 20, 1, 1)], fetched.append)
    assert fetched[-1][0].size > 0  # in sync: served over the rate
    assert throttle.quota.rate() > 0 and throttle.quota.exceeded()  # and counted
    assert throttle.should_throttle("t", 0, in_sync=False)


class PendingSync:
    def __init__(self) -> None:
        self.dirs = {"/d"}
        self.ran = 0

    def run(self) -> None:
        self.ran += 1


def test_a_large_leader_and_isr_holds_appends_until_its_epochs_are_durable() -> None:
    """Over VERBOSE_ORDERS partitions, new leader epochs are made durable together by a
    sync its caller runs off the event loop (a syncfs can take seconds); until then the
    new leaders' appends wait, in order, while other partitions' go on."""
    from contextlib import contextmanager

    from kafkarepl.replication.replica_manager import VERBOSE_ORDERS

    rm, storage, _o, _c = manager()
    other = TopicPartition("other", 0)
    lead(rm, isr=(1,), tp=other)  # a small request: synced inline, never held
    pending = PendingSync()

    @contextmanager
    def deferred_syncs():
        yield pending

    storage.deferred_syncs = deferred_syncs  # type: ignore[attr-defined]
    orders = [PartitionOrder(TopicPartition("big", p), 1, 1, (1,), (1, 2), 1) for p in range(VERBOSE_ORDERS + 1)]
    err, _ = rm.become_leader_or_follower(1, 50, orders, {})
    assert err is ErrorCode.NONE
    sync = rm.pop_epoch_sync()
    assert sync is not None and sync.pending is pending and len(sync.partitions) == VERBOSE_ORDERS + 1
    assert rm.pop_epoch_sync() is None
    big0, big1 = TopicPartition("big", 0), TopicPartition("big", 1)
    got: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(1000, 1, {big0: ["a"]}, got.append)
    rm.append_records(1000, 1, {big1: ["x"], other: ["o1"]}, got.append)  # waits: it touches big-1
    rm.append_records(1000, 1, {other: ["o2"]}, got.append)  # waits behind the one above (order)
    rm.append_records(1000, 1, {TopicPartition("other2", 0): ["z"]}, got.append)  # unrelated: answered
    assert [list(r) for r in got] == [[TopicPartition("other2", 0)]]
    rm.append_records(1000, 1, {big0: ["b"]}, got.append)
    assert len(got) == 1
    rm.epoch_synced(sync)
    assert [list(r) for r in got[1:]] == [[big0], [big1, other], [other], [big0]]
    assert [got[i][tp].base_offset for i, tp in ((1, big0), (2, other), (3, other), (4, big0))] == [0, 0, 1, 1]
    assert storage.logs[big0].records == [(1, "a"), (1, "b")]
    rm.append_records(1000, 1, {big0: ["c"]}, got.append)  # durable now: at once
    assert got[-1][big0].base_offset == 2


def test_replicas_on_a_failed_log_dir_answer_kafka_storage_error() -> None:
    """KIP-112: once a replica's log dir failed, produce, fetch and LeaderAndIsr for it
    answer KAFKA_STORAGE_ERROR (the controller learns from the last which replicas went
    offline), a waiting acks=all produce is answered so too (Kafka's DelayedProduce), and
    the fetcher stops; the other partitions go on."""
    rm, _s, outlets, _c = manager()
    other = TopicPartition("t", 1)
    lead(rm)
    lead(rm, tp=other, isr=(1,))
    follower = TopicPartition("t", 2)
    rm.become_leader_or_follower(1, 50, [PartitionOrder(follower, 2, 1, (1, 2), (1, 2), 1)], {})
    assert outlets.fetching[follower] == 2
    waiting: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(1000, -1, {TP: ["a"]}, waiting.append)  # parked for the ISR
    assert not waiting
    rm.take_offline([TP, follower])
    assert len(waiting) == 1 and waiting[0][TP].error is ErrorCode.KAFKA_STORAGE_ERROR
    assert follower not in outlets.fetching and TP not in rm.partitions
    got: list[dict[TopicPartition, PartitionResponse]] = []
    rm.append_records(1000, 1, {TP: ["b"], other: ["c"]}, got.append)
    assert got[0][TP].error is ErrorCode.KAFKA_STORAGE_ERROR and got[0][other].error is ErrorCode.NONE
    fetched: list[list[FetchPartitionData]] = []
    rm.fetch_messages(FetchParams(-1, 0, 1, 1 << 20), [PartitionFetch(TP, 0, 1 << 20, 1, -1)], fetched.append)
    assert fetched[0][0].error is ErrorCode.KAFKA_STORAGE_ERROR
    _, res = rm.become_leader_or_follower(1, 50, [PartitionOrder(TP, 2, 2, (2,), (1, 2), 2),
                                                  PartitionOrder(other, 1, 2, (1,), (1, 2), 2)], {})
    assert res[TP] is ErrorCode.KAFKA_STORAGE_ERROR and res[other] is ErrorCode.NONE


def test_stop_replica_of_a_replica_on_a_failed_dir_answers_storage_error() -> None:
    """As Kafka (HostedPartition.Offline): the controller keeps the deletion pending
    (ineligible) instead of counting files on the failed disk as deleted."""
    rm, storage, _o, _c = manager()
    lead(rm)
    rm.take_offline([TP])
    err, res = rm.stop_replicas(1, 50, [StopOrder(TP, -2, True)])
    assert err is ErrorCode.NONE and res[TP] is ErrorCode.KAFKA_STORAGE_ERROR and not storage.deleted


def test_a_read_committed_fetch_whose_log_cannot_be_read_answers_kafka_storage_error() -> None:
    """Finding a read_committed fetch's aborted transactions reads the log too (where the
    slice ends): a disk error there answers that partition KAFKA_STORAGE_ERROR, as a read
    error does, instead of failing the whole fetch; the other partitions get their data."""
    from kafkarepl.errors import KafkaStorageError

    class Unreadable(MemoryLog):
        def aborted_transactions(self, fetch_offset: int, upper_bound: int, read: object = None) -> list:
            raise KafkaStorageError("t-0: aborted transactions failed: [Errno 5] Input/output error")

    rm, storage, _o, _c = manager()
    storage.logs[TP] = Unreadable()
    other = TopicPartition("t", 1)
    lead(rm, isr=(1,))
    lead(rm, tp=other, isr=(1,))
    rm.append_records(1000, 1, {TP: ["a"], other: ["b"]}, lambda r: None)
    fetched: list[list[FetchPartitionData]] = []
    rm.fetch_messages(FetchParams(-1, 0, 1, 1 << 20, read_committed=True),
                      [PartitionFetch(TP, 0, 1 << 20), PartitionFetch(other, 0, 1 << 20)], fetched.append)
    bad, good = fetched[0]  # in the order asked
    assert bad.error is ErrorCode.KAFKA_STORAGE_ERROR and bad.size == 0 and bad.records is None, bad
    assert good.error is ErrorCode.NONE and good.size == 1, good


def test_a_parked_fetch_is_answered_when_its_log_dir_fails() -> None:
    """A consumer fetch waiting in the purgatory, then the partition's dir fails (its log
    closed: reads raise KafkaStorageError): taking the replicas offline must not stop
    half-way, and the fetch is answered at once, KAFKA_STORAGE_ERROR (Kafka's DelayedFetch
    completes on a KafkaStorageException)."""
    from kafkarepl.errors import KafkaStorageError

    class Closable(MemoryLog):
        closed = False

        def read(self, *a, **k):  # type: ignore[no-untyped-def]
            if self.closed:
                raise KafkaStorageError("t-0: read failed: [Errno 9] Bad file descriptor")
            return super().read(*a, **k)

    rm, storage, _o, clock = manager()
    storage.logs[TP] = lg = Closable()
    other = TopicPartition("t", 1)
    lead(rm, isr=(1,))
    lead(rm, tp=other, isr=(1,))
    rm.append_records(1000, 1, {TP: ["a"]}, lambda r: None)
    fetched: list[list[FetchPartitionData]] = []
    rm.fetch_messages(FetchParams(-1, 500, 10**6, 1 << 20), [PartitionFetch(TP, 0, 1 << 20, 1, -1)], fetched.append)
    assert not fetched  # parked: fewer bytes than min_bytes
    lg.closed = True
    rm.take_offline([TP, other])
    assert {TP, other} <= rm.offline and TP not in rm.partitions and other not in rm.partitions
    assert len(fetched) == 1 and fetched[0][0].error is ErrorCode.KAFKA_STORAGE_ERROR


def test_list_offsets_answers_a_disk_error_for_that_partition() -> None:
    """ListOffsets by timestamp reads the log: a disk error is that partition's
    KAFKA_STORAGE_ERROR, as Kafka's handleListOffsetRequest answers it. Before, it escaped
    the handler and, ListOffsets having no top-level error code, closed the connection."""
    from kafkarepl.errors import KafkaStorageError
    from kafkarepl.server.replica_apis import ReplicaApis

    class Unreadable(MemoryLog):
        def offset_for_timestamp(self, ts_ms: int):  # type: ignore[no-untyped-def]
            raise KafkaStorageError("t-0: offset by timestamp failed: [Errno 5] Input/output error")

    rm, storage, _o, _c = manager()
    storage.logs[TP] = Unreadable()
    lead(rm, isr=(1,))
    apis = ReplicaApis(rm, None, None)  # type: ignore[arg-type]
    out = apis._list_offset(TP, {"timestamp": 1_700_000_000_000, "current_leader_epoch": -1}, -1, False)
    assert out["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR and out["offset"] == -1
    out = apis._list_offset(TP, {"timestamp": -1, "current_leader_epoch": -1}, -1, False)  # latest: no read
    assert out["error_code"] == 0
