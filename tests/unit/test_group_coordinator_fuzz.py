"""The group coordinator against hostile and buggy clients: random sequences of every
group request of both protocols (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ConsumerGroupHeartbeat, OffsetCommit, DescribeGroups, DeleteGroups, OffsetDelete) on a few
group ids, with member ids, epochs, generations, instance ids, protocol types, embedded
protocols (valid, truncated, garbage), subscriptions, regexes, assignors and owned
partitions drawn from what a client could send, interleaved with timers, failed record
writes and coordinator failovers. Whatever arrives:
- every call returns an answer (no exception escapes the coordinator), never
  UNKNOWN_SERVER_ERROR;
- a KIP-848 group never has a partition held by two members, and its index of who holds
  what agrees with its members;
- a new coordinator replaying the records has every KIP-848 group the old one had, each
  Stable classic group as it was, and every committed offset (expired, deleted ones gone).
Joined members usually sync next, as clients do, so classic groups reach Stable."""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

import pytest

from kafkarepl.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    TopicsView,
)
from kafkarepl.coordinator.consumer_protocol import SUBSCRIPTION, write_assignment
from kafkarepl.coordinator.coordinator import GroupCoordinator
from kafkarepl.coordinator.group import (
    Group,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResponse,
    Parked,
    StoreRequest,
)
from kafkarepl.coordinator.group_records import encode_group_key, encode_group_value
from kafkarepl.coordinator.offsets import OffsetAndMetadata, encode_key, encode_value
from kafkarepl.errors import ErrorCode as E
from tests.unit.test_consumer_group_protocol import state_of

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = TopicsView(1, {"a": (T1, 6), "b": (T2, 3)})
GROUPS = ("g", "h")
POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


class Fuzzer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.policy = self.rng.choice(POLICIES)
        self.log: list[tuple[bytes | None, bytes | None]] = []
        self.topics = TOPICS
        self.now = 0
        self.member_ids: list[str] = ["", "ghost"]
        self.unwritten: set[str] = set()  # groups whose last records write failed
        self.inflight: list[tuple[str, Any, int]] = []  # (group, its records or a StoreRequest, when made)
        self.seq = 0  # settle() calls: when a write was made
        self.failed_at: dict[str, int] = {}  # group -> the settle() at which a write of it failed
        self.parked: dict[int, str] = {}  # JoinGroup token -> its group
        self.joined: list[tuple[str, JoinResponse]] = []  # answers a well-behaved member syncs after
        self.unstored: set[str] = set()  # classic groups whose last record write failed
        self.failing = 0  # steps left of a spell in which every write fails (too few replicas)
        self.c = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=self.rng.choice([0, 0, 3000])), 1,
                             consumer_config=ConsumerGroupConfig(migration_policy=self.policy,
                                                                 max_size=self.rng.choice([2, 1000])))
        c.begin_loading(0)
        c.load(0, self.log, now_ms=self.now, topics=self.topics)
        c.finish_loading(0)
        return c

    # ------------------------------------------------------------ what a client sends
    def pick(self, *options: Any) -> Any:
        return self.rng.choice(options)

    def member_id(self) -> str:
        return self.rng.choice(self.member_ids + [str(uuid.UUID(int=self.rng.getrandbits(128)))])

    def epoch(self, gid: str, mid: str) -> int:
        cg = self.c.consumer_groups.get(gid)
        g = self.c.groups.get(gid)
        known = [cg.members[mid].epoch] if cg is not None and mid in cg.members else []
        known += [g.generation_id] if g is not None else []
        return self.rng.choice([-2, -1, 0, 0, 1, 2, 7, 2**31 - 1, *known, *known, *known])

    def topic_names(self) -> list[str]:
        return self.rng.sample(["a", "b", "nope", "__consumer_offsets", ""], self.rng.randint(0, 3))

    def subscription(self) -> bytes:
        kind = self.rng.random()
        if kind < 0.1:
            return self.rng.randbytes(self.rng.randint(0, 40))  # garbage
        owned = [{"topic": t, "partitions": sorted(self.rng.sample(range(-1, 8), self.rng.randint(0, 3)))}
                 for t in self.topic_names()]
        good = SUBSCRIPTION.write(self.pick(0, 1, 3), {"topics": self.topic_names(), "user_data": None,
                                                     "owned_partitions": owned, "generation_id": -1,
                                                     "rack_id": None})
        return good[: self.rng.randint(0, len(good) - 1)] if kind < 0.2 else good  # truncated

    def assignment(self) -> bytes:
        if self.rng.random() < 0.15:
            return self.rng.randbytes(self.rng.randint(0, 30))
        return write_assignment(self.pick(0, 1, 3), {t: frozenset(self.rng.sample(range(8), self.rng.randint(0, 3)))
                                                     for t in self.topic_names() if t})

    def owned(self) -> dict[uuid.UUID, frozenset[int]] | None:
        if self.rng.random() < 0.3:
            return None
        return {self.pick(T1, T2, uuid.UUID(int=9)): frozenset(self.rng.sample(range(-1, 8), self.rng.randint(0, 4)))
                for _ in range(self.rng.randint(0, 2))}

    # ------------------------------------------------------------------- the calls
    def settle(self, out: Any) -> Any:
        """Write what the call asked to write (now and then a write fails) and take the
        answers of parked calls."""
        self.seq += 1
        self.queue()
        # appends complete in order, now or some calls later (requests meet writes in flight)
        self.complete(len(self.inflight) if self.rng.random() < 0.7 else self.rng.randint(0, len(self.inflight)))
        answers = dict(self.c.drain())
        for token, res in answers.items():
            self.check(res.error)
            self.learn(getattr(res, "member_id", ""))
            joined = self.parked.pop(token, None)
            if joined is not None and isinstance(res, JoinResponse) and res.error is E.NONE:
                self.joined.append((joined, res))
        return answers.get(out.token) if isinstance(out, Parked) else out

    def queue(self) -> None:
        """What the coordinator asked to write, in flight in the service's order: a KIP-848
        group's records are appended at once, a classic group's record by a task that
        starts right after."""
        stores = self.c.drain_stores()
        self.inflight += [(gid, written, self.seq) for gid, written in self.c.drain_writes()]
        self.inflight += [(s.group_id, s, self.seq) for s in stores]

    def land(self, gid: str, written: Any) -> None:
        if isinstance(written, StoreRequest):  # a classic group's record
            self.log.append((encode_group_key(gid), None if written.snapshot is None
                             else encode_group_value(written.snapshot)))
        else:
            self.log.extend(written)

    def complete(self, n: int, lost: bool = False) -> None:
        """The first n writes in flight land or fail (the service's callbacks: write_failed,
        or write_done for a group's last write in flight); `lost`: the coordinator is gone,
        no callbacks."""
        for _ in range(n):
            gid, written, seq = self.inflight.pop(0)
            failed = self.failing > 0 or self.rng.random() < 0.03
            if isinstance(written, StoreRequest):
                if not failed and not lost:
                    self.land(gid, written)
                if not lost:
                    self.c.store_done(gid, written.store_id, E.NOT_COORDINATOR if failed else E.NONE, self.now)
                (self.unstored.add if failed or lost else self.unstored.discard)(gid)
            elif lost:
                self.unwritten.add(gid)
            elif failed:
                self.c.write_failed(gid)
                self.failed_at[gid] = self.seq
                self.unwritten.add(gid)  # the client was answered an error: not on record
            else:
                self.land(gid, written)
                if all(g != gid or isinstance(w, StoreRequest) for g, w, _s in self.inflight):
                    self.c.write_done(gid)
                if seq > self.failed_at.get(gid, -1):  # made after the failure: a rewrite of it all
                    self.unwritten.discard(gid)

    def learn(self, mid: str | None) -> None:
        if mid and mid not in self.member_ids:
            self.member_ids.append(mid)

    @staticmethod
    def check(code: Any) -> None:
        assert isinstance(code, E), code
        assert code is not E.UNKNOWN_SERVER_ERROR

    def step(self) -> None:
        c, gid, now = self.c, self.pick(*GROUPS, ""), self.now
        mid, instance = self.member_id(), self.pick(None, None, "i1", "i2")
        op = self.rng.randrange(12)
        if self.joined and self.rng.random() < 0.5:  # a joined member syncs, as a client does
            gid, joined = self.joined.pop(self.rng.randrange(len(self.joined)))
            assignments = {m: write_assignment(0, {"a": frozenset(range(6))} if i == 0 else {})
                           for i, (m, _i, _md) in enumerate(joined.members)}
            res = self.settle(c.sync(gid, joined.member_id, None, joined.generation_id, joined.protocol_type,
                                     joined.protocol_name, assignments, now))
            if res is not None:
                self.check(res.error)
        elif op == 0:
            if self.rng.random() < 0.5:  # as a consumer joins: it forms classic groups of several members
                sub = SUBSCRIPTION.write(1, {"topics": self.pick(["a"], ["a", "b"]), "user_data": None,
                                             "owned_partitions": []})
                r = JoinRequest(self.pick("", "", mid), "client", 10000, 20000, "consumer",
                                [("cooperative-sticky", sub), ("range", sub)], group_instance_id=instance,
                                require_known_member_id=False)
            else:
                r = JoinRequest(mid, "client", self.pick(10000, 5000, 45000), self.pick(20000, 0, 100),
                                self.pick("consumer", "consumer", "connect", ""),
                                [(self.pick("range", "cooperative-sticky", "roundrobin", "x"), self.subscription())
                                 for _ in range(self.rng.randint(0, 2))],
                                group_instance_id=instance, require_known_member_id=self.rng.random() < 0.5)
            out = c.join(gid, r, now, self.topics)
            if isinstance(out, Parked):
                self.parked[out.token] = gid
            res = self.settle(out)
            if res is not None:
                self.check(res.error)
                self.learn(res.member_id)
                if not isinstance(out, Parked) and res.error is E.NONE:
                    self.joined.append((gid, res))
        elif op == 1:
            assignments = {self.member_id(): self.assignment() for _ in range(self.rng.randint(0, 2))}
            res = self.settle(c.sync(gid, mid, instance, self.epoch(gid, mid), self.pick("consumer", None, "connect"),
                                     self.pick("range", "cooperative-sticky", None, "x"), assignments, now))
            if res is not None:
                self.check(res.error)
        elif op in (2, 3, 4):
            joining = self.rng.random() < 0.3
            r = HeartbeatRequest(
                mid, 0 if joining else self.epoch(gid, mid), instance, self.pick(None, "r1"),
                self.pick(-1, 0, 20000) if not joining else 20000,
                self.topic_names() if joining or self.rng.random() < 0.2 else None,
                self.pick(None, None, "a|b", ".*", "(", "") if joining or self.rng.random() < 0.1 else None,
                self.pick(None, None, "uniform", "range", "nope"), self.owned(), version=self.pick(0, 1))
            res = self.settle(c.consumer_heartbeat(gid, r, self.topics, now))
            self.check(res.error)
            self.learn(res.member_id)
        elif op == 5:
            self.check(c.heartbeat(gid, mid, instance, self.epoch(gid, mid), now))
        elif op == 6:
            err, codes = self.settle(c.leave(gid, [(self.member_id(), self.pick(None, "i1", "i2"))
                                                   for _ in range(self.rng.randint(1, 2))], now, self.topics))
            for code in [err, *codes]:
                self.check(code)
        elif op == 7:
            err = c.validate_commit(gid, mid, instance, self.epoch(gid, mid), now, self.pick(1, 7, 9))
            self.check(err)
            if err is E.NONE:
                offsets = {(self.pick("a", "b"), self.rng.randrange(3)): OffsetAndMetadata(self.rng.randrange(100))}
                self.log.extend((encode_key(gid, *tp), encode_value(o)) for tp, o in offsets.items())
                self.check(c.apply_commit(gid, offsets))
        elif op == 8:
            err, _ = c.describe(gid)
            self.check(err)
            self.check(c.list_groups()[0])
        elif op == 9:
            err, offsets = c.prepare_delete(gid)
            self.check(err)
            if err is E.NONE:
                self.log.extend([(encode_key(gid, t, i), None) for t, i in offsets]
                                + [(encode_group_key(gid), None)] + c.consumer_group_tombstones(gid))
                self.check(c.finish_delete(gid))
        elif op == 11:  # offsets.retention.minutes
            for part in c.expire_offsets(now, now, self.pick(0, 5000, 10**9)).values():
                self.log.extend((encode_key(gid_, *tp), None) for gid_, tp in part)
        else:
            err, codes, deletable = c.prepare_offset_delete(gid, [("a", 0), ("b", 1), ("nope", 0)])
            self.check(err)
            for code in codes.values():
                self.check(code)
            if deletable:
                self.log.extend((encode_key(gid, *tp), None) for tp in deletable)
                c.apply_offset_delete(gid, deletable)
        self.settle(None)

    def topics_change(self) -> None:
        """A topic created, deleted (and maybe created again: a new id), or given more
        partitions: the groups subscribed to it get new assignments."""
        by_name = dict(self.topics.by_name)
        name = self.pick("a", "b", "c")
        if name in by_name and self.rng.random() < 0.5:
            tid, n = by_name[name]
            by_name[name] = (tid, n + self.rng.randint(1, 3))
        elif name in by_name:
            del by_name[name]
        else:
            by_name[name] = (uuid.UUID(int=self.rng.getrandbits(128)), self.rng.randint(1, 8))
        self.topics = TopicsView(self.topics.version + 1, by_name)

    def tick(self) -> None:
        self.now += self.pick(0, 0, 10, 3000, 12000, 50000)
        self.c.poll(self.now)
        self.settle(None)

    def fail_over(self) -> None:
        old = self.c
        self.settle(None)
        self.queue()
        landed = self.rng.randint(0, len(self.inflight))  # what was in flight: some of it landed
        for gid, written, _seq in self.inflight[:landed]:
            self.land(gid, written)
        self.inflight = self.inflight[landed:]
        self.complete(len(self.inflight), lost=True)
        self.c = self.new_coordinator()
        unwritten, self.unwritten = self.unwritten, set()  # the new coordinator is what the records say
        for gid in old.consumer_groups.keys() | self.c.consumer_groups.keys():
            was, now = old.consumer_groups.get(gid), self.c.consumer_groups.get(gid)
            if gid in unwritten:
                continue
            # neither lost nor brought back from the dead (tombstones whose write failed)
            assert recorded(was) == recorded(now), gid
            if was is not None and now is not None and recorded(was):
                if was._seen_version == self.topics.version:
                    # the topics its target was computed on: their counts are derived from
                    # the target, which covers every partition but after an online upgrade
                    # (the classic members' assignments, as their leader made them: maybe
                    # fewer, maybe partitions that do not exist; the next epoch mends it)
                    assert state_of(now)[:6] == state_of(was)[:6]
                    assert now.topics.keys() <= was.topics.keys()
                    bogus = any(p >= was.topics[t][1] for goal in was.target.values()
                                for t, ps in goal.items() if t in was.topics for p in ps)
                    assert all(now.topics[t][0] == was.topics[t][0] and (bogus or now.topics[t][1] <= was.topics[t][1])
                               for t in now.topics)
                else:  # the new coordinator sees topics the old group had yet to: members alike
                    assert state_of(now)[:2] == state_of(was)[:2] and now.members.keys() == was.members.keys()
        unstored, self.unstored = self.unstored, set()
        for gid, g in old.groups.items():  # a Stable classic group is what its record says
            if g.state is GroupState.STABLE and gid not in unstored and not self.c.consumer_groups.get(gid):
                assert classic_view(self.c.groups.get(gid)) == classic_view(g), gid
        # committed offsets are neither lost nor brought back
        assert offsets_of(self.c) == offsets_of(old)


def settle_consumer_groups(f: Fuzzer) -> None:
    """The KIP-848 groups, once their members behave: a consumer-protocol member
    heartbeats at its epoch, reports what it owns and gives up what it is told to; a
    classic one heartbeats at its generation and, told to rebalance, rejoins reporting
    what it owns and syncs. Each group becomes Stable with every partition of the topics
    its members subscribe to assigned, at the partition counts the cluster has now."""
    for _ in range(40):
        f.now += 100
        for gid, cg in list(f.c.consumer_groups.items()):
            for mid, m in list(cg.members.items()):
                if mid not in cg.members or f.c.consumer_groups.get(gid) is not cg:
                    continue
                if m.classic is None:
                    r = HeartbeatRequest(mid, m.epoch, m.instance_id, owned=dict(m.assigned), version=1)
                    f.check(f.settle(f.c.consumer_heartbeat(gid, r, f.topics, f.now)).error)
                elif f.c.heartbeat(gid, mid, m.instance_id, m.epoch, f.now) is E.REBALANCE_IN_PROGRESS:
                    rejoin_classic(f, gid, cg, m)
    for gid, cg in f.c.consumer_groups.items():
        if not cg.members:
            continue
        assert cg.state == "Stable", gid
        if all(m.classic is not None for m in cg.members.values()):
            # classic members alone do not take topics created since their last JoinGroup
            # (their heartbeat looks at no metadata, as Kafka's; no leader rejoins for them)
            continue
        names = {t for m in cg.members.values() for t in m.subscribed_names} & f.topics.by_name.keys()
        names |= {t for m in cg.members.values() if m.regex for t in f.topics.by_name
                  if not t.startswith("__") and re.fullmatch(m.regex, t)}
        assert names <= cg.topics.keys(), gid
        held = {(tid, p) for m in cg.members.values() for tid, ps in m.assigned.items() for p in ps}
        for t in cg.topics:
            tid, count = f.topics.by_name[t]
            assert {(tid, p) for p in range(count)} <= held, (gid, t)


def settle_classic_groups(f: Fuzzer) -> None:
    """The classic groups, once their members behave: each heartbeats at its generation;
    told to rebalance (or unknown at its generation), it rejoins with its protocols, and
    every member syncs with the generation its JoinGroup answer gave (the leader with an
    assignment for each). Each group becomes Stable (or Empty), every member at the
    group's generation with an assignment from its leader."""
    for _ in range(60):
        f.now += 500
        f.c.poll(f.now)
        f.settle(None)
        while f.joined:  # JoinGroup answers: every member syncs (the leader assigns)
            gid, joined = f.joined.pop(0)
            assignments = {m: write_assignment(0, {}) for m, _i, _md in joined.members}
            f.settle(f.c.sync(gid, joined.member_id, None, joined.generation_id, joined.protocol_type,
                              joined.protocol_name, assignments, f.now))
        for gid, g in list(f.c.groups.items()):
            if f.c.consumer_groups.get(gid) and f.c.consumer_groups[gid].members:
                continue
            for mid, m in list(g.members.items()):
                if m.join_token is not None or m.sync_token is not None:
                    continue  # its JoinGroup or SyncGroup is parked: it waits for the answer
                code = f.c.heartbeat(gid, mid, m.group_instance_id, g.generation_id, f.now)
                f.check(code)
                if code is not E.NONE:
                    r = JoinRequest(mid, m.client_id, m.session_timeout_ms, m.rebalance_timeout_ms, m.protocol_type,
                                    list(m.protocols), group_instance_id=m.group_instance_id)
                    out = f.c.join(gid, r, f.now, f.topics)
                    if isinstance(out, Parked):
                        f.parked[out.token] = gid
                    elif out.error is E.NONE:
                        f.joined.append((gid, out))
                    f.settle(out)
    for gid, g in f.c.groups.items():
        if g.members and not (f.c.consumer_groups.get(gid) and f.c.consumer_groups[gid].members):
            assert g.state is GroupState.STABLE, (gid, g.state)
            assert all(m.join_token is None and m.sync_token is None for m in g.members.values()), gid


def rejoin_classic(f: Fuzzer, gid: str, cg: ConsumerGroup, m: Any) -> None:
    """What a cooperative classic consumer does on REBALANCE_IN_PROGRESS: JoinGroup with
    its subscription and the partitions it owns, then SyncGroup at the generation it got."""
    names = cg.topic_names()
    owned = [{"topic": names[tid], "partitions": sorted(ps)} for tid, ps in m.assigned.items() if tid in names]
    sub = SUBSCRIPTION.write(1, {"topics": sorted(m.subscribed_names), "user_data": None, "owned_partitions": owned})
    r = JoinRequest(m.member_id, m.client_id, m.classic.session_timeout_ms, max(m.rebalance_timeout_ms, 0),
                    "consumer", [(name, sub) for name, _md in m.classic.protocols], group_instance_id=m.instance_id)
    joined = f.settle(f.c.join(gid, r, f.now, f.topics))
    if joined is not None and joined.error is E.NONE:
        f.settle(f.c.sync(gid, m.member_id, m.instance_id, joined.generation_id, "consumer",
                          joined.protocol_name, {}, f.now))


def offsets_of(c: GroupCoordinator) -> dict[str, dict[Any, OffsetAndMetadata]]:
    return {gid: dict(g.offsets) for gid, g in c.groups.items() if g.offsets}


def classic_view(g: Group | None) -> tuple | None:
    if g is None:
        return None
    return (g.state, g.generation_id, g.protocol_type, g.protocol_name,
            {mid: (m.group_instance_id, m.assignment) for mid, m in g.members.items()}, dict(g.static_members))


def recorded(cg: ConsumerGroup | None) -> bool:
    """Whether the group has records to keep (members, or an epoch once joined)."""
    return cg is not None and bool(cg.members or cg.group_epoch)


def assert_holders_agree(cg: ConsumerGroup) -> None:
    held: dict[tuple[uuid.UUID, int], str] = {}
    for m in cg.members.values():
        for a in (m.assigned, m.pending_revocation):
            for tid, ps in a.items():
                for p in ps:
                    assert (tid, p) not in held, f"{(tid, p)} held by {held[(tid, p)]} and {m.member_id}"
                    held[(tid, p)] = m.member_id
    assert cg.owners == held


@pytest.mark.parametrize("seed", range(400))
def test_random_hostile_requests_of_both_protocols_are_answered_and_keep_the_groups_sound(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = random.Random(-seed)  # member ids the coordinator makes up: the same run again for a seed
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=ids.getrandbits(128), version=4))
    f = Fuzzer(seed)
    for _ in range(400):
        roll = f.rng.random()
        f.failing = max(0, f.failing - 1) if roll > 0.02 else f.rng.randint(1, 10)
        if roll < 0.1:
            f.tick()
        elif roll < 0.115:
            f.topics_change()
        elif roll < 0.13:
            f.fail_over()
        else:
            f.step()
        for cg in f.c.consumer_groups.values():
            assert_holders_agree(cg)
    f.fail_over()
    f.failing = 0
    settle_consumer_groups(f)
    settle_classic_groups(f)
