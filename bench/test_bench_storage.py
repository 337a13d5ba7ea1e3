"""Storage layer speed vs the limits it sits on (run: pytest bench/test_bench_storage.py
--benchmark-enable). Figures go to bench/RESULTS.md, "Storage layer (issue 2)".

append   Log.append_as_leader of a 1 MiB buffer of batches of 100-byte records
         (validate with CRC, idempotence check, assign offsets in place, one write,
         index) vs raw os.write of the same bytes to a file in the same directory.
         Batch sizes: 100 records (~10 KiB), 160 (~16 KiB = the Java and kafka-python
         default batch.size) and 10,000 (~1 MiB, librdkafka's default batch.size).
         Two setups: both files grow by 1 MiB per round, as a segment does (dirty page
         writeback throttling shows up in both), and both are truncated between rounds
         (untimed) so they stay in the page cache (pure CPU + copy cost).
lookup   Log.read(from_offset, 1 MiB) on a ~1 GiB log vs a 16 MiB log (index.interval.bytes 4096):
         sparse index binary search in C + a header walk of one pread, whatever the size.
"""

from __future__ import annotations

import itertools
import os
import random

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkarepl.storage import Log, LogConfig

MIB = 1 << 20
T0 = 1_700_000_000_000


def batch_of_100_byte_records(n_records: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i in range(n_records):
        builder.append(i, T0 + i, None, os.urandom(90), [])
    return bytes(builder.build())


def mib_of_batches(records_per_batch: int) -> bytearray:
    batch = batch_of_100_byte_records(records_per_batch)
    return bytearray(batch * max(1, MIB // len(batch)))


BATCH_SIZES = [100, 160, 10_000]


@pytest.fixture(scope="module", params=BATCH_SIZES, ids=lambda n: f"{n}rec")
def buffer(request) -> bytearray:
    return mib_of_batches(request.param)


# ---- append ------------------------------------------------------------------------

@pytest.mark.benchmark(group="append-1MiB")
def test_append_log(benchmark, tmp_path, buffer):
    log = Log.open(tmp_path / "bench-0", LogConfig())
    # The same buffer every round: offsets are re-assigned in place, CRC unaffected.
    benchmark.pedantic(log.append_as_leader, args=(buffer, 0, T0), rounds=300,
                       warmup_rounds=20)
    assert log.log_end_offset > 0
    log.close()


@pytest.mark.benchmark(group="append-1MiB")
def test_append_raw_os_write(benchmark, tmp_path, buffer):
    fd = os.open(tmp_path / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    benchmark.pedantic(os.write, args=(fd, buffer), rounds=300, warmup_rounds=20)
    os.close(fd)


def _reset_log(log: Log) -> None:
    # Cut the (single) segment back to empty like the raw side's ftruncate. Log.truncate_to
    # would also rewrite the leader-epoch-checkpoint (fsync + journal commit), whose
    # after-effects would then land in the next timed round.
    log.active_segment.truncate_to(0)
    log.log_end_offset = log.recovery_point = 0


@pytest.mark.benchmark(group="append-1MiB-page-cache")
def test_append_log_cached(benchmark, tmp_path, buffer):
    """Truncated between rounds (untimed), so both files stay in the page cache and
    the comparison is CPU work, not writeback throttling."""
    log = Log.open(tmp_path / "bench-0", LogConfig())
    benchmark.pedantic(log.append_as_leader, args=(buffer, 0, T0),
                       setup=lambda: _reset_log(log), rounds=300, warmup_rounds=20)
    log.close()


@pytest.mark.benchmark(group="append-1MiB-page-cache")
def test_append_raw_os_write_cached(benchmark, tmp_path, buffer):
    fd = os.open(tmp_path / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    benchmark.pedantic(os.write, args=(fd, buffer), setup=lambda: os.ftruncate(fd, 0),
                       rounds=300, warmup_rounds=20)
    os.close(fd)


# ---- read(from_offset) lookup ------------------------------------------------------

def build_log(dir, size_bytes: int) -> Log:
    log = Log.open(dir, LogConfig(index_interval_bytes=4096, segment_bytes=1 << 30))
    buf = mib_of_batches(100)
    for _ in range(size_bytes // len(buf)):
        log.append_as_leader(buf, 0, T0)
    return log


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    log = build_log(tmp_path_factory.mktemp("big") / "big-0", 1 << 30)
    yield log
    log.delete()


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    log = build_log(tmp_path_factory.mktemp("small") / "small-0", 16 * MIB)
    yield log
    log.delete()


def bench_lookup(benchmark, log: Log) -> None:
    rnd = random.Random(1)
    offsets = itertools.cycle([rnd.randrange(log.log_end_offset) for _ in range(4096)])

    def lookup():
        return log.read(next(offsets), MIB)

    s = benchmark.pedantic(lookup, rounds=20000, warmup_rounds=1000)
    assert s.size > 0


@pytest.mark.benchmark(group="read-lookup")
def test_lookup_1gib_log(benchmark, big_log):
    assert big_log.size_in_bytes > 1000 * MIB
    bench_lookup(benchmark, big_log)


@pytest.mark.benchmark(group="read-lookup")
def test_lookup_16mib_log(benchmark, small_log):
    bench_lookup(benchmark, small_log)
