"""Replica placement for new topics and partitions (seed 000, as Kafka does it).

Brokers are sorted; partition i's first (preferred) replica goes on broker
(start + i) mod n. The other replicas follow at an offset `shift` that grows by one
every n partitions, so the partitions a broker leads have their followers on
different brokers: when it dies, its load spreads over all survivors, not one.

With racks on every broker, the broker list alternates racks (r1 b0, r2 b3, r1 b1, ...)
and a replica is skipped while its rack (or broker) already holds one of the
partition's replicas and another rack (broker) does not yet.

Hosts are a failure domain below the rack (a node runs one broker per core: all of a
host's brokers fail together). Given `hosts` ({broker: host id}), the list also
alternates hosts within each rack, and a replica is skipped while its host already holds
one of the partition's replicas and another host does not yet: with at least RF hosts,
no two replicas of a partition share a host (with fewer, every host gets one first).
Brokers without a host entry are hosts of their own; when every broker is on a host of
its own the result is exactly the rack/broker placement above.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence

from kafkarepl.errors import ErrorCode, KafkaError


def invalid_replication_factor(msg: str) -> KafkaError:
    return KafkaError(msg, ErrorCode.INVALID_REPLICATION_FACTOR)


def invalid_assignment(msg: str) -> KafkaError:
    return KafkaError(msg, ErrorCode.INVALID_REPLICA_ASSIGNMENT)


def _replica_index(
    first_replica_index: int, second_replica_shift: int, replica_index: int, n: int
) -> int:
    # Never 0: a follower is never on the leader's broker.
    shift = 1 + (second_replica_shift + replica_index) % (n - 1)
    return (first_replica_index + shift) % n


def _broker_racks(brokers: Mapping[int, str | None] | Iterable[int]) -> dict[int, str | None]:
    if isinstance(brokers, Mapping):
        return {int(b): r for b, r in brokers.items()}
    return {int(b): None for b in brokers}


def _host_map(racks: Mapping[int, str | None], hosts: Mapping[int, str] | None) -> dict[int, str]:
    """Host of every broker; a broker without one is a host of its own."""
    given = {int(b): str(h) for b, h in (hosts or {}).items() if h not in (None, "")}
    return {b: given.get(b, f"\0broker-{b}") for b in racks}


def _interleave(groups: Mapping[str, list[int]]) -> list[int]:
    """Round-robin over the groups (sorted by name), each in its given order."""
    keys = sorted(groups)
    iters = {k: iter(groups[k]) for k in keys}
    total = sum(len(v) for v in groups.values())
    result: list[int] = []
    i = 0
    while len(result) < total:
        nxt = next(iters[keys[i]], None)
        if nxt is not None:
            result.append(nxt)
        i = (i + 1) % len(keys)
    return result


def domain_alternated_brokers(
    broker_racks: Mapping[int, str | None], broker_hosts: Mapping[int, str]
) -> list[int]:
    """Brokers ordered so that consecutive ones sit on different racks, and within a rack
    on different hosts, where possible."""
    by_rack: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for b in sorted(broker_racks):
        by_rack[str(broker_racks[b])][broker_hosts[b]].append(b)
    return _interleave({rack: _interleave(by_host) for rack, by_host in by_rack.items()})


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so that consecutive ones sit on different racks where possible."""
    by_rack: dict[str, list[int]] = defaultdict(list)
    for b in sorted(broker_racks):
        by_rack[broker_racks[b]].append(b)
    return _interleave(by_rack)


def assign_replicas(
    brokers: Mapping[int, str | None] | Iterable[int],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
    hosts: Mapping[int, str] | None = None,
) -> dict[int, list[int]]:
    """Assignment {partition: [replica broker ids]} for partitions
    start_partition_id .. start_partition_id + num_partitions - 1.

    brokers: live broker ids, or {id: rack or None}. Rack-aware when every broker has a
    rack. hosts: {id: host id} (e.g. the advertised host); host-aware when some host
    holds more than one broker. fixed_start_index >= 0 makes the result deterministic
    (tests); otherwise the start and shift are random so that topics don't all lead on
    the same broker."""
    racks = _broker_racks(brokers)
    if num_partitions <= 0:
        raise KafkaError(
            "Number of partitions must be larger than 0.", ErrorCode.INVALID_PARTITIONS
        )
    if replication_factor <= 0:
        raise invalid_replication_factor("Replication factor must be larger than 0.")
    if replication_factor > len(racks):
        raise invalid_replication_factor(
            f"Replication factor: {replication_factor} larger than available brokers: {len(racks)}."
        )
    rng = rng or random.Random()
    rack_aware = all(r is not None for r in racks.values()) and len(set(racks.values())) > 1
    host_of = _host_map(racks, hosts)
    num_hosts = len(set(host_of.values()))
    host_aware = num_hosts < len(racks)
    if not rack_aware:
        racks = {b: None for b in racks}
    if host_aware:
        broker_list = domain_alternated_brokers(racks, host_of)
        num_racks = len(set(racks.values())) if rack_aware else 1
    elif rack_aware:
        broker_list = rack_alternated_brokers(racks)  # type: ignore[arg-type]
        num_racks = len(set(racks.values()))
    else:
        broker_list = sorted(racks)
        num_racks = 1
    n = len(broker_list)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    result: dict[int, list[int]] = {}
    partition = max(0, start_partition_id)
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = broker_list[first]
        replicas = [leader]
        if rack_aware or host_aware:
            racks_used = {racks[leader]}
            hosts_used = {host_of[leader]}
            brokers_used = {leader}
            k = 0
            # A consistent layout (each host in one rack) always finds a candidate within
            # one pass over the other n-1 brokers. If not (one host id in two racks), relax
            # the host rule, then the rack rule, rather than loop forever.
            misses = relaxed = 0
            while len(replicas) < replication_factor:
                b = broker_list[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack_ok = relaxed >= 2 or racks[b] not in racks_used or len(racks_used) == num_racks
                host_ok = relaxed >= 1 or host_of[b] not in hosts_used or len(hosts_used) == num_hosts
                broker_ok = b not in brokers_used or len(brokers_used) == n
                if rack_ok and host_ok and broker_ok:
                    replicas.append(b)
                    racks_used.add(racks[b])
                    hosts_used.add(host_of[b])
                    brokers_used.add(b)
                    misses = 0
                else:
                    misses += 1
                    if misses >= n - 1:
                        relaxed, misses = relaxed + 1, 0
        else:
            replicas.extend(
                broker_list[_replica_index(first, shift, j, n)]
                for j in range(replication_factor - 1)
            )
        result[partition] = replicas
        partition += 1
    return result


def assign_new_partitions(
    brokers: Mapping[int, str | None] | Iterable[int],
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    rng: random.Random | None = None,
    hosts: Mapping[int, str] | None = None,
) -> dict[int, list[int]]:
    """Assignment for the partitions added to reach new_total (CreatePartitions).
    Continues the existing pattern: start from partition 0's preferred broker."""
    if new_total <= len(existing):
        raise KafkaError(
            f"Topic currently has {len(existing)} partitions, {new_total} would not be an increase.",
            ErrorCode.INVALID_PARTITIONS,
        )
    racks = _broker_racks(brokers)
    ordered = sorted(racks)
    first_broker = existing[0][0] if 0 in existing and existing[0] else ordered[0]
    start_index = next((i for i, b in enumerate(ordered) if b >= first_broker), 0)
    rf = len(existing[0]) if 0 in existing else 1
    return assign_replicas(
        racks,
        new_total - len(existing),
        rf,
        fixed_start_index=start_index,
        start_partition_id=len(existing),
        rng=rng,
        hosts=hosts,
    )


def validate_assignment(
    assignment: Mapping[int, Sequence[int]],
    known_brokers: Collection[int],
    start_partition_id: int = 0,
    expected_replication_factor: int | None = None,
) -> dict[int, list[int]]:
    """Check an explicit assignment (CreateTopics/CreatePartitions); returns it normalized.

    INVALID_REPLICA_ASSIGNMENT for: no replicas, a broker twice in one partition, an
    unknown broker, different replica counts, partition ids not consecutive from
    start_partition_id. INVALID_REPLICATION_FACTOR if it differs from the topic's."""
    if not assignment:
        raise invalid_assignment("Replica assignment is empty.")
    result = {int(p): [int(b) for b in r] for p, r in assignment.items()}
    expected_ids = list(range(start_partition_id, start_partition_id + len(result)))
    if sorted(result) != expected_ids:
        raise invalid_assignment(
            f"Partitions should be a consecutive 0-based integer sequence (from {start_partition_id})."
        )
    sizes = {len(r) for r in result.values()}
    if 0 in sizes:
        raise invalid_assignment("Replica assignment has a partition with no replicas.")
    if len(sizes) > 1:
        raise invalid_assignment("All partitions should have the same number of replicas.")
    rf = sizes.pop()
    if expected_replication_factor is not None and rf != expected_replication_factor:
        raise invalid_assignment(
            f"Inconsistent replication factor between partitions, partition 0 has "
            f"{expected_replication_factor} while partitions {sorted(result)} have replication factor {rf}."
        )
    known = set(known_brokers)
    for p, replicas in sorted(result.items()):
        if len(set(replicas)) != len(replicas):
            raise invalid_assignment(
                f"Duplicate brokers not allowed in replica assignment: {replicas} (partition {p})."
            )
        unknown = sorted(set(replicas) - known)
        if unknown:
            raise invalid_assignment(
                f"Unknown broker(s) {unknown} in replica assignment of partition {p}."
            )
    return result
