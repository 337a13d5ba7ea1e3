"""Transactions in storage.Log: open transactions hold the LSO back, markers complete
them, aborted ones land in the .txnindex (Kafka's format) and come back for the range a
read_committed fetch returns; all of it survives reopen, recovery and truncation."""

from __future__ import annotations

import os
import struct

import pytest

from kafkarepl.coordinator.records import build_marker
from kafkarepl.errors import InvalidProducerEpochError, InvalidRecordError
from kafkarepl.storage import Log, LogConfig, records
from kafkarepl.storage.txn_index import AbortedTxn
from tests.batches import build_batch

T0 = 1_700_000_000_000
A, B = 1001, 2002


def txn(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytearray:
    return build_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)


def marker(pid: int, commit: bool, epoch: int = 0) -> bytearray:
    return build_marker(pid, epoch, commit, 0, T0)


@pytest.fixture
def log(tmp_path):
    lg = Log.open(tmp_path / "t-0", LogConfig())
    yield lg
    lg.close()


def leader(lg: Log, batch: bytearray) -> int:
    ctl = batch[21 + 1] & 0x20  # attributes low byte: control bit
    return lg.append_as_leader(batch, 0, T0, control_allowed=bool(ctl)).first_offset


def test_open_transactions_hold_the_lso_and_aborts_are_indexed(log):
    log.append_as_leader(build_batch(2), 0, T0)  # 0-1, not transactional
    assert leader(log, txn(A, 0)) == 2  # A: 2-3
    assert leader(log, txn(B, 0)) == 4  # B: 4-5
    assert log.last_stable_offset(6) == 2  # A is open
    assert leader(log, marker(A, commit=False)) == 6
    # The HW has not passed A's marker yet: still unstable (Kafka's unreplicated txns).
    assert log.last_stable_offset(6) == 2
    assert log.last_stable_offset(7) == 4  # A decided and replicated; B still open
    assert log.aborted_transactions(0, 7) == [AbortedTxn(A, 2, 6, 4)]  # LSO: B's first offset
    assert leader(log, marker(B, commit=True)) == 7
    assert log.last_stable_offset(8) == 8
    assert log.aborted_transactions(0, 8) == [AbortedTxn(A, 2, 6, 4)]  # commits are not indexed
    assert log.aborted_transactions(7, 8) == []  # A ended before 7
    # The file is Kafka's: version 0, pid, first, last, lso.
    raw = (log.dir / f"{0:020d}.txnindex").read_bytes()
    assert raw == struct.pack(">hqqqq", 0, A, 2, 6, 4)


def test_clients_cannot_write_markers_and_old_epochs_are_fenced(log):
    with pytest.raises(InvalidRecordError, match="control"):
        log.append_as_leader(marker(A, True), 0, T0)
    leader(log, txn(A, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        leader(log, marker(A, False, epoch=2))
    assert log.last_stable_offset(2) == 0


def test_follower_append_of_interleaved_markers_records_kafka_lso(tmp_path, log):
    for b in (txn(A, 0), txn(B, 0), marker(A, False), marker(B, False)):
        leader(log, b)
    log.flush()
    data = os.pread(log.active_segment.fd, log.active_segment.size, 0)
    follower = Log.open(tmp_path / "f-0", LogConfig())
    try:
        follower.append_as_follower(bytearray(data))  # all four in one append
        # A's abort happened while B (first offset 2) was open: its LSO is 2, not 5.
        assert follower.aborted_transactions(0, 6) == [AbortedTxn(A, 0, 4, 2), AbortedTxn(B, 2, 5, 6)]
        assert follower.last_stable_offset(6) == 6
    finally:
        follower.close()


@pytest.mark.parametrize("window", [None, 90])  # 90: the rebuild reads every batch across windows
def test_open_transaction_survives_clean_reopen_and_index_rebuilds_after_a_crash(tmp_path, monkeypatch, window):
    if window is not None:
        monkeypatch.setattr(records, "SCAN_WINDOW", window)
    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig())
    leader(lg, txn(A, 0))
    leader(lg, marker(A, False))
    leader(lg, txn(B, 0))  # open at 3
    lg.flush()
    lg.close()
    (tmp_path / ".kafka_cleanshutdown").touch()
    lg = Log.open(d, LogConfig())  # clean: snapshot + index files trusted
    assert lg.last_stable_offset(5) == 3 and lg.aborted_transactions(0, 5) == [AbortedTxn(A, 0, 2, 3)]
    lg.close()
    (tmp_path / ".kafka_cleanshutdown").unlink()
    (d / f"{0:020d}.txnindex").unlink()  # lost with the crash: rebuilt from the markers
    lg = Log.open(d, LogConfig(), recovery_point=0)
    try:
        assert lg.last_stable_offset(5) == 3 and lg.aborted_transactions(0, 5) == [AbortedTxn(A, 0, 2, 3)]
        assert (d / f"{0:020d}.txnindex").exists()
    finally:
        lg.close()


def test_truncation_reopens_a_transaction_whose_marker_it_removed(log):
    leader(log, txn(A, 0))
    leader(log, marker(A, False))  # 2
    assert log.last_stable_offset(3) == 3 and log.aborted_transactions(0, 3)
    log.truncate_to(2)
    assert log.last_stable_offset(2) == 0  # A is open again
    assert log.aborted_transactions(0, 2) == []
    leader(log, marker(A, True))
    assert log.last_stable_offset(3) == 3 and log.aborted_transactions(0, 3) == []


def test_aborted_transactions_are_bounded_by_the_returned_slice(log):
    for i in range(5):  # five aborted transactions of A, 3 offsets each
        leader(log, txn(A, 2 * i))
        leader(log, marker(A, False))
    sl = log.read(0, 1, 15)  # max_bytes 1: the first batch only (offsets 0-1)
    assert sl.size and log.aborted_transactions(0, 15, sl) == [AbortedTxn(A, 0, 2, 3)]
    assert len(log.aborted_transactions(0, 15)) == 5
