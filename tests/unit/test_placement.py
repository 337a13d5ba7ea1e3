"""Replica placement (seed 000, Kafka's algorithm): balance, spread on failure, racks."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl.controller.placement import (
    assign_new_partitions,
    assign_replicas,
    rack_alternated_brokers,
    validate_assignment,
)
from kafkarepl.errors import ErrorCode, KafkaError


def leader_counts(a):
    return Counter(r[0] for r in a.values())


def replica_counts(a):
    return Counter(b for r in a.values() for b in r)


def test_seed_example_five_brokers_fifteen_partitions_rf3_is_balanced():
    brokers = [0, 1, 2, 3, 4]
    a = assign_replicas(brokers, 15, 3, fixed_start_index=0)
    assert sorted(a) == list(range(15))
    assert leader_counts(a) == {b: 3 for b in brokers}
    assert replica_counts(a) == {b: 9 for b in brokers}
    # i-th partition's preferred replica on broker i mod n (start index 0)
    assert [a[p][0] for p in range(15)] == [p % 5 for p in range(15)]
    for replicas in a.values():
        assert len(set(replicas)) == 3


@pytest.mark.parametrize("dead", [0, 1, 2, 3, 4])
def test_seed_example_dead_broker_load_lands_on_all_survivors(dead):
    a = assign_replicas([0, 1, 2, 3, 4], 15, 3, fixed_start_index=0)
    survivors = {0, 1, 2, 3, 4} - {dead}
    led = [r for r in a.values() if r[0] == dead]
    # The new leaders (next replica in order) of the dead broker's partitions...
    new_leaders = {r[1] for r in led}
    # ...and all followers of the partitions it led cover every survivor.
    followers = {b for r in led for b in r[1:]}
    assert followers == survivors
    assert len(new_leaders) == len(led)  # three partitions, three different new leaders
    hosted = [r for r in a.values() if dead in r]
    assert {b for r in hosted for b in r if b != dead} == survivors


def test_kafka_reference_assignment():
    # Kafka's AdminUtils for 5 brokers, 10 partitions, RF 3, fixed start index 0.
    a = assign_replicas([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0)
    assert a == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_brokers_are_sorted_and_ids_need_not_be_dense():
    a = assign_replicas([30, 10, 20], 3, 2, fixed_start_index=0)
    assert [a[p][0] for p in range(3)] == [10, 20, 30]


def test_rf_larger_than_brokers_is_invalid_replication_factor():
    with pytest.raises(KafkaError) as e:
        assign_replicas([1, 2], 3, 3)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaError) as e:
        assign_replicas([1, 2], 3, 0)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaError) as e:
        assign_replicas([1, 2], 0, 1)
    assert e.value.code == ErrorCode.INVALID_PARTITIONS


def test_random_start_spreads_leaders_of_single_partition_topics():
    rng = random.Random(7)
    leaders = Counter(assign_replicas([1, 2, 3], 1, 1, rng=rng)[0][0] for _ in range(300))
    assert set(leaders) == {1, 2, 3}


def test_rack_alternated_list():
    racks = {0: "a", 1: "a", 2: "b", 3: "c", 4: "c", 5: "b"}
    assert rack_alternated_brokers(racks) == [0, 2, 3, 1, 5, 4]


def test_rack_aware_replicas_on_distinct_racks():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    a = assign_replicas(racks, 12, 3, fixed_start_index=0)
    for replicas in a.values():
        assert len({racks[b] for b in replicas}) == 3
    assert leader_counts(a) == {b: 2 for b in racks}
    assert replica_counts(a) == {b: 6 for b in racks}


def test_rack_aware_more_replicas_than_racks_uses_every_rack_then_any_broker():
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    a = assign_replicas(racks, 8, 3, fixed_start_index=1)
    for replicas in a.values():
        assert {racks[b] for b in replicas} == {"a", "b"}
        assert len(set(replicas)) == 3


def test_add_partitions_continues_the_pattern():
    existing = assign_replicas([0, 1, 2], 3, 2, fixed_start_index=0)
    new = assign_new_partitions([0, 1, 2], existing, 6)
    assert sorted(new) == [3, 4, 5]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in new.values())
    assert leader_counts({**existing, **new}) == {0: 2, 1: 2, 2: 2}
    with pytest.raises(KafkaError) as e:
        assign_new_partitions([0, 1, 2], existing, 3)
    assert e.value.code == ErrorCode.INVALID_PARTITIONS


@pytest.mark.parametrize(
    "assignment",
    [
        {0: [1, 1]},  # duplicate broker
        {0: [1, 9]},  # unknown broker
        {0: [1, 2], 1: [2]},  # inconsistent RF
        {0: []},  # no replicas
        {0: [1], 2: [2]},  # not consecutive
        {},
    ],
)
def test_invalid_explicit_assignments(assignment):
    with pytest.raises(KafkaError) as e:
        validate_assignment(assignment, [1, 2, 3])
    assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_valid_explicit_assignment_and_rf_of_existing_topic():
    assert validate_assignment({"0": ["1", "2"], 1: [2, 3]}, [1, 2, 3]) == {0: [1, 2], 1: [2, 3]}
    assert validate_assignment({2: [3, 1]}, [1, 2, 3], start_partition_id=2, expected_replication_factor=2)
    with pytest.raises(KafkaError) as e:
        validate_assignment({2: [3]}, [1, 2, 3], start_partition_id=2, expected_replication_factor=2)
    assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 12),
    rounds=st.integers(1, 6),
    extra=st.integers(0, 11),
    rf_seed=st.integers(0, 100),
    start=st.integers(0, 100),
)
def test_property_balanced_leaders_and_replicas(n, rounds, extra, rf_seed, start):
    brokers = list(range(100, 100 + n))
    rf = 1 + rf_seed % n
    partitions = n * rounds + (extra % n)
    a = assign_replicas(brokers, partitions, rf, fixed_start_index=start % n)
    assert sorted(a) == list(range(partitions))
    for replicas in a.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
    lc = [leader_counts(a).get(b, 0) for b in brokers]
    rc = [replica_counts(a).get(b, 0) for b in brokers]
    assert max(lc) - min(lc) <= 1
    if partitions % n == 0:
        assert max(lc) == min(lc)
        # Every n partitions place each broker exactly rf times.
        assert max(rc) == min(rc) == partitions * rf // n
    else:
        assert max(rc) - min(rc) <= rf


@settings(max_examples=200, deadline=None)
@given(n=st.integers(3, 10), rf=st.integers(2, 4), start=st.integers(0, 100), dead_seed=st.integers(0, 100))
def test_property_dead_broker_load_spreads(n, rf, start, dead_seed):
    rf = min(rf, n)
    brokers = list(range(n))
    # n*(n-1) partitions: one full round of shifts, so every survivor is reached.
    a = assign_replicas(brokers, n * (n - 1), rf, fixed_start_index=start % n)
    dead = dead_seed % n
    led = [r for r in a.values() if r[0] == dead]
    new_leader_load = Counter(r[1] for r in led)
    assert set(new_leader_load) == set(brokers) - {dead}
    assert max(new_leader_load.values()) - min(new_leader_load.values()) <= 1


@settings(max_examples=200, deadline=None)
@given(
    racks=st.lists(st.sampled_from("abcd"), min_size=2, max_size=10),
    rf_seed=st.integers(0, 100),
    partitions=st.integers(1, 40),
    start=st.integers(0, 100),
)
def test_property_rack_spread(racks, rf_seed, partitions, start):
    broker_racks = {i: r for i, r in enumerate(racks)}
    rf = 1 + rf_seed % len(racks)
    a = assign_replicas(broker_racks, partitions, rf, fixed_start_index=start % len(racks))
    n_racks = len(set(racks))
    for replicas in a.values():
        assert len(set(replicas)) == rf
        # As many distinct racks as possible.
        assert len({broker_racks[b] for b in replicas}) == min(rf, n_racks)
    lc = leader_counts(a)
    counts = [lc.get(b, 0) for b in broker_racks]
    assert max(counts) - min(counts) <= 1


# --- hosts: a failure domain below the rack (a node runs one broker per core) ---------


def test_host_alternated_list_and_distinct_hosts():
    # two hosts with three brokers each (a "node" per host)
    hosts = {1: "h1", 2: "h1", 3: "h1", 4: "h2", 5: "h2", 6: "h2"}
    a = assign_replicas(list(hosts), 12, 2, fixed_start_index=0, hosts=hosts)
    for replicas in a.values():
        assert {hosts[b] for b in replicas} == {"h1", "h2"}
    assert set(leader_counts(a).values()) == {2}  # leaders still perfectly balanced


def test_without_shared_hosts_placement_is_unchanged():
    plain = assign_replicas([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0)
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0,
                           hosts={b: f"host{b}" for b in range(5)}) == plain
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0, hosts={}) == plain
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c"}
    assert assign_replicas(racks, 10, 3, fixed_start_index=2, hosts={b: str(b) for b in racks}) == \
        assign_replicas(racks, 10, 3, fixed_start_index=2)


def test_more_replicas_than_hosts_uses_every_host_first():
    hosts = {1: "h1", 2: "h1", 3: "h2", 4: "h2"}
    for replicas in assign_replicas(list(hosts), 8, 3, fixed_start_index=1, hosts=hosts).values():
        assert {hosts[b] for b in replicas} == {"h1", "h2"} and len(set(replicas)) == 3


def test_racks_and_hosts_together():
    racks = {1: "r1", 2: "r1", 3: "r1", 4: "r1", 5: "r2", 6: "r2", 7: "r2", 8: "r2"}
    hosts = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c", 7: "d", 8: "d"}
    for replicas in assign_replicas(racks, 16, 3, fixed_start_index=3, hosts=hosts).values():
        assert len({hosts[b] for b in replicas}) == 3
        assert {racks[b] for b in replicas} == {"r1", "r2"}


def test_inconsistent_host_in_two_racks_still_terminates():
    racks = {1: "r1", 2: "r2", 3: "r2"}
    hosts = {1: "h", 2: "h", 3: "h2"}
    for replicas in assign_replicas(racks, 6, 3, fixed_start_index=0, hosts=hosts).values():
        assert sorted(replicas) == [1, 2, 3]


def test_add_partitions_keeps_hosts_apart():
    hosts = {1: "h1", 2: "h1", 3: "h2", 4: "h2"}
    existing = assign_replicas(list(hosts), 2, 2, fixed_start_index=0, hosts=hosts)
    added = assign_new_partitions(list(hosts), existing, 6, hosts=hosts)
    assert sorted(added) == [2, 3, 4, 5]
    for replicas in added.values():
        assert {hosts[b] for b in replicas} == {"h1", "h2"}


@settings(max_examples=300, deadline=None)
@given(
    layout=st.lists(st.tuples(st.sampled_from("xyz"), st.integers(1, 4)), min_size=1, max_size=6),
    use_racks=st.booleans(),
    rf_seed=st.integers(0, 100),
    partitions=st.integers(1, 40),
    start=st.integers(0, 100),
    first_id=st.integers(0, 1000),
)
def test_property_host_spread(layout, use_racks, rf_seed, partitions, start, first_id):
    """Hosts (each in one rack) with 1-4 brokers each: every partition's replicas are on
    min(rf, hosts) distinct hosts and min(rf, racks) distinct racks; leaders balanced."""
    racks: dict[int, str | None] = {}
    hosts: dict[int, str] = {}
    bid = first_id
    for h, (rack, count) in enumerate(layout):
        for _ in range(count):
            racks[bid] = rack if use_racks else None
            hosts[bid] = f"host{h}"
            bid += 1
    n = len(racks)
    rf = 1 + rf_seed % n
    a = assign_replicas(racks, partitions, rf, fixed_start_index=start % n, hosts=hosts)
    n_hosts = len(layout)
    rack_aware = use_racks and len({r for r in racks.values()}) > 1
    for replicas in a.values():
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert len({hosts[b] for b in replicas}) == min(rf, n_hosts)
        if rack_aware:
            assert len({racks[b] for b in replicas}) == min(rf, len(set(racks.values())))
    lc = [leader_counts(a).get(b, 0) for b in racks]
    assert max(lc) - min(lc) <= 1
