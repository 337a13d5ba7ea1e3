"""Cost of the leader's batch validation on the uncompressed produce path (issue 10).

Run: pytest bench/test_bench_validate.py --benchmark-enable. Figures go to
bench/RESULTS.md, "Leader batch validation (issue 10)".

validate  `_core.validate_batches` of 1 MiB (header walk + CRC32C) and, where the core
          has it, the per-record walk the leader adds (`check_records=True`: record
          count, offset deltas, varints, lengths): the whole C cost per produced MiB.
append    `Log.append_as_leader` of 1 MiB, files truncated between rounds so only CPU
          is measured (the setup in which a slowdown would show most).

Record sizes: 100-byte records (the storage benches' load) and 10-byte records (the
worst case for a per-record walk: most bytes are record headers). Run it on the
commit before the validator and after it to get the ratio.
"""

from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkarepl import _core
from kafkarepl.storage import Log, LogConfig

MIB = 1 << 20
T0 = 1_700_000_000_000


def batch(n_records: int, value_size: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i in range(n_records):
        builder.append(i, T0 + i, None, os.urandom(value_size), [])
    return bytes(builder.build())


def mib_of(n_records: int, value_size: int) -> bytearray:
    b = batch(n_records, value_size)
    return bytearray(b * max(1, MIB // len(b)))


CASES = {"100B-x100": (100, 90), "100B-x10000": (10_000, 90), "10B-x1000": (1000, 2)}


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def buffer(request) -> bytearray:
    return mib_of(*CASES[request.param])


try:  # the leader's records walk, where the core has it (absent before issue 10)
    _core.validate_batches(b"", check_records=True)
    LEADER_CHECK: dict = {"check_records": True}
except TypeError:
    LEADER_CHECK = {}


def _validate(buf: bytearray) -> None:
    _core.validate_batches(buf, **LEADER_CHECK)


@pytest.mark.benchmark(group="validate-1MiB")
def test_validate(benchmark, buffer):
    benchmark.pedantic(_validate, args=(buffer,), rounds=300, warmup_rounds=20)


@pytest.mark.benchmark(group="append-1MiB-page-cache")
def test_append_leader_cached(benchmark, tmp_path, buffer):
    log = Log.open(tmp_path / "bench-0", LogConfig())

    def reset() -> None:
        log.active_segment.truncate_to(0)
        log.log_end_offset = log.recovery_point = 0

    benchmark.pedantic(log.append_as_leader, args=(buffer, 0, T0), setup=reset,
                       rounds=300, warmup_rounds=20)
    log.close()
