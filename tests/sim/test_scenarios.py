"""Named failure scenarios from Kafka's history, scripted on the simulator.

Each runs the real core (PartitionState, FollowerFetcher, purgatory) on the simulated
cluster with the invariant checks after every step. See
../shared/reference/facts-and-sources.md section 2 for the stories.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    EpochRequest,
    FetcherState,
    MemoryLog,
    PartitionConfig,
    PartitionState,
)
from tests.sim.mutants import HwTruncatingFetcher, NonStrictMinIsrPartition
from tests.sim.simulator import (
    CONTROLLER,
    InvariantViolation,
    Msg,
    ProduceTicket,
    PState,
    SimConfig,
    Simulation,
)

FAST_NET = (1, 3)


def run_until(sim: Simulation, cond: Callable[[], bool], max_ms: int = 10_000) -> None:
    end = sim.now + max_ms
    while not cond():
        if sim.now >= end:
            raise AssertionError(f"condition not reached in {max_ms} ms\n{sim.describe()}")
        sim.step(1)
        sim.check()


def run_for(sim: Simulation, ms: int) -> None:
    end = sim.now + ms
    while sim.now < end:
        sim.step(1)
        sim.check()


def produce_acked(sim: Simulation, p: int = 0, n: int = 1, broker: int | None = None) -> list[object]:
    op = sim.produce(p, n, acks=-1, broker=broker)
    assert isinstance(op, ProduceTicket), op
    run_until(sim, lambda: op.completed)
    assert op.results[p] is ErrorCode.NONE, op.results
    return op.values


def values(sim: Simulation, b: int, p: int = 0) -> list[object]:
    return [v for _e, v in sim.brokers[b].logs[p].records]


def settled(sim: Simulation, p: int = 0) -> bool:
    leader = sim.leader_of(p)
    return leader is not None and len(leader.parts[p].isr) == len(leader.parts[p].replicas)


def bounce_unnoticed(sim: Simulation, b: int) -> None:
    """Restart broker b before the controller notices (the pre-KIP-380 window); the
    controller re-sends its current LeaderAndIsr to the new process."""
    sim.brokers[b].crash(lose_unflushed=False)
    sim.brokers[b].restart()
    sim.controller.registered[b] = sim.brokers[b].incarnation
    st = sim.controller.state[0]
    sim.net.send(CONTROLLER, b, "leader_and_isr", 0, PState(**vars(st)), False)


# -- KIP-101 ---------------------------------------------------------------------------------


def _kip101_scenario1(fetcher_factory=None) -> Simulation:
    """RF=2: B (broker 0) leads, A (broker 1) follows. A fetches m2; B's HW moves to 2 on
    A's next fetch, but A restarts before that answer arrives (its HW is still 1). Then B
    dies and A is elected."""
    cfg = SimConfig(brokers=2, replication_factor=2, min_insync_replicas=1, net_delay_ms=FAST_NET)
    sim = Simulation(101, cfg, fetcher_factory=fetcher_factory)
    run_until(sim, lambda: settled(sim))
    produce_acked(sim)  # m1
    run_until(sim, lambda: sim.brokers[1].parts[0].high_watermark == 1)

    def hw2_to_a(m: Msg) -> bool:
        return m.kind == "fetch_response" and m.dst == 1 and m.body[2].high_watermark == 2

    sim.net.drop_if = hw2_to_a
    m2 = produce_acked(sim)
    a = sim.brokers[1]
    assert a.logs[0].log_end_offset == 2 and a.parts[0].high_watermark == 1
    a.checkpoint_hw()
    bounce_unnoticed(sim, 1)
    # A finishes its truncation step, but fetches nothing more before B dies.
    sim.net.drop_if = lambda m: m.kind == "fetch" and m.src == 1
    run_until(sim, lambda: 0 in a.parts and a.parts[0].fetcher is not None and a.parts[0].fetcher.state is FetcherState.FETCHING)
    run_for(sim, 20)
    sim.crash(0)
    run_until(sim, lambda: sim.leader_of(0) is a)
    assert m2[0] in values(sim, 1)
    return sim


def test_kip101_scenario1_epoch_truncation_keeps_m2() -> None:
    sim = _kip101_scenario1()
    sim.converge()
    assert values(sim, 0) == values(sim, 1) == [1, 2]


def test_kip101_scenario1_hw_truncation_loses_m2() -> None:
    """The seed-003 rule (truncate to HW) drops m2 and the invariants catch it."""
    with pytest.raises(InvariantViolation, match="acked value 2@1 lost"):
        _kip101_scenario1(fetcher_factory=HwTruncatingFetcher)


def _kip101_scenario2(fetcher_factory=None) -> Simulation:
    """RF=2: A (broker 0) leads with m1, m2 (both committed); B has m1 flushed, m2 not.
    Both lose power. B restarts first, becomes leader, takes m3 at offset 1. A returns
    as a follower whose HW covers offset 1."""
    cfg = SimConfig(brokers=2, replication_factor=2, min_insync_replicas=1, net_delay_ms=FAST_NET)
    sim = Simulation(102, cfg, fetcher_factory=fetcher_factory)
    run_until(sim, lambda: settled(sim))
    produce_acked(sim)  # m1
    for b in sim.brokers:
        b.logs[0].flush()
    produce_acked(sim)  # m2
    run_until(sim, lambda: sim.brokers[1].logs[0].log_end_offset == 2)
    sim.brokers[0].logs[0].flush()
    sim.brokers[0].checkpoint_hw()
    assert sim.brokers[0].hw_checkpoint[0] == 2
    sim.crash(0, lose_unflushed=True)
    sim.crash(1, lose_unflushed=True)
    assert values(sim, 1) == [1]
    run_for(sim, 2 * cfg.session_timeout_ms)
    sim.restart(1)
    run_until(sim, lambda: sim.leader_of(0) is sim.brokers[1])
    sim.produce(0, 1, acks=1)  # m3 at offset 1
    assert values(sim, 1) == [1, 3]
    sim.restart(0)
    sim.converge()
    return sim


def test_kip101_scenario2_replicas_end_identical() -> None:
    sim = _kip101_scenario2()
    assert values(sim, 0) == values(sim, 1) == [1, 3]
    # m2 was committed and is gone: only because both ISR copies lost power; the
    # checker recorded it as an allowed loss rather than silently passing.
    assert 0 in sim.tainted


def test_kip101_scenario2_hw_truncation_diverges() -> None:
    with pytest.raises(InvariantViolation, match="did not converge"):
        _kip101_scenario2(fetcher_factory=HwTruncatingFetcher)


# -- KIP-279 ---------------------------------------------------------------------------------


def test_kip279_follower_with_epoch_the_leader_never_saw() -> None:
    """Fast failover: B led epoch 2 briefly (m2 at offset 1) while A was away; A came back
    as leader of epoch 3 and wrote m3 at offset 1. B must drop m2 by asking for epoch 2,
    learning (1, 1) (largest epoch <= 2 that A knows, ended where epoch 3 starts)."""
    a_log, b_log = MemoryLog(), MemoryLog()
    a_log.append_as_leader(["m1"], 1)
    b_log.append_as_follower([(0, 1, "m1")])
    b_log.append_as_leader(["m2"], 2)
    a = PartitionState(0, a_log, PartitionConfig())
    a.become_leader(3, isr=[0], replicas=[0, 1], partition_epoch=5, now_ms=0)
    a_log.append_as_leader(["m3"], 3)
    assert a_log.epochs == [(1, 0), (3, 1)]

    b = PartitionState(1, b_log, PartitionConfig())
    fetcher = b.become_follower(0, 3, isr=[0], replicas=[0, 1], partition_epoch=5, now_ms=0)
    assert fetcher is not None
    req = fetcher.next_request(0)
    assert isinstance(req, EpochRequest) and req.leader_epoch == 2
    err, answer = a.end_offset_for_epoch(req.leader_epoch, req.current_leader_epoch)
    assert (err, answer.epoch, answer.end_offset) == (ErrorCode.NONE, 1, 1)
    out = fetcher.on_epoch_end_offset(req, err, answer, 0)
    assert out.truncated_to == 1 and b_log.epochs == [(1, 0)]
    assert fetcher.state is FetcherState.FETCHING


def test_kip279_fast_leader_changes_lose_nothing() -> None:
    """shouldSurviveFastLeaderChange: write, bounce the follower, then bounce the leader
    right after, many times; no acked record lost, logs identical."""
    cfg = SimConfig(brokers=2, replication_factor=2, min_insync_replicas=1, net_delay_ms=FAST_NET)
    sim = Simulation(279, cfg)
    run_until(sim, lambda: settled(sim))
    acked: list[object] = []
    for _ in range(8):
        run_until(sim, lambda: sim.leader_of(0) is not None)
        acked += produce_acked(sim, n=2)
        leader = sim.controller.state[0].leader
        follower = 1 - leader
        sim.crash(follower)
        sim.restart(follower)
        run_for(sim, 5)
        sim.crash(leader)
        sim.restart(leader)
        run_for(sim, 5)
    sim.converge()
    assert values(sim, 0) == values(sim, 1)
    assert set(acked) <= set(values(sim, 0))
    assert not sim.tainted


# -- Jepsen 2013 -----------------------------------------------------------------------------


def _isolate_followers_until_isr_is_leader_only(sim: Simulation) -> None:
    run_until(sim, lambda: settled(sim))
    produce_acked(sim, n=3)
    for b in (1, 2):
        sim.net.cut[b] = 1 << 40  # away from the leader, still in ZooKeeper
    sim.produce(0, 1, acks=1)  # followers with nothing to fetch never lag: give them some
    run_until(sim, lambda: sim.controller.state[0].isr == (0,))
    run_until(sim, lambda: sim.brokers[0].parts[0].isr == {0})


def test_jepsen_min_isr_2_refuses_writes_and_loses_nothing() -> None:
    cfg = SimConfig(brokers=3, min_insync_replicas=2, net_delay_ms=FAST_NET)
    sim = Simulation(2013, cfg)
    _isolate_followers_until_isr_is_leader_only(sim)
    assert sim.produce(0, 1, acks=-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert sim.brokers[0].parts[0].is_under_min_isr
    # Kill the leader: the only ISR member is gone and unclean election is off, so the
    # partition stays offline rather than electing a stale replica.
    sim.crash(0)
    run_for(sim, 3 * cfg.session_timeout_ms)
    assert sim.controller.state[0].leader == -1 and sim.controller.unclean_elections == 0
    sim.net.cut.clear()
    sim.restart(0)
    sim.converge()
    assert not sim.tainted and len(sim.acked[0]) == 3


def test_jepsen_min_isr_1_with_unclean_election_can_lose_acked_writes() -> None:
    cfg = SimConfig(brokers=3, min_insync_replicas=1, unclean=True, net_delay_ms=FAST_NET)
    sim = Simulation(2013, cfg)
    _isolate_followers_until_isr_is_leader_only(sim)
    lone = [v for _ in range(5) for v in produce_acked(sim)]  # acked by the lone leader
    sim.brokers[0].checkpoint_hw()
    sim.crash(0)
    sim.net.cut.clear()
    run_until(sim, lambda: sim.leader_of(0) is not None)
    new_leader = sim.leader_of(0)
    assert new_leader is not None and new_leader.id != 0
    assert sim.controller.unclean_elections == 1
    assert new_leader.metrics.unclean_elections == 1
    assert not set(lone) & set(values(sim, new_leader.id))  # the acked writes are gone
    assert 0 in sim.tainted  # allowed only because the election was unclean
    sim.restart(0)
    sim.converge()
    assert not set(lone) & set(values(sim, 0))
    assert sim.brokers[0].metrics.truncations_below_hw == 1  # the loss shows in a metric


# -- KIP-966 ---------------------------------------------------------------------------------


def _kip966_last_replica_standing(partition_cls: type[PartitionState] = PartitionState) -> Simulation:
    """ISR {0,1,2}, min ISR 2. Broker 1 then broker 2 drop out; 0 leads alone. With the
    HW frozen below min ISR, nothing 0 takes alone is committed, so its power loss and
    re-election lose no acknowledged (or consumer-visible) record."""
    cfg = SimConfig(brokers=3, min_insync_replicas=2, net_delay_ms=FAST_NET)
    sim = Simulation(966, cfg, partition_cls=partition_cls)
    run_until(sim, lambda: settled(sim))
    produce_acked(sim, n=2)
    leader = sim.brokers[0]
    sim.net.cut[1] = 1 << 40  # T0
    sim.produce(0, 1, acks=1)
    run_until(sim, lambda: leader.parts[0].isr == {0, 2})
    produce_acked(sim, n=2)  # committed on {0, 2}
    for b in sim.brokers:
        b.logs[0].flush()  # (flush.ms elapsed)
    sim.net.cut[2] = 1 << 40  # T1
    pending = sim.produce(0, 1, acks=-1)  # appended while the ISR is still {0, 2}
    run_until(sim, lambda: leader.parts[0].isr == {0})
    hw_alone = leader.parts[0].high_watermark
    assert sim.produce(0, 1, acks=-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert sim.produce(0, 3, acks=1) is ErrorCode.NONE  # acks=1 still appends ...
    run_for(sim, 100)
    sim.hw_moved_alone = leader.parts[0].high_watermark > hw_alone  # type: ignore[attr-defined]
    assert isinstance(pending, ProduceTicket) and pending.completed
    sim.crash(0, lose_unflushed=True)  # T2
    sim.net.cut.clear()
    run_for(sim, 2 * cfg.session_timeout_ms)
    assert sim.controller.state[0].leader == -1  # 0 was the last ISR member
    sim.restart(0)  # T3: re-elected with its truncated log; 1 and 2 follow it
    sim.converge()
    return sim


def test_kip966_last_replica_standing_strict_min_isr() -> None:
    sim = _kip966_last_replica_standing()
    assert not sim.hw_moved_alone  # type: ignore[attr-defined]  # ... but is never committed
    assert not sim.tainted
    assert {a.value for a in sim.acked[0]} <= set(values(sim, 1))
    assert sim.produce_errors == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]


def test_kip966_without_strict_min_isr_committed_data_is_lost() -> None:
    """The same story before KIP-966: the lone leader's HW covered the acks=1 records,
    consumers could read them, and the power loss took them from the only ISR copy."""
    sim = _kip966_last_replica_standing(NonStrictMinIsrPartition)
    assert sim.hw_moved_alone  # type: ignore[attr-defined]
    assert 0 in sim.tainted  # the checker saw committed data vanish (allowed: power loss)


# -- seed 004 --------------------------------------------------------------------------------


def test_seed004_bursts_of_large_batches_do_not_shrink_the_isr() -> None:
    cfg = SimConfig(
        brokers=3,
        min_insync_replicas=2,
        replica_lag_time_max_ms=400,
        fetch_max_records=100,
        net_delay_ms=(1, 10),
    )
    sim = Simulation(4, cfg)
    run_until(sim, lambda: settled(sim))
    max_lag = 0
    for _ in range(20):
        sim.produce(0, 300, acks=-1)  # a burst 3x larger than one fetch brings back
        for _ in range(300):
            sim.step(1)
            sim.check()
            max_lag = max(max_lag, sim.brokers[0].parts[0].max_follower_lag)
    assert max_lag >= 250  # a message-count rule (replica.lag.max.messages) would flap
    assert sum(b.metrics.isr_shrinks for b in sim.brokers) == 0
    assert sim.brokers[0].parts[0].isr == {0, 1, 2}
    assert len(sim.acked[0]) == 20 * 300
    # A follower that really stops (a GC pause longer than the lag time) does leave,
    # and rejoins once it has caught up.
    sim.brokers[2].paused_until = sim.now + 3 * cfg.replica_lag_time_max_ms
    sim.produce(0, 10, acks=-1)
    run_until(sim, lambda: sim.brokers[0].parts[0].isr == {0, 1})
    run_until(sim, lambda: sim.brokers[0].parts[0].isr == {0, 1, 2})
    assert sim.brokers[0].metrics.isr_shrinks == 1 and sim.brokers[0].metrics.isr_expands == 1


# -- a leader cut off from ZooKeeper and its followers -----------------------------------------


@pytest.mark.parametrize("min_isr", [1, 2])
def test_leader_cut_off_cannot_ack_a_write_that_is_later_lost(min_isr: int) -> None:
    cfg = SimConfig(brokers=3, min_insync_replicas=min_isr, net_delay_ms=FAST_NET)
    sim = Simulation(7, cfg)
    run_until(sim, lambda: settled(sim))
    produce_acked(sim, n=2)
    old = sim.brokers[0]
    sim.net.cut[0] = old.zk_cut_until = sim.now + 4 * cfg.session_timeout_ms
    stale = [sim.produce(0, 1, acks=-1, broker=0) for _ in range(3)]  # clients with old metadata
    run_until(sim, lambda: sim.leader_of(0) is not None and sim.leader_of(0) is not old)
    fresh = produce_acked(sim, n=2)
    # It cannot shrink its ISR without the controller, so its HW cannot move alone.
    assert old.parts[0].is_leader and old.parts[0].isr == {0, 1, 2}
    sim.converge()
    for op in stale:
        assert isinstance(op, ProduceTicket) and op.completed
        assert op.results[0] is not ErrorCode.NONE
    assert set(fresh) <= set(values(sim, 0)) and not sim.tainted
