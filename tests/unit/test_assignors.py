"""The uniform assignor (coordinator/assignors.py) against a model of its rule: the
straightforward partition-by-partition water-filling it was first written as, which the
shipped one (whole topics' partition sets, quotas by arithmetic) must equal exactly, on
random subscriptions, partition counts and previous targets, chained over several epochs."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl.coordinator.assignors import TopicPartitions, _subscribers, assign


def uniform_model(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
             current: Mapping[str, TopicPartitions]) -> dict[str, TopicPartitions]:
    members = sorted(subscriptions)
    # Partitions grouped by the members that may have them (one group per distinct
    # subscription set, usually one): O(partitions x log members), never x members.
    groups: dict[int, tuple[tuple[str, ...], list[tuple[str, int]]]] = {}  # by id() of the shared tuple
    for topic, subscribed in _subscribers(subscriptions, partitions).items():
        groups.setdefault(id(subscribed), (subscribed, []))[1].extend((topic, p) for p in range(partitions[topic]))
    order = sorted(groups.values(), key=lambda kv: (len(kv[0]), kv[0]))
    # How many each member should get: water-filling, the partitions with the fewest
    # eligible members placed first, each on the least loaded of its members.
    quota = dict.fromkeys(members, 0)
    for ms, tps in order:
        heap = [(quota[m], m) for m in ms]
        heapq.heapify(heap)
        for _ in tps:
            q, m = heapq.heappop(heap)
            quota[m] = q + 1
            heapq.heappush(heap, (q + 1, m))
    # Sticky: each member keeps its current partitions it may still have, up to its quota.
    eligible: dict[tuple[str, int], frozenset[str]] = {}
    for ms, tps in order:
        allowed = frozenset(ms)  # one set per subscription, not per partition
        eligible.update((tp, allowed) for tp in tps)
    owner: dict[tuple[str, int], str] = {}
    count = dict.fromkeys(members, 0)
    for m in members:
        mine = current.get(m, {})
        over = sum(map(len, mine.values())) > quota[m]  # only then does the order of keeping matter
        for topic, parts in (sorted(mine.items()) if over else mine.items()):
            for p in (sorted(parts) if over else parts):
                tp = (topic, p)
                if count[m] < quota[m] and tp not in owner and m in eligible.get(tp, ()):
                    owner[tp] = m
                    count[m] += 1
    # The rest: each to the eligible member furthest under its quota.
    for ms, tps in order:
        gaps = [(count[m] - quota[m], count[m], m) for m in ms]
        heapq.heapify(gaps)
        for tp in tps:
            if tp in owner:
                continue
            _gap, c, m = heapq.heappop(gaps)
            owner[tp] = m
            count[m] = c + 1
            heapq.heappush(gaps, (count[m] - quota[m], count[m], m))
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for (topic, p), m in owner.items():
        out[m].setdefault(topic, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in tps.items()} for m, tps in out.items()}


MEMBERS = [f"m{i}" for i in range(8)]
TOPICS = [f"t{i}" for i in range(6)]

subscriptions_st = st.dictionaries(st.sampled_from(MEMBERS), st.frozensets(st.sampled_from(TOPICS + ["gone"])),
                                   min_size=1)
partitions_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(1, 12))
# previous targets as the coordinator may hold them: for members gone or new, topics
# deleted or shrunk, partitions out of range, even two members with the same partition
current_st = st.dictionaries(st.sampled_from(MEMBERS + ["left"]), st.dictionaries(
    st.sampled_from(TOPICS + ["gone"]), st.frozensets(st.integers(-1, 14), min_size=1)))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(subscriptions_st, partitions_st), min_size=1, max_size=4), current_st)
def test_uniform_equals_its_model_over_epochs(epochs: list[tuple[dict[str, frozenset[str]], dict[str, int]]],
                                              current: dict[str, TopicPartitions]) -> None:
    for subscriptions, partitions in epochs:
        got = assign("uniform", subscriptions, partitions, current)
        assert got == uniform_model(subscriptions, partitions, current)
        for m, goal in got.items():  # an unchanged target is handed back as it was
            if current.get(m) == goal:
                assert goal is current[m]
        current = got


def test_quotas_fill_the_least_loaded_first() -> None:
    # groups of different subscriptions: the narrower group's partitions first, then the
    # wider group's raise everyone to one level, the extras to the lowest ids
    subs = {"a": frozenset({"x", "y"}), "b": frozenset({"y"}), "c": frozenset({"y"}), "d": frozenset({"x", "y"})}
    got = assign("uniform", subs, {"x": 5, "y": 6}, {})
    assert {m: sum(map(len, g.values())) for m, g in got.items()} == {"a": 3, "b": 3, "c": 3, "d": 2}
    assert got == uniform_model(subs, {"x": 5, "y": 6}, {})
