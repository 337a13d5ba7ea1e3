"""Producer snapshots taken at rolls (Kafka's `<offset>.snapshot`) and the recovery point
a roll's flush moves: after an unclean stop, or a truncation, the producer state and the
aborted-transaction indexes come from the newest snapshot still standing plus a replay of
the segments from it, and match a replay of the whole log."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage import log as log_module
from kafkarepl.storage.log import ROLL_SNAPSHOT_SUFFIX
from tests.batches import build_batch
from tests.unit.test_log_recovery import crash
from tests.unit.test_transactions_log import leader, marker, txn

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=700, index_interval_bytes=100)
IDEMPOTENT, TXN_A, TXN_B = 7, 1001, 2002


def workload(lg: Log, seed: int, steps: int = 120) -> None:
    """Plain, idempotent and transactional batches with commit and abort markers, the
    transactions left open across rolls at random."""
    rnd = random.Random(seed)
    seq = {IDEMPOTENT: 0, TXN_A: 0, TXN_B: 0}
    open_txn = {TXN_A: False, TXN_B: False}
    for _ in range(steps):
        kind = rnd.choice(["plain", "idempotent", "txn", "txn", "marker"])
        if kind == "plain":
            lg.append_as_leader(build_batch(rnd.randint(1, 3)), 0, T0)
        elif kind == "idempotent":
            n = rnd.randint(1, 3)
            lg.append_as_leader(build_batch(n, producer_id=IDEMPOTENT, producer_epoch=0,
                                            base_sequence=seq[IDEMPOTENT]), 0, T0)
            seq[IDEMPOTENT] += n
        else:
            pid = rnd.choice([TXN_A, TXN_B])
            if kind == "txn":
                leader(lg, txn(pid, seq[pid]))
                seq[pid] += 2
                open_txn[pid] = True
            elif open_txn[pid]:
                leader(lg, marker(pid, commit=rnd.random() < 0.5))
                open_txn[pid] = False


def state(lg: Log) -> tuple:
    """What the producer state answers with: per producer its epoch, retained batches,
    timestamp and open transaction; the open transactions; the aborted ones and LSO."""
    ps = lg.producer_state
    leo = lg.log_end_offset
    return ({pid: (e.producer_epoch, list(e.batches), e.last_timestamp, e.current_txn_first_offset)
             for pid, e in ps.producers.items()},
            dict(ps.ongoing_txns), lg.aborted_transactions(0, leo), lg.last_stable_offset(leo))


def snapshots(d: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in d.glob(f"*{ROLL_SNAPSHOT_SUFFIX}"))


def full_replay(src: Path, tmp_path: Path) -> tuple:
    """The state a replay of every segment gives: a copy of the log without snapshots
    or aborted-transaction indexes, opened after an unclean stop."""
    work = tmp_path / "full" / src.name
    work.mkdir(parents=True)
    for p in src.iterdir():
        if p.suffix not in (ROLL_SNAPSHOT_SUFFIX, ".txnindex") and p.is_file():
            work.joinpath(p.name).write_bytes(p.read_bytes())
    lg = Log.open(work, CFG, recovery_point=0, clean_shutdown=False)
    try:
        return state(lg)
    finally:
        lg.close()


@pytest.fixture
def replayed(monkeypatch) -> list[list[int]]:
    """The base offsets of the segments each producer-state replay read."""
    calls: list[list[int]] = []
    real = log_module.rebuild_from_headers

    def spy(segments, cache, producers, on_completed=None):
        if producers is not None:
            calls.append([s.base_offset for s in segments])
        return real(segments, cache, producers, on_completed)

    monkeypatch.setattr(log_module, "rebuild_from_headers", spy)
    return calls


def test_every_roll_leaves_a_snapshot_kept_while_its_segment_is(tmp_path):
    lg = Log.open(tmp_path / "t-0", CFG)
    try:
        workload(lg, seed=1)
        bases = [s.base_offset for s in lg.segments]
        assert len(bases) > 5
        assert snapshots(lg.dir) == bases[1:]  # the first segment was never rolled to
        lg.truncate_to(bases[-2] + 1)  # the last segment and its snapshot go
        assert snapshots(lg.dir) == [s.base_offset for s in lg.segments][1:] == bases[1:-1]
        lg.maybe_increment_log_start_offset(bases[3])
        lg.delete_old_segments(T0)  # the three below the log start go, with theirs
        assert snapshots(lg.dir) == [s.base_offset for s in lg.segments] == bases[3:-1]
        lg.truncate_fully_and_start_at(lg.log_end_offset + 10)
        assert snapshots(lg.dir) == []
    finally:
        lg.close()


@pytest.mark.parametrize("seed", range(6))
def test_unclean_reopen_replays_from_the_snapshot_at_the_recovery_point(tmp_path, replayed, seed):
    d = tmp_path / "t-0"
    lg = Log.open(d, CFG)
    workload(lg, seed)
    bases = [s.base_offset for s in lg.segments]
    recovery_point = bases[len(bases) * 2 // 3]
    lg.flush(recovery_point)  # what the roll to that segment flushed
    assert lg.recovery_point == recovery_point
    expected = state(lg)
    crash(lg)
    # A crash also loses what was never flushed, the aborted-transaction index of the
    # segments being recovered included: it is rebuilt by the replay.
    for p in d.glob("*.txnindex"):
        if int(p.name[:20]) >= recovery_point:
            p.unlink()
    replayed.clear()
    lg = Log.open(d, CFG, recovery_point=recovery_point, clean_shutdown=False)
    try:
        assert replayed == [[b for b in bases if b >= recovery_point]]
        assert state(lg) == expected == full_replay(d, tmp_path)
        # The idempotent producer's retry of its last batch is still found a duplicate.
        last = expected[0][IDEMPOTENT][1][-1]
        leo = lg.log_end_offset
        lg.append_as_leader(build_batch(last.last_seq - last.first_seq + 1, producer_id=IDEMPOTENT,
                                        producer_epoch=0, base_sequence=last.first_seq), 0, T0)
        assert lg.log_end_offset == leo
    finally:
        lg.close()


def test_a_snapshot_above_a_cut_is_not_used(tmp_path, replayed):
    """Recovery cuts the log at a damaged batch and drops the segments after it: their
    snapshots describe offsets that are gone, and are deleted."""
    d = tmp_path / "t-0"
    lg = Log.open(d, CFG)
    workload(lg, seed=3)
    bases = [s.base_offset for s in lg.segments]
    crash(lg)
    damaged = bases[2]
    with open(d / f"{damaged:020d}.log", "r+b") as f:  # a byte of the first batch's records
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    replayed.clear()
    lg = Log.open(d, CFG, recovery_point=0, clean_shutdown=False)
    try:
        assert lg.log_end_offset == damaged
        # The damaged segment stays, empty (the log ends at its base): its snapshot is
        # the state at the new LEO and stays; those above go.
        assert snapshots(d) == bases[1:3]
        assert replayed == [bases[:3]]  # from the start: no snapshot at or below offset 0
        assert state(lg) == full_replay(d, tmp_path)
    finally:
        lg.close()


def test_truncation_replays_from_the_snapshot_below_it(tmp_path, replayed):
    d = tmp_path / "t-0"
    lg = Log.open(d, CFG)
    try:
        workload(lg, seed=4)
        leader(lg, txn(3003, 0))  # open: the truncation below cuts its batch
        bases = [s.base_offset for s in lg.segments]
        replayed.clear()
        lg.truncate_to(bases[-1] + 1)
        assert replayed == [[bases[-1]]]
        lg.flush()
        truncated = state(lg)
        assert truncated == full_replay(d, tmp_path)
    finally:
        lg.close()


def test_a_truncation_during_a_flush_keeps_the_recovery_point_below_it(tmp_path):
    """The syncs of a flush begun before a truncation cover bytes that the truncation
    removed and later appends rewrote: the recovery point stops at the truncation."""
    lg = Log.open(tmp_path / "t-0", CFG)
    try:
        workload(lg, seed=5, steps=40)
        pending = lg.begin_flush()
        cut = lg.segments[-1].base_offset + 1
        worker = threading.Thread(target=pending.run)
        worker.start()
        lg.truncate_to(cut)
        for _ in range(10):
            lg.append_as_leader(build_batch(2), 0, T0)
        worker.join()
        lg.complete_flush(pending)
        assert lg.recovery_point <= cut < lg.log_end_offset
    finally:
        lg.close()


def test_a_torn_snapshot_falls_back_to_an_older_one(tmp_path, replayed):
    d = tmp_path / "t-0"
    lg = Log.open(d, CFG)
    workload(lg, seed=2)
    bases = [s.base_offset for s in lg.segments]
    expected = state(lg)
    crash(lg)
    newest = d / f"{bases[-1]:020d}{ROLL_SNAPSHOT_SUFFIX}"
    os.truncate(newest, newest.stat().st_size // 2)  # written unsynced, cut by a power loss
    replayed.clear()
    lg = Log.open(d, CFG, recovery_point=bases[-1], clean_shutdown=False)
    try:
        assert replayed == [bases[-2:]]
        assert state(lg) == expected
    finally:
        lg.close()


def test_a_lost_epoch_checkpoint_is_rebuilt_from_every_segment_beside_the_replay(tmp_path, replayed):
    """The leader epochs need every segment's headers even when the producer state
    replays only the newest one."""
    d = tmp_path / "t-0"
    lg = Log.open(d, CFG)
    for epoch in range(4):
        for _ in range(6):
            lg.append_as_leader(build_batch(3, value_size=30), epoch, T0)
    bases = [s.base_offset for s in lg.segments]
    epochs = lg.leader_epoch_cache.epochs()
    assert len(epochs) == 4 and len(bases) > 3
    crash(lg)
    (d / "leader-epoch-checkpoint").unlink()
    replayed.clear()
    lg = Log.open(d, CFG, recovery_point=bases[-1], clean_shutdown=False)
    try:
        assert replayed == [bases[-1:]]
        assert lg.leader_epoch_cache.epochs() == epochs
    finally:
        lg.close()
