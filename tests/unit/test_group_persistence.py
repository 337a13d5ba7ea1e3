"""Group membership in `__consumer_offsets` (Kafka's GroupMetadataKey/Value): the record
layout, when the sans-I/O coordinator asks for a record, what a failed write does, and
a new coordinator resuming groups from the records the old one wrote."""

from __future__ import annotations

import struct

import pytest

from kafkarepl.coordinator import (
    GroupSnapshot,
    GroupState,
    JoinResponse,
    MemberSnapshot,
    OffsetAndMetadata,
    SyncResponse,
    decode_group_key,
    decode_group_value,
    decode_key,
    encode_group_key,
    encode_group_value,
    encode_key,
    encode_value,
)
from kafkarepl.errors import ErrorCode as E
from tests.unit.test_group_state import G, Harness, stable_pair


def _s(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text)) + text.encode()


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


# ------------------------------------------------------------------ the layout ----
def test_group_key_and_value_v3_layout() -> None:
    assert encode_group_key("grp") == b"\x00\x02\x00\x03grp"
    assert decode_group_key(b"\x00\x02\x00\x03grp") == "grp"
    assert decode_group_key(encode_key("grp", "t", 0)) is None  # an offset key
    assert decode_key(encode_group_key("grp")) is None  # and the other way round
    snap = GroupSnapshot("consumer", 7, "range", "m1", 1_700_000_000_000, (
        MemberSnapshot("m1", "inst", "cid", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        MemberSnapshot("m2", None, "cid2", "/h", 5000, 6000, b"", b""),
    ))
    # The fields of GroupMetadataValue v3, in its order.
    expected = (b"\x00\x03" + _s("consumer") + struct.pack(">i", 7) + _s("range") + _s("m1")
                + struct.pack(">q", 1_700_000_000_000) + struct.pack(">i", 2)
                + _s("m1") + _s("inst") + _s("cid") + _s("/127.0.0.1") + struct.pack(">ii", 30000, 10000)
                + _b(b"sub") + _b(b"asg")
                + _s("m2") + _s(None) + _s("cid2") + _s("/h") + struct.pack(">ii", 5000, 6000) + _b(b"") + _b(b""))
    assert encode_group_value(snap) == expected
    assert decode_group_value(expected) == snap
    assert decode_group_value(None) is None


def test_older_group_value_versions_are_read() -> None:
    member_v0 = _s("m") + _s("c") + _s("h") + struct.pack(">i", 9000) + _b(b"s") + _b(b"a")
    v0 = b"\x00\x00" + _s("consumer") + struct.pack(">i", 3) + _s(None) + _s(None) + struct.pack(">i", 1) + member_v0
    assert decode_group_value(v0) == GroupSnapshot("consumer", 3, None, None, -1, (
        MemberSnapshot("m", None, "c", "h", 9000, 9000, b"s", b"a"),))
    member_v1 = _s("m") + _s("c") + _s("h") + struct.pack(">ii", 20000, 9000) + _b(b"s") + _b(b"a")
    v2 = (b"\x00\x02" + _s("connect") + struct.pack(">i", 4) + _s("sessioned") + _s("m") + struct.pack(">q", 55)
          + struct.pack(">i", 1) + member_v1)
    assert decode_group_value(v2) == GroupSnapshot("connect", 4, "sessioned", "m", 55, (
        MemberSnapshot("m", None, "c", "h", 20000, 9000, b"s", b"a"),))


@pytest.mark.parametrize("value", [
    b"\x00\x05" + _s("consumer"),  # a version from the future
    b"\x00\x03" + _s("consumer") + struct.pack(">i", 1),  # cut short
    b"\x00\x03" + _s("c") + struct.pack(">i", 1) + _s(None) + _s(None) + struct.pack(">q", 0)
    + struct.pack(">i", 1000),  # more members than bytes
])
def test_malformed_group_values_raise_value_error(value: bytes) -> None:
    with pytest.raises(ValueError):
        decode_group_value(value)


# ------------------------------------------------------------- when it writes ----
def test_the_group_is_stable_only_once_the_leaders_assignment_is_stored() -> None:
    h = Harness()
    a = h.new_member("a")
    assert h.result(h.join(a, client="a")).generation_id == 1
    h.hold_stores = True
    sa = h.sync(a, 1, {a: b"A"})
    assert h.result(sa) is None and h.state() is GroupState.COMPLETING_REBALANCE
    [pending] = h.held
    assert pending.group_id == G and pending.snapshot is not None
    assert [(m.member_id, m.assignment) for m in pending.snapshot.members] == [(a, b"A")]
    assert (pending.snapshot.generation_id, pending.snapshot.leader_id) == (1, a)
    h.finish_store()
    assert h.result(sa) == SyncResponse(E.NONE, "consumer", "range", b"A")
    assert h.state() is GroupState.STABLE


def test_a_failed_assignment_write_fails_the_syncgroups_and_rebalances() -> None:
    # Kafka's resetAndPropagateAssignmentError + maybePrepareRebalance.
    h = Harness()
    h.hold_stores = True
    a = h.new_member("a")
    h.join(a, client="a")
    h.tick(0)
    b = h.new_member("b")
    pb = h.join(b, client="b")
    pa = h.join(a, client="a")
    assert h.result(pa).generation_id == h.result(pb).generation_id == 2
    h.held.clear()  # the Empty group's record after generation 1 (no members): not in question
    sb = h.sync(b, 2)
    sa = h.sync(a, 2, {a: b"A", b: b"B"})
    h.finish_store(E.NOT_COORDINATOR)
    assert h.result(sa) == SyncResponse(E.NOT_COORDINATOR)
    assert h.result(sb) == SyncResponse(E.NOT_COORDINATOR)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in h.c.groups[G].members.values())


def test_a_rebalance_during_the_write_voids_its_outcome() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    h.hold_stores = True
    pa = h.join(a, client="a", protocols=(("range", b"changed"),))  # the leader rejoins: rebalance
    pb = h.join(b, client="b")
    assert h.result(pa).generation_id == gen + 1
    sa = h.sync(a, gen + 1, {a: b"A2", b: b"B2"})
    assert len(h.held) == 1
    pc = h.join(h.new_member("c"), client="c")  # a newcomer before the record is written
    assert h.result(sa) == SyncResponse(E.REBALANCE_IN_PROGRESS)
    h.finish_store()  # too late: nothing changes
    assert h.state() is GroupState.PREPARING_REBALANCE and h.result(pc) is None and h.result(pb) is not None


def test_a_replaced_static_members_failed_write_puts_the_old_member_back() -> None:
    h = Harness()
    old = h.result(h.join(client="s", instance="inst-1")).member_id
    h.sync(old, 1, {old: b"x"})
    h.hold_stores = True
    parked = h.join(client="s", instance="inst-1")
    assert h.result(parked) is None  # not answered before the new id is in the log
    h.finish_store(E.COORDINATOR_NOT_AVAILABLE)
    assert h.result(parked) == JoinResponse(E.COORDINATOR_NOT_AVAILABLE, "")
    g = h.c.groups[G]
    assert list(g.members) == [old] and g.static_members == {"inst-1": old} and g.leader_id == old
    assert h.c.heartbeat(G, old, "inst-1", 1, h.now) is E.NONE  # the old incarnation goes on
    assert h.state() is GroupState.STABLE and g.members[old].assignment == b"x"


def test_an_empty_group_is_stored_and_a_forgotten_one_gets_a_tombstone() -> None:
    h = Harness()
    a = h.new_member("a")
    h.result(h.join(a, client="a"))
    h.sync(a, 1, {a: b"A"})
    assert h.c.leave(G, [(a, None)], h.now) == (E.NONE, [E.NONE])
    h.tick(0)
    # After the last member left: the Empty group's record (Kafka's storeGroup with no
    # members), then, as it has no offsets and is forgotten, its tombstone.
    empty, tombstone = h.records[-2:]
    assert empty.snapshot is not None and empty.snapshot.members == () and empty.snapshot.generation_id == 2
    assert tombstone.group_id == G and tombstone.snapshot is None
    assert G not in h.c.groups


# ---------------------------------------------------------- a new coordinator ----
def _records(h: Harness, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> list[tuple[bytes, bytes | None]]:
    """What the new coordinator reads: the group records written, and the offsets."""
    out: list[tuple[bytes, bytes | None]] = [
        (encode_group_key(r.group_id), None if r.snapshot is None else encode_group_value(r.snapshot))
        for r in h.records]
    return out + [(encode_key(G, t, p), encode_value(o)) for (t, p), o in offsets.items()]


def test_a_new_coordinator_resumes_a_stable_group_in_its_generation() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    assert h.result(h.join(client="s", instance="inst-1")) is None  # a static member joins: rebalance
    for mid in (a, b):
        h.join(mid, client=mid[0])
    g = h.c.groups[G]
    s = next(m for m in g.members if m.startswith("s-"))
    gen += 1
    h.sync(s, gen)
    h.sync(b, gen)
    h.sync(a, gen, {a: b"A", b: b"B", s: b"S"})
    assert h.state() is GroupState.STABLE
    new = Harness()
    new.now = h.now + 500
    new.c.unload(0)
    new.c.begin_loading(0)
    new.c.load(0, _records(h, {("t", 0): OffsetAndMetadata(5)}), new.now, 0)
    new.c.finish_loading(0)
    g2 = new.c.groups[G]
    assert (g2.state, g2.generation_id, g2.leader_id, g2.protocol_type, g2.protocol_name) == (
        GroupState.STABLE, gen, a, "consumer", "range")
    assert {m: x.assignment for m, x in g2.members.items()} == {a: b"A", b: b"B", s: b"S"}
    assert g2.static_members == {"inst-1": s}
    assert g2.offsets == {("t", 0): OffsetAndMetadata(5)}
    # The members carry on: heartbeats, SyncGroup (their assignment again), commits.
    for mid in (a, b):
        assert new.c.heartbeat(G, mid, None, gen, new.now) is E.NONE
    assert new.c.heartbeat(G, s, "inst-1", gen, new.now) is E.NONE
    assert new.sync(b, gen) == SyncResponse(E.NONE, "consumer", "range", b"B")
    assert new.c.validate_commit(G, a, None, gen, new.now) is E.NONE
    # A member that rejoins with what it had keeps the generation: no rebalance.
    r = new.join(b, client="b")
    assert isinstance(r, JoinResponse) and r.generation_id == gen and new.state() is GroupState.STABLE
    # Sessions restart at the load: a member that stays silent is removed after its timeout.
    new.tick(3000)
    assert new.c.heartbeat(G, b, None, gen, new.now) is E.NONE
    assert new.c.heartbeat(G, s, "inst-1", gen, new.now) is E.NONE
    new.tick(3001)
    assert a not in g2.members and b in g2.members and new.state() is GroupState.PREPARING_REBALANCE


def test_a_new_coordinator_keeps_an_empty_groups_generation_and_drops_a_deleted_one() -> None:
    h = Harness()
    a = h.new_member("a")
    h.result(h.join(a, client="a"))
    h.sync(a, 1, {a: b"A"})
    h.c.apply_commit(G, {("t", 0): OffsetAndMetadata(1)})  # offsets keep the Empty group
    h.c.leave(G, [(a, None)], h.now)
    h.tick(0)
    assert h.state() is GroupState.EMPTY and h.records[-1].snapshot.members == ()
    new = Harness()
    new.c.unload(0)
    new.c.begin_loading(0)
    new.c.load(0, _records(h, {("t", 0): OffsetAndMetadata(1)}), new.now, 0)
    new.c.finish_loading(0)
    assert (new.state(), new.c.groups[G].generation_id) == (GroupState.EMPTY, 2)
    b = new.new_member("b")
    assert new.result(new.join(b, client="b")).generation_id == 3  # generations go on
    # A tombstone after the record (DeleteGroups, or a forgotten group) leaves nothing.
    again = Harness()
    again.c.load(0, [(encode_group_key(G), encode_group_value(h.records[-1].snapshot)),
                     (encode_group_key(G), None)], 0, 0)
    assert G not in again.c.groups
