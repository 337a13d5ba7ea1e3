"""The server-side assignors of KIP-848 consumer groups (`group.consumer.assignors`):
`uniform` (the default) and `range`. Pure functions of the members' subscriptions, the
subscribed topics' partition counts and the current target assignment.

uniform: every member gets as near the same number of partitions as its subscriptions
allow, and keeps as many of its current ones as that balance permits (sticky), so a
member joining or leaving moves only the partitions it must.
range: per topic, the members subscribed to it in member id order each get a contiguous
range (the first `partitions % members` one more), so members subscribed to the same
co-partitioned topics get the same partition numbers of each.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

TopicPartitions = dict[str, frozenset[int]]  # topic name -> partitions
ASSIGNORS = ("uniform", "range")


def assign(assignor: str, subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
           current: Mapping[str, TopicPartitions]) -> dict[str, TopicPartitions]:
    """member id -> its target partitions. `subscriptions`: member id -> topic names it
    subscribes to; `partitions`: topic name -> partition count (topics that do not exist
    are absent); `current`: the previous target assignment."""
    if assignor == "range":
        return _range(subscriptions, partitions)
    return _uniform(subscriptions, partitions, current)


def _subscribers(subscriptions: Mapping[str, frozenset[str]],
                 partitions: Mapping[str, int]) -> dict[str, tuple[str, ...]]:
    """topic -> the members subscribed to it, in member id order. Members are grouped by
    their subscription first (usually one for the whole group), so the cost is topics x
    distinct subscriptions, not topics x members; topics with the same subscribers share
    one tuple (the same object: cheap to use as a key again)."""
    alike: dict[frozenset[str], list[str]] = {}
    for m in sorted(subscriptions):
        alike.setdefault(subscriptions[m], []).append(m)
    subs = list(alike.items())
    shared: dict[tuple[int, ...], tuple[str, ...]] = {}
    out: dict[str, tuple[str, ...]] = {}
    for topic in sorted(partitions):
        key = tuple(i for i, (sub, _ms) in enumerate(subs) if topic in sub)
        if not key:
            continue
        members = shared.get(key)
        if members is None:
            members = shared[key] = tuple(sorted(m for i in key for m in subs[i][1]))
        out[topic] = members
    return out


def _range(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int]) -> dict[str, TopicPartitions]:
    out: dict[str, TopicPartitions] = {m: {} for m in subscriptions}
    for topic, members in _subscribers(subscriptions, partitions).items():
        count = partitions[topic]
        if not members:
            continue
        base, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members if base else members[:extra]):  # members past the ranges get none
            n = base + (1 if i < extra else 0)
            if n:
                out[m][topic] = frozenset(range(start, start + n))
            start += n
    return out


def _uniform(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
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
