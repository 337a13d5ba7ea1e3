"""The sans-I/O group coordinator on a fake clock: join/sync rounds, MEMBER_ID_REQUIRED,
heartbeat expiry, rebalance timeout, leave, generations and the error codes."""

from __future__ import annotations

import itertools

import pytest

from kafkarepl.coordinator import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResponse,
    OffsetAndMetadata,
    Parked,
    StoreRequest,
    SyncResponse,
    encode_key,
    encode_value,
)
from kafkarepl.errors import ErrorCode as E

G = "group-a"
SESSION = 6000
REBALANCE = 10000


class Harness:
    """A coordinator owning every partition, a clock, and the parked responses."""

    def __init__(self, initial_delay: int = 0, max_size: int = 2147483647) -> None:
        ids = itertools.count(1)
        self.now = 1_000_000
        self.c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=initial_delay, max_size=max_size), 1,
                                  new_member_id=lambda client: f"{client}-{next(ids)}")
        self.c.begin_loading(0)
        self.c.finish_loading(0)
        self.done: dict[int, JoinResponse | SyncResponse] = {}
        self.records: list[StoreRequest] = []  # every group record written, in order
        self.hold_stores = False  # True: group records wait in `held` for store_done
        self.held: list[StoreRequest] = []

    def _collect(self) -> None:
        """Parked answers, after writing the group records asked for (at once, unless held)."""
        while stores := self.c.drain_stores():
            if self.hold_stores:
                self.held += stores
                continue
            for s in stores:
                self.records.append(s)
                self.c.store_done(s.group_id, s.store_id, E.NONE, self.now)
        self.done.update(self.c.drain())

    def finish_store(self, error: E = E.NONE) -> None:
        s = self.held.pop(0)
        if not error:
            self.records.append(s)
        self.c.store_done(s.group_id, s.store_id, error, self.now)
        self._collect()

    def tick(self, ms: int) -> None:
        self.now += ms
        self.c.poll(self.now)
        self._collect()

    def join(self, member_id: str = "", client: str = "c", protocols=(("range", b"m"),), v4: bool = True,
             session: int = SESSION, instance: str | None = None) -> JoinResponse | Parked:
        r = JoinRequest(member_id, client, session, REBALANCE, "consumer", list(protocols), instance,
                        require_known_member_id=v4)
        out = self.c.join(G, r, self.now)
        self._collect()
        return out

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None):
        out = self.c.sync(G, member_id, None, generation, None, None, assignments or {}, self.now)
        self._collect()
        return out

    def result(self, parked) -> JoinResponse | SyncResponse | None:
        assert isinstance(parked, Parked), parked
        return self.done.get(parked.token)

    def state(self) -> GroupState:
        return self.c.groups[G].state

    def new_member(self, client: str = "c") -> str:
        first = self.join(client=client)
        assert isinstance(first, JoinResponse) and first.error is E.MEMBER_ID_REQUIRED
        assert first.member_id.startswith(f"{client}-")
        return first.member_id


def stable_pair(h: Harness) -> tuple[str, str, int]:
    """Two members in a Stable generation; returns (leader, follower, generation)."""
    a = h.new_member("a")
    pa = h.join(a, client="a")
    resp = h.result(pa)
    assert resp.error is E.NONE and resp.leader_id == a and resp.generation_id == 1
    b = h.new_member("b")
    pb = h.join(b, client="b")
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.result(pb) is None  # waits for a to rejoin
    assert h.c.heartbeat(G, a, None, 1, h.now) is E.REBALANCE_IN_PROGRESS
    pa = h.join(a, client="a")
    ra, rb = h.result(pa), h.result(pb)
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader_id == rb.leader_id == a
    assert sorted(m[0] for m in ra.members) == sorted([a, b]) and rb.members == []
    assert h.state() is GroupState.COMPLETING_REBALANCE
    sb = h.sync(b, 2)
    assert h.result(sb) is None  # the follower waits for the leader's assignment
    sa = h.sync(a, 2, {a: b"A", b: b"B"})
    assert h.result(sa).assignment == b"A" and h.result(sb).assignment == b"B"
    assert h.state() is GroupState.STABLE
    return a, b, 2


def test_first_join_requires_member_id_then_completes() -> None:
    h = Harness()
    member = h.new_member("client-1")
    assert h.c.groups[G].members == {}
    parked = h.join(member, client="client-1")
    resp = h.result(parked)
    assert resp.error is E.NONE
    assert (resp.member_id, resp.leader_id, resp.generation_id, resp.protocol_name) == (member, member, 1, "range")
    assert resp.members == [(member, None, b"m")]
    sync = h.sync(member, 1, {member: b"all"})
    assert h.result(sync) == SyncResponse(E.NONE, "consumer", "range", b"all")
    assert h.state() is GroupState.STABLE
    assert h.c.heartbeat(G, member, None, 1, h.now) is E.NONE
    # Stable: a later SyncGroup of the same generation gets the assignment at once.
    assert h.sync(member, 1) == SyncResponse(E.NONE, "consumer", "range", b"all")


def test_v3_join_gets_member_id_without_a_round_trip() -> None:
    h = Harness()
    resp = h.result(h.join(v4=False, client="old"))
    assert resp.error is E.NONE and resp.member_id.startswith("old-")


def test_unknown_member_and_bad_session_timeout() -> None:
    h = Harness()
    assert h.join("nobody").error is E.UNKNOWN_MEMBER_ID
    assert h.join(session=1000).error is E.INVALID_SESSION_TIMEOUT
    assert h.join(session=2_000_000).error is E.INVALID_SESSION_TIMEOUT
    assert h.c.heartbeat(G, "nobody", None, 0, h.now) is E.UNKNOWN_MEMBER_ID
    assert h.c.sync(G, "nobody", None, 0, None, None, {}, h.now).error is E.UNKNOWN_MEMBER_ID
    r = JoinRequest("", "c", SESSION, REBALANCE, "consumer", [("range", b"")])
    assert h.c.join("", r, h.now).error is E.INVALID_GROUP_ID


def test_two_members_split_and_illegal_generation() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    assert h.c.heartbeat(G, b, None, gen - 1, h.now) is E.ILLEGAL_GENERATION
    assert h.sync(b, gen + 1).error is E.ILLEGAL_GENERATION
    assert h.c.validate_commit(G, b, None, gen - 1, h.now) is E.ILLEGAL_GENERATION
    assert h.c.validate_commit(G, b, None, gen, h.now) is E.NONE
    # A simple (generation -1) commit into a group with members is refused.
    assert h.c.validate_commit(G, "", None, -1, h.now) is E.UNKNOWN_MEMBER_ID


def test_inconsistent_protocols_are_refused() -> None:
    h = Harness()
    stable_pair(h)
    other = h.join(client="x", protocols=[("roundrobin", b"")])
    assert other.error is E.INCONSISTENT_GROUP_PROTOCOL
    r = JoinRequest("", "x", SESSION, REBALANCE, "connect", [("range", b"")])
    assert h.c.join(G, r, h.now).error is E.INCONSISTENT_GROUP_PROTOCOL


def test_a_rebalancing_group_keeps_its_protocol_type_with_no_members_and_the_first_member_sets_it() -> None:
    h = Harness(initial_delay=3000)
    a = h.join(client="a", v4=False)
    member = next(iter(h.c.groups[G].members))
    assert isinstance(a, Parked) and h.state() is GroupState.PREPARING_REBALANCE  # the initial delay
    h.c.apply_commit(G, {("t", 0): OffsetAndMetadata(1)})  # keeps the group once Empty
    h.c.leave(G, [(member, None)], h.now)
    assert h.state() is GroupState.PREPARING_REBALANCE and not h.c.groups[G].members
    # Kafka's supportsProtocols goes by state: not Empty yet, so the type must match.
    other = JoinRequest("", "x", SESSION, REBALANCE, "connect", [("range", b"")], require_known_member_id=False)
    assert h.c.join(G, other, h.now).error is E.INCONSISTENT_GROUP_PROTOCOL
    h.tick(3000)
    assert h.state() is GroupState.EMPTY and h.c.groups[G].protocol_type == "consumer"
    # Empty: any type; the first member sets it, so a consumer can no longer join alongside.
    assert isinstance(h.c.join(G, other, h.now), Parked)
    assert h.c.groups[G].protocol_type == "connect"
    assert h.join(client="b", v4=False).error is E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_chosen_by_votes() -> None:
    h = Harness()
    pa = [("roundrobin", b"1"), ("range", b"2")]
    a = h.result(h.join(client="a", v4=False, protocols=pa)).member_id  # generation 1, alone
    pb = h.join(client="b", v4=False, protocols=[("range", b"3"), ("roundrobin", b"4"), ("sticky", b"")])
    pc = h.join(client="c", v4=False, protocols=[("range", b"5"), ("roundrobin", b"6")])
    lead = h.result(h.join(a, client="a", protocols=pa))
    # Votes: a -> roundrobin, b -> range, c -> range ("sticky" is not common to all).
    assert lead.protocol_name == h.result(pb).protocol_name == h.result(pc).protocol_name == "range"
    assert sorted(md for _, _, md in lead.members) == [b"2", b"3", b"5"]


def test_heartbeat_expiry_removes_member_and_rebalances() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    for _ in range(2):  # a keeps heartbeating, b goes silent
        h.tick(SESSION // 3)
        assert h.c.heartbeat(G, a, None, gen, h.now) is E.NONE
        assert b in h.c.groups[G].members
    h.tick(SESSION // 3)
    assert b not in h.c.groups[G].members
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.c.heartbeat(G, a, None, gen, h.now) is E.REBALANCE_IN_PROGRESS
    resp = h.result(h.join(a, client="a"))  # the only member left: completes at once
    assert (resp.generation_id, resp.leader_id, [m[0] for m in resp.members]) == (gen + 1, a, [a])
    assert h.c.heartbeat(G, b, None, gen, h.now) is E.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_removes_members_that_did_not_rejoin() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    c = h.new_member("c")
    pc = h.join(c, client="c")
    pa = h.join(a, client="a")
    assert h.result(pc) is None  # b has not rejoined yet
    # b heartbeats (it is alive) but never rejoins: the rebalance timeout decides.
    for _ in range(REBALANCE // 2000 - 1):
        h.tick(2000)
        assert h.c.heartbeat(G, b, None, gen, h.now) is E.REBALANCE_IN_PROGRESS
    assert h.result(pc) is None
    h.tick(2000)
    ra, rc = h.result(pa), h.result(pc)
    assert ra.error is E.NONE and rc.error is E.NONE and ra.generation_id == gen + 1
    assert sorted(m[0] for m in ra.members) == sorted([a, c])
    assert h.c.heartbeat(G, b, None, gen, h.now) is E.UNKNOWN_MEMBER_ID


def _static_pair(h: Harness) -> tuple[str, str, int]:
    """A dynamic leader and a static member ("inst-b", a session longer than the
    rebalance timeout, as KIP-345 recommends) in a Stable generation."""
    a = h.new_member("a")
    h.join(a, client="a")
    pb = h.join(client="b", instance="inst-b", session=3 * REBALANCE)
    pa = h.join(a, client="a")
    gen = h.result(pa).generation_id
    b = h.result(pb).member_id
    h.sync(b, gen)
    h.sync(a, gen, {a: b"A", b: b"B"})
    assert h.state() is GroupState.STABLE
    return a, b, gen


def test_a_static_member_that_did_not_rejoin_stays_in_the_next_generation() -> None:
    # KIP-345 (Kafka's completeClassicGroupJoin removes only *dynamic* members that did
    # not rejoin): a bouncing static member keeps its place and gets an assignment; when
    # it comes back it syncs into the generation, and nobody rebalances again.
    h = Harness()
    a, b, gen = _static_pair(h)
    c = h.new_member("c")
    pc = h.join(c, client="c")
    pa = h.join(a, client="a")
    h.tick(REBALANCE)  # b (silent: restarting) never rejoins
    ra, rc = h.result(pa), h.result(pc)
    assert ra.generation_id == rc.generation_id == gen + 1 and ra.leader_id == a
    assert sorted(m[0] for m in ra.members) == sorted([a, b, c])  # the leader assigns b too
    assert (b, "inst-b") in [(m[0], m[1]) for m in ra.members]
    h.sync(c, gen + 1)
    h.sync(a, gen + 1, {a: b"A2", b: b"B2", c: b"C2"})
    assert h.state() is GroupState.STABLE and b in h.c.groups[G].pending_sync
    # b is back within its session: with its member id it learns the generation and
    # syncs its assignment; or, restarted, with a new id it takes the old one's place.
    assert h.c.heartbeat(G, b, "inst-b", gen, h.now) is E.ILLEGAL_GENERATION
    rb = h.join(b, client="b", instance="inst-b")
    assert isinstance(rb, JoinResponse) and rb.generation_id == gen + 1 and h.state() is GroupState.STABLE
    assert h.sync(b, gen + 1).assignment == b"B2"
    assert h.c.groups[G].pending_sync == set() and h.state() is GroupState.STABLE
    for mid in (a, b, c):
        assert h.c.heartbeat(G, mid, "inst-b" if mid == b else None, gen + 1, h.now) is E.NONE


def test_a_carried_static_member_that_never_syncs_goes_at_the_pending_sync_expiry() -> None:
    h = Harness()
    a, b, gen = _static_pair(h)
    c = h.new_member("c")
    h.join(c, client="c")
    h.join(a, client="a")
    h.tick(REBALANCE)
    assert b in h.c.groups[G].members
    h.sync(c, gen + 1)
    h.sync(a, gen + 1, {a: b"A2", b: b"B2", c: b"C2"})
    h.tick(REBALANCE // 2)
    for mid in (a, c):
        h.c.heartbeat(G, mid, None, gen + 1, h.now)
    h.tick(REBALANCE // 2)  # the rebalance timeout after the join phase: no SyncGroup from b
    assert b not in h.c.groups[G].members and "inst-b" not in h.c.groups[G].static_members
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_a_rebalance_no_member_rejoined_waits_for_the_static_members_sessions() -> None:
    # Kafka: "could not complete rebalance because no members rejoined": the join phase
    # is rescheduled; the generation stays until the members come back or expire.
    h = Harness()
    p1 = h.join(client="s", instance="i1", session=3 * REBALANCE)
    s1 = h.result(p1).member_id
    h.sync(s1, 1, {s1: b"x"})
    p2 = h.join(client="t", instance="i2", session=3 * REBALANCE)  # a second static member: rebalance
    h.tick(REBALANCE)  # s1 (silent) never rejoined; i2 did
    assert h.result(p2).generation_id == 2 and h.c.groups[G].leader_id != s1
    g = h.c.groups[G]
    h.c.leave(G, [(h.result(p2).member_id, "i2")], h.now)  # i2 leaves: only s1, silent, is left
    h.tick(REBALANCE)
    assert g.state is GroupState.PREPARING_REBALANCE and g.generation_id == 2 and list(g.members) == [s1]
    h.tick(3 * REBALANCE)  # s1's session runs out: the group empties
    assert G not in h.c.groups or h.state() is GroupState.EMPTY


def test_leave_rebalances_and_last_leave_empties_group() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    assert h.c.leave(G, [(b, None), ("ghost", None)], h.now) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    assert h.state() is GroupState.PREPARING_REBALANCE
    resp = h.result(h.join(a, client="a"))
    assert resp.generation_id == gen + 1 and [m[0] for m in resp.members] == [a]
    h.sync(a, gen + 1, {a: b"everything"})
    # Commit something so the group outlives its members (offsets keep it, as in Kafka).
    offs = {("t", 0): OffsetAndMetadata(7)}
    assert h.c.validate_commit(G, a, None, gen + 1, h.now) is E.NONE
    h.c.apply_commit(G, offs)
    assert h.c.leave(G, [(a, None)], h.now) == (E.NONE, [E.NONE])
    assert h.state() is GroupState.EMPTY
    assert h.c.groups[G].generation_id == gen + 2
    assert h.c.fetch_offsets(G, [("t", [0, 1])]) == (E.NONE, {("t", 0): OffsetAndMetadata(7), ("t", 1): None})
    # Simple commits are accepted by an Empty group.
    assert h.c.validate_commit(G, "", None, -1, h.now) is E.NONE


def test_rebalance_during_completing_voids_pending_syncs() -> None:
    h = Harness()
    a = h.new_member("a")
    h.join(a, client="a")
    b = h.new_member("b")
    pb = h.join(b, client="b")
    pa = h.join(a, client="a")
    gen = h.result(pa).generation_id
    sb = h.sync(b, gen)
    assert h.result(sb) is None
    c = h.new_member("c")
    h.join(c, client="c")  # a newcomer during CompletingRebalance
    assert h.result(sb).error is E.REBALANCE_IN_PROGRESS
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.result(pb).generation_id == gen


def test_pending_member_id_expires_after_session_timeout() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    h.new_member("slow")
    assert len(h.c.groups[G].pending_members) == 1
    for _ in range(3):
        h.tick(SESSION // 2)
        h.c.heartbeat(G, a, None, gen, h.now)
        h.c.heartbeat(G, b, None, gen, h.now)
    assert h.c.groups[G].pending_members == {}
    assert h.state() is GroupState.STABLE


def test_initial_rebalance_delay_gathers_members() -> None:
    h = Harness(initial_delay=3000)
    a = h.new_member("a")
    pa = h.join(a, client="a")
    h.tick(1000)
    b = h.new_member("b")
    pb = h.join(b, client="b")
    h.tick(2000)  # the first delay ran out, but b arrived during it: wait once more
    assert h.result(pa) is None
    h.tick(3000)
    ra, rb = h.result(pa), h.result(pb)
    assert ra.generation_id == rb.generation_id == 1
    assert sorted(m[0] for m in ra.members) == sorted([a, b])


def test_static_member_rejoin_fences_old_id_without_a_rebalance() -> None:
    # KIP-345: a restarted static member gets a new member id, the old one's assignment
    # and the current generation; the group stays Stable (no revoke for anyone).
    h = Harness()
    p1 = h.join(client="s", instance="inst-1")
    old = h.result(p1).member_id
    h.sync(old, 1, {old: b"x"})
    assert h.state() is GroupState.STABLE
    r = h.result(h.join(client="s", instance="inst-1"))  # answered once the new id is stored
    assert isinstance(r, JoinResponse) and r.error is E.NONE
    new = r.member_id
    assert [m.member_id for m in h.records[-1].snapshot.members] == [new]
    assert new != old and r.generation_id == 1 and h.state() is GroupState.STABLE
    assert r.leader_id == old and r.members == []  # the leader as it was: no reassignment
    synced = h.sync(new, 1)
    assert isinstance(synced, SyncResponse) and synced.assignment == b"x"
    assert h.c.heartbeat(G, old, "inst-1", 1, h.now) is E.FENCED_INSTANCE_ID
    assert h.c.heartbeat(G, new, "inst-1", 1, h.now) is E.NONE
    assert h.c.leave(G, [("", "inst-1")], h.now) == (E.NONE, [E.NONE])


def test_a_replaced_static_member_is_fenced_everywhere_and_an_unknown_instance_is_unknown() -> None:
    # Kafka's ClassicGroup.validateMember checks the group.instance.id before the member
    # id: the old incarnation of a restarted static member learns FENCED_INSTANCE_ID (it
    # had UNKNOWN_MEMBER_ID, so it rejoined and fenced its successor: a ping-pong), and an
    # instance id the group does not know is UNKNOWN_MEMBER_ID even for a known member.
    h = Harness()
    old = h.result(h.join(client="s", instance="inst-1")).member_id
    h.sync(old, 1, {old: b"x"})
    new = h.result(h.join(client="s", instance="inst-1")).member_id
    assert new != old
    assert h.c.heartbeat(G, old, "inst-1", 1, h.now) is E.FENCED_INSTANCE_ID
    assert h.c.sync(G, old, "inst-1", 1, None, None, {}, h.now).error is E.FENCED_INSTANCE_ID
    assert h.c.validate_commit(G, old, "inst-1", 1, h.now) is E.FENCED_INSTANCE_ID
    assert h.join(old, client="s", instance="inst-1").error is E.FENCED_INSTANCE_ID
    assert h.c.heartbeat(G, new, "inst-2", 1, h.now) is E.UNKNOWN_MEMBER_ID
    assert h.c.sync(G, new, "inst-2", 1, None, None, {}, h.now).error is E.UNKNOWN_MEMBER_ID
    assert h.join(new, client="s", instance="inst-2").error is E.UNKNOWN_MEMBER_ID
    assert h.c.validate_commit(G, new, "inst-2", 1, h.now) is E.UNKNOWN_MEMBER_ID
    assert h.c.heartbeat(G, new, "inst-1", 1, h.now) is E.NONE and h.state() is GroupState.STABLE


def test_static_member_rejoining_with_another_protocol_rebalances() -> None:
    h = Harness()
    p1 = h.join(client="s", instance="inst-1")
    old = h.result(p1).member_id
    h.sync(old, 1, {old: b"x"})
    r = h.join(client="s", instance="inst-1", protocols=(("roundrobin", b"m"), ("range", b"m")))
    assert isinstance(r, Parked)
    assert h.result(r).error is E.NONE and h.result(r).generation_id == 2


def test_coordinator_errors_and_unload() -> None:
    h = Harness()
    a = h.new_member("a")
    pa = h.join(a, client="a")
    gen = h.result(pa).generation_id
    b = h.new_member("b")
    pb = h.join(b, client="b")
    h.c.unload(0)
    h._collect()
    assert h.result(pb).error is E.NOT_COORDINATOR
    assert h.c.heartbeat(G, a, None, gen, h.now) is E.NOT_COORDINATOR
    h.c.begin_loading(0)
    assert h.c.heartbeat(G, a, None, gen, h.now) is E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.list_groups()[0] is E.COORDINATOR_LOAD_IN_PROGRESS


def test_load_replays_offsets_and_tombstones() -> None:
    c = GroupCoordinator(GroupConfig(), 1)
    c.begin_loading(0)
    recs = [
        (encode_key("g1", "t", 0), encode_value(OffsetAndMetadata(10, 3, "m", 111))),
        (encode_key("g1", "t", 1), encode_value(OffsetAndMetadata(20))),
        (encode_key("g1", "t", 0), encode_value(OffsetAndMetadata(12, 4, "", 222))),
        (encode_key("g2", "t", 0), encode_value(OffsetAndMetadata(1))),
        (encode_key("g2", "t", 0), None),
        (b"\x00\x02\x00\x02g3", b"group metadata: skipped"),
    ]
    assert c.load(0, recs) == 5
    c.finish_loading(0)
    err, offs = c.fetch_offsets("g1", None)
    assert err is E.NONE
    assert offs == {("t", 0): OffsetAndMetadata(12, 4, "", 222), ("t", 1): OffsetAndMetadata(20)}
    assert "g2" not in c.groups  # its only offset was deleted
    assert c.list_groups() == (E.NONE, [("g1", "", "Empty", "classic")])
    assert c.describe("nope") == (E.NONE, {"group_state": "Dead", "protocol_type": "", "protocol_data": "",
                                           "members": []})


@pytest.mark.parametrize("metadata,code", [("x" * 4096, E.NONE), ("x" * 4097, E.OFFSET_METADATA_TOO_LARGE)])
def test_commit_metadata_limit(metadata: str, code: E) -> None:
    c = GroupCoordinator(GroupConfig(), 1)
    c.begin_loading(0)
    c.finish_loading(0)
    assert c.validate_commit("g", "", None, -1, 0) is E.NONE
    assert c.offset_error(OffsetAndMetadata(1, metadata=metadata)) is code


def test_offsets_of_an_empty_group_expire_after_retention_from_when_it_emptied() -> None:
    import struct

    from kafkarepl.coordinator.offsets import OffsetAndMetadata

    h = Harness()
    m = h.new_member("a")
    subscription = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)  # consumer protocol: ["t"]
    gen = h.result(h.join(m, client="a", protocols=(("range", subscription),))).generation_id
    h.sync(m, gen, {m: b"x"})
    wall = 5_000_000
    h.c.apply_commit(G, {("t", 0): OffsetAndMetadata(10, commit_timestamp_ms=wall),
                         ("u", 0): OffsetAndMetadata(3, commit_timestamp_ms=wall)})
    retention = 60_000
    # With members, only offsets of topics no member subscribes to expire (by commit time).
    assert h.c.expire_offsets(h.now, wall + retention - 1, retention) == {}
    assert h.c.expire_offsets(h.now, wall + retention, retention) == {h.c.partition_for(G): [(G, ("u", 0))]}
    h.c.apply_commit(G, {("u", 0): OffsetAndMetadata(3, commit_timestamp_ms=wall)})
    h.c.leave(G, [(m, None)], h.now)
    h.tick(1)
    assert h.state() is GroupState.EMPTY
    emptied = h.c.groups[G].empty_since_ms
    assert h.c.expire_offsets(emptied + retention - 1, wall + 10 * retention, retention) == {}
    out = h.c.expire_offsets(emptied + retention, wall, retention)
    assert out == {h.c.partition_for(G): [(G, ("t", 0)), (G, ("u", 0))]}
    assert G not in h.c.groups  # an Empty group without offsets is gone (Dead)


@pytest.mark.parametrize(("subscription", "topics"), [
    # v3: topics, user data, owned partitions, generation, rack
    (bytes.fromhex("0003" "00000002" "0001" "74" "0001" "75" "00000002" "abcd" "00000001" "0001" "74" "00000001"
                   "00000000" "00000005" "0002" "7231"), {"t", "u"}),
    # a version from the future, with fields after the known ones: read as v3 (Kafka's ConsumerProtocol)
    (bytes.fromhex("0009" "00000001" "0001" "77" "ffffffff" "00000000" "ffffffff" "ffff" "0102030405"), {"w"}),
    (bytes.fromhex("0001" "00000005" "0001" "74"), None),  # cut short: every topic counts as subscribed
])
def test_subscribed_topics_read_the_members_consumer_protocol_subscriptions(
        subscription: bytes, topics: set[str] | None) -> None:
    h = Harness()
    m = h.new_member("a")
    h.result(h.join(m, client="a", protocols=(("range", subscription),)))
    assert h.c.groups[G].subscribed_topics() == topics


def test_offsets_committed_without_membership_expire_from_their_commit_time() -> None:
    from kafkarepl.coordinator.offsets import OffsetAndMetadata

    h = Harness()
    h.c.apply_commit(G, {("t", 0): OffsetAndMetadata(1, commit_timestamp_ms=1000),
                         ("t", 1): OffsetAndMetadata(1, commit_timestamp_ms=5000)})
    assert h.c.expire_offsets(h.now, 1000 + 3999, 4000) == {}
    assert h.c.expire_offsets(h.now, 5000, 4000) == {h.c.partition_for(G): [(G, ("t", 0))]}
    assert h.c.fetch_offsets(G, None)[1] == {("t", 1): OffsetAndMetadata(1, commit_timestamp_ms=5000)}


def test_commit_outside_group_management_into_an_empty_group_names_any_member() -> None:
    # Kafka's validateOffsetCommit: generation -1 into an Empty group is accepted before
    # any member check (an assign() consumer may still send its old member or instance id).
    h = Harness()
    pending = h.new_member("a")  # a MEMBER_ID_REQUIRED id: the group exists, Empty
    assert h.c.validate_commit(G, pending, None, -1, h.now) is E.NONE
    assert h.c.validate_commit(G, "stale-id", "inst-9", -1, h.now) is E.NONE
    # With a generation going, an anonymous commit is refused, a named one validated.
    h.c.leave(G, [(pending, None)], h.now)
    a, _b, gen = stable_pair(h)
    assert h.c.validate_commit(G, "", None, -1, h.now) is E.UNKNOWN_MEMBER_ID
    assert h.c.validate_commit(G, a, None, -1, h.now) is E.ILLEGAL_GENERATION
    assert h.c.validate_commit(G, a, None, gen, h.now) is E.NONE


def test_leave_of_a_pending_member_id_needs_no_instance_check() -> None:
    # Kafka's classicGroupLeave drops a pending (MEMBER_ID_REQUIRED) id before validating
    # a group.instance.id, which such an id never has (it was UNKNOWN_MEMBER_ID).
    h = Harness()
    pending = h.new_member("a")
    assert h.c.leave(G, [(pending, "inst-1")], h.now) == (E.NONE, [E.NONE])
    assert h.c.groups.get(G) is None or not h.c.groups[G].pending_members


def test_pending_member_ids_do_not_keep_an_empty_group_from_deletion() -> None:
    # Kafka's validateDeleteGroup goes by state: an Empty group is deleted even while
    # MEMBER_ID_REQUIRED ids are pending (a client repeating JoinGroup v4 without a
    # member id kept the group NON_EMPTY_GROUP for ever).
    h = Harness()
    h.c.apply_commit(G, {("t", 0): OffsetAndMetadata(1)})
    pending = h.new_member("a")
    assert h.state() is GroupState.EMPTY
    assert h.c.prepare_delete(G) == (E.NONE, [("t", 0)])
    assert h.c.finish_delete(G) is E.NONE and G not in h.c.groups
    assert h.join(pending, client="a").error is E.UNKNOWN_MEMBER_ID  # it finds no group


def test_sync_naming_a_protocol_before_the_group_has_one_is_not_inconsistent() -> None:
    # Kafka's isProtocolInconsistent needs both names: in the first rebalance the group
    # has none yet, so a SyncGroup v5 naming one learns REBALANCE_IN_PROGRESS.
    h = Harness(initial_delay=3000)
    member = h.new_member("a")
    h.join(member, client="a")
    assert h.state() is GroupState.PREPARING_REBALANCE and h.c.groups[G].protocol_name is None
    out = h.c.sync(G, member, None, 0, "consumer", "range", {}, h.now)
    assert out.error is E.REBALANCE_IN_PROGRESS


def _completing_pair(h: Harness) -> tuple[str, str, int]:
    """Two members told generation 2, neither synced yet: (leader, follower, generation)."""
    a = h.new_member("a")
    h.join(a, client="a")
    b = h.new_member("b")
    pb = h.join(b, client="b")
    ra = h.result(h.join(a, client="a"))
    assert ra.leader_id == a and h.result(pb).generation_id == ra.generation_id
    assert h.state() is GroupState.COMPLETING_REBALANCE
    return a, b, ra.generation_id


def test_a_leader_that_heartbeats_but_never_syncs_is_removed_at_the_rebalance_timeout() -> None:
    # Kafka's pending-sync expiry (KAFKA-12890): members that sent no SyncGroup within the
    # rebalance timeout after the join phase leave. Without it the follower's SyncGroup
    # stayed parked (and the group CompletingRebalance) as long as the leader heartbeated.
    h = Harness()
    a, b, gen = _completing_pair(h)
    sb = h.sync(b, gen)
    for _ in range(REBALANCE // 2000 - 1):
        h.tick(2000)
        assert h.c.heartbeat(G, a, None, gen, h.now) is E.NONE
    assert h.result(sb) is None and h.c.next_deadline() == h.now + 2000
    h.tick(2000)
    assert h.result(sb).error is E.REBALANCE_IN_PROGRESS
    assert a not in h.c.groups[G].members and h.state() is GroupState.PREPARING_REBALANCE
    r = h.result(h.join(b, client="b"))
    assert r.error is E.NONE and r.leader_id == b and r.generation_id == gen + 1


def test_members_that_all_synced_are_not_expired_by_the_sync_timeout() -> None:
    h = Harness()
    a, b, gen = _completing_pair(h)
    h.sync(b, gen)
    h.sync(a, gen, {a: b"A", b: b"B"})
    assert h.state() is GroupState.STABLE and h.c.groups[G].sync_deadline_ms is None
    for _ in range(3):
        h.tick(REBALANCE // 2)
        assert h.c.heartbeat(G, a, None, gen, h.now) is E.NONE
        assert h.c.heartbeat(G, b, None, gen, h.now) is E.NONE
    assert h.state() is GroupState.STABLE and len(h.c.groups[G].members) == 2


def test_a_parked_sync_answered_late_restarts_the_members_session() -> None:
    # Kafka's propagateAssignment reschedules the heartbeat of every member it answers: the
    # member could not heartbeat while its SyncGroup waited. Without that, a follower
    # answered after its session timeout was removed at the next timer, assignment in hand.
    h = Harness()
    a, b, gen = _completing_pair(h)
    sb = h.sync(b, gen)
    for _ in range(2):
        h.tick(SESSION // 2 + 1)  # past b's session, inside the rebalance timeout
        assert h.c.heartbeat(G, a, None, gen, h.now) is E.NONE
    sa = h.sync(a, gen, {a: b"A", b: b"B"})
    assert h.result(sa).assignment == b"A" and h.result(sb).assignment == b"B"
    h.tick(1)
    assert b in h.c.groups[G].members and h.state() is GroupState.STABLE
    assert h.c.heartbeat(G, b, None, gen, h.now) is E.NONE


def test_group_max_size_refuses_members_past_the_limit() -> None:
    # group.max.size, as Kafka's acceptJoiningMember: a full Stable group takes no new
    # member (not even a member id: no MEMBER_ID_REQUIRED round trip), its members rejoin.
    h = Harness(max_size=2)
    a, b, gen = stable_pair(h)
    refused = h.join(client="c")
    assert refused == JoinResponse(E.GROUP_MAX_SIZE_REACHED, "")
    assert h.c.groups[G].pending_members == {} and h.state() is GroupState.STABLE
    assert h.join(b, client="b").error is E.NONE  # a member still rejoins (its current answer)
    # A member leaves: there is room again.
    assert h.c.leave(G, [(b, None)], h.now)[1] == [E.NONE]
    assert h.new_member("c")


def test_group_max_size_lowered_leaves_out_the_last_to_rejoin() -> None:
    # A group loaded with more members than the limit (lowered since it was written)
    # rebalances; while it gathers its members, those rejoining once the limit is reached
    # are removed with GROUP_MAX_SIZE_REACHED (Kafka's "Freshly-loaded group is over
    # capacity"), and the generation completes with the others.
    h = Harness()
    a, b, gen = stable_pair(h)
    group_records = [r for r in h.records if r.group_id == G]
    lowered = Harness(max_size=1)
    lowered.c.unload(0)
    lowered.c.begin_loading(0)
    snap = group_records[-1].snapshot
    from kafkarepl.coordinator.group_records import encode_group_key, encode_group_value
    lowered.c.load(0, [(encode_group_key(G), encode_group_value(snap))], lowered.now, lowered.now)
    lowered.c.finish_loading(0)
    assert lowered.state() is GroupState.PREPARING_REBALANCE
    pa = lowered.join(a, client="a")  # the first to rejoin is in
    assert lowered.result(pa) is None or lowered.result(pa).error is E.NONE
    rb = lowered.join(b, client="b")  # the limit is reached: b is out
    assert rb == JoinResponse(E.GROUP_MAX_SIZE_REACHED, "")
    assert b not in lowered.c.groups[G].members
    ra = lowered.result(pa)
    assert ra.error is E.NONE and ra.generation_id == gen + 1 and [m[0] for m in ra.members] == [a]
