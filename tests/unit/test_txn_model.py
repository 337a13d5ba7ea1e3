"""Hypothesis state machine: the transaction coordinator against Kafka's transaction rules.

The real TransactionCoordinatorService (server/txn_coordinator.py: its decisions in
coordinator/txn.py) on a real ReplicaManager and `__transaction_state` log in a temp dir;
the only stand-ins are the clock, the controller/fetcher outlets, and one tiny broker
on localhost that leads the transactions' partitions and answers WriteTxnMarkers (or
holds them: markers pending). A second replica of `__transaction_state` may lag, so
state writes stay in flight until the test lets it fetch: requests then meet each
other's pending writes.

Producers (each a transactional.id instance with the producer id and epoch it was
given) send InitProducerId (new, or KIP-360 recovery with their id and epoch, or a
stale one), AddPartitionsToTxn, AddOffsetsToTxn and EndTxn; time passes and timed-out
transactions are aborted; leadership of the partition moves away and back. Each answer
is compared with Kafka's TransactionCoordinator / TransactionMetadata (3.x, before
KIP-890 part 2) in the same state; the coordinator's states must follow Kafka's legal
transitions, epochs must not go back, markers must carry the producer id and epoch of
the transaction they end, and what the coordinator holds must be what its log says.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkarepl import _core
from kafkarepl.coordinator.offsets import OFFSETS_TOPIC
from kafkarepl.coordinator.records import build_batch, iter_records
from kafkarepl.coordinator.txn_log import (
    TXN_TOPIC,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kafkarepl.errors import ErrorCode as E
from kafkarepl.protocol import ApiKey, Request
from kafkarepl.replication import (
    FetchParams,
    PartitionFetch,
    PartitionOrder,
    ReplicaManager,
    TopicPartition,
)
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.metadata_cache import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from kafkarepl.server.replica_storage import LogStorage
from kafkarepl.server.txn_coordinator import TransactionCoordinatorService
from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.manager import LogManager
from tests.unit.test_client import TinyBroker

TID = "tx"
MAX_TIMEOUT = 60_000
EXPIRATION = 600_000
SHORT_MAX = 32767
TXN_TP = TopicPartition(TXN_TOPIC, 0)
PARTS = [("t", 0), ("t", 1), ("t", 2)]
LEADER = 7  # the tiny broker leading the transactions' partitions
S = TxnState
# Kafka's TransactionState.validPreviousStates (PrepareEpochFence is never written here:
# the fence goes straight to PrepareAbort with the bumped epoch).
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
}


def exhausted(epoch: int) -> bool:
    return epoch >= SHORT_MAX - 1  # TransactionMetadata.isEpochExhausted


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def monotonic_ms(self) -> int:
        return self.now

    def wall_ms(self) -> int:
        return self.now


class Outlets:
    """The controller channel and the replica fetchers: nothing is sent anywhere."""

    def submit(self, tp: Any, change: Any, callback: Any) -> None:
        pass

    def add_partition(self, tp: Any, leader_id: int) -> None:
        pass

    def remove_partition(self, tp: Any) -> None:
        pass


@dataclass
class Sent:
    kind: str
    task: asyncio.Task
    expected: set[object]  # error codes Kafka answers; "write": NONE once the state is written
    client: int | None = None
    gives: tuple[int | None, int] | None = None  # InitProducerId: (id, None = a new one; epoch)
    old_client: bool = False  # a version before PRODUCER_FENCED: INVALID_PRODUCER_EPOCH instead


@dataclass
class Seen:
    """The coordinator's metadata as last observed."""

    producer_id: int
    producer_epoch: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]

    @classmethod
    def of(cls, m: TxnMetadata) -> Seen:
        return cls(m.producer_id, m.producer_epoch, m.state, frozenset(m.partitions))


class Recorded(dict):
    """The coordinator's transactional-id cache, recording each metadata made current
    (background completions included) for the transition checks."""

    def __init__(self, on_set: Any) -> None:
        super().__init__()
        self.on_set = on_set

    def __setitem__(self, key: str, value: TxnMetadata) -> None:
        super().__setitem__(key, value)
        self.on_set(value)


class TxnModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = tempfile.mkdtemp(prefix="txnmodel")
        self.clock = Clock()
        self.next_pid = 1000
        self.clients: list[tuple[int, int]] = []  # producer instances: (id, epoch) they were given
        self.sent: list[Sent] = []
        self.marker_requests: list[dict[str, Any]] = []  # WriteTxnMarkers as the partition leader got them
        self.marker_faults: list[str] = []
        self.faults: list[str] = []
        self.transitions: list[str] = []
        self.seen: Seen | None = None
        self.reloading = False  # a failover's load: not a transition
        self.ongoing_pid: int | None = None  # whose partitions the open transaction holds
        # Kafka's lastProducerEpoch, kept here by Kafka's rules (not read from the
        # coordinator): it decides which KIP-360 retries are fenced.
        self.last_epoch = -1
        self.leader_epoch = 1
        self.lagging = False
        self.gate = asyncio.Event()
        self.gate.set()
        self.tb = TinyBroker(LEADER)
        self.tb.handlers[ApiKey.WRITE_TXN_MARKERS] = self._on_markers
        self.loop.run_until_complete(self.tb.start())

    # -- set-up --------------------------------------------------------------------------
    @initialize(lagging=st.booleans(), start_epoch=st.sampled_from([None, None, 5, SHORT_MAX - 3, SHORT_MAX - 2]))
    def setup(self, lagging: bool, start_epoch: int | None) -> None:
        """A coordinator leading `__transaction_state`-0; with start_epoch, the log already
        holds the transactional id (a producer that bumped its epoch that far)."""
        self.lagging = lagging
        cfg = BrokerConfig.from_props({
            "broker.id": "1", "log.dirs": self.tmp, "transaction.state.log.num.partitions": "1",
            "transaction.max.timeout.ms": str(MAX_TIMEOUT),
            "transactional.id.expiration.ms": str(EXPIRATION)})
        self.lm = LogManager([self.tmp], LogConfig())
        self.md = MetadataCache()
        self.md.brokers[LEADER] = BrokerInfo(LEADER, "127.0.0.1", self.tb.port)
        self.md.topics[TXN_TOPIC] = TopicInfo(TXN_TOPIC, uuid.uuid4(), {0: PartitionInfo(TXN_TOPIC, 0, 1, 1, [1], [1])})
        for topic, n in (("t", 3), (OFFSETS_TOPIC, 1)):
            self.md.topics[topic] = TopicInfo(topic, uuid.uuid4(), {
                i: PartitionInfo(topic, i, LEADER, 1, [LEADER], [LEADER]) for i in range(n)})
        out = Outlets()
        self.rm = ReplicaManager(1, LogStorage(self.lm, cfg), out, out, self.clock,
                                 internal_topics=frozenset({TXN_TOPIC}),
                                 known_partition=lambda tp: self.md.partition(tp.topic, tp.partition) is not None)
        self.rm.broker_epoch = 50

        async def new_producer_id() -> int:
            self.next_pid += 1
            return self.next_pid

        self.svc = TransactionCoordinatorService(cfg, self.md, self.rm, None, self.clock,  # type: ignore[arg-type]
                                                 new_producer_id)
        self.svc.txns = Recorded(self.transition)
        self.rm.add_listener(self.svc.on_partition_changed)
        if start_epoch is not None:
            lg = self.lm.get_or_create_log(TXN_TOPIC, 0)
            m = TxnMetadata(TID, 500, start_epoch, 10_000, S.COMPLETE_COMMIT, set(), -1, self.clock.now)
            lg.append_as_leader(memoryview(build_batch([(encode_key(TID), encode_value(m))], self.clock.now)),
                                0, self.clock.now)
            self.clients.append((500, start_epoch))
            self.next_pid = 1000
        self.lead()
        self.observe()

    def teardown(self) -> None:
        try:
            if hasattr(self, "svc"):
                self.gate.set()
                self.settle()
                self.svc.shutdown()  # closes its connections: the tiny broker's readers end
            self.run(self.tb.stop())
            for _ in range(20):
                if all(t.done() for t in asyncio.all_tasks(self.loop)):
                    break
                self.run(asyncio.sleep(0.001))
            rest = asyncio.all_tasks(self.loop)
            for task in rest:
                task.cancel()

            async def cancelled() -> None:
                await asyncio.gather(*rest, return_exceptions=True)

            self.run(cancelled())
        finally:
            self.loop.close()
            if hasattr(self, "lm"):
                self.lm.shutdown()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- plumbing ------------------------------------------------------------------------
    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def pump(self, n: int = 5) -> None:
        for _ in range(n):
            self.run(asyncio.sleep(0))

    def lead(self) -> None:
        isr = (1, 2) if self.lagging else (1,)

        async def order() -> None:
            err, res = self.rm.become_leader_or_follower(
                1, 50, [PartitionOrder(TXN_TP, 1, self.leader_epoch, isr, (1, 2), self.leader_epoch)], {})
            assert err is E.NONE and res[TXN_TP] is E.NONE

        self.run(order())
        self.wait_for(lambda: self.svc._owned.get(0) is True, "the partition to load")

    def wait_for(self, done: Any, what: str, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"gave up waiting for {what}"
            self.run(asyncio.sleep(0.0005))

    def pending_writes(self) -> bool:
        return len(self.rm.produce_purgatory) > 0

    def settle(self) -> None:
        """Let everything run that can without the test's say: a prepared transaction
        gets its markers and completes unless the markers are held or its completion
        waits for replication."""
        def quiet() -> bool:
            m = self.svc.txns.get(TID)
            busy = m is not None and m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and self.gate.is_set() \
                and not self.pending_writes()
            return not busy and all(s.task.done() or self.pending_writes() for s in self.sent)

        self.pump()
        self.wait_for(quiet, "a prepared transaction to complete (markers allowed)")
        self.pump()

    async def _on_markers(self, req: Request) -> dict[str, Any]:
        await self.gate.wait()
        m = self.svc.txns.get(TID)
        for mk in req.body["markers"]:
            self.marker_requests.append(mk)
            parts = {(t["name"], i) for t in mk["topics"] for i in t["partition_indexes"]}
            want = S.PREPARE_COMMIT if mk["transaction_result"] else S.PREPARE_ABORT
            if m is None or m.state is not want or (mk["producer_id"], mk["producer_epoch"]) != (
                    m.producer_id, m.producer_epoch) or not parts <= m.partitions:
                self.marker_faults.append(f"markers {mk} while the coordinator holds {m}")
            if mk["producer_id"] != self.ongoing_pid:
                self.marker_faults.append(
                    f"markers of producer {mk['producer_id']} end a transaction of producer {self.ongoing_pid}")
        return {"markers": [{"producer_id": mk["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": i, "error_code": 0} for i in t["partition_indexes"]]}
            for t in mk["topics"]]} for mk in req.body["markers"]]}

    def request(self, key: ApiKey, version: int, body: dict[str, Any]) -> Request:
        return Request(key, version, 1, "model", body, 0)

    def send(self, kind: str, coro: Any, expected: set[object], client: int | None = None,
             gives: tuple[int | None, int] | None = None, old_client: bool = False) -> None:
        self.sent.append(Sent(kind, self.loop.create_task(coro), expected, client, gives, old_client))
        self.pump()
        self.collect()

    def write_in_flight(self) -> bool:
        return any(not s.task.done() for s in self.sent)

    def collect(self) -> None:
        """Answers of finished requests, against what Kafka answers."""
        for s in [s for s in self.sent if s.task.done()]:
            self.sent.remove(s)
            body = s.task.result()
            if s.kind == "timer":
                continue
            code = E(body["error_code"]) if "error_code" in body else E(
                body["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"])
            allowed = {E.NONE if x == "write" else x for x in s.expected}
            if s.old_client and E.PRODUCER_FENCED in allowed:
                allowed = allowed - {E.PRODUCER_FENCED} | {E.INVALID_PRODUCER_EPOCH}
            assert code in allowed, f"{s.kind} answered {code.name}, Kafka answers {allowed} ({s.expected})"
            if s.kind == "init" and code is E.NONE:
                pair = (body["producer_id"], body["producer_epoch"])
                assert s.gives is not None
                pid, epoch = s.gives
                assert pair[1] == epoch and (pair[0] == pid if pid is not None else pair[0] not in (
                    c[0] for c in self.clients)), f"InitProducerId gave {pair}, Kafka gives {s.gives}"
                if s.client is None:
                    self.clients.append(pair)
                else:
                    self.clients[s.client] = pair
        self.observe()

    # -- the oracle (Kafka's TransactionCoordinator) ---------------------------------------
    def current(self) -> TxnMetadata | None:
        return self.svc.txns.get(TID)

    def expected_init(self, timeout: int, expected: tuple[int, int] | None
                      ) -> tuple[set[object], tuple[int | None, int] | None]:
        """Kafka's handleInitProducerId / prepareInitProducerIdTransit: the codes, and for
        a write the (id, epoch) it gives (id None: a new one). Keeps lastProducerEpoch."""
        if timeout <= 0 or timeout > MAX_TIMEOUT:
            return {E.INVALID_TRANSACTION_TIMEOUT}, None
        m = self.current()
        if self.pending_writes():  # Kafka's pendingTransitionInProgress (a first state too)
            return {E.CONCURRENT_TRANSACTIONS}, None
        if m is None:
            self.last_epoch = -1
            return {"write", "new"}, (None, 0)
        if expected is not None and expected[0] != m.producer_id:
            return {E.PRODUCER_FENCED}, None  # (a retry after an id rotation is not modelled)
        if expected is not None and not (expected[1] == m.producer_epoch or 0 <= expected[1] == self.last_epoch) \
                and m.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            # Deliberately stricter than Kafka, which checks this epoch only once the
            # transaction is over: it answers CONCURRENT_TRANSACTIONS first and, while one
            # is open, aborts it with an epoch bump, so a zombie fences the live producer.
            return {E.PRODUCER_FENCED}, None
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return {E.CONCURRENT_TRANSACTIONS}, None
        if m.state is S.ONGOING:
            # prepareFenceProducerEpoch: the open transaction is aborted with epoch + 1 (the
            # same producer id, even to Short.MaxValue); the client retries.
            self.last_epoch = -1
            return {E.CONCURRENT_TRANSACTIONS}, None
        epoch = m.producer_epoch
        if exhausted(epoch) and (expected is None or expected[1] == epoch):
            self.last_epoch = epoch if expected is not None else -1  # prepareProducerIdRotation
            return {"write"}, (None, 0)
        if expected is None:
            self.last_epoch = -1  # a new instance: older ones cannot come back (KIP-360)
            return {"write"}, (m.producer_id, epoch + 1)
        if expected[1] == epoch:
            self.last_epoch = epoch
            return {"write"}, (m.producer_id, epoch + 1)
        if expected[1] == self.last_epoch and expected[1] >= 0:
            return {"write"}, (m.producer_id, epoch)  # a retry of a bump it never got: no new bump
        return {E.PRODUCER_FENCED}, None

    def expected_producer(self, pid: int, epoch: int) -> set[object] | None:
        m = self.current()
        if m is None or m.producer_id != pid:
            return {E.INVALID_PRODUCER_ID_MAPPING}
        if m.producer_epoch != epoch:
            return {E.PRODUCER_FENCED}
        if self.pending_writes():  # a state write in flight (the coordinator's own ones too)
            return {E.CONCURRENT_TRANSACTIONS}
        return None

    def expected_add(self, pid: int, epoch: int, parts: set[tuple[str, int]]) -> set[object]:
        err = self.expected_producer(pid, epoch)
        if err:
            return err
        m = self.current()
        assert m is not None
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return {E.CONCURRENT_TRANSACTIONS}
        if m.state is S.ONGOING and parts <= m.partitions:
            return {E.NONE}
        return {"write"}

    def expected_end(self, pid: int, epoch: int, commit: bool) -> set[object]:
        err = self.expected_producer(pid, epoch)
        if err:
            return err
        m = self.current()
        assert m is not None
        s = m.state
        if s is S.ONGOING:
            return {"write"}
        if (s, commit) in ((S.COMPLETE_COMMIT, True), (S.COMPLETE_ABORT, False)):
            return {E.NONE}
        if (s, commit) in ((S.PREPARE_COMMIT, True), (S.PREPARE_ABORT, False)):
            return {E.CONCURRENT_TRANSACTIONS}
        return {E.INVALID_TXN_STATE}  # EndTxn v0-3 in Empty too (TV2's empty abort is not served)

    # -- clients --------------------------------------------------------------------------
    def who(self, i: int, how: str) -> tuple[int | None, tuple[int, int]]:
        if not self.clients:
            return None, (4242, 0)
        c = len(self.clients) - 1 if i % 3 else i % len(self.clients)  # mostly the newest instance
        pid, epoch = self.clients[c]
        if how == "older":
            epoch -= 1
        elif how == "newer":
            epoch += 1
        elif how == "other_id":
            pid += 1
        return c, (pid, epoch)

    @rule(timeout=st.sampled_from([10_000, 10_000, 30_000, 0, MAX_TIMEOUT + 1]), version=st.sampled_from([4, 4, 1]))
    def init_new(self, timeout: int, version: int = 4) -> None:
        """A producer instance starts: InitProducerId with no id or epoch."""
        expected, gives = self.expected_init(timeout, None)
        body = {"transactional_id": TID, "transaction_timeout_ms": timeout, "producer_id": -1, "producer_epoch": -1}
        self.send("init", self.svc.init_producer_id(self.request(ApiKey.INIT_PRODUCER_ID, version, body)), expected,
                  None, gives, version < 4)

    @rule(i=st.integers(0, 100), how=st.sampled_from(["own", "own", "older", "other_id"]))
    def init_recover(self, i: int, how: str) -> None:
        """KIP-360: a producer instance recovering from an abortable error re-initialises
        with the id and epoch it has."""
        c, (pid, epoch) = self.who(i, how)
        expected, gives = self.expected_init(10_000, (pid, epoch))
        body = {"transactional_id": TID, "transaction_timeout_ms": 10_000, "producer_id": pid, "producer_epoch": epoch}
        self.send("init", self.svc.init_producer_id(self.request(ApiKey.INIT_PRODUCER_ID, 4, body)), expected,
                  c if how == "own" else None, gives)

    @rule(i=st.integers(0, 100), how=st.sampled_from(["own", "own", "own", "older", "newer", "other_id"]),
          parts=st.sets(st.sampled_from(PARTS), min_size=1), version=st.sampled_from([3, 3, 1]))
    def add_partitions(self, i: int, how: str, parts: set[tuple[str, int]], version: int = 3) -> None:
        _c, (pid, epoch) = self.who(i, how)
        expected = self.expected_add(pid, epoch, parts)
        if "write" in expected:
            self.ongoing_pid = pid
        body = {"v3_and_below_transactional_id": TID, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": t, "partitions": sorted(p for tt, p in parts if tt == t)}
                                        for t in sorted({t for t, _ in parts})]}
        self.send("add", self.svc.add_partitions_to_txn(self.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, body)),
                  expected, old_client=version < 2)

    @rule(i=st.integers(0, 100), how=st.sampled_from(["own", "own", "older"]))
    def add_offsets(self, i: int, how: str) -> None:
        _c, (pid, epoch) = self.who(i, how)
        expected = self.expected_add(pid, epoch, {(OFFSETS_TOPIC, 0)})
        if "write" in expected:
            self.ongoing_pid = pid
        body = {"transactional_id": TID, "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
        self.send("add_offsets", self.svc.add_offsets_to_txn(self.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, body),
                                                             lambda _g: 0), expected)

    @rule(i=st.integers(0, 100), how=st.sampled_from(["own", "own", "own", "older", "other_id"]), commit=st.booleans(),
          version=st.sampled_from([3, 3, 1]))
    def end_txn(self, i: int, how: str, commit: bool, version: int = 3) -> None:
        _c, (pid, epoch) = self.who(i, how)
        expected = self.expected_end(pid, epoch, commit)
        body = {"transactional_id": TID, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
        self.send("end", self.svc.end_txn(self.request(ApiKey.END_TXN, version, body)), expected,
                  old_client=version < 2)

    @rule(commit=st.booleans(), offsets=st.booleans())
    def transaction(self, commit: bool, offsets: bool) -> None:
        """The newest instance runs a whole transaction (each step checked as above)."""
        self.add_partitions(1, "own", {PARTS[0], PARTS[1]})
        if offsets:
            self.add_offsets(1, "own")
        self.end_txn(1, "own", commit)

    # -- the environment ----------------------------------------------------------------------
    @precondition(lambda self: self.lagging)
    @rule()
    def replicate(self) -> None:
        """The lagging replica fetches to the log end: pending state writes complete."""
        leo = self.rm.partitions[TXN_TP].log.log_end_offset
        got: list[Any] = []
        self.rm.fetch_messages(FetchParams(2, 0, 1, 1 << 20), [PartitionFetch(TXN_TP, leo, 1 << 20)], got.append)
        self.pump()
        self.settle()
        self.collect()

    @rule(hold=st.booleans())
    def markers(self, hold: bool) -> None:
        """The partitions' leader stops answering WriteTxnMarkers, or answers again."""
        if hold:
            self.gate.clear()
        else:
            self.gate.set()
        self.settle()
        self.collect()

    @rule(ms=st.sampled_from([1000, 9_000, 10_001, 30_001, EXPIRATION]))
    def time_passes(self, ms: int) -> None:
        """The abort-timed-out-transactions and transactional-id-expiration timers run."""
        self.clock.now += ms
        m = self.current()
        due = m is not None and m.state is S.ONGOING and not m.pending and m.start_ms + m.timeout_ms < self.clock.now
        if due:  # Kafka's abortTimedOutTransactions fences the producer: epoch + 1, abort
            self.last_epoch = -1
        self.send("timer", self.svc.abort_timed_out(), set())
        if due:
            nxt = self.current()
            assert nxt is not m or self.pending_writes(), f"a timed-out transaction was not aborted: {nxt}"
        self.settle()
        self.send("timer", self.svc.expire_transactional_ids(), set())
        self.settle()
        self.collect()

    @precondition(lambda self: not self.write_in_flight() and not self.pending_writes())
    @rule()
    def failover(self) -> None:
        """Leadership moves away and back: the new coordinator rebuilds the state from the
        log and finishes what was prepared."""
        before = self.current()
        self.gate.set()

        async def follow() -> None:
            self.leader_epoch += 1
            self.rm.become_leader_or_follower(
                1, 50, [PartitionOrder(TXN_TP, 2, self.leader_epoch, (2,), (1, 2), self.leader_epoch)], {})

        self.run(follow())
        assert TID not in self.svc.txns
        self.leader_epoch += 1
        self.reloading = True
        self.lead()
        self.reloading = False
        self.last_epoch = -1  # not in the log value (v0): Kafka reloads it as -1
        after = self.current()
        if before is None:
            assert after is None
        else:  # the same state; a prepared one may have completed since (markers let through)
            assert after is not None, before
            done = {S.PREPARE_COMMIT: S.COMPLETE_COMMIT, S.PREPARE_ABORT: S.COMPLETE_ABORT}.get(before.state)
            assert Seen.of(after) == Seen.of(before) or done is not None and Seen.of(after) == Seen(
                before.producer_id, before.producer_epoch, done, frozenset()), (before, after)
        self.settle()
        self.collect()

    # -- invariants -----------------------------------------------------------------------
    def observe(self) -> None:
        m = self.current()
        if m is None and self.seen is not None and not self.write_in_flight():
            # Expired (transactional.id.expiration.ms): the next one starts afresh.
            self.seen = None
            self.last_epoch = -1

    def transition(self, m: TxnMetadata) -> None:
        """Each metadata the coordinator makes current (from a request or a background
        completion): a legal transition from the last. Faults are kept for the invariant
        (raising here would fail the coordinator's task, not the test)."""
        new = Seen.of(m)
        old, self.seen = self.seen, new
        if self.reloading or old is None:
            return
        if old.state not in VALID_PREVIOUS[new.state]:
            self.faults.append(f"illegal transition {old} -> {new}")
        if new.producer_id == old.producer_id:
            if new.producer_epoch < old.producer_epoch:
                self.faults.append(f"epoch went back: {old} -> {new}")
        elif not (exhausted(old.producer_epoch) and new.state is S.EMPTY):
            # A new producer id only when the epochs ran out, never mid-transaction.
            self.faults.append(f"producer id changed: {old} -> {new}")
        if new.producer_epoch > SHORT_MAX:
            self.faults.append(f"epoch overflow: {new}")

    @invariant()
    def markers_end_the_right_transaction(self) -> None:
        assert not self.marker_faults, self.marker_faults

    @invariant()
    def transitions_are_legal(self) -> None:
        assert not self.faults, self.faults

    @invariant()
    def state_is_what_the_log_says(self) -> None:
        """The cache is the last state written (a failover reloads exactly it)."""
        if not hasattr(self, "svc") or self.write_in_flight() or self.pending_writes():
            return
        self.observe()
        lg: Any = self.rm.partitions[TXN_TP].log  # a storage.Log
        last: TxnMetadata | None = None
        offset = 0
        while offset < lg.log_end_offset:
            sl = lg.read(offset, 1 << 20, lg.log_end_offset, min_one_batch=True)
            data = lg.read_bytes(sl.fd, sl.position, sl.size)
            for b in _core.scan_batches(data)[0]:
                for o, key, value in iter_records(data[b.position:b.position + b.size]):
                    if o >= offset and key is not None and decode_key(key) == TID:
                        last = None if value is None else decode_value(TID, value)
                offset = b.base_offset + b.last_offset_delta + 1
        m = self.current()
        if m is None:
            assert last is None or last.state is S.DEAD, last
        else:
            assert last is not None and Seen.of(last) == Seen.of(m), f"cache {m} but the log says {last}"


TxnModel.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestTxnModel = TxnModel.TestCase


# -- sequences the model found, as plain tests -------------------------------------------

def _model(lagging: bool) -> TxnModel:
    m = TxnModel()
    m.setup(lagging=lagging, start_epoch=None)
    return m


def _check(m: TxnModel) -> None:
    m.markers_end_the_right_transaction()
    m.transitions_are_legal()
    m.state_is_what_the_log_says()


def test_a_second_first_init_producer_id_retries_while_the_first_is_written() -> None:
    # Two InitProducerId of a new transactional id, the first still being written: the
    # second took a producer id of its own, wrote its state after the first's and was
    # answered NOT_COORDINATOR, leaving the log (what a failover reloads) saying another
    # producer id than the coordinator's cache. Kafka answers CONCURRENT_TRANSACTIONS.
    m = _model(lagging=True)
    try:
        m.init_new(10_000)
        assert len(m.sent) == 1 and not m.sent[0].task.done()  # waits for replication
        second = m.loop.create_task(m.svc.init_producer_id(m.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": TID, "transaction_timeout_ms": 10_000, "producer_id": -1, "producer_epoch": -1})))
        m.pump()
        assert second.done() and second.result()["error_code"] == E.CONCURRENT_TRANSACTIONS
        m.replicate()
        assert not m.sent and m.clients == [(1001, 0)]
        _check(m)
    finally:
        m.teardown()


def test_requests_wait_while_an_expired_transactional_id_is_being_removed() -> None:
    # transactional.id.expiration.ms: the tombstone's write did not mark the id pending,
    # so an InitProducerId meanwhile bumped the epoch and wrote after the tombstone; the
    # cache then dropped the id the log had just given a state again (and the client got
    # NOT_COORDINATOR). Kafka's prepareDead makes it pending: CONCURRENT_TRANSACTIONS.
    m = _model(lagging=True)
    try:
        m.init_new(10_000)
        m.replicate()
        m.clock.now += EXPIRATION
        m.send("timer", m.svc.expire_transactional_ids(), set())
        current = m.current()
        assert m.pending_writes() and current is not None and current.pending
        m.init_new(10_000)  # the model expects CONCURRENT_TRANSACTIONS, answered at once
        assert [s.kind for s in m.sent] == ["timer"]
        m.replicate()
        assert m.current() is None
        _check(m)
    finally:
        m.teardown()
