"""Transactions under log compaction, as Kafka's LogCleaner treats them: aborted records
go and never supersede committed ones, committed transactional records are compacted like
any others, a marker stays while a batch of its transaction is left (and an ABORT
marker's .txnindex entry with it), then until delete.retention.ms; each producer's last
batch stays so its state survives, and a log reopened after cleaning has no transaction
left hanging open."""

from __future__ import annotations

import os

from kafkarepl import _core
from kafkarepl.coordinator.records import build_marker
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.records import CONTROL_MASK, TRANSACTIONAL_MASK
from kafkarepl.storage.txn_index import AbortedTxn
from tests.batches import build_batch
from tests.unit.test_log_cleaner import DAY, T0, records, run_cleaning

A, B = 1001, 2002


def cfg() -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=400, index_interval_bytes=100,
                     delete_retention_ms=DAY)


class Writer:
    def __init__(self, lg: Log) -> None:
        self.lg = lg
        self.seq: dict[int, int] = {}

    def txn(self, pid: int, kvs: list[tuple[bytes, bytes]], commit: bool) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + len(kvs)
        b = build_batch([v for _, v in kvs], keys=[k for k, _ in kvs], producer_id=pid, producer_epoch=0,
                        base_sequence=seq, transactional=True, timestamp=T0)
        first = self.lg.append_as_leader(b, 0, T0).first_offset
        self.lg.append_as_leader(build_marker(pid, 0, commit, 0, T0), 0, T0, control_allowed=True)
        return first

    def put(self, key: bytes, value: bytes) -> int:
        return self.lg.append_as_leader(build_batch([value], keys=[key], timestamp=T0), 0, T0).first_offset


def batches(lg: Log) -> list[tuple[int, int, int, int]]:
    """(base offset, attributes, producer id, records) of every batch of the log."""
    out = []
    for seg in lg.segments:
        data = os.pread(seg.fd, seg.size, 0)
        out += [(b.base_offset, b.attributes, b.producer_id, b.records_count)
                for b in _core.validate_batches(data)]
    return out


def markers(lg: Log, pid: int) -> list[int]:
    return [base for base, attrs, p, _n in batches(lg) if attrs & CONTROL_MASK and p == pid]


def test_aborted_records_go_and_markers_stay_while_their_batches_do(tmp_path):
    lg = Log.open(tmp_path / "t-0", cfg())
    w = Writer(lg)
    try:
        w.put(b"k2", b"committed-before")
        a1 = w.txn(A, [(b"k1", b"a1")], commit=True)  # committed, superseded below
        b1 = w.txn(B, [(b"k2", b"aborted")], commit=False)  # must not supersede k2
        w.put(b"k1", b"p2")
        w.txn(A, [(b"k9", b"a-last")], commit=True)  # A's and B's later transactions:
        w.txn(B, [(b"k8", b"b-last")], commit=True)  # their first batches are not their last
        for i in range(12):
            w.put(b"filler", b"%d" % i)
        assert lg.aborted_transactions(0, lg.log_end_offset) == [AbortedTxn(B, b1, b1 + 1, b1 + 2)]

        run_cleaning(lg, now_ms=T0 + 1000)
        got = {k: v for _o, k, v in records(lg) if k is not None and v is not None}
        assert got[b"k2"] == b"committed-before"  # the aborted write superseded nothing
        assert got[b"k1"] == b"p2" and got[b"k9"] == b"a-last" and got[b"k8"] == b"b-last"
        assert b"aborted" not in [v for _o, _k, v in records(lg)]
        assert a1 not in [base for base, *_ in batches(lg)]  # its only record superseded
        # This pass still saw the batches of A's first and B's aborted transaction, so
        # their markers stay, and B's abort keeps its index entry.
        assert markers(lg, A) == [a1 + 1, a1 + 6] and markers(lg, B) == [b1 + 1, b1 + 6]
        assert lg.aborted_transactions(0, lg.log_end_offset) == [AbortedTxn(B, b1, b1 + 1, b1 + 2)]

        run_cleaning(lg, now_ms=T0 + 1000)  # nothing guarded, but younger than delete.retention.ms
        assert markers(lg, A) == [a1 + 1, a1 + 6] and markers(lg, B) == [b1 + 1, b1 + 6]
        assert lg.aborted_transactions(0, lg.log_end_offset) == []  # no aborted data left

        run_cleaning(lg, now_ms=T0 + 2 * DAY)
        # The first transactions' markers go; the last ones follow the producers' last
        # batches, which stay for the producers' state.
        assert markers(lg, A) == [a1 + 6] and markers(lg, B) == [b1 + 6]
        got = {k: v for _o, k, v in records(lg) if k is not None and v is not None}
        assert got[b"k9"] == b"a-last" and got[b"k8"] == b"b-last" and got[b"k2"] == b"committed-before"
    finally:
        lg.close()


def test_a_producers_last_batch_stays_emptied_and_its_marker_with_it(tmp_path):
    d = tmp_path / "t-0"
    lg = Log.open(d, cfg())
    w = Writer(lg)
    b1 = w.txn(B, [(b"k", b"aborted")], commit=False)  # B's last batch, aborted
    for i in range(12):
        w.put(b"filler", b"%d" % i)
    end = lg.log_end_offset
    run_cleaning(lg, now_ms=T0 + 2 * DAY)
    run_cleaning(lg, now_ms=T0 + 2 * DAY)
    kept = [(base, n) for base, attrs, p, n in batches(lg) if p == B]
    assert kept == [(b1, 0), (b1 + 1, 1)]  # emptied batch (sequence, epoch) and its marker
    assert [v for _o, k, v in records(lg) if k == b"k"] == []
    lg._close_files()  # kill -9: the producer state comes back from the log
    lg = Log.open(d, cfg(), recovery_point=0)
    try:
        assert lg.last_stable_offset(end) == end  # no transaction left open
        entry = lg.producer_state.producers[B]
        assert entry.last_seq == 0 and entry.producer_epoch == 0
    finally:
        lg.close()


def test_committed_transactional_records_are_compacted_like_any(tmp_path):
    lg = Log.open(tmp_path / "t-0", cfg())
    w = Writer(lg)
    try:
        for i in range(6):
            w.txn(A, [(b"k", b"v%d" % i), (b"j", b"w%d" % i)], commit=True)
        for i in range(12):
            w.put(b"filler", b"%d" % i)
        run_cleaning(lg, now_ms=T0 + 1000)
        txn_values = [v for _o, k, v in records(lg) if k in (b"k", b"j")]
        assert txn_values == [b"v5", b"w5"]
        assert all(attrs & TRANSACTIONAL_MASK for _b, attrs, p, _n in batches(lg) if p == A)
    finally:
        lg.close()
