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
    """Works on whole topics' partition sets (a member keeping all it had keeps the same
    frozensets) and computes quotas by arithmetic: partition by partition only for the
    partitions that move, so a membership change of a large, stable group costs the
    coordinator's loop O(members' topics), not O(partitions x log members)."""
    members = sorted(subscriptions)
    # Topics grouped by the members that may have them (one group per distinct
    # subscription set, usually one), the groups with the fewest members first.
    groups: dict[int, tuple[tuple[str, ...], list[str]]] = {}  # by id() of the shared tuple
    for topic, subscribed in _subscribers(subscriptions, partitions).items():
        groups.setdefault(id(subscribed), (subscribed, []))[1].append(topic)
    order = sorted(groups.values(), key=lambda kv: (len(kv[0]), kv[0]))
    # How many each member should get: water-filling, each group's partitions on the least
    # loaded of its members (ties to the lowest member id).
    quota = dict.fromkeys(members, 0)
    for ms, topics in order:
        _fill(quota, ms, sum(partitions[t] for t in topics))
    # Sticky: each member keeps its current partitions it may still have, up to its quota
    # (if it has more, the first ones in topic and partition order).
    out: dict[str, dict[str, frozenset[int]]] = {m: {} for m in members}
    count = dict.fromkeys(members, 0)
    owned: dict[str, set[int]] = {}  # topic -> partitions given so far
    for m in members:
        mine = current.get(m)
        if not mine:
            continue
        allowed, room, kept = subscriptions[m], quota[m], out[m]
        over = sum(map(len, mine.values())) > room  # only then does the order of keeping matter
        for topic, parts in (sorted(mine.items()) if over else mine.items()):
            n = partitions.get(topic, 0)
            if not parts or not n or topic not in allowed:
                continue
            if max(parts) >= n or min(parts) < 0:  # the topic has fewer partitions now
                parts = frozenset(p for p in parts if 0 <= p < n)
            taken = owned.get(topic)
            if taken and not taken.isdisjoint(parts):
                parts = parts - taken
            if over and len(parts) > room - count[m]:
                parts = frozenset(sorted(parts)[:room - count[m]])
            if parts:
                kept[topic] = parts
                count[m] += len(parts)
                owned.setdefault(topic, set()).update(parts)
    # The rest: each to the eligible member furthest under its quota.
    for ms, topics in order:
        gaps: list[tuple[int, int, str]] | None = None
        for topic in topics:
            held = owned.get(topic, set())
            if len(held) == partitions[topic]:
                continue
            if gaps is None:
                gaps = [(count[m] - quota[m], count[m], m) for m in ms]
                heapq.heapify(gaps)
            added: dict[str, list[int]] = {}
            for p in range(partitions[topic]):
                if p in held:
                    continue
                _gap, c, m = heapq.heappop(gaps)
                added.setdefault(m, []).append(p)
                count[m] = c + 1
                heapq.heappush(gaps, (c + 1 - quota[m], c + 1, m))
            for m, ps in added.items():
                had = out[m].get(topic)
                out[m][topic] = had | frozenset(ps) if had else frozenset(ps)
    for m, goal in out.items():  # an unchanged target stays the same object: cheap to compare
        prev = current.get(m)
        if prev is not None and prev == goal:
            out[m] = prev
    return out


def _fill(quota: dict[str, int], members: tuple[str, ...], k: int) -> None:
    """Give `k` partitions one at a time to the member with the fewest (ties to the
    lowest id), by arithmetic: everyone under a level L is raised to it, then the r left
    go one each to the lowest ids at L."""
    if not k:
        return
    levels = sorted(quota[m] for m in members)
    need = 0  # partitions that raise levels[:i] to levels[i - 1]
    i = 1
    while i < len(levels) and need + i * (levels[i] - levels[i - 1]) <= k:
        need += i * (levels[i] - levels[i - 1])
        i += 1
    # levels[:i] end at L or L + 1
    level, r = levels[i - 1] + (k - need) // i, (k - need) % i
    at_level = [m for m in members if quota[m] <= level]  # members is in id order
    for m in at_level:
        quota[m] = level
    for m in at_level[:r]:
        quota[m] = level + 1
