"""Replication metrics kept by the core: counters bumped on events, gauges computed on read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .partition import PartitionState


@dataclass
class ReplicationMetrics:
    """Per-broker counters (one instance shared by all of a broker's PartitionStates)."""

    isr_shrinks: int = 0
    isr_expands: int = 0
    failed_isr_updates: int = 0
    unclean_elections: int = 0
    # A follower cut its log below its own HW: committed data went away (unclean election
    # or lost unflushed data). Never happens when every election is clean.
    truncations_below_hw: int = 0


@dataclass(frozen=True)
class ReplicationGauges:
    under_replicated: int  # leader partitions with |ISR| < |replicas|
    under_min_isr: int  # leader partitions with |ISR| < min.insync.replicas
    at_min_isr: int  # leader partitions with |ISR| == min.insync.replicas
    max_follower_lag: int  # offsets, max over leader partitions of LEO - follower LEO
    leader_count: int


def gauges(partitions: Iterable[PartitionState]) -> ReplicationGauges:
    under = below = at = lag = leaders = 0
    for p in partitions:
        if not p.is_leader:
            continue
        leaders += 1
        under += p.is_under_replicated
        below += p.is_under_min_isr
        at += p.is_at_min_isr
        lag = max(lag, p.max_follower_lag)
    return ReplicationGauges(under, below, at, lag, leaders)
