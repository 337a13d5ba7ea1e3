"""Hypothesis state machine: the sans-I/O group coordinator against Kafka's classic group
protocol, driven by confused and hostile clients.

Random sequences of JoinGroup (with and without member id, v3 and v4, static members,
changed protocols and protocol types), SyncGroup, Heartbeat, batch LeaveGroup,
OffsetCommit/OffsetFetch, DescribeGroups, DeleteGroups, coordinator failover (a new
coordinator loading the group records and offsets the old one wrote; here every write
succeeds at once) and time advances (the broker's timer: poll at every next_deadline()). Each synchronous answer is
compared with what Kafka's GroupMetadataManager/ClassicGroup (group-coordinator module,
3.7+; GroupCoordinator.scala before it) answers in the same state; each parked
JoinGroup/SyncGroup answer must arrive exactly once, in bounded time, with a code
Kafka can send for it. After every step the group's structure is checked (leader,
static members, tokens held, generation, timers).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkarepl.coordinator import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResponse,
    OffsetAndMetadata,
    Parked,
    SyncResponse,
    encode_group_key,
    encode_group_value,
    encode_key,
    encode_value,
)
from kafkarepl.coordinator.group import Group
from kafkarepl.errors import ErrorCode as E

G = "g"
MIN_SESSION, MAX_SESSION = 1000, 60_000
SESSIONS = [MIN_SESSION - 1, MIN_SESSION, 10_000, 30_000]  # the first is refused
REBALANCES = [1000, 4000, 15_000]
R_MAX = max(REBALANCES)
INSTANCES = ["i1", "i2"]
PROTOCOLS: list[list[tuple[str, bytes]]] = [
    [("range", b"a")],
    [("range", b"b")],  # same name, other metadata: a protocol change
    [("roundrobin", b"")],
    [("range", b"a"), ("roundrobin", b"")],
    [("sticky", b"")],
    [],  # no protocol at all: never supported
]
TYPES = ["consumer", "consumer", "consumer", "connect", ""]
TPS = [("t", 0), ("t", 1), ("u", 0)]


@dataclass
class Park:
    kind: str  # "join" | "sync" | "rejoin" (a static member's new id, answered once stored)
    member_id: str
    generation: int  # the group's generation when parked
    at_ms: int


def kafka_supports(g: Group | None, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
    """ClassicGroup.supportsProtocols: an Empty group takes any non-empty type and
    protocol list; otherwise the type must match and one protocol must be supported by
    every member."""
    names = {n for n, _ in protocols}
    if g is None or g.state is GroupState.EMPTY:
        return bool(protocol_type) and bool(names)
    if g.protocol_type != protocol_type:
        return False
    n = len(g.members)
    return any(sum(name in m.protocol_names() for m in g.members.values()) == n for name in names)


def validate_member(g: Group, member_id: str, instance_id: str | None) -> E:
    """ClassicGroup.validateMember: a given group.instance.id must exist and map to the
    member id (else UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID), then the member must exist."""
    if instance_id is not None:
        known = g.static_members.get(instance_id)
        if known is None:
            return E.UNKNOWN_MEMBER_ID
        if known != member_id:
            return E.FENCED_INSTANCE_ID
    return E.NONE if member_id in g.members else E.UNKNOWN_MEMBER_ID


def member_of_generation(g: Group | None, member_id: str, instance_id: str | None, gen: int) -> E:
    """The checks SyncGroup and Heartbeat share: the group, the member, its generation."""
    if g is None:
        return E.UNKNOWN_MEMBER_ID
    err = validate_member(g, member_id, instance_id)
    if err:
        return err
    return E.ILLEGAL_GENERATION if gen != g.generation_id else E.NONE


class GroupModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000_000
        self.delay = 0
        self.c = self._coordinator(0)
        self.issued: list[str] = []  # every member id the coordinator handed out
        self.protocols_of: dict[str, list[tuple[str, bytes]]] = {}  # as the member last joined
        self.instance_of: dict[str, str | None] = {}
        self.told_gen: dict[str, int] = {}  # generation each member id learnt (JoinGroup NONE)
        self.assigned: dict[str, bytes] = {}  # each member's assignment from the leader's SyncGroup
        self.outstanding: dict[int, Park] = {}
        self.answered: set[int] = set()
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.group_object: Group | None = None  # a new one after delete, failover, or forgotten when Empty
        # When the current generation's join phase completed, and the group's rebalance
        # timeout then (the longest of its members'): SyncGroups are due by their sum.
        self.sync_due: tuple[int, int] | None = None
        self.last_gen = 0
        self.commit_ts = itertools.count(1)
        self.group_record: bytes | None = None  # the group's last record in the log
        # Members a new coordinator resumed in the stored generation, though they had
        # been told a newer one (a failover mid-rebalance): they learn ILLEGAL_GENERATION.
        self.resumed: set[str] = set()

    def _coordinator(self, delay: int) -> GroupCoordinator:
        ids = itertools.count(1)
        c = GroupCoordinator(GroupConfig(min_session_timeout_ms=MIN_SESSION, max_session_timeout_ms=MAX_SESSION,
                                         initial_rebalance_delay_ms=delay),
                             1, new_member_id=lambda client: f"{client}-{next(ids)}")
        c.begin_loading(0)
        c.finish_loading(0)
        return c

    @initialize(delay=st.sampled_from([0, 0, 3000]), members=st.integers(0, 3),
                phase=st.sampled_from(["preparing", "completing", "stable"]),
                session=st.sampled_from([10_000, 30_000]), rebalance=st.sampled_from([4000, 15_000, 15_000]))
    def setup(self, delay: int, members: int, phase: str, session: int, rebalance: int) -> None:
        """A group of well-behaved members to start from, in one of the rebalance phases."""
        self.delay = delay
        self.c = self._coordinator(delay)
        for i in range(members):
            self.member_arrives(client="abc"[i], instance=[None, "i1", None][i], proto=0, session=session,
                                rebalance=rebalance)
        self.advance_to(self.now + delay, keepalive=None)
        if phase != "preparing":
            self.everyone_rejoins()
        if phase == "stable":
            self.everyone_syncs()

    # -- helpers ---------------------------------------------------------------------
    @property
    def g(self) -> Group | None:
        return self.c.groups.get(G)

    def pick(self, i: int) -> str:
        g = self.g
        live = list(g.members) + list(g.pending_members) if g else []
        pool = live + self.issued + ["ghost-0"]
        return pool[i % len(pool)]

    def instance_for(self, member_id: str, how: str) -> str | None:
        own = self.instance_of.get(member_id)
        if how == "own":
            return own
        if how == "none":
            return None
        return next(i for i in INSTANCES if i != own)

    def generation_for(self, member_id: str, how: str) -> int:
        g = self.g
        if how == "told":
            return self.told_gen.get(member_id, -1)
        if how == "group":
            return g.generation_id if g else 0
        if how == "stale":
            return (g.generation_id if g else 1) - 1
        return -1

    def issue(self, member_id: str) -> None:
        if member_id not in self.issued:
            self.issued.append(member_id)

    def park(self, token: int, kind: str, member_id: str, generation: int) -> None:
        assert token not in self.outstanding and token not in self.answered, f"token {token} reused"
        self.outstanding[token] = Park(kind, member_id, generation, self.now)

    def drain(self, failover: bool = False) -> None:
        """The group records asked for are written; then every completed parked answer:
        known, not answered before, a code Kafka sends."""
        while stores := self.c.drain_stores():
            for st_ in stores:
                assert st_.group_id == G
                self.group_record = None if st_.snapshot is None else encode_group_value(st_.snapshot)
                self.c.store_done(G, st_.store_id, E.NONE, self.now)
        for token, resp in self.c.drain():
            assert token not in self.answered, f"token {token} answered twice: {resp}"
            assert token in self.outstanding, f"answer for a token never parked: {token} {resp}"
            p = self.outstanding.pop(token)
            self.answered.add(token)
            if failover:
                assert resp.error is E.NOT_COORDINATOR, (p, resp)
                continue
            g = self.g
            present = g is not None and p.member_id in g.members
            if p.kind in ("join", "rejoin"):
                assert isinstance(resp, JoinResponse), (p, resp)
                self._check_join_answer(p, resp, g, present)
            else:
                assert isinstance(resp, SyncResponse), (p, resp)
                self._check_sync_answer(p, resp, g, present)

    def _check_join_answer(self, p: Park, resp: JoinResponse, g: Group | None, present: bool) -> None:
        if resp.error is E.NONE:
            assert g is not None and present, f"JoinGroup NONE for a member not in the group: {p} {resp}"
            assert resp.member_id == p.member_id
            if p.kind == "rejoin":  # the current generation, as it was
                assert p.generation == resp.generation_id <= g.generation_id, (p, resp, g.generation_id)
            else:
                assert p.generation < resp.generation_id <= g.generation_id, (p, resp, g.generation_id)
            if resp.leader_id == p.member_id:
                assert p.member_id in [m for m, _, _ in resp.members], resp
            else:
                assert resp.members == [], resp
            self.told_gen[p.member_id] = resp.generation_id
            self.resumed.discard(p.member_id)
        elif resp.error is E.REBALANCE_IN_PROGRESS:  # a newer JoinGroup of the member took its place
            assert g is not None and present and g.members[p.member_id].join_token is not None, (p, resp)
        elif resp.error is E.UNKNOWN_MEMBER_ID:
            assert not present, (p, resp)
        elif resp.error is E.FENCED_INSTANCE_ID:
            inst = self.instance_of.get(p.member_id)
            assert not present and g is not None and inst is not None, (p, resp)
            assert g.static_members.get(inst) not in (None, p.member_id), (p, resp)
        else:
            raise AssertionError(f"JoinGroup answered {resp.error.name}: {p} {resp}")

    def _check_sync_answer(self, p: Park, resp: SyncResponse, g: Group | None, present: bool) -> None:
        if resp.error is E.NONE:
            assert g is not None and present and g.state is GroupState.STABLE, (p, resp)
            assert resp.assignment == self.assigned.get(p.member_id, b""), (p, resp, self.assigned)
            assert (resp.protocol_type, resp.protocol_name) == (g.protocol_type, g.protocol_name)
        elif resp.error is E.REBALANCE_IN_PROGRESS:  # a new rebalance, or a newer SyncGroup
            assert g is not None and present, (p, resp)
        elif resp.error is E.UNKNOWN_MEMBER_ID:
            assert not present, (p, resp)
        elif resp.error is E.FENCED_INSTANCE_ID:
            assert not present, (p, resp)
        else:
            raise AssertionError(f"SyncGroup answered {resp.error.name}: {p} {resp}")

    # -- JoinGroup ---------------------------------------------------------------------
    def expected_join(self, r: JoinRequest, g: Group | None) -> set[object]:
        """Kafka's answer: an error code, "ok" (NONE at once) or "parked"."""
        if not MIN_SESSION <= r.session_timeout_ms <= MAX_SESSION:
            return {E.INVALID_SESSION_TIMEOUT}
        if g is None and r.member_id:
            return {E.UNKNOWN_MEMBER_ID}
        if not kafka_supports(g, r.protocol_type, r.protocols):
            return {E.INCONSISTENT_GROUP_PROTOCOL}
        if not r.member_id:
            inst = r.group_instance_id
            if g is not None and inst is not None and inst in g.static_members:
                old = g.members[g.static_members[inst]]
                if g.state is GroupState.STABLE:
                    # No rebalance unless the group's protocol would change.
                    return {"ok"} if old.protocols == r.protocols else {"ok", "parked"}
                return {"parked"}
            if inst is None and r.require_known_member_id:
                return {E.MEMBER_ID_REQUIRED}
            return {"parked"}
        if g is None:
            return {E.UNKNOWN_MEMBER_ID}
        if r.member_id in g.pending_members:
            # Kafka throws IllegalStateException for a static pending member.
            return {E.UNKNOWN_MEMBER_ID, E.UNKNOWN_SERVER_ERROR} if r.group_instance_id else {"parked"}
        err = validate_member(g, r.member_id, r.group_instance_id)
        if err:
            return {err}
        m = g.members[r.member_id]
        same = m.protocols == r.protocols
        if g.state is GroupState.PREPARING_REBALANCE:
            return {"parked"}
        if g.state is GroupState.COMPLETING_REBALANCE:
            return {"ok"} if same else {"parked"}
        if g.state is GroupState.STABLE:
            return {"ok"} if same and r.member_id != g.leader_id else {"parked"}
        return {E.UNKNOWN_MEMBER_ID}

    def do_join(self, r: JoinRequest) -> None:
        g = self.g
        expected = self.expected_join(r, g)
        replaced = None
        if g is not None and not r.member_id and r.group_instance_id in g.static_members:
            replaced = g.static_members[r.group_instance_id]
        before = set(g.members) if g else set()
        gen_before = g.generation_id if g else 0
        out = self.c.join(G, r, self.now)
        if isinstance(out, Parked):
            g = self.g
            assert g is not None
            # A static member's new id in a Stable group: Kafka's "ok", once stored.
            rejoin = replaced is not None and g.state is GroupState.STABLE and "ok" in expected
            assert "parked" in expected or rejoin, f"parked, Kafka answers {expected}"

            assert g is not None
            new = set(g.members) - before
            mid = r.member_id or new.pop()
            new.discard(mid)
            assert not new and mid in g.members
            self.issue(mid)
            self.park(out.token, "rejoin" if rejoin else "join", mid, gen_before)
            self.protocols_of[mid] = list(r.protocols)
            self.instance_of[mid] = g.members[mid].group_instance_id
            self._carry_over(replaced, mid)
        else:
            code: object = "ok" if out.error is E.NONE else out.error
            assert code in expected, f"JoinGroup answered {out.error.name}, Kafka answers {expected}: {r}"
            g = self.g
            if out.error is E.MEMBER_ID_REQUIRED:
                assert g is not None and out.member_id in g.pending_members
                self.issue(out.member_id)
                self.instance_of[out.member_id] = None
            elif out.error is E.NONE:
                mid = out.member_id
                assert g is not None and mid in g.members and out.generation_id == g.generation_id
                assert g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
                self.issue(mid)
                self.told_gen[mid] = out.generation_id
                self.resumed.discard(mid)
                self.protocols_of[mid] = list(r.protocols)
                self.instance_of[mid] = g.members[mid].group_instance_id
                self._carry_over(replaced, mid)
        self.drain()

    def _carry_over(self, old: str | None, new: str) -> None:
        """A static member's new id takes the old one's place and assignment (KIP-345)."""
        if old is not None and old != new:
            if old in self.assigned:
                self.assigned[new] = self.assigned[old]

    @rule(client=st.sampled_from(["a", "b", "c"]), instance=st.sampled_from([None, None, *INSTANCES]),
          v4=st.booleans(), proto=st.integers(0, len(PROTOCOLS) - 1), ptype=st.sampled_from(TYPES),
          session=st.sampled_from(SESSIONS), rebalance=st.sampled_from(REBALANCES))
    def join_new(self, client: str, instance: str | None, v4: bool, proto: int, ptype: str, session: int,
                 rebalance: int) -> None:
        self.do_join(JoinRequest("", client, session, rebalance, ptype, list(PROTOCOLS[proto]), instance,
                                 require_known_member_id=v4))

    @rule(client=st.sampled_from(["a", "b", "c"]), instance=st.sampled_from([None, None, *INSTANCES]),
          proto=st.sampled_from([0, 0, 1, 3]), session=st.sampled_from([10_000, 30_000]),
          rebalance=st.sampled_from(REBALANCES[1:]))
    def member_arrives(self, client: str, instance: str | None, proto: int, session: int = 30_000,
                       rebalance: int = REBALANCES[1]) -> None:
        """A well-behaved new member: JoinGroup v4, then again with the member id it got."""
        r = JoinRequest("", client, session, rebalance, "consumer", list(PROTOCOLS[proto]), instance)
        self.do_join(r)
        if instance is None and self.issued and self.g is not None and self.issued[-1] in self.g.pending_members:
            self.do_join(JoinRequest(self.issued[-1], client, session, rebalance, "consumer",
                                     list(PROTOCOLS[proto])))

    @rule(who=st.integers(0, 1000), inst=st.sampled_from(["own", "own", "own", "none", "other"]),
          proto=st.integers(-3, len(PROTOCOLS) - 1), ptype=st.sampled_from(["consumer"] * 6 + TYPES),
          session=st.sampled_from(SESSIONS[2:] * 3 + SESSIONS), rebalance=st.sampled_from(REBALANCES))
    def join_known(self, who: int, inst: str, proto: int, ptype: str, session: int, rebalance: int) -> None:
        mid = self.pick(who)
        protocols = self.protocols_of.get(mid, PROTOCOLS[0]) if proto < 0 else PROTOCOLS[proto]
        self.do_join(JoinRequest(mid, "c", session, rebalance, ptype, list(protocols), self.instance_for(mid, inst)))

    @rule()
    def everyone_rejoins(self) -> None:
        """Every member not already waiting rejoins as it is (drives rebalances home)."""
        g = self.g
        if g is None:
            return
        for mid in [m for m, x in g.members.items() if x.join_token is None]:
            if self.g is None or mid not in self.g.members:
                continue
            m = self.g.members[mid]
            self.do_join(JoinRequest(mid, "c", m.session_timeout_ms, m.rebalance_timeout_ms, m.protocol_type,
                                     list(m.protocols), m.group_instance_id))

    # -- SyncGroup ---------------------------------------------------------------------
    def expected_sync(self, g: Group | None, member_id: str, instance: str | None, gen: int,
                      ptype: str | None, pname: str | None) -> object:
        err = member_of_generation(g, member_id, instance, gen)
        if err:
            return err
        assert g is not None
        if (ptype is not None and g.protocol_type is not None and ptype != g.protocol_type) or (
                pname is not None and g.protocol_name is not None and pname != g.protocol_name):
            return E.INCONSISTENT_GROUP_PROTOCOL
        return {GroupState.EMPTY: E.UNKNOWN_MEMBER_ID, GroupState.PREPARING_REBALANCE: E.REBALANCE_IN_PROGRESS,
                GroupState.COMPLETING_REBALANCE: "parked", GroupState.STABLE: "ok"}[g.state]

    def do_sync(self, member_id: str, instance: str | None, gen: int, ptype: str | None, pname: str | None,
                assignments: dict[str, bytes]) -> None:
        g = self.g
        expected = self.expected_sync(g, member_id, instance, gen, ptype, pname)
        leader_sync = expected == "parked" and g is not None and member_id == g.leader_id
        members = list(g.members) if g else []
        gen_before = g.generation_id if g else 0
        out = self.c.sync(G, member_id, instance, gen, ptype, pname, assignments, self.now)
        if expected in ("parked", "ok"):
            # Accepted with the group's generation: the member knows it now, told or not
            # (a static member carried into the generation untold may have guessed it).
            self.told_gen[member_id] = gen
            self.resumed.discard(member_id)
        if isinstance(out, Parked):
            assert expected == "parked", f"SyncGroup parked, Kafka answers {expected}"
            self.park(out.token, "sync", member_id, gen_before)
            if leader_sync:
                self.assigned.update({m: assignments.get(m, b"") for m in members})
        else:
            code: object = "ok" if out.error is E.NONE else out.error
            assert code == expected, f"SyncGroup answered {out.error.name}, Kafka answers {expected}"
            if out.error is E.NONE:
                assert out.assignment == self.assigned.get(member_id, b""), (member_id, out, self.assigned)
        self.drain()

    @rule(who=st.integers(0, 1000), inst=st.sampled_from(["own", "own", "own", "none", "other"]),
          gen=st.sampled_from(["told", "told", "told", "group", "stale", "minus1"]),
          ptype=st.sampled_from([None, None, "consumer", "connect"]),
          pname=st.sampled_from([None, None, "range", "roundrobin"]),
          give=st.lists(st.integers(0, 1000), max_size=3))
    def sync(self, who: int, inst: str, gen: str, ptype: str | None, pname: str | None, give: list[int]) -> None:
        mid = self.pick(who)
        g = self.g
        assignments = {}
        if g is not None:
            targets = list(g.members) + ["ghost-0"]
            assignments = {targets[i % len(targets)]: f"{targets[i % len(targets)]}@{g.generation_id}".encode()
                           for i in give}
        self.do_sync(mid, self.instance_for(mid, inst), self.generation_for(mid, gen), ptype, pname, assignments)

    @rule(leader_too=st.booleans())
    def everyone_syncs(self, leader_too: bool = True) -> None:
        """Members sync with the generation they were told; the leader last, assigning
        something to every member (or not at all: a slow or stuck leader)."""
        g = self.g
        if g is None:
            return
        leader = g.leader_id
        order = sorted(g.members, key=lambda m: m == leader)
        if not leader_too:
            order = [m for m in order if m != leader]
        for mid in order:
            g = self.g
            if g is None or mid not in g.members or g.members[mid].sync_token is not None:
                continue
            assignments = {m: f"{m}@{g.generation_id}".encode() for m in g.members}
            self.do_sync(mid, self.instance_of.get(mid), self.told_gen.get(mid, -1), None, None, assignments)

    @rule(part=st.sampled_from([0.25, 0.9, 1.1]))
    def slow_leader(self, part: float) -> None:
        """The followers sync; the leader, alive (heartbeating), takes that part of the
        group's rebalance timeout to assign."""
        g = self.g
        if g is None or g.state is not GroupState.COMPLETING_REBALANCE:
            return
        timeout = max(m.rebalance_timeout_ms for m in g.members.values())
        self.everyone_syncs(leader_too=False)
        self.advance_to(self.now + int(part * timeout), keepalive="idle")
        self.everyone_syncs(leader_too=True)

    # -- Heartbeat ---------------------------------------------------------------------
    def expected_heartbeat(self, g: Group | None, member_id: str, instance: str | None, gen: int) -> E:
        err = member_of_generation(g, member_id, instance, gen)
        if err:
            return err
        assert g is not None
        return {GroupState.EMPTY: E.UNKNOWN_MEMBER_ID, GroupState.PREPARING_REBALANCE: E.REBALANCE_IN_PROGRESS,
                GroupState.COMPLETING_REBALANCE: E.NONE, GroupState.STABLE: E.NONE}[g.state]

    def do_heartbeat(self, member_id: str, instance: str | None, gen: int) -> None:
        expected = self.expected_heartbeat(self.g, member_id, instance, gen)
        got = self.c.heartbeat(G, member_id, instance, gen, self.now)
        assert got is expected, f"Heartbeat answered {got.name}, Kafka answers {expected.name}"
        self.drain()

    @rule(who=st.integers(0, 1000), inst=st.sampled_from(["own", "own", "own", "none", "other"]),
          gen=st.sampled_from(["told", "told", "group", "stale", "minus1"]))
    def heartbeat(self, who: int, inst: str, gen: str) -> None:
        mid = self.pick(who)
        self.do_heartbeat(mid, self.instance_for(mid, inst), self.generation_for(mid, gen))

    # -- LeaveGroup --------------------------------------------------------------------
    @rule(batch=st.lists(st.tuples(st.integers(0, 1000), st.sampled_from(["id", "id", "both", "instance", "wrong"])),
                         min_size=1, max_size=3))
    def leave(self, batch: list[tuple[int, str]]) -> None:
        who: list[tuple[str, str | None]] = []
        for i, how in batch:
            mid = self.pick(i)
            inst = self.instance_of.get(mid)
            if how == "id":
                who.append((mid, None))
            elif how == "both":
                who.append((mid, inst))
            elif how == "instance":
                who.append(("", inst if inst is not None else INSTANCES[i % 2]))
            else:
                who.append((mid, next(x for x in INSTANCES if x != inst)))
        g = self.g
        expected: list[E] = []
        if g is not None:
            members, static, pending = set(g.members), dict(g.static_members), set(g.pending_members)
            for mid, inst in who:  # LeaveGroup's per-member rules, applied in order
                if not mid:
                    if inst is not None and inst in static:
                        members.discard(static.pop(inst))
                        expected.append(E.NONE)
                    else:
                        expected.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if mid in pending:
                    pending.discard(mid)
                    expected.append(E.NONE)
                    continue
                err = E.NONE
                if inst is not None:
                    err = E.UNKNOWN_MEMBER_ID if inst not in static else (
                        E.FENCED_INSTANCE_ID if static[inst] != mid else E.NONE)
                if not err and mid not in members:
                    err = E.UNKNOWN_MEMBER_ID
                if not err:
                    members.discard(mid)
                    static = {k: v for k, v in static.items() if v != mid}
                expected.append(err)
        else:
            expected = [E.UNKNOWN_MEMBER_ID for _ in who]
        top, codes = self.c.leave(G, who, self.now)
        assert top is E.NONE and codes == expected, f"LeaveGroup {who}: {codes}, Kafka answers {expected}"
        self.drain()

    # -- offsets -----------------------------------------------------------------------
    def expected_commit(self, g: Group | None, member_id: str, instance: str | None, gen: int) -> E:
        """ClassicGroup.validateOffsetCommit (and OffsetMetadataManager for no group)."""
        if g is None:
            return E.NONE if gen < 0 else E.ILLEGAL_GENERATION
        if gen < 0 and g.state is GroupState.EMPTY:
            return E.NONE
        if gen >= 0 or member_id or instance is not None:
            err = validate_member(g, member_id, instance)
            if err:
                return err
            if gen != g.generation_id:
                return E.ILLEGAL_GENERATION
        elif g.state is not GroupState.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if g.state is GroupState.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    @rule(who=st.integers(0, 1000), anonymous=st.booleans(), inst=st.sampled_from(["own", "own", "none", "other"]),
          gen=st.sampled_from(["told", "told", "group", "stale", "minus1"]),
          tps=st.sets(st.sampled_from(TPS), min_size=1), offset=st.integers(0, 100))
    def commit(self, who: int, anonymous: bool, inst: str, gen: str, tps: set[tuple[str, int]],
               offset: int) -> None:
        mid = "" if anonymous else self.pick(who)
        instance = None if anonymous else self.instance_for(mid, inst)
        generation = -1 if anonymous else self.generation_for(mid, gen)
        expected = self.expected_commit(self.g, mid, instance, generation)
        offs = {tp: OffsetAndMetadata(offset, -1, "", next(self.commit_ts)) for tp in sorted(tps)}
        err = self.c.validate_commit(G, mid, instance, generation, self.now)
        assert err is expected, f"OffsetCommit answered {err.name}, Kafka answers {expected.name}"
        if not err:
            assert all(self.c.offset_error(o) is E.NONE for o in offs.values())
            assert self.c.apply_commit(G, offs) is E.NONE
            self.offsets.update(offs)
        self.drain()

    @rule()
    def fetch_offsets(self) -> None:
        err, found = self.c.fetch_offsets(G, [("t", [0, 1]), ("u", [0])])
        assert err is E.NONE
        assert found == {tp: self.offsets.get(tp) for tp in TPS}
        assert self.c.fetch_offsets(G, None) == (E.NONE, dict(sorted(self.offsets.items())))

    # -- DescribeGroups / DeleteGroups ---------------------------------------------------
    @rule()
    def describe(self) -> None:
        err, d = self.c.describe(G)
        assert err is E.NONE
        g = self.g
        if g is None:
            assert d["group_state"] == "Dead" and d["members"] == []
            return
        assert d["group_state"] == g.state.value
        assert [m["member_id"] for m in d["members"]] == list(g.members)
        if g.state is GroupState.STABLE:
            assert d["protocol_data"] == g.protocol_name

    @rule()
    def delete_group(self) -> None:
        g = self.g
        # ClassicGroup.validateDeleteGroup: only an Empty group (or, with no group: not found).
        expected = E.GROUP_ID_NOT_FOUND if g is None else (
            E.NONE if g.state is GroupState.EMPTY else E.NON_EMPTY_GROUP)
        err, tombstones = self.c.prepare_delete(G)
        assert err is expected, f"DeleteGroups answered {err.name}, Kafka answers {expected.name}"
        if not err:
            assert sorted(tombstones) == sorted(self.offsets)
            assert self.c.finish_delete(G) is E.NONE
            self.group_record = None  # the broker writes the group's tombstone with the offsets'
            assert G not in self.c.groups
            self.offsets.clear()
        self.drain()

    def new_incarnation(self) -> None:
        self.resumed.clear()
        self.last_gen = 0
        self.told_gen.clear()
        self.assigned.clear()

    # -- coordinator failover ------------------------------------------------------------
    @rule()
    def failover(self) -> None:
        """The partition's leadership moves away and back: parked requests learn
        NOT_COORDINATOR; the group (its last stored generation, members and assignments)
        and the committed offsets come back from the log."""
        self.c.unload(0)
        self.drain(failover=True)
        assert not self.outstanding
        self.c.begin_loading(0)
        assert self.c.heartbeat(G, "x", None, 1, self.now) is E.COORDINATOR_LOAD_IN_PROGRESS
        records = [(encode_key(G, t, p), encode_value(o)) for (t, p), o in self.offsets.items()]
        self.c.load(0, [(encode_group_key(G), self.group_record), *records], self.now, 0)
        self.c.finish_loading(0)
        self.drain()
        g = self.g
        if g is not None and self.group_object is not None:
            self.group_object = g  # the same group, resumed: not a new incarnation
            assert g.generation_id <= self.last_gen
            self.last_gen = g.generation_id
            self.resumed = {m for m in g.members if self.told_gen.get(m) != g.generation_id}

    # -- time ----------------------------------------------------------------------------
    def advance_to(self, target: int, keepalive: str | None) -> None:
        """The broker's timer: poll at each deadline up to `target`. keepalive: every
        member ("all"), or every member with no JoinGroup/SyncGroup parked ("idle"),
        heartbeats (with what it knows) every few hundred ms, but does nothing else."""
        while self.now < target:
            step = min(target, self.now + 400) if keepalive else target
            nd = self.c.next_deadline()
            if nd is not None and nd < step:
                step = max(nd, self.now + 1)
            self.now = step
            self.c.poll(self.now)
            self.drain()
            g = self.g
            if keepalive and g is not None:
                for mid in list(g.members):
                    m = self.g.members.get(mid) if self.g is not None else None
                    if m is not None and (keepalive == "all" or (m.join_token is None and m.sync_token is None)):
                        self.c.heartbeat(G, mid, self.instance_of.get(mid), self.told_gen.get(mid, -1), self.now)
                        self.drain()

    @rule(ms=st.sampled_from([1, 300, 1000, 2500, 4000, 12_000, 20_000, 40_000]),
          keepalive=st.sampled_from([None, "all", "idle", "idle"]))
    def advance(self, ms: int, keepalive: str | None) -> None:
        self.advance_to(self.now + ms, keepalive)

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def group_structure(self) -> None:
        g = self.g
        if g is not self.group_object:  # deleted, forgotten when Empty without offsets, or reloaded
            if self.group_object is not None:
                self.new_incarnation()
            self.group_object = g
        if g is None:
            assert not self.outstanding
            return
        s = g.state
        assert s is not GroupState.DEAD
        assert g.generation_id >= self.last_gen, "the generation went back"
        if g.generation_id != self.last_gen:
            self.sync_due = (self.now, max((m.rebalance_timeout_ms for m in g.members.values()), default=0))
        self.last_gen = g.generation_id
        if g.members:
            assert g.leader_id in g.members, "the leader is not a member"
        else:
            assert g.leader_id is None
            # Kafka too keeps a memberless group PreparingRebalance until its rebalance
            # completes: in the initial delay, or while a MEMBER_ID_REQUIRED id may still
            # join (ClassicGroup.hasAllMembersJoined counts pending members).
            assert s is GroupState.EMPTY or (s is GroupState.PREPARING_REBALANCE
                                             and g.rebalance_deadline_ms is not None), s
        if s is GroupState.EMPTY:
            assert not g.members
        # group.instance.id <-> member id: one member per instance, and the member says so.
        assert len(set(g.static_members.values())) == len(g.static_members)
        for inst, mid in g.static_members.items():
            assert mid in g.members and g.members[mid].group_instance_id == inst
        for mid, m in g.members.items():
            if m.group_instance_id is not None:
                assert g.static_members.get(m.group_instance_id) == mid
        assert not set(g.pending_members) & set(g.members)
        assert set(g.members) | set(g.pending_members) <= set(self.issued), "a member id nobody was given"
        # Members owing a SyncGroup (Kafka's pendingSyncMembers) exist, only after a join phase.
        assert g.pending_sync <= set(g.members)
        if g.pending_sync:
            assert s in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and g.sync_deadline_ms is not None
        # Parked answers: held by exactly the member they were parked for, in the state
        # that completes them; nothing held that the clients are not waiting for.
        held: dict[int, tuple[str, str]] = {}
        for mid, m in g.members.items():
            if m.join_token is not None:
                assert s is GroupState.PREPARING_REBALANCE, f"a JoinGroup parked in {s}"
                held[m.join_token] = ("join", mid)
            if m.sync_token is not None:
                assert s is GroupState.COMPLETING_REBALANCE, f"a SyncGroup parked in {s}"
                held[m.sync_token] = ("sync", mid)
        waiting = {t: (p.kind, p.member_id) for t, p in self.outstanding.items()}
        assert held == waiting, f"parked answers lost or phantom: held {held}, clients wait for {waiting}"
        if s in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            # KIP-345: a static member that did not rejoin is carried into the generation
            # untold; it owes a SyncGroup (after a rejoin) or goes at the pending-sync expiry.
            carried = {mid for mid in g.pending_sync if g.members[mid].group_instance_id is not None}
            for mid in set(g.members) - self.resumed - carried:
                assert self.told_gen.get(mid) == g.generation_id, \
                    f"{mid} is in generation {g.generation_id} but was told {self.told_gen.get(mid)}"

    @invariant()
    def timers_are_current(self) -> None:
        """After the timer ran at `now`, nothing is overdue: expired members and pending
        ids are gone, and the next deadline is in the future."""
        g = self.g
        if g is None:
            return
        for mid, deadline in g.pending_members.items():
            assert deadline > self.now, f"pending member {mid} outlived its session"
        for mid, m in g.members.items():
            if m.join_token is None and m.sync_token is None:
                assert m.heartbeat_deadline_ms > self.now, f"{mid} outlived its session"
        nd = self.c.next_deadline()
        assert nd is None or nd > self.now, f"deadline {nd} overdue at {self.now}"

    @invariant()
    def parked_answers_come_in_bounded_time(self) -> None:
        # JoinGroup: by the rebalance timeout (or the initial delay); SyncGroup: by the
        # rebalance timeout after the join phase completed (Kafka's pending-sync expiry).
        for token, p in self.outstanding.items():
            assert self.now - p.at_ms <= max(R_MAX, self.delay), \
                f"{p} unanswered after {self.now - p.at_ms} ms (token {token})"
            if p.kind == "sync" and self.sync_due is not None:
                since, timeout = self.sync_due
                assert self.now - since <= timeout, \
                    f"{p} unanswered {self.now - since} ms after the join phase (rebalance timeout {timeout})"

    def teardown(self) -> None:
        # Liveness: with every client silent, all parked answers arrive and every member
        # and pending member id expires.
        self.advance_to(self.now + 4 * (R_MAX + MAX_SESSION), keepalive=None)
        assert not self.outstanding, f"never answered: {self.outstanding}"
        g = self.g
        assert g is None or (not g.members and not g.pending_members and g.state is GroupState.EMPTY)


GroupModel.TestCase.settings = settings(max_examples=400, stateful_step_count=40, deadline=None)
TestGroupModel = GroupModel.TestCase


def test_a_carried_static_member_syncing_with_the_groups_generation() -> None:
    """Found by the model: a static member that did not rejoin is carried into the next
    generation untold (KIP-345); its SyncGroup with that generation, guessed, is accepted
    as Kafka accepts it, and from then on it is a member of the generation like any other."""
    s = GroupModel()

    def step() -> None:
        s.group_structure()
        s.parked_answers_come_in_bounded_time()
        s.timers_are_current()

    s.setup(delay=0, members=2, phase="preparing", session=10000, rebalance=4000)
    step()
    s.join_known(inst="own", proto=0, ptype="consumer", rebalance=1000, session=10000, who=0)
    step()
    s.sync(gen="told", give=[], inst="own", pname=None, ptype=None, who=0)  # REBALANCE_IN_PROGRESS
    step()
    s.join_known(inst="own", proto=0, ptype="consumer", rebalance=1000, session=10000, who=0)
    step()
    s.advance(keepalive=None, ms=4000)  # the join phase ends without the second member
    step()
    s.sync(gen="group", give=[], inst="own", pname=None, ptype=None, who=1)
    step()
    s.teardown()
