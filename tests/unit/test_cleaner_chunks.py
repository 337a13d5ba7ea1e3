"""The cleaner's C path (OffsetMap.map_segment / clean_segment over whole segments in read
pieces, Python only for compressed, transactional and control batches) gives byte for
byte what cleaning batch by batch gives (clean_batch, itself checked against
kafka-python), for any read size: batches cut by a piece's end, and batches larger than
a piece. The offset map holds every key's latest offset outside aborted transactions.
A second cleaning, before or after the delete horizons the first one set (KIP-534), again
equals batch by batch; every record keeps its timestamp through both."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkarepl import _core
from kafkarepl.coordinator.records import build_marker
from kafkarepl.storage import Log, LogConfig, cleaner
from kafkarepl.storage.cleaner import STAGING_DIR, TxnCleaning, clean, clean_batch, new_offset_map
from tests.batches import build_batch, decode

T0 = 1_700_000_000_000
DAY = 86_400_000
KEYS = [b"a", b"b", b"c", b"d", b"e", None]

record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=40)))
batch_spec = st.tuples(
    st.sampled_from(["plain", "plain", "plain", "idempotent", "gzip", "txn-commit", "txn-abort"]),
    st.lists(record, min_size=1, max_size=12),
    st.integers(0, 3 * DAY),  # the batch's age at cleaning
)


def write_log(lg: Log, specs: list, stamps: dict[int, int]) -> dict[bytes, int]:
    """Append the batches; returns each key's latest offset outside aborted transactions.
    `stamps` gets each record's timestamp by offset."""
    latest: dict[bytes, int] = {}
    seq = txn_seq = 0
    for kind, recs, age in specs:
        keys = [k for k, _ in recs]
        values = [v for _, v in recs]
        ts = T0 + 3 * DAY - age
        kw: dict = {}
        if kind == "idempotent":
            kw = dict(producer_id=9, producer_epoch=0, base_sequence=seq)
            seq += len(recs)
        if kind.startswith("txn"):
            kw = dict(producer_id=5, producer_epoch=0, base_sequence=txn_seq, transactional=True)
            txn_seq += len(recs)
        compression = "gzip" if kind == "gzip" else "none"
        b = build_batch(values, keys=keys, timestamp=ts, compression=compression, **kw)
        first = lg.append_as_leader(b, 0, ts).first_offset
        stamps.update((first + i, ts) for i in range(len(recs)))
        if kind.startswith("txn"):
            m = build_marker(5, 0, kind == "txn-commit", 0, ts)
            lg.append_as_leader(m, 0, ts, control_allowed=True)
        if kind != "txn-abort":
            for i, k in enumerate(keys):
                if k is not None:
                    latest[k] = first + i
    return latest


def clean_and_compare(lg: Log, d, now: int, first_dirty: int, chunk: int,
                      latest: dict[bytes, int] | None, io: cleaner.MapBuffer | None = None) -> int:
    """One cleaning through the C path against batch by batch; swaps it in; returns the
    cleaned-up-to offset. io: a cleaner thread's buffers, kept from an earlier cleaning."""
    fd, end, _ = lg.cleanable_range(first_dirty, lg.log_end_offset, now)
    plan = lg.cleaning_plan(fd, end, now)
    try:
        m = new_offset_map(1 << 16, 0.9)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cleaner, "_READ_CHUNK", chunk)
            result = clean(plan, m, map_buffer=io)
        for k, off in (latest or {}).items():
            assert m.get(k) == off
        got = b"".join((d / STAGING_DIR / f"{g.base_offset:020d}.log").read_bytes() for g in result.groups)
        want = bytearray()
        removed = 0
        horizons = []
        scratch = bytearray()
        txn = TxnCleaning(plan.aborted)
        for seg in plan.segments:
            if seg.next_offset > result.cleaned_up_to:
                break
            data = os.pread(seg.fd, seg.size, 0)
            for info in _core.validate_batches(data, False):
                out, lost, horizon = clean_batch(memoryview(data)[info.position : info.position + info.size],
                                                 m, plan, scratch, txn)
                removed += lost
                if horizon is not None:
                    horizons.append(horizon)
                if out is not None:
                    want += out
        assert got == bytes(want)
        assert result.records_removed == removed and result.bytes_written == len(got)
        assert result.delete_horizon == min(horizons, default=None)
        assert lg.replace_segments(plan, result)
    finally:
        plan.close()
    # The new segments' indexes point at batch starts, as a rebuilt index would.
    for seg in lg.segments:
        seg.offset_index.sanity_check(seg.size)
    return result.cleaned_up_to


def _small_buffers(chunk: int) -> cleaner.IoBuffers:
    io = cleaner.IoBuffers()
    io.read, io.write = bytearray(chunk), bytearray(2 * chunk)  # grown by batches larger than a piece
    return io


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(batch_spec, min_size=1, max_size=30), st.sampled_from([64, 200, 777, 1 << 20]),
       st.integers(0, 2 * DAY))
def test_chunked_cleaning_equals_batch_by_batch(tmp_path_factory, specs, chunk, later) -> None:
    d = tmp_path_factory.mktemp("c") / "t-0"
    cfg = dict(segment_bytes=900, delete_retention_ms=DAY, index_interval_bytes=100)
    lg = Log.open(d, LogConfig(cleanup_policy="delete", **cfg))  # keyless records allowed
    try:
        stamps: dict[int, int] = {}
        latest = write_log(lg, specs, stamps)
        lg.roll()
        lg.reconfigure(LogConfig(cleanup_policy="compact", **cfg))
        now = T0 + 3 * DAY
        kept = cleaner.MapBuffer(1 << 16)  # the read and write buffers reused by both cleanings
        kept.io = cleaner.IoBuffers() if chunk == 1 << 20 else _small_buffers(chunk)
        first_dirty = clean_and_compare(lg, d, now, 0, chunk, latest, kept)
        # Again without new writes, before or past the horizons the first cleaning set.
        clean_and_compare(lg, d, now + later, first_dirty, chunk, None, kept)
        for seg in lg.segments:
            for off, ts, _k, _v in decode(os.pread(seg.fd, seg.size, 0)):
                if off in stamps:  # (markers are not in stamps)
                    assert ts == stamps[off], off
    finally:
        lg.close()
