"""The reassignment proposal (`reassign-partitions --generate`): an even spread over the
given brokers, as few replica moves as possible, rack spread, determinism."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl.controller.placement import assign_replicas
from kafkarepl.controller.reassign_plan import (
    PlanError,
    changed_partitions,
    propose_reassignment,
    replicas_moved,
)


def topic(name: str, assignment: dict[int, list[int]]) -> dict[tuple[str, int], list[int]]:
    return {(name, p): r for p, r in assignment.items()}


def replica_counts(plan, name: str | None = None) -> Counter:
    return Counter(b for (t, _), r in plan.items() if name in (None, t) for b in r)


def leader_counts(plan) -> Counter:
    return Counter(r[0] for r in plan.values())


def fewest_moves(current, brokers) -> int:
    """Lower bound: replicas off the brokers, plus what the fullest brokers hold over an
    even share (the extra replicas of an uneven total going to the fullest)."""
    total = sum(len(r) for r in current.values())
    base, extra = divmod(total, len(brokers))
    held = sorted((sum(b in r for r in current.values()) for b in brokers), reverse=True)
    return total - sum(min(h, base + (i < extra)) for i, h in enumerate(held))


def check_valid(current, plan, brokers) -> None:
    assert plan.keys() == current.keys()
    for tp, replicas in plan.items():
        assert len(replicas) == len(current[tp]), tp
        assert len(set(replicas)) == len(replicas), (tp, replicas)
        assert set(replicas) <= set(brokers), (tp, replicas)


THREE = topic("t", assign_replicas([1, 2, 3], 6, 3, fixed_start_index=0))
TWO_OF_THREE = topic("t", assign_replicas([1, 2, 3], 12, 2, fixed_start_index=0))


def test_removing_a_broker_moves_only_its_replicas_and_spreads_them():
    plan = propose_reassignment(TWO_OF_THREE, [1, 2])
    check_valid(TWO_OF_THREE, plan, [1, 2])
    assert replica_counts(plan) == {1: 12, 2: 12}
    on_3 = sum(3 in r for r in TWO_OF_THREE.values())
    assert replicas_moved(TWO_OF_THREE, plan) == on_3 == 8
    # Partitions without broker 3 keep their replica list, order included.
    for tp, r in TWO_OF_THREE.items():
        if 3 not in r:
            assert plan[tp] == r


def test_removing_a_broker_with_rf3_on_four_brokers():
    current = topic("t", assign_replicas([1, 2, 3, 4], 8, 3, fixed_start_index=0))
    plan = propose_reassignment(current, [1, 2, 4])
    check_valid(current, plan, [1, 2, 4])
    assert replica_counts(plan) == {1: 8, 2: 8, 4: 8}
    assert replicas_moved(current, plan) == fewest_moves(current, [1, 2, 4]) == 6


def test_adding_a_broker_gives_it_an_even_share_and_leadership():
    plan = propose_reassignment(TWO_OF_THREE, [1, 2, 3, 4])
    check_valid(TWO_OF_THREE, plan, [1, 2, 3, 4])
    assert replica_counts(plan) == {1: 6, 2: 6, 3: 6, 4: 6}
    assert replicas_moved(TWO_OF_THREE, plan) == 6  # only the new broker's share moves
    assert leader_counts(plan)[4] >= 2  # 12 partitions over 4 brokers: 3 each ideally
    assert max(leader_counts(plan).values()) - min(leader_counts(plan).values()) <= 2


def test_balanced_assignment_on_the_same_brokers_is_left_alone():
    for current in (THREE, TWO_OF_THREE):
        plan = propose_reassignment(current, [1, 2, 3])
        assert plan == current
        assert changed_partitions(current, plan) == {}


def test_unbalanced_topic_is_rebalanced_on_the_same_brokers():
    current = topic("t", {p: [1, 2] for p in range(6)})  # broker 3 empty
    plan = propose_reassignment(current, [1, 2, 3])
    check_valid(current, plan, [1, 2, 3])
    assert replica_counts(plan) == {1: 4, 2: 4, 3: 4}
    assert replicas_moved(current, plan) == 4


def test_each_topic_is_spread_on_its_own_and_the_totals_stay_even():
    current = {**topic("a", {p: [1] for p in range(3)}), **topic("b", {p: [1] for p in range(3)})}
    plan = propose_reassignment(current, [1, 2])
    for name in ("a", "b"):
        counts = replica_counts(plan, name)
        assert max(counts.values()) - min(counts.values()) <= 1
    # The odd replica of each topic lands on different brokers.
    assert replica_counts(plan) == {1: 3, 2: 3}


def test_rack_aware_plan_puts_replicas_on_different_racks():
    current = topic("t", {p: [1, 2] for p in range(4)})  # both on rack a
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    plan = propose_reassignment(current, racks)
    check_valid(current, plan, racks)
    for tp, r in plan.items():
        assert {racks[b] for b in r} == {"a", "b"}, (tp, r)
    assert replica_counts(plan) == {1: 2, 2: 2, 3: 2, 4: 2}


def test_plan_is_deterministic_and_independent_of_input_order():
    current = topic("t", assign_replicas([1, 2, 3, 4, 5], 20, 3, fixed_start_index=2))
    reversed_input = dict(reversed(list(current.items())))
    first = propose_reassignment(current, [5, 1, 3, 2])
    assert propose_reassignment(reversed_input, [1, 2, 3, 5]) == first
    assert propose_reassignment(current, {1: None, 2: None, 3: None, 5: None}) == first


def test_impossible_plans_raise_plan_error():
    with pytest.raises(PlanError, match="only 2 brokers"):
        propose_reassignment(THREE, [1, 2])
    with pytest.raises(PlanError, match="empty"):
        propose_reassignment(THREE, [])
    with pytest.raises(PlanError, match="no replicas"):
        propose_reassignment({("t", 0): []}, [1])


@settings(max_examples=300, deadline=None)
@given(
    old_brokers=st.integers(1, 6),
    rf=st.integers(1, 3),
    partitions=st.integers(1, 16),
    new_brokers=st.sets(st.integers(1, 8), min_size=1, max_size=8),
    seed=st.integers(0, 10_000),
)
def test_any_plan_is_valid_even_and_near_minimal(old_brokers, rf, partitions, new_brokers, seed):
    import random

    rng = random.Random(seed)
    rf = min(rf, old_brokers, len(new_brokers))
    current = topic("t", {p: rng.sample(range(1, old_brokers + 1), rf) for p in range(partitions)})
    plan = propose_reassignment(current, sorted(new_brokers))
    check_valid(current, plan, new_brokers)
    counts = replica_counts(plan)
    per_broker = [counts[b] for b in new_brokers]
    assert max(per_broker) - min(per_broker) <= 1
    # Greedy, not an exact optimum: at most a few moves over the lower bound.
    assert replicas_moved(current, plan) <= fewest_moves(current, new_brokers) + 3
    assert propose_reassignment(current, sorted(new_brokers)) == plan


# --- hosts: a failure domain below the rack (kafkarepl node: several brokers per host) ---

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _host_cluster(draw):
    n_hosts = draw(st.integers(2, 5))
    per_host = draw(st.integers(1, 4))
    hosts = {h * 10 + i: f"10.0.0.{h}" for h in range(n_hosts) for i in range(per_host)}
    rf = draw(st.integers(1, min(3, n_hosts)))
    brokers = sorted(hosts)
    n_parts = draw(st.integers(1, 12))
    current = {}
    for p in range(n_parts):  # any valid current assignment, hosts ignored
        current[("t", p)] = draw(st.permutations(brokers).map(lambda b: list(b[:rf])))
    # sometimes a new host joins (adding brokers), sometimes one host leaves
    change = draw(st.sampled_from(["same", "add", "remove"]))
    target = dict(hosts)
    if change == "add":
        target.update({90 + i: "10.0.0.9" for i in range(per_host)})
    elif change == "remove" and n_hosts > rf:
        gone = f"10.0.0.{n_hosts - 1}"
        target = {b: h for b, h in target.items() if h != gone}
    return current, target, rf


@settings(max_examples=200, deadline=None)
@given(_host_cluster())
def test_no_partition_keeps_two_replicas_on_one_host(case) -> None:
    current, hosts, rf = case
    proposed = propose_reassignment(current, sorted(hosts), hosts=hosts)
    for tp, replicas in proposed.items():
        assert len(replicas) == rf and len(set(replicas)) == rf, (tp, replicas)
        assert set(replicas) <= set(hosts), (tp, replicas)
        assert len({hosts[b] for b in replicas}) == rf, (tp, replicas, hosts)


def test_hosts_change_nothing_when_every_broker_is_its_own_host() -> None:
    current = {("t", p): [1 + p % 4, 1 + (p + 1) % 4] for p in range(8)}
    brokers = [1, 2, 3, 4, 5]
    assert propose_reassignment(current, brokers) == propose_reassignment(
        current, brokers, hosts={b: f"h{b}" for b in brokers})
