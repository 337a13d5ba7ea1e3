"""Deterministic simulator for the sans-I/O replication core.

N brokers, each holding PartitionStates over MemoryLogs, a ZooKeeper-mode controller,
and a network that delays, drops and reorders broker-to-broker messages, all on one
simulated clock driven by a seeded random.Random. Scenario tests script it step by step;
the swarm test drives it with random faults. `check()` asserts the safety invariants
after every step and raises InvariantViolation with a description.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    EpochRequest,
    FetchParams,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FollowerFetcher,
    IsrChange,
    IsrChangeResult,
    MemoryLog,
    PartitionConfig,
    PartitionFetch,
    PartitionOrder,
    PartitionResponse,
    PartitionState,
    ReplicaManager,
    ReplicationMetrics,
    Role,
    TopicPartition,
)

CONTROLLER = -1
TOPIC = "t"


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimLog(MemoryLog):
    """MemoryLog counting truncations, so the invariant checks can be incremental."""

    truncations: int = 0

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset:
            self.truncations += 1
        super().truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.truncations += 1
        super().truncate_fully_and_start_at(offset)


@dataclass
class SimConfig:
    brokers: int = 3
    partitions: int = 1
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean: bool = False
    replica_lag_time_max_ms: int = 400
    session_timeout_ms: int = 500
    fetch_max_wait_ms: int = 50
    fetch_max_records: int = 20
    fetch_timeout_ms: int = 300
    fetch_backoff_ms: int = 20
    produce_timeout_ms: int = 1_500
    hw_checkpoint_interval_ms: int = 100
    net_delay_ms: tuple[int, int] = (1, 10)
    net_loss: float = 0.0


@dataclass
class Msg:
    src: int
    dst: int
    kind: str
    body: tuple
    dst_incarnation: int


@dataclass
class PState:
    """The controller's record of a partition (ZooKeeper's partition state znode)."""

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0


class Network:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.queue: list[tuple[int, int, Msg]] = []
        self.seq = itertools.count()
        # Scenario hook: return True to drop a message.
        self.drop_if: Callable[[Msg], bool] | None = None
        self.cut: dict[int, int] = {}  # broker -> cut off from other brokers until (ms)

    def send(self, src: int, dst: int, kind: str, *body: object) -> None:
        sim = self.sim
        lo, hi = sim.cfg.net_delay_ms
        broker_link = src != CONTROLLER and dst != CONTROLLER
        if broker_link and sim.cfg.net_loss and sim.rng.random() < sim.cfg.net_loss:
            return
        if dst == CONTROLLER:
            inc = 0
        elif src == CONTROLLER:
            # The broker epoch the controller knows (KIP-380): a restarted broker drops
            # requests meant for its previous incarnation.
            inc = sim.controller.registered.get(dst, -1)
        else:
            inc = sim.brokers[dst].incarnation
        msg = Msg(src, dst, kind, body, inc)
        heapq.heappush(self.queue, (sim.now + sim.rng.randint(lo, hi), next(self.seq), msg))

    def due(self, now: int) -> list[Msg]:
        out = []
        while self.queue and self.queue[0][0] <= now:
            out.append(heapq.heappop(self.queue)[2])
        return out

    def requeue(self, msg: Msg, at: int) -> None:
        heapq.heappush(self.queue, (at, next(self.seq), msg))

    def dropped(self, msg: Msg) -> bool:
        now = self.sim.now
        if msg.src != CONTROLLER and msg.dst != CONTROLLER:
            if self.cut.get(msg.src, 0) > now or self.cut.get(msg.dst, 0) > now:
                return True
        return self.drop_if is not None and self.drop_if(msg)


class SimClock:
    """Both clocks are the simulated one."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def monotonic_ms(self) -> int:
        return self.sim.now

    def wall_ms(self) -> int:
        return self.sim.now


class SimStorage:
    """ReplicaStorage over the broker's MemoryLogs, which survive its crashes (the disk)."""

    def __init__(self, broker: Broker, config: PartitionConfig) -> None:
        self.broker = broker
        self.config = config

    def open_log(self, tp: TopicPartition, overrides: object, is_new: bool = True) -> SimLog:
        return self.broker.logs.setdefault(tp.partition, SimLog())

    def reconfigure_log(self, tp: TopicPartition, overrides: object) -> None:
        pass

    def delete_log(self, tp: TopicPartition) -> None:
        self.broker.logs.pop(tp.partition, None)

    def partition_config(self, overrides: object) -> PartitionConfig:
        return self.config

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return self.broker.hw_checkpoint.get(tp.partition, 0)


@dataclass(eq=False)
class ProduceTicket:
    """A produce sent to a broker; `results` fills in when the ReplicaManager answers."""

    p: int
    values: list[object]
    acks: int
    broker: Broker
    completed: bool = False
    results: dict[int, ErrorCode] = field(default_factory=dict)
    first: int = -1
    sending: bool = True  # inside append_records: the caller reports a synchronous answer

    def complete(self, responses: dict[TopicPartition, PartitionResponse]) -> None:
        res = responses[TopicPartition(TOPIC, self.p)]
        self.completed = True
        self.results[self.p] = res.error
        self.first = res.base_offset
        if self.acks == -1 and not self.sending:
            self.broker.sim.on_produce_done(self.broker, self)


class Broker:
    """One simulated broker: the production ReplicaManager over MemoryLogs, with the
    simulated network standing in for its replica fetchers and controller channel."""

    def __init__(self, sim: Simulation, broker_id: int) -> None:
        self.sim = sim
        self.id = broker_id
        self.logs: dict[int, SimLog] = {}  # survive crashes (the disk)
        self.hw_checkpoint: dict[int, int] = {}
        self.alive = True
        self.incarnation = 0
        self.paused_until = 0
        self.zk_cut_until = 0
        self.metrics = ReplicationMetrics()  # cumulative across restarts, for tests
        self.next_checkpoint = 0
        self._start()

    def _start(self) -> None:
        self.incarnation += 1
        cfg = self.sim.cfg
        pcfg = PartitionConfig(
            min_insync_replicas=cfg.min_insync_replicas,
            replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            unclean_leader_election_enable=cfg.unclean,
            replica_fetch_backoff_ms=cfg.fetch_backoff_ms,
        )
        self.sent_at: dict[int, int] = {}
        self.in_flight: dict[int, tuple[FollowerFetcher, EpochRequest | FetchRequest]] = {}
        self.isr_callbacks: dict[tuple[int, IsrChange], Callable[[IsrChangeResult], None]] = {}
        self.rm = ReplicaManager(
            self.id,
            SimStorage(self, pcfg),
            isr_sender=self,
            fetchers=self,
            clock=self.sim.clock,
            metrics=self.metrics,
            known_partition=lambda tp: True,
            partition_factory=self.sim.partition_cls,
            fetcher_factory=self.sim.fetcher_factory,
        )
        self.rm.broker_epoch = self.incarnation

    @property
    def parts(self) -> dict[int, PartitionState]:
        return {tp.partition: p for tp, p in self.rm.partitions.items()}

    @property
    def running(self) -> bool:
        return self.alive and self.paused_until <= self.sim.now

    def crash(self, lose_unflushed: bool) -> None:
        self.sim.dirty = True
        for log in self.logs.values():
            log.crash(lose_unflushed)
        self.alive = False

    def restart(self) -> None:
        self.sim.dirty = True
        self.alive = True
        self.paused_until = 0
        self._start()

    # -- the ReplicaManager's outlets ----------------------------------------------------

    def submit(self, tp: TopicPartition, change: IsrChange, callback: Callable[[IsrChangeResult], None]) -> None:
        # IsrChangeSender: the controller's answer names the change it answers
        self.isr_callbacks[(tp.partition, change)] = callback
        self.sim.net.send(self.id, CONTROLLER, "alter_partition", tp.partition, change)

    def add_partition(self, tp: TopicPartition, leader_id: int) -> None:  # FetcherControl
        self.in_flight.pop(tp.partition, None)

    def remove_partition(self, tp: TopicPartition) -> None:
        self.in_flight.pop(tp.partition, None)

    # -- events ------------------------------------------------------------------------

    def handle(self, msg: Msg) -> None:
        self.sim.dirty = True
        if msg.kind == "leader_and_isr":
            self.on_leader_and_isr(msg.dst_incarnation, *msg.body)
            return
        getattr(self, "on_" + msg.kind)(msg.src, *msg.body)

    def on_leader_and_isr(self, broker_epoch: int, p: int, st: PState, unclean: bool) -> None:
        part = self.parts.get(p)
        before = None if part is None else (part.role, part.leader_epoch)
        self.sim.trace("b%d p%d LeaderAndIsr %s (was %s)", self.id, p, st, before)
        order = PartitionOrder(
            TopicPartition(TOPIC, p), st.leader, st.leader_epoch, st.isr, st.replicas, st.partition_epoch, unclean
        )
        self.rm.become_leader_or_follower(0, broker_epoch, [order], {})
        part = self.parts[p]
        if part.is_leader and before != (Role.LEADER, part.leader_epoch):
            self.sim.record_leader(p, part.leader_epoch, self.id)

    def produce(self, p: int, values: list[object], acks: int) -> ProduceTicket | ErrorCode:
        self.sim.dirty = True
        log = self.logs.get(p)
        leo = None if log is None else log.log_end_offset
        ticket = ProduceTicket(p, values, acks, self)
        self.rm.append_records(
            self.sim.cfg.produce_timeout_ms, acks, {TopicPartition(TOPIC, p): values}, ticket.complete
        )
        ticket.sending = False
        appended = log is not None and log.log_end_offset != leo
        if acks != -1 or (ticket.completed and not appended):
            return ticket.results[p]  # refused before any append
        if ticket.completed:
            self.sim.on_produce_done(self, ticket)
        return ticket

    def on_fetch(self, src: int, p: int, req: FetchRequest) -> None:
        n = self.sim.rng.randint(1, self.sim.cfg.fetch_max_records)
        params = FetchParams(replica_id=src, max_wait_ms=self.sim.cfg.fetch_max_wait_ms, min_bytes=1, max_bytes=n)
        fetch = PartitionFetch(
            TopicPartition(TOPIC, p), req.fetch_offset, n, req.current_leader_epoch, req.last_fetched_epoch
        )

        def answer(data: list[FetchPartitionData]) -> None:
            self.sim.dirty = True
            d = data[0]
            resp = FetchResponse(d.error, d.high_watermark, d.log_start_offset, d.records, d.diverging_epoch)
            self.sim.net.send(self.id, src, "fetch_response", p, req, resp)

        self.rm.fetch_messages(params, [fetch], answer)

    def on_fetch_response(self, _src: int, p: int, req: FetchRequest, resp: FetchResponse) -> None:
        sent = self.in_flight.get(p)
        if sent is None or sent[1] is not req:
            return  # for a fetcher that is gone (new epoch, stopped replica)
        del self.in_flight[p]
        fetcher = sent[0]
        out = self.rm.on_fetch_response(TopicPartition(TOPIC, p), fetcher, req, resp)
        if out.truncated_to is not None or out.error is not ErrorCode.NONE:
            self.sim.trace("b%d p%d fetch %s -> %s: %s", self.id, p, req, resp, out)
        if not out.stale and out.error is ErrorCode.NONE and resp.diverging_epoch is None:
            self.sim.fetched_in_epoch.add((self.id, self.incarnation, p, fetcher.leader_epoch))

    def on_epoch(self, src: int, p: int, req: EpochRequest) -> None:
        err, eo = self.rm.last_offset_for_leader_epoch(TopicPartition(TOPIC, p), req.leader_epoch, req.current_leader_epoch)
        self.sim.net.send(self.id, src, "epoch_response", p, req, err, eo)

    def on_epoch_response(self, _src: int, p: int, req: EpochRequest, err: ErrorCode, eo) -> None:
        sent = self.in_flight.get(p)
        if sent is None or sent[1] is not req:
            return
        del self.in_flight[p]
        out = self.rm.on_epoch_response(TopicPartition(TOPIC, p), sent[0], req, err, eo)
        self.sim.trace("b%d p%d epoch %s -> %s %s: %s", self.id, p, req, err, eo, out)

    def on_alter_partition_response(self, _src: int, p: int, change: IsrChange, ok: bool, st: PState) -> None:
        callback = self.isr_callbacks.pop((p, change), None)
        if callback is None:
            return  # sent by an earlier incarnation
        if ok:
            callback(IsrChangeResult(ErrorCode.NONE, st.isr, st.partition_epoch))
        else:
            callback(IsrChangeResult(ErrorCode.INVALID_UPDATE_VERSION))

    # -- timers ------------------------------------------------------------------------

    def tick(self) -> None:
        now, net = self.sim.now, self.sim.net
        self.rm.maybe_shrink_isrs()
        for tp in list(self.rm.partitions):
            p = tp.partition
            sent = self.in_flight.get(p)
            if sent is not None and now - self.sent_at.get(p, now) > self.sim.cfg.fetch_timeout_ms:
                del self.in_flight[p]
                self.rm.on_follower_request_failed(*sent)
            nxt = self.rm.follower_request(tp)
            if nxt is not None:
                fetcher, req = nxt
                self.in_flight[p] = nxt
                self.sent_at[p] = now
                kind = "epoch" if isinstance(req, EpochRequest) else "fetch"
                net.send(self.id, fetcher.leader_id, kind, p, req)
        self.rm.poll()
        if now >= self.next_checkpoint:
            self.checkpoint_hw()
            self.next_checkpoint = now + self.sim.cfg.hw_checkpoint_interval_ms

    def checkpoint_hw(self) -> None:
        for p, part in self.parts.items():
            self.hw_checkpoint[p] = part.high_watermark


class Controller:
    """ZooKeeper-mode controller: liveness by session, clean elections from the ISR in
    assignment order, unclean only when enabled, conditional AlterPartition."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.state = {
            p: PState(tuple(r), r[0], 0, tuple(r)) for p, r in enumerate(sim.assignment)
        }
        self.registered: dict[int, int] = {}  # broker -> incarnation with a live session
        self.last_heartbeat: dict[int, int] = {}
        self.unclean_elections = 0

    def start(self) -> None:
        for b in self.sim.brokers:
            self.registered[b.id] = b.incarnation
            self.last_heartbeat[b.id] = self.sim.now
        for p in self.state:
            self._push(p, unclean=False)

    def live(self, b: int) -> bool:
        return b in self.registered

    def tick(self) -> None:
        now = self.sim.now
        for b in self.sim.brokers:
            if b.running and b.zk_cut_until <= now:
                self.last_heartbeat[b.id] = now
                if self.registered.get(b.id) != b.incarnation:
                    if b.id in self.registered:
                        self.on_broker_failure(b.id)  # a bounce we missed
                    self.registered[b.id] = b.incarnation
                    self.on_broker_startup(b.id)
            elif b.id in self.registered and now - self.last_heartbeat[b.id] > self.sim.cfg.session_timeout_ms:
                self.on_broker_failure(b.id)

    def on_broker_failure(self, b: int) -> None:
        self.sim.dirty = True
        self.registered.pop(b, None)
        for p, st in self.state.items():
            if b not in st.replicas:
                continue
            if st.leader == b:
                self.elect(p)
            elif b in st.isr and len(st.isr) > 1:
                st.isr = tuple(r for r in st.isr if r != b)
                st.partition_epoch += 1
                self._push(p, unclean=False)

    def on_broker_startup(self, b: int) -> None:
        for p, st in self.state.items():
            if b not in st.replicas:
                continue
            if st.leader < 0 or not self.live(st.leader):
                self.elect(p)
            else:
                self.sim.net.send(CONTROLLER, b, "leader_and_isr", p, PState(**vars(st)), False)

    def elect(self, p: int, avoid: int | None = None) -> bool:
        self.sim.dirty = True
        st = self.state[p]
        candidates = [r for r in st.replicas if r in st.isr and self.live(r) and r != avoid]
        unclean = False
        if candidates:
            leader = candidates[0]
            isr = tuple(r for r in st.isr if self.live(r))
        elif avoid is not None:
            return False
        else:
            live = [r for r in st.replicas if self.live(r)]
            if self.sim.cfg.unclean and live:
                leader, isr, unclean = live[0], (live[0],), True
                self.unclean_elections += 1
                self.sim.on_unclean_election(p)
            else:
                # Offline until an ISR member returns; never shrink the ISR to empty.
                leader = -1
                isr = tuple(r for r in st.isr if r != st.leader) or st.isr
        self.sim.trace("controller elect p%d: %s isr=%s unclean=%s", p, leader, isr, unclean)
        st.leader, st.isr = leader, isr
        st.leader_epoch += 1
        st.partition_epoch += 1
        self._push(p, unclean=unclean)
        return True

    def _push(self, p: int, unclean: bool) -> None:
        st = self.state[p]
        for r in st.replicas:
            if self.live(r):
                self.sim.net.send(CONTROLLER, r, "leader_and_isr", p, PState(**vars(st)), unclean)

    def handle(self, msg: Msg) -> None:
        assert msg.kind == "alter_partition"
        self.sim.dirty = True
        p, change = msg.body
        st = self.state[p]
        ok = (
            change.leader_id == st.leader
            and change.leader_epoch == st.leader_epoch
            and change.partition_epoch == st.partition_epoch
            and all(self.live(r) for r in set(change.new_isr) - set(st.isr))  # KIP-841
        )
        self.sim.trace("controller alter_partition p%d %s ok=%s", p, change, ok)
        if ok:
            st.isr = change.new_isr
            st.partition_epoch += 1
        self.sim.net.send(CONTROLLER, msg.src, "alter_partition_response", p, change, ok, PState(**vars(st)))


@dataclass
class Acked:
    offset: int
    value: object


class Simulation:
    def __init__(
        self,
        seed: int,
        cfg: SimConfig | None = None,
        fetcher_factory: Callable[[PartitionState, int, int], FollowerFetcher] | None = None,
        partition_cls: type[PartitionState] = PartitionState,
    ) -> None:
        self.seed = seed
        self.partition_cls = partition_cls  # mutants replace it
        self.rng = random.Random(seed)
        self.cfg = cfg or SimConfig()
        self.now = 0
        self.fetcher_factory = fetcher_factory
        c = self.cfg
        self.assignment = [
            tuple((p + i) % c.brokers for i in range(c.replication_factor)) for p in range(c.partitions)
        ]
        self.net = Network(self)
        self.clock = SimClock(self)
        self.brokers: list[Broker] = []
        for b in range(c.brokers):
            self.brokers.append(Broker(self, b))
        self.controller = Controller(self)
        self.acked: dict[int, list[Acked]] = {p: [] for p in range(c.partitions)}
        self.produce_errors: list[ErrorCode] = []
        self.epoch_leaders: dict[tuple[int, int], int] = {}
        self.leader_hw: dict[tuple[int, int, int], int] = {}  # (broker, p, epoch) -> hw
        self.fetched_in_epoch: set[tuple[int, int, int, int]] = set()
        self.tainted: set[int] = set()  # partitions where loss was allowed (unclean, power loss)
        # (p, broker) -> {(offset, value)} destroyed on that broker by a power loss
        self.excused: dict[tuple[int, int], set[tuple[int, object]]] = {}
        self.acked_set: dict[int, set[tuple[int, object]]] = {p: set() for p in range(c.partitions)}
        self.committed: dict[int, list[tuple[int, object]]] = {p: [] for p in range(c.partitions)}
        self._verified: dict[tuple[int, int], list[int]] = {}
        self._leaders_checked: set[tuple[int, ...]] = set()
        self.retention_floor: dict[int, int] = {}
        self.next_value = itertools.count(1)
        self.tracing = False
        self.dirty = True
        self.events: list[str] = []
        self.controller.start()

    def trace(self, fmt: str, *args: object) -> None:
        if self.tracing:
            self.events.append(f"{self.now:6d} " + (fmt % args if args else fmt))

    # -- bookkeeping called by brokers ----------------------------------------------------

    def record_leader(self, p: int, epoch: int, b: int) -> None:
        other = self.epoch_leaders.setdefault((p, epoch), b)
        if other != b:
            raise InvariantViolation(f"p{p} epoch {epoch} has two leaders: {other} and {b}")

    def on_produce_done(self, broker: Broker, op: ProduceTicket) -> None:
        self.dirty = True
        p, first, values = op.p, op.first, op.values
        err = op.results[p]
        self.trace("b%d p%d produce %s@%d -> %s", broker.id, p, values, first, err.name)
        if err is ErrorCode.NONE:
            log = broker.logs[p]
            for i, v in enumerate(values):
                got = log.get(first + i)
                if first + i >= log.log_start_offset and (got is None or got[1] != v):
                    raise InvariantViolation(f"acked {v}@{first + i} on p{p} not in leader {broker.id}'s log")
                self.acked[p].append(Acked(first + i, v))
                self.acked_set[p].add((first + i, v))
        else:
            self.produce_errors.append(err)

    def on_unclean_election(self, p: int) -> None:
        self.tainted.add(p)

    # -- driving --------------------------------------------------------------------------

    def step(self, dt: int | None = None) -> None:
        self.now += self.rng.randint(1, 10) if dt is None else dt
        for msg in self.net.due(self.now):
            self.deliver(msg)
        for b in self.brokers:
            if b.running:
                b.tick()
        self.controller.tick()

    def deliver(self, msg: Msg) -> None:
        if self.net.dropped(msg):
            return
        zk_cut = self.brokers[msg.src if msg.dst == CONTROLLER else msg.dst].zk_cut_until
        if CONTROLLER in (msg.src, msg.dst) and zk_cut > self.now:
            self.net.requeue(msg, zk_cut)  # the controller channel retries until healed
            return
        if msg.dst == CONTROLLER:
            self.controller.handle(msg)
            return
        b = self.brokers[msg.dst]
        if not b.alive or b.incarnation != msg.dst_incarnation:
            return  # the connection died with the process
        if b.paused_until > self.now:
            self.net.requeue(msg, b.paused_until)
            return
        b.handle(msg)

    def run(self, ms: int, check: bool = True) -> None:
        end = self.now + ms
        while self.now < end:
            self.step()
            if check:
                self.check()

    def produce(self, p: int, n: int = 1, acks: int = -1, broker: int | None = None) -> ProduceTicket | ErrorCode:
        target = self.controller.state[p].leader if broker is None else broker
        if target < 0 or not self.brokers[target].running:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        b = self.brokers[target]
        values = [next(self.next_value) for _ in range(n)]
        return b.produce(p, values, acks)

    def crash(self, b: int, lose_unflushed: bool = False) -> None:
        broker = self.brokers[b]
        self.trace("crash b%d lose_unflushed=%s", b, lose_unflushed)
        if lose_unflushed:
            self._excuse_power_loss(broker)
        broker.crash(lose_unflushed)

    def _excuse_power_loss(self, broker: Broker) -> None:
        """Power loss on `broker`: the records it loses are excused on it (only fsync could
        keep them), including ones acknowledged later thanks to fetches it sent before;
        they are lost for real only if no other ISR member has them."""
        for p, log in broker.logs.items():
            lost = self.excused.setdefault((p, broker.id), set())
            for offset, _epoch, value in log.records_from(log.flushed_offset):
                lost.add((offset, value))

    def holds(self, b: int, p: int, a: Acked) -> bool:
        """b has record a (or deleted it by retention, which is no loss)."""
        log = self.brokers[b].logs[p]
        got = log.get(a.offset)
        deleted = max(log.log_start_offset, self.retention_floor.get(p, 0))
        return a.offset < deleted or (got is not None and got[1] == a.value)

    def delete_records(self, b: int, p: int, offset: int) -> None:
        self.trace("b%d p%d log start -> %d", b, p, offset)
        self.dirty = True
        self.brokers[b].logs[p].maybe_increment_log_start_offset(offset)
        self.retention_floor[p] = max(self.retention_floor.get(p, 0), offset)

    def restart(self, b: int) -> None:
        self.trace("restart b%d", b)
        self.brokers[b].restart()

    def leader_of(self, p: int) -> Broker | None:
        """The broker acting as the controller's current leader, once it knows it."""
        st = self.controller.state[p]
        if st.leader < 0:
            return None
        b = self.brokers[st.leader]
        part = b.parts.get(p)
        if b.alive and part is not None and part.is_leader and part.leader_epoch == st.leader_epoch:
            return b
        return None

    # -- invariants -------------------------------------------------------------------------

    def check(self) -> None:
        """Check every invariant, unless nothing that they read changed since the last
        check (every state change in the simulation sets `dirty`)."""
        if not self.dirty:
            return
        self.dirty = False
        for p in range(self.cfg.partitions):
            self._check_partition(p)

    def _check_partition(self, p: int) -> None:
        live = [b for b in self.brokers if b.alive and p in b.parts]
        # Leader HW never goes back within a leader's tenure.
        for b in live:
            part = b.parts[p]
            if part.is_leader:
                key = (b.id, p, part.leader_epoch)
                prev = self.leader_hw.get(key, -1)
                if part.high_watermark < prev:
                    raise InvariantViolation(f"p{p}: leader {b.id} HW went back {prev} -> {part.high_watermark}")
                self.leader_hw[key] = part.high_watermark
            if part.high_watermark > part.log.log_end_offset:
                raise InvariantViolation(f"p{p}: broker {b.id} HW {part.high_watermark} > LEO")
        if p in self.tainted:
            return
        leader = self.leader_of(p)
        if leader is not None and self._leader_lost_committed_to_power_loss(p, leader):
            self._taint(p, f"leader {leader.id} lost committed data to a power loss")
            return
        # Follower HW <= leader HW once it fetched from this leader.
        if leader is not None:
            lpart = leader.parts[p]
            for b in live:
                part = b.parts[p]
                if (
                    part.role is Role.FOLLOWER
                    and part.leader_epoch == lpart.leader_epoch
                    and (b.id, b.incarnation, p, part.leader_epoch) in self.fetched_in_epoch
                    # (as Kafka, a HW is never below its own log start)
                    and part.high_watermark > max(lpart.high_watermark, part.log.log_start_offset)
                ):
                    raise InvariantViolation(
                        f"p{p}: follower {b.id} HW {part.high_watermark} > leader {leader.id} HW {lpart.high_watermark}"
                    )
        self._check_agreement(p, live)
        self._check_acked(p, leader)

    def _progress(self, p: int, b: Broker) -> list[int]:
        """[truncations seen, agreed up to, acked records verified] for (p, b); reset when
        the log was truncated since, so checks stay incremental yet exact."""
        log = b.logs[p]
        st = self._verified.setdefault((p, b.id), [log.truncations, 0, 0])
        if st[0] != log.truncations:
            st[:] = [log.truncations, 0, 0]
        return st

    def _check_agreement(self, p: int, live: list[Broker]) -> None:
        """Every replica's log below its HW is a prefix of one committed log, record for
        record (offset, epoch, value), for the whole run: replicas agree below their HWs
        and nothing once committed is ever rewritten."""
        committed = self.committed[p]
        for b in live:
            log, h = b.logs[p], b.parts[p].high_watermark
            base = log.log_start_offset  # retention may have deleted the head
            st = self._progress(p, b)
            start = max(min(st[1], h), base)
            n = min(h, len(committed))
            if start < n and log.records[start - base : n - base] != committed[start:n]:
                bad = next(i for i in range(start, n) if log.records[i - base] != committed[i])
                raise InvariantViolation(
                    f"p{p}: broker {b.id} has {log.records[bad - base]} at offset {bad} below its "
                    f"HW {h}, but {committed[bad]} was committed there"
                )
            if h > len(committed):
                assert base <= len(committed), "retention ran past what was ever committed"
                committed.extend(log.records[len(committed) - base : h - base])
            st[1] = h

    def _check_acked(self, p: int, leader: Broker | None) -> None:
        """No acknowledged (acks=all) record is lost while an ISR member survives: every
        member of the controller's ISR (dead or alive), the current leader and every live
        replica whose HW covers it hold it, except copies destroyed by a power loss."""
        isr = self.controller.state[p].isr
        acked = self.acked[p]
        lost_by_power: list[Acked] = []
        # Below the highest log start retention set on the partition, records are
        # deleted, not lost (a replica may briefly hold other ones there, as in Kafka).
        floor = self.retention_floor.get(p, 0)
        for b in self.brokers:
            if p not in b.logs:
                continue
            log = b.logs[p]
            st = self._progress(p, b)
            part = b.parts.get(p)
            if not b.alive:
                hw = -1
            elif part is not None:
                hw = part.high_watermark
            else:  # restarted, no LeaderAndIsr yet: it will start from its checkpoint
                hw = min(b.hw_checkpoint.get(p, 0), log.log_end_offset)
            must_hold_all = b.id in isr or b is leader
            i, contiguous = st[2], True
            for j in range(i, len(acked)):
                a = acked[j]
                got = log.get(a.offset)
                if a.offset < floor or (got is not None and got[1] == a.value):
                    if contiguous:
                        i = j + 1
                    continue
                contiguous = False
                if not (must_hold_all or hw > a.offset):
                    continue
                if (a.offset, a.value) not in self.excused.get((p, b.id), ()):
                    raise InvariantViolation(
                        f"p{p}: acked value {a.value}@{a.offset} lost on broker {b.id} "
                        f"(leader={leader.id if leader else None}, isr={isr}, has {got})"
                    )
                if b is leader:
                    self._taint(p, f"leader {b.id} lost acked {a} to a power loss")
                    return
                lost_by_power.append(a)
            st[2] = i
        for a in lost_by_power:
            if not any(self.holds(r, p, a) for r in isr):
                self._taint(p, f"{a} lost to power loss on every ISR member")
                return

    def _taint(self, p: int, why: str) -> None:
        self.trace("p%d: %s: no longer checked", p, why)
        self.tainted.add(p)

    def _leader_lost_committed_to_power_loss(self, p: int, leader: Broker) -> bool:
        lost = self.excused.get((p, leader.id))
        if not lost:
            return False
        log = leader.logs[p]
        key = (p, leader.id, leader.incarnation, leader.parts[p].leader_epoch, log.truncations)
        if key in self._leaders_checked:
            return False
        self._leaders_checked.add(key)
        committed = len(self.committed[p])
        for offset, value in lost:
            got = log.get(offset)
            if offset < log.log_start_offset:  # it deleted it (retention): not a loss
                continue
            if (got is None or got[1] != value) and (offset < committed or (offset, value) in self.acked_set[p]):
                return True
        return False

    def converge(self, max_ms: int = 20_000) -> None:
        """Heal everything, restart the dead, and wait until every replica of every
        partition holds the same log up to the same HW (the leader's LEO)."""
        self.net.drop_if = None
        self.net.cut.clear()
        for b in self.brokers:
            b.paused_until = 0
            b.zk_cut_until = 0
            if not b.alive:
                b.restart()
        end = self.now + max_ms
        while self.now < end:
            self.step()
            self.check()
            if self._converged():
                return
        raise InvariantViolation(f"replicas did not converge within {max_ms} ms: {self.describe()}")

    def _converged(self) -> bool:
        for p in range(self.cfg.partitions):
            leader = self.leader_of(p)
            if leader is None:
                return False
            lpart = leader.parts[p]
            if len(lpart.isr) != len(lpart.replicas) or lpart.high_watermark != lpart.log.log_end_offset:
                return False
            lead = leader.logs[p]
            for r in lpart.replicas:
                b, log = self.brokers[r], self.brokers[r].logs[p]
                part = b.parts.get(p)
                if part is None or log.log_end_offset != lead.log_end_offset or part.high_watermark != lpart.high_watermark:
                    return False
                start = max(log.log_start_offset, lead.log_start_offset)  # retention differs
                if log.records_from(start) != lead.records_from(start):
                    return False
        return True

    def describe(self) -> str:
        lines = [f"seed={self.seed} now={self.now}"]
        for p, st in self.controller.state.items():
            lines.append(f" p{p} controller: leader={st.leader} epoch={st.leader_epoch} isr={st.isr}")
            for b in self.brokers:
                if p in b.parts:
                    part = b.parts[p]
                    log = b.logs[p]
                    lines.append(
                        f"  b{b.id} alive={b.alive} role={part.role.value} epoch={part.leader_epoch} "
                        f"isr={sorted(part.isr)} hw={part.high_watermark} leo={log.log_end_offset} "
                        f"epochs={log.epochs}"
                    )
        return "\n".join(lines)


@dataclass
class SwarmStats:
    schedules: int = 0
    steps: int = 0
    acked: int = 0
    tainted: int = 0
    unclean: int = 0
    shrinks: int = 0
    errors: dict[str, int] = field(default_factory=dict)
