"""KIP-848 consumer groups (coordinator/consumer_group.py) against clients simulated as
Kafka's own behaves: each member owns what its last answer assigned, reports it after a
change, and heartbeats in any order. No partition may ever be owned by two members, and
the group must settle on a balanced assignment in which every member is at the group's
epoch. A group's records, replayed by a new coordinator, must give back the same group."""

from __future__ import annotations

import dataclasses
import random
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl.coordinator import consumer_group_records as records
from kafkarepl.coordinator.assignors import assign
from kafkarepl.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
    TopicsView,
)
from kafkarepl.coordinator.coordinator import GroupCoordinator
from kafkarepl.coordinator.group import GroupConfig
from kafkarepl.coordinator.offsets import OffsetAndMetadata
from kafkarepl.errors import ErrorCode as E

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = TopicsView(1, {"a": (T1, 6), "b": (T2, 3)})


class LoggedGroup(ConsumerGroup):
    """A group whose records go to a compacted log after every call, as the broker
    writes them (each key's last value kept, in the order of those last writes)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.log: dict[bytes, bytes | None] = {}

    def _take(self) -> None:
        for key, value in self.pending_records():
            self.log.pop(key, None)
            self.log[key] = value
        self.write_done()  # written at once

    def heartbeat(self, r: HeartbeatRequest, topics: TopicsView, now_ms: int) -> HeartbeatResponse:
        out = super().heartbeat(r, topics, now_ms)
        self._take()
        return out

    def expire(self, now_ms: int) -> list[str]:
        out = super().expire(now_ms)
        self._take()
        return out


def state_of(g: ConsumerGroup) -> tuple:
    """What a group's records must carry over (not timers: sessions restart)."""
    members = {mid: dataclasses.replace(m, session_deadline_ms=0, revocation_deadline_ms=None,
                                        previous_epoch=-1 if m.left else m.previous_epoch)
               for mid, m in g.members.items()}
    return (g.group_epoch, g.assignment_epoch, members, g.static, g.owners,
            {mid: t for mid, t in g.target.items() if t}, g.topics)


def fail_over(g: LoggedGroup, clients: list[Client], view: TopicsView = TOPICS) -> LoggedGroup:
    """A new coordinator (its metadata: `view`): the group as replayed from its records
    (a group that wrote none yet is new); the clients heartbeat to it from now on."""
    loaded: dict[str, records.LoadedConsumerGroup] = {}
    for key, value in g.log.items():
        assert records.replay(loaded, key, value)
    new = LoggedGroup(g.group_id, g.config)
    new.log = dict(g.log)
    if g.group_id in loaded and loaded[g.group_id].group_epoch is not None:
        new.restore(loaded[g.group_id], view, 0)
    assert state_of(new) == state_of(g)
    assert new.pending_records() == []  # the log already holds all of it
    for c in clients:
        c.group = new
    return new


def coordinator_and_join() -> tuple[GroupCoordinator, HeartbeatRequest]:
    """A coordinator owning its only partition, and member m's first heartbeat."""
    c = GroupCoordinator(GroupConfig(), 1)
    c.begin_loading(0)
    c.finish_loading(0)
    return c, HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_names=["a"], owned={}, version=1)


class Client:
    """A member as Kafka's consumer acts: it owns what it was last assigned."""

    def __init__(self, group: ConsumerGroup, name: str, topics: list[str], instance: str | None = None) -> None:
        self.group, self.id, self.topics, self.instance = group, name, topics, instance
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.report = True  # TopicPartitions is sent on joining and after each change

    def beat(self, now: int = 0, view: TopicsView = TOPICS) -> E:
        joining = self.epoch == 0
        r = HeartbeatRequest(self.id, self.epoch, instance_id=self.instance,
                             rebalance_timeout_ms=30000 if joining else -1,
                             subscribed_topic_names=self.topics if joining else None,
                             owned=dict(self.owned) if self.report else None, version=1)
        res = self.group.heartbeat(r, view, now)
        if res.error:
            return res.error
        self.report = False
        self.epoch = res.member_epoch
        if res.assignment is not None and res.assignment != self.owned:
            self.owned = {t: p for t, p in res.assignment.items() if p}
            self.report = True
        return E.NONE

    def leave(self) -> E:
        res = self.group.heartbeat(HeartbeatRequest(self.id, -1, version=1), TOPICS, 0)
        self.owned, self.epoch = {}, 0
        return res.error


def owned_by_two(clients: list[Client]) -> set[tuple[uuid.UUID, int]]:
    seen: set[tuple[uuid.UUID, int]] = set()
    twice = set()
    for c in clients:
        for t, ps in c.owned.items():
            for p in ps:
                (twice if (t, p) in seen else seen).add((t, p))
    return twice


def settle(group: ConsumerGroup, clients: list[Client], rng: random.Random, rounds: int = 60) -> None:
    for _ in range(rounds):
        for c in rng.sample(clients, len(clients)):
            assert c.beat() is E.NONE
            assert not owned_by_two(clients)


def test_a_joining_member_gets_its_share_only_once_the_other_released_it() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig())
    a = Client(g, "a", ["a"])
    a.beat()
    assert a.owned == {T1: frozenset(range(6))} and a.epoch == 1 and g.state == "Stable"
    b = Client(g, "b", ["a"])
    b.beat()  # b joins: epoch 2, but a still holds every partition
    assert b.epoch == 2 and b.owned == {} and g.state == "Reconciling"
    a.beat()  # a is told to keep 3 (revoking 3), at its old epoch
    assert a.epoch == 1 and len(a.owned[T1]) == 3
    b.beat()  # a has not confirmed: b still gets nothing
    assert b.owned == {}
    a.beat()  # a reports the 3 it kept: it moves to epoch 2
    assert a.epoch == 2
    b.beat()
    assert b.owned[T1] == frozenset(range(6)) - a.owned[T1]
    assert g.state == "Stable" and not owned_by_two([a, b])


@pytest.mark.parametrize("failovers", [False, True])
@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), joins=st.integers(1, 6))
def test_random_heartbeat_orders_never_give_a_partition_to_two_members(failovers: bool, seed: int,
                                                                       joins: int) -> None:
    """failovers: at random points a new coordinator takes the group over from its records."""
    rng = random.Random(seed)
    g = LoggedGroup("g", ConsumerGroupConfig())
    clients: list[Client] = []
    for i in range(joins):
        if failovers and rng.random() < 0.4:
            g = fail_over(g, clients)
        clients.append(Client(g, f"m{i}", rng.choice([["a"], ["a", "b"], ["b"]]), rng.choice([None, f"i{i}"])))
        for _ in range(rng.randint(0, 4)):
            c = rng.choice(clients)
            assert c.beat() is E.NONE
            assert not owned_by_two(clients)
        # (a static member's replacement that has not joined yet stays: the instance's
        # partitions wait for it until its session ends, and no time passes here)
        leaving = [c for c in clients if c.instance is None or c.id in g.members]
        if len(clients) > 1 and leaving and rng.random() < 0.3:
            gone = rng.choice(leaving)
            clients.remove(gone)
            known = gone.id in g.members
            if gone.instance is not None and known and rng.random() < 0.5:
                # a static member restarts: it leaves with -2, the same instance comes back
                assert g.heartbeat(HeartbeatRequest(gone.id, -2, instance_id=gone.instance, version=1),
                                   TOPICS, 0).error is E.NONE
                gone.owned = {}  # it consumes nothing while away
                clients.append(Client(g, gone.id + "'", gone.topics, gone.instance))
            elif gone.instance is not None:
                res = g.heartbeat(HeartbeatRequest(gone.id, -1, instance_id=gone.instance, version=1), TOPICS, 0)
                assert res.error is (E.NONE if known else E.UNKNOWN_MEMBER_ID)
            else:
                assert gone.leave() is (E.NONE if known else E.UNKNOWN_MEMBER_ID)
    if failovers:
        g = fail_over(g, clients)
    settle(g, clients, rng)
    assert g.state == "Stable"
    assert all(c.epoch == g.group_epoch for c in clients)
    # every subscribed partition is owned, by a member subscribed to its topic
    wanted = {(T1, p) for p in range(6)} if any("a" in c.topics for c in clients) else set()
    wanted |= {(T2, p) for p in range(3)} if any("b" in c.topics for c in clients) else set()
    got = {(t, p) for c in clients for t, ps in c.owned.items() for p in ps}
    assert got == wanted
    for c in clients:
        assert all(({T1: "a", T2: "b"}[t]) in c.topics for t in c.owned)
    # the coordinator's index of who holds what agrees with its members
    assert g.owners == {(tid, p): m.member_id for m in g.members.values()
                        for a in (m.assigned, m.pending_revocation) for tid, ps in a.items() for p in ps}


def test_uniform_is_balanced_and_sticky() -> None:
    subs = {m: frozenset({"t"}) for m in "abc"}
    first = assign("uniform", subs, {"t": 10}, {})
    assert sorted(len(v["t"]) for v in first.values()) == [3, 3, 4]
    subs["d"] = frozenset({"t"})
    second = assign("uniform", subs, {"t": 10}, first)
    assert sorted(len(v.get("t", ())) for v in second.values()) == [2, 2, 3, 3]
    for m in "abc":  # the old members keep what they keep, the new one gets the moved ones
        assert second[m]["t"] <= first[m]["t"]
    ranged = assign("range", subs, {"t": 10, "u": 3}, {})
    assert ranged["a"]["t"] == frozenset({0, 1, 2}) and ranged["d"]["t"] == frozenset({8, 9})


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig(session_timeout_ms=45000))
    a, b = Client(g, "a", ["a"]), Client(g, "b", ["a"])
    a.beat(now=0)
    b.beat(now=0)
    a.beat(now=0)  # told to revoke 3, with its rebalance timeout of 30 s
    assert g.expire(29_999) == []
    assert g.expire(30_000) == ["a"]
    assert b.beat(now=30_000) is E.NONE and b.owned[T1] == frozenset(range(6))
    assert a.beat(now=30_001) is E.UNKNOWN_MEMBER_ID


def test_session_timeout_and_epoch_fencing() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig(session_timeout_ms=1000))
    a = Client(g, "a", ["a"])
    a.beat(now=0)
    a.epoch += 5
    assert a.beat(now=10) is E.FENCED_MEMBER_EPOCH
    a.epoch -= 5
    assert g.expire(999) == [] and g.expire(1000) == ["a"]  # a fenced heartbeat does not count
    assert g.state == "Empty"


def test_a_static_member_returns_to_its_partitions_without_a_rebalance() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig())
    a, b = Client(g, "a", ["a"], instance="ia"), Client(g, "b", ["a"])
    settle(g, [a, b], random.Random(1), rounds=4)
    epoch, mine = g.group_epoch, a.owned
    assert g.heartbeat(HeartbeatRequest("a", -2, instance_id="ia", version=1), TOPICS, 0).error is E.NONE
    again = Client(g, "a2", ["a"], instance="ia")  # a new process, a new member id
    assert again.beat() is E.NONE
    assert again.owned == mine and g.group_epoch == epoch
    other = Client(g, "a3", ["a"], instance="ia")
    assert other.beat() is E.UNRELEASED_INSTANCE_ID  # the instance is in use again


def test_offset_commits_follow_the_member_epoch() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig())
    assert g.commit_error("", -1) is E.NONE  # an admin's commit to an empty group
    a = Client(g, "a", ["a"])
    a.beat()
    assert g.commit_error("", -1) is E.UNKNOWN_MEMBER_ID
    assert g.commit_error("a", a.epoch) is E.NONE
    assert g.commit_error("a", a.epoch - 1) is E.STALE_MEMBER_EPOCH
    assert g.commit_error("a", a.epoch, api_version=8) is E.UNSUPPORTED_VERSION  # a member needs v9+
    # OffsetFetch v9: a member only at its epoch; a fetch naming no member (admin) always
    assert g.fetch_error("a", a.epoch) is E.NONE
    assert g.fetch_error("a", a.epoch + 1) is E.STALE_MEMBER_EPOCH
    assert g.fetch_error("b", 1) is E.UNKNOWN_MEMBER_ID
    assert g.fetch_error(None, -1) is E.NONE


@pytest.mark.parametrize(("request_", "message"), [
    (HeartbeatRequest("", 0, rebalance_timeout_ms=1, subscribed_topic_names=["a"], owned={}, version=1),
     "MemberId can't be empty."),
    (HeartbeatRequest("m", 0, subscribed_topic_names=["a"], owned={}, version=1),
     "RebalanceTimeoutMs must be provided in first request."),
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=1, owned={}, version=1),
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (HeartbeatRequest("m", -2, version=1), "InstanceId can't be null."),
    (HeartbeatRequest("m", -3, version=1), "MemberEpoch is invalid."),
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(", owned={}, version=1),
     "not a valid regular expression"),
])
def test_invalid_heartbeats_are_answered_as_kafka_does(request_: HeartbeatRequest, message: str) -> None:
    res = ConsumerGroup("g", ConsumerGroupConfig()).heartbeat(request_, TOPICS, 0)
    assert res.error is E.INVALID_REQUEST and message in (res.message or "")


def test_a_regex_subscription_follows_new_topics_in_linear_time() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig())
    r = HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(a+)+b", owned={}, version=1)
    names = {"a" * 240: (T1, 1), "aab": (T2, 2)}  # a backtracking engine would never finish the first
    res = g.heartbeat(r, TopicsView(1, names), 0)
    assert res.assignment == {T2: frozenset({0, 1})}
    names["aaab"] = (uuid.UUID(int=3), 1)
    res = g.heartbeat(HeartbeatRequest("m", res.member_epoch, version=1), TopicsView(2, names), 1)
    assert res.assignment is not None and uuid.UUID(int=3) in res.assignment


def test_a_regex_resolves_to_the_topics_the_member_may_describe() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig())
    r = HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="a|b", owned={}, version=1,
                         may_describe=lambda t: t == "b")
    res = g.heartbeat(r, TOPICS, 0)
    assert res.assignment == {T2: frozenset({0, 1, 2})}  # "a" matches, but is not hers to see


def test_a_subscription_too_large_to_record_fails_that_member_only() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig())
    a = Client(g, "a", ["a"])
    assert a.beat() is E.NONE
    g.pending_records()
    huge = [f"topic-{i:07d}-" + "x" * 200 for i in range(3000)]  # ~640 KiB of names
    res = g.heartbeat(HeartbeatRequest("b", 0, rebalance_timeout_ms=1, subscribed_topic_names=huge, owned={},
                                       version=1), TOPICS, 1)
    assert res.error is E.UNKNOWN_SERVER_ERROR and "do not fit" in (res.message or "")
    assert set(g.members) == {"a"} and g.pending_records() == []  # nothing changed, nothing to write
    assert a.beat() is E.NONE and a.owned == {T1: frozenset(range(6))}


def test_a_consumer_group_takes_classic_members_of_its_protocol_only() -> None:
    c, join = coordinator_and_join()
    assert c.consumer_heartbeat("g", join, TOPICS, 0).error is E.NONE
    from kafkarepl.coordinator.group import JoinRequest
    classic = JoinRequest(member_id="", client_id="c", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                          protocol_type="connect", protocols=[("range", b"")])
    assert c.join("g", classic, 0).error is E.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]
    classic.protocol_type = "consumer"
    required = c.join("g", classic, 0)
    assert required.error is E.MEMBER_ID_REQUIRED  # type: ignore[union-attr]
    classic.member_id = required.member_id  # type: ignore[union-attr]
    # a subscription it cannot read (b""): not the consumer's embedded protocol
    assert c.join("g", classic, 0).error is E.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]
    assert set(c.consumer_groups["g"].members) == {"m"}
    assert c.list_groups() == (E.NONE, [("g", "consumer", "Stable", "consumer")])
    assert c.describe("g")[0] is E.GROUP_ID_NOT_FOUND
    assert c.prepare_delete("g")[0] is E.NON_EMPTY_GROUP
    # a member unknown to this coordinator (a new one after a failover) joins again
    lost = HeartbeatRequest("x", 3, version=1)
    assert c.consumer_heartbeat("h", lost, TOPICS, 0).error is E.UNKNOWN_MEMBER_ID


def test_a_static_member_leaving_mid_revocation_releases_what_it_was_revoking() -> None:
    g = ConsumerGroup("g", ConsumerGroupConfig())
    a, b = Client(g, "a", ["a"], instance="ia"), Client(g, "b", ["a"])
    a.beat()
    b.beat()
    a.beat()  # a is told to revoke 3
    assert len(a.owned[T1]) == 3 and g.members["a"].pending_revocation
    assert g.heartbeat(HeartbeatRequest("a", -2, instance_id="ia", version=1), TOPICS, 0).error is E.NONE
    b.beat()  # the 3 a was revoking are free at once; a's kept 3 wait for it
    assert b.owned[T1] == frozenset(range(6)) - a.owned[T1]
    back = Client(g, "a-again", ["a"], instance="ia")
    assert back.beat() is E.NONE and back.owned == a.owned
    settle(g, [back, b], random.Random(2), rounds=4)
    assert g.state == "Stable" and not owned_by_two([back, b])


def test_members_carry_on_after_a_failover_in_their_epochs() -> None:
    g = LoggedGroup("g", ConsumerGroupConfig())
    a, b = Client(g, "a", ["a", "b"], instance="ia"), Client(g, "b", ["a"])
    settle(g, [a, b], random.Random(3), rounds=4)
    epoch, owned = g.group_epoch, (dict(a.owned), dict(b.owned))
    g = fail_over(g, [a, b])
    for c in (a, b):
        assert c.beat(now=1) is E.NONE and g.commit_error(c.id, c.epoch) is E.NONE
    assert g.group_epoch == epoch and (a.owned, b.owned) == owned and g.state == "Stable"
    # a static member that left before the failover gets its partitions back after it
    assert g.heartbeat(HeartbeatRequest("a", -2, instance_id="ia", version=1), TOPICS, 1).error is E.NONE
    g = fail_over(g, [b])
    back = Client(g, "a2", ["a", "b"], instance="ia")
    assert back.beat(now=2) is E.NONE and back.owned == owned[0] and g.group_epoch == epoch
    # a member that leaves is gone from the records: a later coordinator does not know it
    assert b.leave() is E.NONE
    g = fail_over(g, [back])
    assert set(g.members) == {"a2"}
    # and the group, emptied, leaves only its epochs behind until it is deleted
    assert back.leave() is E.NONE
    assert g.is_empty and {records.record_version(k) for k, v in g.log.items() if v is not None} == {
        records.GROUP_EPOCH, records.ASSIGNMENT_EPOCH}
    assert {records.record_version(k) for k, _v in g.tombstones()} == {records.GROUP_EPOCH, records.ASSIGNMENT_EPOCH}


def test_the_coordinator_writes_restores_and_deletes_consumer_groups() -> None:
    c, join = coordinator_and_join()
    res = c.consumer_heartbeat("g", join, TOPICS, 0)
    assert res.error is E.NONE
    writes = c.drain_writes()
    assert [gid for gid, _ in writes] == ["g"]
    log = dict(writes[0][1])
    assert {records.record_version(k) for k in log} == {
        records.GROUP_EPOCH, records.MEMBER_METADATA, records.ASSIGNMENT_EPOCH, records.TARGET_ASSIGNMENT,
        records.CURRENT_ASSIGNMENT}
    # a failed write: the next heartbeat writes the whole group again
    c.write_failed("g")
    assert c.consumer_heartbeat("g", HeartbeatRequest("m", res.member_epoch, version=1), TOPICS, 1).error is E.NONE
    (_, again), = c.drain_writes()
    assert dict(again) == log
    # a new coordinator resumes the member in its epoch
    new = GroupCoordinator(GroupConfig(), 1)
    new.begin_loading(0)
    new.load(0, list(log.items()), now_ms=5, topics=TOPICS)
    new.finish_loading(0)
    res2 = new.consumer_heartbeat("g", HeartbeatRequest("m", res.member_epoch, version=1), TOPICS, 6)
    assert res2.error is E.NONE and res2.member_epoch == res.member_epoch
    assert new.drain_writes() == []  # nothing changed
    # the member leaves: the group, with no offsets, is forgotten and its records deleted
    assert new.consumer_heartbeat("g", HeartbeatRequest("m", -1, version=1), TOPICS, 7).error is E.NONE
    assert "g" not in new.consumer_groups
    for _gid, recs in new.drain_writes():
        for key, value in recs:
            log.pop(key, None)
            if value is not None:
                log[key] = value
    assert log == {}


def test_a_member_joining_while_its_group_is_deleted_gets_its_records_written_again() -> None:
    c, join = coordinator_and_join()
    assert c.consumer_heartbeat("g", join, TOPICS, 0).error is E.NONE
    c.apply_commit("g", {("a", 0): OffsetAndMetadata(5)})
    assert c.consumer_heartbeat("g", HeartbeatRequest("m", -1, version=1), TOPICS, 1).error is E.NONE
    assert "g" in c.consumer_groups  # Empty, kept for its offsets
    c.drain_writes()
    c.write_done("g")  # the member's tombstones landed
    assert c.prepare_delete("g") == (E.NONE, [("a", 0)])
    gone = c.consumer_group_tombstones("g")
    assert {records.record_version(k) for k, _ in gone} == {records.GROUP_EPOCH, records.ASSIGNMENT_EPOCH}
    # the tombstones are being written when a member joins again
    res = c.consumer_heartbeat("g", dict_join(join, "n"), TOPICS, 2)
    assert res.error is E.NONE
    c.drain_writes()
    assert c.finish_delete("g") is E.NON_EMPTY_GROUP
    assert c.consumer_heartbeat("g", HeartbeatRequest("n", res.member_epoch, version=1), TOPICS, 3).error is E.NONE
    (_, again), = c.drain_writes()  # the whole group written again after its tombstones
    assert {records.record_version(k) for k, v in again if v is not None} >= {
        records.GROUP_EPOCH, records.ASSIGNMENT_EPOCH, records.MEMBER_METADATA}


def test_partitions_added_while_the_coordinator_moved_are_assigned_by_the_next_one() -> None:
    """Topic a grows from 6 to 8 partitions, and a new coordinator loads the group before
    any member heartbeated on: the group's first heartbeat there sees the topic changed
    (the counts its target was computed on are kept), so a new epoch assigns partitions 6
    and 7 too. (The new coordinator used to take the topic's count as it found it, see
    nothing changed, and leave the new partitions to nobody.)"""
    g = LoggedGroup("g", ConsumerGroupConfig())
    a, b = Client(g, "a", ["a"]), Client(g, "b", ["a"])
    settle(g, [a, b], random.Random(5), rounds=4)
    epoch = g.group_epoch
    grown = TopicsView(TOPICS.version + 1, {**TOPICS.by_name, "a": (T1, 8)})
    new = fail_over(g, [a, b], grown)
    for _ in range(6):
        for c in (a, b):
            assert c.beat(now=1, view=grown) is E.NONE
            assert not owned_by_two([a, b])
    assert new.group_epoch > epoch and new.state == "Stable"
    assert a.owned[T1] | b.owned[T1] == frozenset(range(8)) and len(a.owned[T1]) == len(b.owned[T1]) == 4


def test_a_topic_created_again_under_its_name_has_its_targets_written_with_the_new_id() -> None:
    """Topic a deleted and created again (a new topic id, the same partition count): the
    members keep the same partitions by name, but their target records name the topic by
    id, so they are written again; a new coordinator then has every member's target.
    (They were not: the next coordinator dropped the targets naming the old id.)"""
    g = LoggedGroup("g", ConsumerGroupConfig())
    a, b = Client(g, "a", ["a"]), Client(g, "b", ["a"])
    settle(g, [a, b], random.Random(2), rounds=4)
    again = TopicsView(TOPICS.version + 1, {**TOPICS.by_name, "a": (uuid.UUID(int=77), 6)})
    for _ in range(4):
        for c in (a, b):
            assert c.beat(now=1, view=again) is E.NONE
    assert g.state == "Stable" and {t for c in (a, b) for t in c.owned} == {uuid.UUID(int=77)}
    fail_over(g, [a, b], again)  # every member's target as it was


def test_a_static_join_with_another_members_id_is_refused() -> None:
    """A client joining as a static member under a member id the group already gives
    another member (a buggy or hostile client: KIP-848 ids are each client's own UUID) is
    refused, the group untouched: taking the id used to leave the other member's
    partitions held, in the coordinator's index, by a member outside the group."""
    g = ConsumerGroup("g", ConsumerGroupConfig())
    a, b = Client(g, "a", ["a", "b"]), Client(g, "b", ["a"], instance="ib")
    settle(g, [a, b], random.Random(1), rounds=4)
    before = state_of(g)
    join = HeartbeatRequest("a", 0, instance_id="ix", rebalance_timeout_ms=1000, subscribed_topic_names=["a"],
                            owned={}, version=1)
    assert g.heartbeat(join, TOPICS, 1).error is E.INVALID_REQUEST
    # nor may the instance of a static member that left come back under another's id
    assert g.heartbeat(HeartbeatRequest("b", -2, instance_id="ib", version=1), TOPICS, 1).error is E.NONE
    left = state_of(g)
    back = dataclasses.replace(join, instance_id="ib")
    assert g.heartbeat(back, TOPICS, 2).error is E.INVALID_REQUEST
    assert state_of(g) == left and before[2].keys() == left[2].keys()
    assert g.owners == {(tid, p): m.member_id for m in g.members.values()
                        for x in (m.assigned, m.pending_revocation) for tid, ps in x.items() for p in ps}


def replayed(log: list[tuple[bytes | None, bytes | None]]) -> GroupCoordinator:
    new = GroupCoordinator(GroupConfig(), 1)
    new.begin_loading(0)
    new.load(0, log, now_ms=10, topics=TOPICS)
    new.finish_loading(0)
    return new


def test_tombstones_whose_write_failed_are_written_again() -> None:
    """A member's tombstones, or a whole group's, in a write that failed (too few
    replicas) go out again with the group's next write: a later coordinator does not
    bring the member back (holding partitions given to others since) or the group."""
    c, join = coordinator_and_join()
    log: list[tuple[bytes | None, bytes | None]] = []

    def write(fail: bool = False) -> None:
        for gid, written in c.drain_writes():
            if fail:
                c.write_failed(gid)
            else:
                log.extend(written)
                c.write_done(gid)

    a = c.consumer_heartbeat("g", join, TOPICS, 0)
    b = c.consumer_heartbeat("g", dict_join(join, "n"), TOPICS, 0)
    write()
    assert c.consumer_heartbeat("g", HeartbeatRequest("m", -1, version=1), TOPICS, 1).error is E.NONE
    write(fail=True)  # m's tombstones
    assert c.consumer_heartbeat("g", HeartbeatRequest("n", b.member_epoch, version=1), TOPICS, 2).error is E.NONE
    write()
    assert set(replayed(log).consumer_groups["g"].members) == {"n"}
    # the whole group dropped (its last member gone, no offsets) in a failed write
    assert c.consumer_heartbeat("g", HeartbeatRequest("n", -1, version=1), TOPICS, 3).error is E.NONE
    assert "g" not in c.consumer_groups
    write(fail=True)
    write()  # nothing else would write them: they go again at once
    assert "g" not in replayed(log).consumer_groups
    assert a.error is E.NONE


def dict_join(r: HeartbeatRequest, member_id: str) -> HeartbeatRequest:
    """The same join from another member."""
    return dataclasses.replace(r, member_id=member_id)
