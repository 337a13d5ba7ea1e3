"""Leader election rules (pure functions)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkarepl.controller.election import (
    LeaderAndIsr,
    NoLeader,
    clean_election,
    controlled_shutdown_election,
    offline,
    offline_partition_election,
    preferred_election,
    reassignment_election,
    unclean_election,
)


def test_clean_picks_first_live_isr_member_in_assignment_order():
    r = clean_election([1, 2, 3], isr=[3, 2], live={2, 3}, leader_epoch=4)
    assert r == LeaderAndIsr(2, 5, [3, 2])


def test_clean_drops_dead_brokers_from_isr():
    r = clean_election([1, 2, 3], isr=[1, 2, 3], live={2, 3}, leader_epoch=0)
    assert r == LeaderAndIsr(2, 1, [2, 3])


def test_clean_never_picks_out_of_sync_replica():
    r = clean_election([1, 2, 3], isr=[1], live={2, 3}, leader_epoch=0)
    assert isinstance(r, NoLeader) and not r.online


def test_unclean_picks_first_live_replica_and_flags_it():
    r = unclean_election([1, 2, 3], isr=[1], live={3, 2}, leader_epoch=7)
    assert r == LeaderAndIsr(2, 8, [2], unclean=True)
    # clean choice preferred when available
    assert unclean_election([1, 2, 3], [3], {2, 3}, 0) == LeaderAndIsr(3, 1, [3])
    assert isinstance(unclean_election([1, 2], [1], set(), 0), NoLeader)


def test_offline_partition_election_respects_unclean_flag():
    assert isinstance(
        offline_partition_election([1, 2], [1], {2}, 0, unclean_allowed=False), NoLeader
    )
    assert offline_partition_election([1, 2], [1], {2}, 0, unclean_allowed=True).unclean


def test_offline_state_keeps_last_isr_member():
    s = offline([1], live={2}, leader_epoch=3)
    assert s.leader == -1 and s.leader_epoch == 4 and s.isr == [1]


def test_preferred():
    assert preferred_election([1, 2], [2, 1], {1, 2}, 3) == LeaderAndIsr(1, 4, [2, 1])
    assert isinstance(preferred_election([1, 2], [2], {1, 2}, 3), NoLeader)
    assert isinstance(preferred_election([1, 2], [1, 2], {2}, 3), NoLeader)


def test_controlled_shutdown_moves_leadership_off_the_broker():
    r = controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, 0, shutting_down={1})
    assert r == LeaderAndIsr(2, 1, [2, 3])
    assert isinstance(controlled_shutdown_election([1, 2], [1], {1, 2}, 0, {1}), NoLeader)


def test_reassignment_election_picks_from_target_set():
    r = reassignment_election([4, 5], isr=[1, 4, 5], live={1, 4, 5}, leader_epoch=2)
    assert r == LeaderAndIsr(4, 3, [4, 5])
    assert isinstance(reassignment_election([4, 5], [1], {1, 4, 5}, 2), NoLeader)


replica_sets = st.lists(st.integers(0, 9), min_size=1, max_size=6, unique=True)


@given(
    assignment=replica_sets,
    isr_mask=st.lists(st.booleans(), min_size=6, max_size=6),
    live=st.sets(st.integers(0, 9)),
    epoch=st.integers(0, 1000),
    unclean=st.booleans(),
)
def test_property_offline_election_rules(assignment, isr_mask, live, epoch, unclean):
    isr = [b for b, m in zip(assignment, isr_mask, strict=False) if m]
    r = offline_partition_election(assignment, isr, live, epoch, unclean_allowed=unclean)
    live_isr = [b for b in assignment if b in live and b in isr]
    live_any = [b for b in assignment if b in live]
    if live_isr:
        # Clean whenever possible: the first live ISR member in assignment order.
        assert r == LeaderAndIsr(live_isr[0], epoch + 1, [b for b in isr if b in live])
    elif unclean and live_any:
        assert (
            r.unclean
            and r.leader == live_any[0]
            and r.isr == [r.leader]
            and r.leader_epoch == epoch + 1
        )
    else:
        assert isinstance(r, NoLeader)
    if isinstance(r, LeaderAndIsr):
        assert r.leader in live and r.leader in assignment and r.leader in r.isr
        assert set(r.isr) <= set(live)


@given(
    assignment=replica_sets,
    live=st.sets(st.integers(0, 9)),
    epoch=st.integers(0, 100),
    down=st.sets(st.integers(0, 9), max_size=2),
)
def test_property_controlled_shutdown_never_picks_a_stopping_broker(assignment, live, epoch, down):
    r = controlled_shutdown_election(assignment, assignment, live, epoch, down)
    if isinstance(r, LeaderAndIsr):
        assert r.leader not in down and r.leader in live
        assert not set(r.isr) & down
    else:
        assert all(b in down or b not in live for b in assignment)
