"""PartitionState and the epoch rules, driven directly (no simulator)."""

from __future__ import annotations

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import (
    UNDEFINED,
    EpochEndOffset,
    MemoryLog,
    PartitionConfig,
    PartitionState,
    ReplicationMetrics,
    epoch_end_offset,
    gauges,
    select_preferred_read_replica,
)

LAG = 1_000


def leader(
    min_isr: int = 1, isr=(0, 1, 2), replicas=(0, 1, 2), records: int = 0, now: int = 0
) -> PartitionState:
    log = MemoryLog()
    if records:
        log.append_as_leader(list(range(records)), 0)
    p = PartitionState(0, log, PartitionConfig(min_insync_replicas=min_isr, replica_lag_time_max_ms=LAG))
    assert p.become_leader(1, isr, replicas, partition_epoch=10, now_ms=now)
    return p


def append(p: PartitionState, n: int, now: int = 0) -> bool:
    p.log.append_as_leader(list(range(n)), p.leader_epoch)  # type: ignore[attr-defined]
    return p.on_leader_append(now)


# -- KIP-279 end offsets ---------------------------------------------------------------------


def test_epoch_end_offset_rules() -> None:
    entries = [(1, 0), (3, 10), (5, 20)]
    assert epoch_end_offset(entries, 5, 25) == EpochEndOffset(5, 25)  # latest: LEO
    assert epoch_end_offset(entries, 3, 25) == EpochEndOffset(3, 20)
    assert epoch_end_offset(entries, 4, 25) == EpochEndOffset(3, 20)  # largest epoch <= 4
    assert epoch_end_offset(entries, 0, 25) == EpochEndOffset(0, 0)  # older than all
    assert epoch_end_offset(entries, 6, 25) == UNDEFINED  # newer than all
    assert epoch_end_offset([], 1, 0) == UNDEFINED
    assert epoch_end_offset(entries, -1, 25) == UNDEFINED


def test_memory_log_epoch_cache_follows_kafka() -> None:
    log = MemoryLog()
    log.append_as_leader(["a", "b"], 1)
    log.assign_epoch(2, 2)  # a leader that appended nothing before losing leadership
    log.truncate_to(2)  # at LEO: no records go, but the empty trailing entry must
    assert log.epochs == [(1, 0)] and log.log_end_offset == 2
    log.assign_epoch(3, 1)  # a new entry drops conflicting later-starting ones
    assert log.epochs == [(1, 0), (3, 1)]


# -- leader election ---------------------------------------------------------------------------


def test_become_leader_records_epoch_at_leo_before_any_append() -> None:
    p = leader(records=5)
    assert p.log.epoch_entries() == [(0, 0), (1, 5)]
    assert p.leader_epoch_start_offset == 5
    # A follower that had epoch 0 up to offset 8 learns that epoch 0 ends at 5 here.
    assert p.end_offset_for_epoch(0, current_leader_epoch=1) == (ErrorCode.NONE, EpochEndOffset(0, 5))
    assert p.end_offset_for_epoch(0, current_leader_epoch=0)[0] is ErrorCode.FENCED_LEADER_EPOCH


def test_stale_and_repeated_leader_and_isr() -> None:
    p = leader()
    assert not p.become_leader(0, [0], [0, 1, 2], 11, 0)  # older epoch: ignored
    assert p.isr == {0, 1, 2}
    assert not p.become_leader(1, [0, 1], [0, 1, 2], 11, 0)  # same epoch, newer ISR
    assert p.isr == {0, 1} and p.partition_epoch == 11
    assert p.become_follower(2, 0, [2], [0, 1, 2], 12, 0) is None  # stale epoch
    assert p.is_leader


def test_validate_leader_epoch() -> None:
    p = leader()
    assert p.validate_leader_epoch(1) is ErrorCode.NONE
    assert p.validate_leader_epoch(-1) is ErrorCode.NONE
    assert p.validate_leader_epoch(0) is ErrorCode.FENCED_LEADER_EPOCH
    assert p.validate_leader_epoch(2) is ErrorCode.UNKNOWN_LEADER_EPOCH


# -- produce checks -------------------------------------------------------------------------------


def test_check_produce() -> None:
    p = leader(min_isr=2, isr=(0,))
    assert p.check_produce(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.check_produce(1) is ErrorCode.NONE  # min ISR is for acks=all only
    assert p.check_produce(0) is ErrorCode.NONE
    assert p.check_produce(2) is ErrorCode.INVALID_REQUIRED_ACKS
    f = PartitionState(1, MemoryLog())
    f.become_follower(0, 1, [0, 1], [0, 1], 1, 0)
    assert f.check_produce(1) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_produce_status() -> None:
    p = leader(min_isr=2, isr=(0, 1), replicas=(0, 1))
    append(p, 3)
    assert p.produce_status(3, 1) is None  # waiting for the follower
    p.on_follower_fetch(1, 3, 1, 5)
    assert p.high_watermark == 3 and p.produce_status(3, 1) is ErrorCode.NONE
    append(p, 1)
    p.on_isr_change_committed([0], 11, 6)
    assert p.produce_status(4, 1) is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert p.produce_status(4, 0) is ErrorCode.NOT_LEADER_OR_FOLLOWER  # appended in another epoch


# -- HW ---------------------------------------------------------------------------------------------


def test_hw_is_min_leo_over_isr_and_never_goes_back() -> None:
    p = leader()
    append(p, 10)
    assert p.high_watermark == 0  # follower LEOs unknown yet
    assert not p.on_follower_fetch(1, 10, 1, 1).hw_changed
    r = p.on_follower_fetch(2, 6, 1, 1)
    assert r.hw_changed and r.high_watermark == 6
    p.on_follower_fetch(2, 4, 1, 2)  # a stale, reordered fetch
    assert p.high_watermark == 6


def test_strict_min_isr_freezes_hw() -> None:
    """KIP-966: a leader alone (min ISR 2) never advances the HW, even for acks=1 data."""
    p = leader(min_isr=2, isr=(0,))
    assert not append(p, 5)
    assert p.high_watermark == 0
    lone = leader(min_isr=1, isr=(0,))
    assert append(lone, 5) and lone.high_watermark == 5


def test_hw_uses_maximal_isr_while_a_change_is_pending() -> None:
    p = leader(isr=(0, 1), replicas=(0, 1, 2))
    append(p, 10)
    p.on_follower_fetch(1, 10, 1, 1)
    assert p.high_watermark == 10
    append(p, 10)
    change = p.on_follower_fetch(2, 10, 1, 2).isr_change  # reaches HW: expand
    assert change is not None and change.new_isr == (0, 1, 2) and change.partition_epoch == 10
    p.on_follower_fetch(1, 20, 1, 3)
    assert p.high_watermark == 10  # broker 2 (pending) has only 10
    p.on_isr_change_committed([0, 1, 2], 11, 4)
    assert p.isr == {0, 1, 2} and p.metrics.isr_expands == 1


def test_expand_needs_current_epoch_start() -> None:
    p = leader(isr=(0,), replicas=(0, 1), records=8)  # epoch 1 starts at 8; HW 0 (unknown)
    assert p.on_follower_fetch(1, 5, 0, 1).isr_change is None  # >= HW but < epoch start
    assert p.on_follower_fetch(1, 8, 0, 2).isr_change is not None


# -- ISR shrink: time only (seed 004) -----------------------------------------------------------------


def test_fresh_leader_does_not_shrink_before_lag_time() -> None:
    p = leader(now=1_000)
    append(p, 1, 1_000)
    assert p.maybe_shrink_isr(1_000 + LAG) is None
    change = p.maybe_shrink_isr(1_001 + LAG)
    assert change is not None and change.new_isr == (0,)


def test_caught_up_means_reaching_leo_of_previous_fetch() -> None:
    p = leader(isr=(0, 1), replicas=(0, 1))
    append(p, 100, 0)
    p.on_follower_fetch(1, 0, 1, 10)  # first fetch: nothing known yet
    assert p.remotes[1].last_caught_up_time_ms == 0
    p.on_follower_fetch(1, 50, 1, 20)  # behind the LEO (100) seen at the previous fetch
    assert p.remotes[1].last_caught_up_time_ms == 0
    append(p, 50, 25)  # a new burst: LEO 150
    p.on_follower_fetch(1, 100, 1, 30)  # reached 100, the LEO at its fetch of t=20
    assert p.remotes[1].last_caught_up_time_ms == 20
    p.on_follower_fetch(1, 150, 1, 40)  # at the current LEO
    assert p.remotes[1].last_caught_up_time_ms == 40


def test_shrink_is_time_based_never_count_based() -> None:
    p = leader(isr=(0, 1), replicas=(0, 1))
    t = 0
    for _ in range(50):  # huge bursts, a follower always one fetch behind but fetching
        append(p, 10_000, t)
        p.on_follower_fetch(1, p.remotes[1].last_fetch_leader_leo if t else 0, 1, t)
        t += LAG // 2
        assert p.maybe_shrink_isr(t) is None
    assert p.max_follower_lag >= 10_000
    # Stops fetching: out after replica.lag.time.max.ms.
    append(p, 1, t)
    assert p.maybe_shrink_isr(t + LAG) is not None


def test_idle_follower_at_leo_stays_in_sync() -> None:
    p = leader(isr=(0, 1), replicas=(0, 1))
    append(p, 3)
    p.on_follower_fetch(1, 3, 1, 1)
    assert p.maybe_shrink_isr(100 * LAG) is None  # nothing new to fetch: not lagging


def test_one_isr_change_in_flight() -> None:
    p = leader()
    append(p, 1)
    first = p.maybe_shrink_isr(LAG + 1)
    assert first is not None and p.maybe_shrink_isr(LAG + 2) is None
    p.on_isr_change_failed(ErrorCode.INVALID_UPDATE_VERSION, LAG + 3, first)
    assert p.metrics.failed_isr_updates == 1 and p.isr == {0, 1, 2}
    again = p.maybe_shrink_isr(LAG + 4)
    assert again is not None
    assert not p.on_isr_change_committed([0], 10, LAG + 5)  # stale partition epoch: ignored
    p.on_isr_change_committed([0], 11, LAG + 5)
    assert p.isr == {0} and p.metrics.isr_shrinks == 1


# -- follower fetch validation on the leader -----------------------------------------------------------


def test_diverging_epoch_and_out_of_range() -> None:
    p = leader(records=5)  # epoch 0: [0, 5), epoch 1 from 5
    append(p, 3)
    r = p.on_follower_fetch(1, 7, 0, 1)  # follower wrote epoch 0 up to 7: diverged at 5
    assert r.diverging_epoch == EpochEndOffset(0, 5) and r.error is ErrorCode.NONE
    assert p.remotes[1].log_end_offset == -1  # not counted as its LEO
    assert p.on_follower_fetch(1, 9, 1, 1).diverging_epoch == EpochEndOffset(1, 8)  # ahead of us
    assert p.on_follower_fetch(1, 9, -1, 1).error is ErrorCode.OFFSET_OUT_OF_RANGE  # no epoch sent
    assert p.on_follower_fetch(7, 0, -1, 1).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    ok = p.on_follower_fetch(1, 5, 0, 1)
    assert ok.error is ErrorCode.NONE and ok.diverging_epoch is None and ok.log_end_offset == 8


# -- KIP-392 --------------------------------------------------------------------------------------------


def test_preferred_read_replica() -> None:
    racks = {0: "a", 1: "b", 2: "b", 3: "c"}
    leos = {1: 10, 2: 20, 3: 30}
    assert select_preferred_read_replica("b", 0, racks, [0, 1, 2], leos, 5) == 2
    assert select_preferred_read_replica("b", 0, racks, [0, 1], leos, 5) == 1
    # KAFKA-14372: a replica out of the ISR is never chosen, however close by.
    assert select_preferred_read_replica("c", 0, racks, [0, 1, 2], leos, 5) is None
    assert select_preferred_read_replica("b", 0, racks, [0, 1, 2], leos, 15) == 2  # 1 lacks 15
    assert select_preferred_read_replica("a", 0, racks, [0, 1, 2], leos, 5) is None  # leader's rack
    assert select_preferred_read_replica(None, 0, racks, [0, 1, 2], leos, 5) is None


def test_follower_serves_consumers_up_to_its_hw() -> None:
    f = PartitionState(1, MemoryLog())
    f.log.append_as_follower([(0, 1, "a"), (1, 1, "b"), (2, 1, "c")])  # type: ignore[attr-defined]
    f.set_follower_high_watermark(2)
    assert f.fetch_upper_bound(from_follower=False) == 2
    f.set_follower_high_watermark(9)
    assert f.high_watermark == 3  # never above its own LEO


# -- metrics ----------------------------------------------------------------------------------------------


def test_gauges() -> None:
    shared = ReplicationMetrics()
    a = PartitionState(0, MemoryLog(), PartitionConfig(min_insync_replicas=2), metrics=shared)
    a.become_leader(1, [0], [0, 1, 2], 1, 0)
    b = PartitionState(0, MemoryLog(), PartitionConfig(min_insync_replicas=2), metrics=shared)
    b.become_leader(1, [0, 1], [0, 1], 1, 0)
    b.log.append_as_leader([1, 2, 3], 1)  # type: ignore[attr-defined]
    g = gauges([a, b])
    assert (g.leader_count, g.under_replicated, g.under_min_isr, g.at_min_isr) == (2, 1, 1, 1)
    assert g.max_follower_lag == 3
    a.become_leader(2, [0], [0, 1, 2], 2, 0, unclean=True)
    assert shared.unclean_elections == 1


def test_late_refusal_of_an_older_proposal_is_ignored() -> None:
    """Found by the simulator (SIM_SEED=10843): a refusal arriving after a newer proposal
    must not clear it, or the HW advances without a member the controller then adds."""
    p = leader(isr=(0,), replicas=(0, 1))
    append(p, 5)
    old = p.on_follower_fetch(1, 5, 1, 1).isr_change
    assert old is not None and old.partition_epoch == 10
    p.become_leader(1, [0], [0, 1], 11, 2)  # LeaderAndIsr, same epoch, newer partition epoch
    append(p, 5)  # HW 10: the leader is alone in the ISR
    new = p.on_follower_fetch(1, 10, 1, 3).isr_change
    assert new is not None and new.partition_epoch == 11
    p.on_isr_change_failed(ErrorCode.INVALID_UPDATE_VERSION, 4, old)
    assert p.pending_change == new and p.metrics.failed_isr_updates == 0
    assert not append(p, 1) and p.high_watermark == 10  # waits for broker 1 now
    p.on_isr_change_committed([0, 1], 12, 5)
    assert p.isr == {0, 1} and p.high_watermark == 10


def test_core_imports_no_io() -> None:
    """The core stays sans-I/O: nothing of sockets, files, asyncio, ZooKeeper, storage,
    server or protocol may be imported by kafkarepl.replication."""
    import ast
    from pathlib import Path

    import kafkarepl.replication as pkg

    banned = ("socket", "asyncio", "kazoo", "os", "io", "selectors", "threading",
              "kafkarepl.storage", "kafkarepl.server", "kafkarepl.protocol", "kafkarepl._core")
    for path in Path(pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert not any(name == b or name.startswith(b + ".") for b in banned), (path.name, name)
