"""Partition leader election: pure functions over (assignment, ISR, live brokers).

Every successful election returns the next LeaderAndIsr: the chosen leader, the
leader epoch + 1 and the new ISR. When nobody is eligible the result is a
`NoLeader` outcome and the partition goes offline (leader -1, leader epoch + 1, the
ISR left as it was so that a returning ISR member can be elected cleanly).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

NO_LEADER = -1


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: list[int] = field(default_factory=list)
    unclean: bool = False  # chosen outside the ISR: acknowledged data may be lost

    @property
    def online(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True)
class NoLeader:
    reason: str

    online = False


ElectionResult = LeaderAndIsr | NoLeader


def _live_isr(isr: Sequence[int], live: Collection[int]) -> list[int]:
    return [b for b in isr if b in live]


def offline(current_isr: Sequence[int], live: Collection[int], leader_epoch: int) -> LeaderAndIsr:
    """The state an offline partition is written with (leader -1). Dead brokers leave the
    ISR, except the last one: it stays so that it can be elected cleanly on its return."""
    live_isr = _live_isr(current_isr, live)
    return LeaderAndIsr(NO_LEADER, leader_epoch + 1, live_isr or list(current_isr)[-1:])


def clean_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], leader_epoch: int
) -> ElectionResult:
    """First live replica, in assignment order, that is in the ISR."""
    for b in assignment:
        if b in live and b in isr:
            return LeaderAndIsr(b, leader_epoch + 1, _live_isr(isr, live))
    return NoLeader("no live replica in the ISR")


def unclean_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], leader_epoch: int
) -> ElectionResult:
    """Clean if possible; else the first live replica (flagged unclean, ISR = [it])."""
    result = clean_election(assignment, isr, live, leader_epoch)
    if isinstance(result, LeaderAndIsr):
        return result
    for b in assignment:
        if b in live:
            return LeaderAndIsr(b, leader_epoch + 1, [b], unclean=True)
    return NoLeader("no live replica")


def offline_partition_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    leader_epoch: int,
    unclean_allowed: bool,
) -> ElectionResult:
    if unclean_allowed:
        return unclean_election(assignment, isr, live, leader_epoch)
    return clean_election(assignment, isr, live, leader_epoch)


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], leader_epoch: int
) -> ElectionResult:
    """The first assigned replica, if it is live and in the ISR."""
    if not assignment:
        return NoLeader("no replicas")
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return LeaderAndIsr(preferred, leader_epoch + 1, _live_isr(isr, live))
    return NoLeader(f"preferred replica {preferred} is not live and in the ISR")


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    leader_epoch: int,
    shutting_down: Collection[int],
) -> ElectionResult:
    """First live ISR member that is not shutting down; the shutting-down brokers also
    leave the ISR."""
    new_isr = [b for b in isr if b in live and b not in shutting_down]
    for b in assignment:
        if b in new_isr:
            return LeaderAndIsr(b, leader_epoch + 1, new_isr)
    return NoLeader("no other live replica in the ISR")


def reassignment_election(
    target_replicas: Sequence[int], isr: Sequence[int], live: Collection[int], leader_epoch: int
) -> ElectionResult:
    """Leader for the end of a reassignment: first live target replica in the ISR; the
    new ISR keeps only target replicas."""
    for b in target_replicas:
        if b in live and b in isr:
            new_isr = [r for r in isr if r in live and r in target_replicas]
            return LeaderAndIsr(b, leader_epoch + 1, new_isr)
    return NoLeader("no live target replica in the ISR")
