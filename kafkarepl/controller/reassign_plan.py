"""Proposed partition reassignments (`kafkarepl reassign-partitions --generate`).

Kafka's tool proposes a fresh random assignment and so moves nearly every replica. This
plan starts from the current assignment instead and moves only what it must:

1. Each broker gets a replica quota for the topic: total replicas // brokers, and one
   more for (total % brokers) brokers, given to the least loaded over the topics planned
   so far (so the totals stay even too), among those to the ones that already hold more
   than the base (no move needed).
2. Replicas on brokers outside the list, replicas over a rack's fair share of the
   partition (rack-aware mode), and replicas over a broker's quota (followers first) are
   dropped; all other replicas stay where they are, in their position.
3. Each free slot gets the broker with the most room left that is not in the partition,
   preferring the partition's least used rack. When every broker with room is already in
   the partition, one replica of another partition is swapped onto it instead, so the
   quotas still hold.
4. Among partitions that changed, the preferred (first) replica is moved to the replica
   leading the fewest partitions, so a new broker takes leadership as well.

Hosts (`hosts={broker: host}`, several brokers per host with `kafkarepl node`) are a
failure domain below the rack, handled like racks: replicas over a host's fair share of a
partition (ceil(RF / hosts)) are dropped in step 2, and a free slot prefers the
partition's least used host (after the rack rule) in step 3. With at least RF hosts no
partition keeps two replicas on one host.

Pure and deterministic: no I/O, no randomness, ties broken by broker id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

TopicPartition = tuple[str, int]


class PlanError(ValueError):
    """The requested plan is impossible (more replicas than brokers, no brokers, ...)."""


def broker_racks(brokers: Mapping[int, str | None] | Iterable[int]) -> dict[int, str | None]:
    if isinstance(brokers, Mapping):
        return {int(b): r for b, r in brokers.items()}
    return {int(b): None for b in brokers}


def is_rack_aware(racks: Mapping[int, str | None]) -> bool:
    """Rack-aware when every broker has a rack and there is more than one rack."""
    return all(r is not None for r in racks.values()) and len(set(racks.values())) > 1


def propose_reassignment(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Mapping[int, str | None] | Iterable[int],
    hosts: Mapping[int, str] | None = None,
) -> dict[TopicPartition, list[int]]:
    """The proposed replicas of every partition in ``current``, on ``brokers`` only
    (broker ids, or {id: rack or None}), each topic spread evenly over them.
    Replication factors are kept. Raises PlanError when a partition has more replicas
    than there are brokers."""
    racks = broker_racks(brokers)
    if not racks:
        raise PlanError("the broker list is empty")
    load = dict.fromkeys(racks, 0)  # replicas proposed so far, over all topics
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in sorted({t for t, _ in current}):
        parts = {p: list(r) for (t, p), r in current.items() if t == topic}
        plan = _TopicPlan(topic, parts, racks, load, hosts)
        for p, replicas in plan.run().items():
            proposed[(topic, p)] = replicas
            for b in replicas:
                load[b] += 1
    return proposed


def replicas_moved(
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
) -> int:
    """How many replicas the plan copies to a broker that does not have them yet."""
    return sum(
        len(set(r) - set(current.get(tp, ()))) for tp, r in proposed.items()
    )


def changed_partitions(
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
) -> dict[TopicPartition, list[int]]:
    """Only the partitions whose replica list (set or order) the plan changes."""
    return {tp: list(r) for tp, r in proposed.items() if list(current.get(tp, ())) != list(r)}


class _TopicPlan:
    def __init__(
        self,
        topic: str,
        parts: dict[int, list[int]],
        racks: dict[int, str | None],
        load: Mapping[int, int],
        hosts: Mapping[int, str] | None = None,
    ) -> None:
        self.topic = topic
        self.original = parts
        self.racks = racks
        # A broker without a known host is a host of its own.
        self.hosts = {b: (hosts or {}).get(b) or f"\0broker-{b}" for b in racks}
        self.num_hosts = len(set(self.hosts.values()))
        self.host_aware = self.num_hosts < len(racks)
        self.load = load
        self.rack_aware = is_rack_aware(racks)
        self.num_racks = len(set(racks.values()))
        n = len(racks)
        for p, r in sorted(parts.items()):
            if not r:
                raise PlanError(f"{topic}-{p} has no replicas")
            if len(set(r)) > n:
                raise PlanError(
                    f"{topic}-{p} has {len(set(r))} replicas but only {n} brokers are given"
                )
        # Slots per partition; None marks one to fill. Duplicates (never valid) are freed.
        self.result: dict[int, list[int | None]] = {}
        for p, r in parts.items():
            seen: set[int] = set()
            slots: list[int | None] = []
            for b in r:
                slots.append(b if b in racks and b not in seen else None)
                seen.add(b)
            self.result[p] = slots
        total = sum(len(r) for r in parts.values())
        base, extra = divmod(total, n)
        held = Counter(b for slots in self.result.values() for b in slots if b is not None)
        order = sorted(racks, key=lambda b: (load[b], held[b] <= base, b))
        self.quota = {b: base + (1 if i < extra else 0) for i, b in enumerate(order)}

    # --- counts -------------------------------------------------------------------------

    def _count(self) -> Counter[int]:
        return Counter(b for slots in self.result.values() for b in slots if b is not None)

    def _max_per_rack(self, p: int) -> int:
        rf = len(self.result[p])
        return -(-rf // self.num_racks)  # ceil

    def _max_per_host(self, p: int) -> int:
        rf = len(self.result[p])
        return -(-rf // self.num_hosts)  # ceil

    # --- phases -------------------------------------------------------------------------

    def run(self) -> dict[int, list[int]]:
        if self.rack_aware:
            self._drop_domain_excess(self.racks, self._max_per_rack)
        if self.host_aware:
            self._drop_domain_excess(self.hosts, self._max_per_host)
        self._drop_over_quota()
        # Partitions with the most free slots first: they need the most distinct brokers.
        for p in sorted(self.result, key=lambda p: (-self.result[p].count(None), p)):
            for i, b in enumerate(self.result[p]):
                if b is None:
                    self.result[p][i] = self._pick(p)
        self._balance_leaders()
        return {p: [b for b in slots if b is not None] for p, slots in sorted(self.result.items())}

    def _drop_domain_excess(self, domain: Mapping[int, str | None], limit_of: Callable[[int], int]) -> None:
        """Free the replicas over a rack's (or host's) fair share of each partition."""
        count = self._count()
        for p in sorted(self.result):
            slots = self.result[p]
            limit = limit_of(p)
            by_domain: dict[str | None, list[tuple[int, int]]] = {}  # (position, broker)
            for i, b in enumerate(slots):
                if b is not None:
                    by_domain.setdefault(domain[b], []).append((i, b))
            for positions in by_domain.values():
                # Keep the preferred replica, then the brokers least over their quota.
                positions.sort(key=lambda ib: (ib[0] != 0, count[ib[1]] - self.quota[ib[1]], ib[0]))
                for i, b in positions[limit:]:
                    count[b] -= 1
                    slots[i] = None

    def _drop_over_quota(self) -> None:
        count = self._count()
        receivers = {b for b in self.racks if count[b] < self.quota[b]}
        for b in sorted(self.racks):
            excess = count[b] - self.quota[b]
            if excess <= 0:
                continue
            # Free slots where a broker with room can go (one not in the partition yet),
            # followers before preferred replicas, later partitions first.
            holders = sorted(
                ((slots.index(b), p) for p, slots in self.result.items() if b in slots),
                key=lambda ip: (
                    len(receivers.intersection(self.result[ip[1]])), ip[0] == 0, -ip[1]
                ),
            )
            for i, p in holders[:excess]:
                self.result[p][i] = None

    def _pick(self, p: int) -> int:
        count = self._count()
        in_part = {b for b in self.result[p] if b is not None}
        rack_use = Counter(self.racks[b] for b in in_part)
        candidates = [b for b in self.racks if b not in in_part]
        if self.rack_aware:
            # Rack spread comes first (Kafka's guarantee), even balance second.
            fewest = min(rack_use[self.racks[b]] for b in candidates)
            candidates = [b for b in candidates if rack_use[self.racks[b]] == fewest]
        if self.host_aware:
            # Then hosts: a host's brokers fail together.
            host_use = Counter(self.hosts[b] for b in in_part)
            fewest = min(host_use[self.hosts[b]] for b in candidates)
            candidates = [b for b in candidates if host_use[self.hosts[b]] == fewest]

        def key(b: int) -> tuple[int, int, int]:
            return (count[b] - self.quota[b], self.load[b], b)

        with_room = [b for b in candidates if count[b] < self.quota[b]]
        if with_room:
            return min(with_room, key=key)
        swapped = self._swap_for(p, count, set(candidates))
        if swapped is not None:
            return swapped
        return min(candidates, key=key)  # no quota-keeping choice: stay valid

    def _swap_for(self, p: int, count: Counter[int], wanted: set[int]) -> int | None:
        """No broker in ``wanted`` (those p may take) has room: move some other partition
        q's replica y (y in wanted) to a broker x with room (x not in q), and give y's
        freed share to p."""
        room = sorted(b for b in self.racks if count[b] < self.quota[b])
        # A replica q only gets in this plan costs nothing to redirect; a kept one does.
        for fresh_only in (True, False):
            for x in room:
                for q in sorted(self.result):
                    if q == p or x in self.result[q]:
                        continue
                    for i, y in enumerate(self.result[q]):
                        if (
                            y in wanted
                            and (not fresh_only or y not in self.original[q])
                            and (not self.rack_aware or self._rack_ok(q, i, x))
                            and (not self.host_aware or self._host_ok(q, i, x))
                        ):
                            self.result[q][i] = x
                            return y
        return None

    def _rack_ok(self, q: int, i: int, x: int) -> bool:
        others = [b for j, b in enumerate(self.result[q]) if j != i and b is not None]
        used = Counter(self.racks[b] for b in others)
        return used[self.racks[x]] < self._max_per_rack(q)

    def _host_ok(self, q: int, i: int, x: int) -> bool:
        others = [b for j, b in enumerate(self.result[q]) if j != i and b is not None]
        used = Counter(self.hosts[b] for b in others)
        return used[self.hosts[x]] < self._max_per_host(q)

    def _balance_leaders(self) -> None:
        leads = Counter(slots[0] for slots in self.result.values())
        changed = [
            p for p in sorted(self.result) if self.result[p] != self.original[p]
        ]
        for p in changed:
            slots = self.result[p]
            first = slots[0]
            best = min(slots, key=lambda b: (leads[b], b))
            if best != first and leads[first] - leads[best] >= 2:
                i = slots.index(best)
                slots[0], slots[i] = best, first
                leads[first] -= 1
                leads[best] += 1
