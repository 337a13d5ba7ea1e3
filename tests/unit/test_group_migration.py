"""Online migration between the classic protocol and KIP-848's (Kafka's
`group.consumer.migration.policy`): a classic member and a consumer-protocol member share
a group through a rolling upgrade and back, never owning a partition at the same time."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from kafkarepl.coordinator import consumer_group_records as records
from kafkarepl.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    TopicsView,
)
from kafkarepl.coordinator.consumer_protocol import SUBSCRIPTION, read_assignment, write_assignment
from kafkarepl.coordinator.coordinator import GroupCoordinator
from kafkarepl.coordinator.group import (
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResponse,
    Parked,
    SyncResponse,
)
from kafkarepl.coordinator.group_records import encode_group_key, encode_group_value
from kafkarepl.errors import ErrorCode as E
from tests.unit.test_consumer_group_protocol import state_of

T1 = uuid.UUID(int=1)
TOPICS = TopicsView(1, {"a": (T1, 6)})
ALL = frozenset(range(6))


def coordinator(policy: str = "bidirectional", log: list[tuple[bytes, bytes | None]] | None = None,
                max_size: int = 2**31 - 1) -> GroupCoordinator:
    """A coordinator owning its only partition (loaded from `log`, when given: its records
    kept there); `max_size`: group.consumer.max.size."""
    c = LoggedCoordinator(GroupConfig(initial_rebalance_delay_ms=0), 1,
                          consumer_config=ConsumerGroupConfig(migration_policy=policy, max_size=max_size))
    c.log = [] if log is None else list(log)
    c.begin_loading(0)
    c.load(0, c.log, topics=TOPICS)
    c.finish_loading(0)
    return c


class LoggedCoordinator(GroupCoordinator):
    """A coordinator whose group records go to `log`, in the order the broker appends them."""

    log: list[tuple[bytes, bytes | None]]


def settle(c: GroupCoordinator, out: Any) -> Any:
    """The answer to a call, once the group records it asked for are written."""
    log = getattr(c, "log", [])
    for store in c.drain_stores():
        log.append((encode_group_key(store.group_id),
                    None if store.snapshot is None else encode_group_value(store.snapshot)))
        c.store_done(store.group_id, store.store_id, E.NONE, 0)
    for _, written in c.drain_writes():
        log.extend(written)
    answers = dict(c.drain())
    return answers[out.token] if isinstance(out, Parked) else out


class Classic:
    """A classic consumer: cooperative (reports what it owns when it rejoins, rejoins
    after giving partitions up) or eager (gives everything up before rejoining)."""

    def __init__(self, c: GroupCoordinator, cooperative: bool = True) -> None:
        self.c, self.cooperative = c, cooperative
        self.member_id, self.generation = "", -1
        self.owned: dict[str, frozenset[int]] = {}

    def join(self) -> JoinResponse:
        if not self.cooperative:
            self.owned = {}
        owned = [{"topic": t, "partitions": sorted(p)} for t, p in self.owned.items()]
        sub = SUBSCRIPTION.write(1, {"topics": ["a"], "user_data": None, "owned_partitions": owned})
        r = JoinRequest(self.member_id, "classic", 10000, 20000, "consumer", [("cooperative-sticky", sub)],
                        require_known_member_id=False)
        res = settle(self.c, self.c.join("g", r, 0, TOPICS))
        assert res.error is E.NONE, res
        self.member_id, self.generation = res.member_id, res.generation_id
        return res

    def sync(self, assignments: dict[str, bytes] | None = None) -> SyncResponse:
        res = settle(self.c, self.c.sync("g", self.member_id, None, self.generation, "consumer",
                                         "cooperative-sticky", assignments or {}, 0))
        if res.error is E.NONE:
            self.owned = {t: p for t, p in read_assignment(res.assignment).items() if p}
        return res

    def heartbeat(self, now: int = 0) -> E:
        code = self.c.heartbeat("g", self.member_id, None, self.generation, now)
        assert isinstance(code, E)
        return code

    def rebalance(self) -> None:
        """What the client does on REBALANCE_IN_PROGRESS: rejoin and sync, again while
        a cooperative assignment took partitions away."""
        for _ in range(5):
            before = dict(self.owned)
            self.join()
            assert self.sync().error is E.NONE
            if not self.cooperative or all(self.owned.get(t, frozenset()) >= p for t, p in before.items()):
                return


class Member:
    """A consumer-protocol member."""

    def __init__(self, c: GroupCoordinator, name: str) -> None:
        self.c, self.id, self.epoch = c, name, 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}

    def beat(self) -> E:
        joining = self.epoch == 0
        r = HeartbeatRequest(self.id, self.epoch, rebalance_timeout_ms=20000 if joining else -1,
                             subscribed_topic_names=["a"] if joining else None, owned=dict(self.owned), version=1)
        res = settle(self.c, self.c.consumer_heartbeat("g", r, TOPICS, 0))
        if res.error is E.NONE:
            self.epoch = res.member_epoch
            if res.assignment is not None:
                self.owned = {t: p for t, p in res.assignment.items() if p}
        return res.error

    def leave(self) -> E:
        res = settle(self.c, self.c.consumer_heartbeat("g", HeartbeatRequest(self.id, -1, version=1), TOPICS, 0))
        return res.error


def a_classic_group(c: GroupCoordinator, cooperative: bool = True) -> Classic:
    """One classic member owning all of topic a, Stable."""
    a = Classic(c, cooperative)
    a.join()
    assert a.sync({a.member_id: write_assignment(1, {"a": ALL})}).error is E.NONE
    assert a.owned == {"a": ALL} and c.groups["g"].state is GroupState.STABLE
    return a


def disjoint(a: Classic, m: Member) -> bool:
    return not (a.owned.get("a", frozenset()) & m.owned.get(T1, frozenset()))


def test_a_rolling_upgrade_converts_the_group_and_moves_partitions_without_overlap() -> None:
    c = coordinator()
    a = a_classic_group(c)
    generation = a.generation
    m = Member(c, "m")
    assert m.beat() is E.NONE  # the first consumer-protocol member converts the group
    cg = c.consumer_groups["g"]
    assert not c.groups.get("g") or not c.groups["g"].members
    classic = cg.members[a.member_id]
    assert classic.classic is not None and classic.epoch == generation and classic.assigned == {T1: ALL}
    assert cg.group_epoch == generation + 1 and m.owned == {}  # a still holds everything
    # the classic member learns of the rebalance from its heartbeat, and moves over
    assert a.heartbeat() is E.REBALANCE_IN_PROGRESS
    for _ in range(4):
        a.rebalance()
        assert disjoint(a, m)
        m.beat()
        assert disjoint(a, m)
        if a.heartbeat() is E.NONE and cg.state == "Stable":
            break
    assert cg.state == "Stable"
    assert a.owned["a"] | m.owned[T1] == ALL and len(a.owned["a"]) == len(m.owned[T1]) == 3
    assert a.generation == cg.members[a.member_id].epoch == cg.group_epoch
    # its commits are checked against its epoch, as its generation
    assert c.validate_commit("g", a.member_id, None, a.generation, 0, api_version=8) is E.NONE
    assert c.validate_commit("g", a.member_id, None, generation, 0, api_version=8) is E.ILLEGAL_GENERATION


def test_an_eager_member_gives_up_all_and_gets_its_share() -> None:
    c = coordinator()
    a = a_classic_group(c, cooperative=False)
    m = Member(c, "m")
    assert m.beat() is E.NONE
    assert a.heartbeat() is E.REBALANCE_IN_PROGRESS
    a.rebalance()
    assert m.beat() is E.NONE and disjoint(a, m)
    assert len(m.owned[T1]) == 3
    if a.heartbeat() is E.REBALANCE_IN_PROGRESS:
        a.rebalance()
    assert a.owned["a"] | m.owned[T1] == ALL and disjoint(a, m)


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group() -> None:
    c = coordinator()
    a = a_classic_group(c)
    m = Member(c, "m")
    m.beat()
    a.heartbeat()
    a.rebalance()
    m.beat()
    assert m.leave() is E.NONE
    assert "g" not in c.consumer_groups
    g = c.groups["g"]
    assert set(g.members) == {a.member_id} and g.state is GroupState.PREPARING_REBALANCE
    assert a.heartbeat() is E.REBALANCE_IN_PROGRESS  # then it rejoins as any classic member
    a.rebalance()
    assert g.state is GroupState.STABLE and a.generation == g.generation_id


def test_a_classic_static_member_taking_the_last_consumer_protocol_members_place_downgrades_the_group() -> None:
    """A rolling downgrade of static members (KIP-345): the consumer-protocol member
    restarts as a classic one under the same group.instance.id. The group is classic
    again at once, without a rebalance (Kafka's validateOnlineDowngradeWithReplacedMemberId):
    the restarted member syncs and gets the partitions its instance held, the other one's
    heartbeats carry on."""
    c = coordinator()
    a = a_classic_group(c)
    join = HeartbeatRequest("m", 0, instance_id="im", rebalance_timeout_ms=20000, subscribed_topic_names=["a"],
                            owned={}, version=1)
    assert settle(c, c.consumer_heartbeat("g", join, TOPICS, 0)).error is E.NONE
    m = Member(c, "m")
    cg = c.consumer_groups["g"]
    for _ in range(4):  # to a stable split
        if a.heartbeat() is E.REBALANCE_IN_PROGRESS:
            a.rebalance()
        m.epoch = cg.members["m"].epoch
        m.beat()
        if cg.state == "Stable" and a.heartbeat() is E.NONE:
            break
    assert cg.state == "Stable" and disjoint(a, m) and len(m.owned[T1]) == 3
    held, epoch = m.owned[T1], cg.group_epoch
    # it stops (a static member's leave keeps its place) and comes back speaking classic
    left = HeartbeatRequest("m", -2, instance_id="im", version=1)
    assert settle(c, c.consumer_heartbeat("g", left, TOPICS, 1)).error is E.NONE
    back = Classic(c)
    sub = SUBSCRIPTION.write(1, {"topics": ["a"], "user_data": None, "owned_partitions": []})
    r = JoinRequest("", "classic", 10000, 20000, "consumer", [("cooperative-sticky", sub)], group_instance_id="im")
    res = settle(c, c.join("g", r, 2, TOPICS))
    assert res.error is E.NONE and res.generation_id == epoch
    assert "g" not in c.consumer_groups
    g = c.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == epoch and set(g.members) == {a.member_id, res.member_id}
    back.member_id, back.generation = res.member_id, res.generation_id
    assert back.sync().error is E.NONE and back.owned == {"a": held}
    assert a.heartbeat() is E.NONE and back.heartbeat() is E.NONE  # no rebalance
    assert not (a.owned["a"] & back.owned["a"]) and a.owned["a"] | back.owned["a"] == ALL
    # the classic record was written, the KIP-848 group's tombstoned: a new coordinator
    # has the classic group
    again = coordinator(log=c.log)
    assert "g" not in again.consumer_groups and set(again.groups["g"].members) == {a.member_id, back.member_id}


def test_a_classic_group_whose_last_writes_failed_does_not_come_back_over_a_consumer_group() -> None:
    """A classic group's member leaves by its session; the group's Empty record and then
    its tombstone fail to be written, so the log still names the member. A KIP-848 member
    taking the id deletes that record with its own (as Kafka deletes an empty classic
    group's): a later coordinator does not restore the old member, which would have kept
    the KIP-848 group's members out (GROUP_ID_NOT_FOUND) until its session ended."""
    c = coordinator()
    a_classic_group(c)
    c.poll(60_000)  # its session is over
    stores = c.drain_stores()
    assert [s.snapshot is None for s in stores] == [False, True]  # Empty, then gone
    for store in stores:
        c.store_done(store.group_id, store.store_id, E.NOT_ENOUGH_REPLICAS, 60_000)
    assert "g" not in c.groups
    m = Member(c, "m")
    assert m.beat() is E.NONE
    again = coordinator(log=c.log)
    assert "g" not in again.groups or not again.groups["g"].members
    res = again.consumer_heartbeat("g", HeartbeatRequest("m", m.epoch, version=1), TOPICS, 60_001)
    assert res.error is E.NONE, res


def test_an_invalid_consumer_heartbeat_converts_nothing() -> None:
    """ConsumerGroupHeartbeat is checked before the group is looked at, as Kafka: a request
    it refuses (here: partitions reported on joining) leaves a classic group classic and
    writes nothing. (It used to convert the group first.)"""
    c = coordinator()
    a = a_classic_group(c)
    bad = HeartbeatRequest("m", 0, rebalance_timeout_ms=20000, subscribed_topic_names=["a"], owned={T1: ALL}, version=1)
    assert settle(c, c.consumer_heartbeat("g", bad, TOPICS, 0)).error is E.INVALID_REQUEST
    assert "g" not in c.consumer_groups and set(c.groups["g"].members) == {a.member_id}
    assert not c.drain_writes() and a.heartbeat() is E.NONE


def test_a_refused_joining_member_leaves_the_classic_group_unconverted() -> None:
    """The consumer-protocol member whose heartbeat would convert the group is itself
    refused (here: the group holds group.consumer.max.size members already): the group
    stays classic, its members undisturbed and nothing written, as Kafka (whose failed
    heartbeat undoes the conversion). It used to stay converted without the new member."""
    c = coordinator(max_size=1)
    a = a_classic_group(c)
    res = settle(c, c.consumer_heartbeat("g", HeartbeatRequest("m", 0, rebalance_timeout_ms=20000,
                                                               subscribed_topic_names=["a"], owned={}, version=1),
                                         TOPICS, 0))
    assert res.error is E.GROUP_MAX_SIZE_REACHED
    assert "g" not in c.consumer_groups and set(c.groups["g"].members) == {a.member_id}
    assert c.groups["g"].state is GroupState.STABLE and a.heartbeat() is E.NONE
    assert not c.drain_writes()


def test_the_migration_policy_is_obeyed() -> None:
    c = coordinator("disabled")
    a_classic_group(c)
    m = Member(c, "m")
    assert m.beat() is E.GROUP_ID_NOT_FOUND and "g" not in c.consumer_groups
    c = coordinator("upgrade")
    a_classic_group(c)
    m = Member(c, "m")
    assert m.beat() is E.NONE
    assert m.leave() is E.NONE
    assert "g" in c.consumer_groups  # no downgrade: the classic member stays in a consumer group


def test_classic_members_are_recorded_and_restored_with_their_protocols() -> None:
    c = coordinator()
    a = a_classic_group(c)
    m = Member(c, "m")
    m.beat()
    written: list[tuple[bytes, bytes | None]] = []
    cg = c.consumer_groups["g"]
    cg.write_failed()  # the whole group written again
    written += cg.pending_records()
    loaded: dict[str, records.LoadedConsumerGroup] = {}
    for key, value in written:
        assert records.replay(loaded, key, value)
    new = ConsumerGroup("g", cg.config)
    new.restore(loaded["g"], TOPICS, 0)
    assert new.members[a.member_id].classic == cg.members[a.member_id].classic
    assert new.members["m"].classic is None
    assert new.members[a.member_id].assigned == cg.members[a.member_id].assigned


def test_a_consumer_protocol_member_fenced_by_its_session_downgrades_the_group_too() -> None:
    c = coordinator()
    a = a_classic_group(c)
    m = Member(c, "m")
    m.beat()
    cg = c.consumer_groups["g"]
    # the classic member keeps its own session (10 s); the consumer-protocol one has 45 s
    assert cg.members[a.member_id].session_deadline_ms == 10000
    a.heartbeat()  # at 0: its session runs to 10 s
    c.poll(10000)
    assert a.member_id not in cg.members and "g" in c.consumer_groups  # m alone: still a consumer group
    c = coordinator()
    a = a_classic_group(c)
    m = Member(c, "m")
    m.beat()
    epoch = c.consumer_groups["g"].group_epoch
    c.consumer_groups["g"].members["m"].session_deadline_ms = 5
    c.poll(5)
    assert "g" not in c.consumer_groups and set(c.groups["g"].members) == {a.member_id}
    assert c.groups["g"].generation_id == epoch  # the epoch its members are at, before m left


def test_a_restarted_static_classic_member_takes_its_place() -> None:
    c = coordinator()
    a = a_classic_group(c)
    m = Member(c, "m")
    m.beat()
    sub = SUBSCRIPTION.write(1, {"topics": ["a"], "user_data": None, "owned_partitions": []})
    r = JoinRequest("", "classic", 10000, 20000, "consumer", [("cooperative-sticky", sub)], group_instance_id="i1")
    first = settle(c, c.join("g", r, 0, TOPICS))
    assert first.error is E.NONE
    cg = c.consumer_groups["g"]
    held = dict(cg.members[first.member_id].assigned)
    restarted = settle(c, c.join("g", r, 0, TOPICS))  # the same instance, a new member id
    assert restarted.error is E.NONE and restarted.member_id != first.member_id
    assert first.member_id not in cg.members and cg.members[restarted.member_id].assigned == held
    assert cg.static["i1"] == restarted.member_id
    # the old id is fenced
    assert c.heartbeat("g", first.member_id, "i1", first.generation_id, 0) is E.FENCED_INSTANCE_ID
    assert a.member_id in cg.members


def test_classic_joins_that_cannot_be_recorded_or_read_change_nothing() -> None:
    c = coordinator()
    a_classic_group(c)
    Member(c, "m").beat()
    cg = c.consumer_groups["g"]
    before = (set(cg.members), cg.group_epoch)
    big = JoinRequest("x", "classic", 10000, 20000, "consumer", [("cooperative-sticky", b"\0\0" + bytes(600 << 10))])
    assert c.join("g", big, 0, TOPICS).error is E.UNKNOWN_SERVER_ERROR  # type: ignore[union-attr]
    garbage = JoinRequest("x", "classic", 10000, 20000, "consumer", [("cooperative-sticky", b"\0")])
    assert c.join("g", garbage, 0, TOPICS).error is E.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]
    assert (set(cg.members), cg.group_epoch) == before
    # a classic group whose member's subscription cannot be read is not converted
    c = coordinator()
    a = a_classic_group(c)
    c.groups["g"].members[a.member_id].protocols = [("cooperative-sticky", b"\0")]
    assert Member(c, "m").beat() is E.GROUP_ID_NOT_FOUND and a.heartbeat() is E.NONE


def owned_twice(classics: list[Classic], members: list[Member]) -> set[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for ps in [c.owned.get("a", frozenset()) for c in classics] + [m.owned.get(T1, frozenset()) for m in members]:
        twice |= seen & ps
        seen |= ps
    return twice


@pytest.mark.parametrize("seed", range(30))
def test_random_interleavings_of_both_protocols_never_give_a_partition_to_two_members(seed: int) -> None:
    """Classic members (eager and cooperative) and consumer-protocol members joining,
    heartbeating, rejoining and leaving in a random order, in a group converted online
    (policy `upgrade`: it stays a KIP-848 group), its coordinator failing over now and
    then (the next one replays the records): no partition is ever owned by two of them,
    the replayed group is the group that wrote them, and once they all heartbeat in turn
    every partition is owned."""
    rng = random.Random(seed)
    c = coordinator("upgrade")
    classics = [a_classic_group(c, cooperative=rng.random() < 0.5)]
    classics += [Classic(c, cooperative=rng.random() < 0.5) for _ in range(2)]
    members = [Member(c, f"m{i}") for i in range(2)]
    members[0].beat()  # converts the group
    active = {id(classics[0]), id(members[0])}

    syncing: set[int] = set()  # classics that joined and have yet to sync (a client always does next)

    def step_classic(x: Classic) -> None:
        if id(x) in syncing:
            syncing.discard(id(x))
            assert x.sync().error in (E.NONE, E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION)
        elif id(x) not in active:
            x.member_id, x.owned = "", {}
            x.rebalance()
            active.add(id(x))
        elif rng.random() < 0.1:
            assert settle(c, c.leave("g", [(x.member_id, None)], 0, TOPICS)) == (E.NONE, [E.NONE])
            x.owned = {}
            active.discard(id(x))
        elif (code := x.heartbeat()) is E.REBALANCE_IN_PROGRESS:
            if rng.random() < 0.7:
                x.join()
                if rng.random() < 0.7:
                    assert x.sync().error in (E.NONE, E.REBALANCE_IN_PROGRESS)
                else:
                    syncing.add(id(x))  # others act before its SyncGroup arrives
        else:
            assert code is E.NONE, code

    def step_member(m: Member) -> None:
        if id(m) not in active:
            m.epoch, m.owned = 0, {}
            assert m.beat() is E.NONE
            active.add(id(m))
        elif rng.random() < 0.1 and len(active) > 1:
            assert m.leave() is E.NONE
            m.epoch, m.owned = 0, {}
            active.discard(id(m))
        else:
            assert m.beat() is E.NONE

    for _ in range(150):
        if rng.random() < 0.05:  # a new coordinator, from the records
            old = c.consumer_groups["g"]
            c = coordinator("upgrade", c.log)
            assert state_of(c.consumer_groups["g"]) == state_of(old)
            for client in [*classics, *members]:
                client.c = c
        who = rng.choice(classics + members)
        if isinstance(who, Classic):
            step_classic(who)
        else:
            step_member(who)
        assert not owned_twice(classics, members)
    cg = c.consumer_groups["g"]
    for _ in range(30):  # everyone heartbeats in turn, and does what it is told
        for x in classics:
            if id(x) in syncing:
                syncing.discard(id(x))
                x.sync()
            if id(x) in active and x.heartbeat() is E.REBALANCE_IN_PROGRESS:
                x.rebalance()
        for m in members:
            if id(m) in active:
                assert m.beat() is E.NONE
        assert not owned_twice(classics, members)
        if cg.state == "Stable":
            break
    assert cg.state == "Stable"
    held = [c_.owned.get("a", frozenset()) for c_ in classics] + [m.owned.get(T1, frozenset()) for m in members]
    assert frozenset().union(*held) == ALL


def test_the_conversions_write_the_records_of_both_kinds() -> None:
    from kafkarepl.coordinator.group_records import encode_group_key

    c = coordinator()
    a = a_classic_group(c)
    r = HeartbeatRequest("m", 0, rebalance_timeout_ms=20000, subscribed_topic_names=["a"], owned={}, version=1)
    assert c.consumer_heartbeat("g", r, TOPICS, 0).error is E.NONE
    assert c.drain_stores() == []
    (gid, written), = c.drain_writes()  # one write: the classic record's tombstone first, atomically
    assert gid == "g" and written[0] == (encode_group_key("g"), None)
    loaded: dict[str, records.LoadedConsumerGroup] = {}
    for key, value in written[1:]:
        assert records.replay(loaded, key, value)
    assert set(loaded["g"].members) == {a.member_id, "m"}
    assert loaded["g"].members[a.member_id]["classic_member_metadata"]["session_timeout_ms"] == 10000
    c.consumer_heartbeat("g", HeartbeatRequest("m", -1, version=1), TOPICS, 0)
    (stored,) = c.drain_stores()  # the classic group's record again
    assert stored.snapshot is not None and [m.member_id for m in stored.snapshot.members] == [a.member_id]
    for _, batch in c.drain_writes():  # the member's leave, then the group's tombstones
        for key, value in batch:
            records.replay(loaded, key, value)
    assert loaded["g"].group_epoch is None and not loaded["g"].members  # the KIP-848 group is gone


def test_a_classic_member_that_joins_and_never_syncs_is_removed_after_its_rebalance_timeout() -> None:
    c = coordinator()
    a = a_classic_group(c)
    m = Member(c, "m")
    m.beat()
    late = Classic(c)
    late.join()  # no SyncGroup follows
    cg = c.consumer_groups["g"]
    assert late.member_id in cg.members
    assert a.heartbeat() is E.REBALANCE_IN_PROGRESS
    a.rebalance()  # joins and syncs: kept
    for now in (9000, 18000):  # both heartbeat within their 10 s sessions
        a.heartbeat(now)
        late.heartbeat(now)
        c.poll(now)
    c.poll(19999)
    assert late.member_id in cg.members
    c.poll(20000)  # its rebalance timeout (20 s) after the join
    assert late.member_id not in cg.members and a.member_id in cg.members


def test_the_migration_policy_is_read_from_the_broker_config() -> None:
    from kafkarepl.server.config import BrokerConfig, ConfigError
    from kafkarepl.server.group_coordinator import consumer_group_config

    assert consumer_group_config(BrokerConfig.load(None, [])).migration_policy == "bidirectional"
    cfg = BrokerConfig.load(None, ["group.consumer.migration.policy=Upgrade"])
    assert consumer_group_config(cfg).upgrade_enabled and not consumer_group_config(cfg).downgrade_enabled
    with pytest.raises(ConfigError, match="migration.policy"):
        consumer_group_config(BrokerConfig.load(None, ["group.consumer.migration.policy=sideways"]))
