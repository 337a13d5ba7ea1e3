"""Random fault schedules against the replication core, bounded in wall time.

SIM_SECONDS (default 18) bounds the random runs; SIM_SEED=<n> replays one schedule;
SIM_RANDOM=1 starts from a random base seed instead of the fixed one (the seed of any
failure is printed either way).
"""

from __future__ import annotations

import os
import random
import time

from tests.sim.mutants import HwTruncatingFetcher
from tests.sim.simulator import InvariantViolation
from tests.sim.swarm import run_schedule

SIM_SECONDS = float(os.environ.get("SIM_SECONDS", "18"))


def _base_seed() -> int:
    if os.environ.get("SIM_RANDOM"):
        base = random.randrange(1 << 30)
        print(f"SIM base seed {base}")
        return base
    return 1_000_000


def test_random_schedules_keep_every_invariant() -> None:
    if "SIM_SEED" in os.environ:
        run_schedule(int(os.environ["SIM_SEED"]))
        return
    base, deadline = _base_seed(), time.monotonic() + SIM_SECONDS * 2 / 3
    schedules = partitions = acked = tainted = shrinks = unclean = elections = 0
    while time.monotonic() < deadline or schedules < 200:
        sim = run_schedule(base + schedules)
        schedules += 1
        partitions += sim.cfg.partitions
        acked += sum(len(a) for a in sim.acked.values())
        tainted += len(sim.tainted)
        unclean += sim.controller.unclean_elections
        shrinks += sum(b.metrics.isr_shrinks for b in sim.brokers)
        elections += sum(len([k for k in sim.epoch_leaders if k[0] == p]) for p in sim.acked)
    print(
        f"{schedules} schedules: {acked} acked records checked, {elections} leader epochs, "
        f"{shrinks} ISR shrinks, {unclean} unclean elections, {tainted}/{partitions} partitions with allowed loss"
    )
    # The swarm must actually exercise failover and durability, not idle.
    assert acked > 10 * schedules
    assert shrinks > schedules // 10 and elections > schedules
    # Allowed losses (unclean election, power loss of every ISR copy) stay the exception.
    assert tainted < partitions // 4


def test_safe_configuration_never_loses_an_acknowledged_record() -> None:
    """Unclean election off and no power loss: no exemption may ever be needed."""
    if "SIM_SEED" in os.environ:
        assert not run_schedule(int(os.environ["SIM_SEED"]), safe=True).tainted
        return
    base, deadline = _base_seed() + 500_000, time.monotonic() + SIM_SECONDS / 3
    schedules = acked = 0
    while time.monotonic() < deadline or schedules < 100:
        sim = run_schedule(base + schedules, safe=True)
        schedules += 1
        acked += sum(len(a) for a in sim.acked.values())
        seed = f"SIM_SEED={base + schedules - 1}"
        assert not sim.tainted and sim.controller.unclean_elections == 0, seed
        # The loss metric stays at zero: no follower ever cut below its HW.
        assert sum(b.metrics.truncations_below_hw for b in sim.brokers) == 0, seed
    print(f"{schedules} safe schedules, {acked} acked records, none lost")


def test_swarm_catches_hw_truncation_mutant() -> None:
    """Seed 003's "truncate to HW" follower must be caught: proves the checks can fail."""
    for seed in range(400):
        try:
            run_schedule(seed, fetcher_factory=HwTruncatingFetcher)
        except InvariantViolation as e:
            assert "SIM_SEED" in str(e)
            return
    raise AssertionError("400 schedules never caught HW truncation")
