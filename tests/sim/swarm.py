"""Random fault schedules over the simulator (a small VOPR-style swarm).

Every seed picks a cluster shape and fault mix, runs a few hundred steps of produces
(acks=all and acks=1), crashes (kill -9, clean shutdown, power loss), restarts, pauses
longer than replica.lag.time.max.ms, network and ZooKeeper cut-offs and leader moves,
checks the invariants after every step, then heals everything and requires every
replica to converge to the same log holding every acknowledged record.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kafkarepl.replication import FollowerFetcher, PartitionState

from .simulator import InvariantViolation, SimConfig, Simulation

FetcherFactory = Callable[[PartitionState, int, int], FollowerFetcher]


def random_config(rng: random.Random) -> SimConfig:
    brokers = rng.choice((2, 3, 3, 3, 4))
    rf = min(brokers, rng.choice((2, 3, 3)))
    return SimConfig(
        brokers=brokers,
        partitions=rng.randint(1, 3),
        replication_factor=rf,
        min_insync_replicas=rng.choice((1, 2, 2)) if rf > 1 else 1,
        unclean=rng.random() < 0.1,
        net_delay_ms=(1, rng.choice((5, 10, 30))),
        net_loss=rng.choice((0.0, 0.0, 0.02, 0.1)),
    )


def run_schedule(
    seed: int, steps: int = 300, fetcher_factory: FetcherFactory | None = None, safe: bool = False
) -> Simulation:
    """Run one schedule; raises InvariantViolation (mentioning SIM_SEED) on a violation.
    safe: Kafka's safe setup only (unclean election off, no power loss), where no
    acknowledged record may ever be lost, with no exemption at all."""
    rng = random.Random(seed)
    cfg = random_config(rng)
    if safe:
        cfg.unclean = False
    sim = Simulation(seed, cfg, fetcher_factory=fetcher_factory)
    try:
        for _ in range(steps):
            sim.step()
            random_event(sim, sim.rng, power_loss=not safe)
            sim.check()
        sim.converge()
    except InvariantViolation as e:
        test = "test_safe_configuration" if safe else "test_random_schedules"
        raise InvariantViolation(
            f"{e}\nreproduce with SIM_SEED={seed} pytest tests/sim/test_swarm.py -k {test}\n{sim.describe()}"
        ) from None
    return sim


def random_event(sim: Simulation, rng: random.Random, power_loss: bool = True) -> None:
    cfg, now = sim.cfg, sim.now
    alive = [b for b in sim.brokers if b.alive]
    dead = [b for b in sim.brokers if not b.alive]
    for b in alive:
        if rng.random() < 0.05:
            for log in b.logs.values():
                log.flush()
    r = rng.random()
    if r < 0.45:
        p = rng.randrange(cfg.partitions)
        broker = None if rng.random() < 0.85 else rng.randrange(cfg.brokers)  # stale metadata
        sim.produce(p, rng.randint(1, 3), acks=-1 if rng.random() < 0.7 else 1, broker=broker)
    elif r < 0.47 and alive:
        b = rng.choice(alive)
        if rng.random() < 0.3:  # clean shutdown: flush and checkpoint first
            b.checkpoint_hw()
            for log in b.logs.values():
                log.flush()
        sim.crash(b.id)
    elif r < 0.4715 and alive:
        sim.crash(rng.choice(alive).id, lose_unflushed=power_loss)
    elif r < 0.51 and dead:
        sim.restart(rng.choice(dead).id)
    elif r < 0.52 and alive:
        rng.choice(alive).paused_until = now + rng.randint(20, 3 * cfg.replica_lag_time_max_ms)
    elif r < 0.53 and alive:
        b = rng.choice(alive)
        until = now + rng.randint(20, 3 * cfg.replica_lag_time_max_ms)
        sim.net.cut[b.id] = until
        if rng.random() < 0.5:
            b.zk_cut_until = until  # a leader cut off from ZooKeeper too
    elif r < 0.535:
        p = rng.randrange(cfg.partitions)
        sim.controller.elect(p, avoid=sim.controller.state[p].leader)
    elif r < 0.54 and alive and (b := rng.choice(alive)).parts:
        # Retention: a replica deletes a committed head of its log (log start <= HW).
        p = rng.choice(list(b.parts))
        limit = min(b.parts[p].high_watermark, len(sim.committed[p]))
        if limit > b.logs[p].log_start_offset:
            sim.delete_records(b.id, p, rng.randint(b.logs[p].log_start_offset, limit))
