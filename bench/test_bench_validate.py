"""Cost of the leader's batch validation on the uncompressed produce path (issue 10).

Run: pytest bench/test_bench_validate.py --benchmark-enable. Figures go to
bench/RESULTS.md, "Leader batch validation (issue 10)".

validate  "before": `_core.validate_batches` of 1 MiB (header walk + CRC32C), the check
          the leader made before issue 10; "leader": `_core.validate_leader_batches`,
          the default leader check now (same + no empty batch, compressed batches
          listed); "walk": the same with the records walk of uncompressed batches
          (kafkarepl.validate.uncompressed.records: count, offset deltas, varints,
          lengths) - the whole C cost per produced MiB.
append    `Log.append_as_leader` of 1 MiB, files truncated between rounds so only CPU
          is measured (the setup in which a slowdown would show most), with the
          default config and with the records walk on.

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


def _validate(buf: bytearray) -> None:
    _core.validate_batches(buf)


def _validate_leader(buf: bytearray) -> None:  # the default leader check (issue 10)
    _core.validate_leader_batches(buf, False)


def _validate_leader_walk(buf: bytearray) -> None:  # kafkarepl.validate.uncompressed.records
    _core.validate_leader_batches(buf, True)


VALIDATORS = {"before": _validate}
if hasattr(_core, "validate_leader_batches"):
    VALIDATORS.update(leader=_validate_leader, walk=_validate_leader_walk)


@pytest.mark.benchmark(group="validate-1MiB")
@pytest.mark.parametrize("how", list(VALIDATORS))
def test_validate(benchmark, buffer, how):
    benchmark.pedantic(VALIDATORS[how], args=(buffer,), rounds=300, warmup_rounds=20)


@pytest.mark.benchmark(group="append-1MiB-page-cache")
@pytest.mark.parametrize("walk", [False, True], ids=["default", "walk-uncompressed"])
def test_append_leader_cached(benchmark, tmp_path, buffer, walk):
    try:
        config = LogConfig(validate_uncompressed_records=walk)
    except TypeError:  # before issue 10: no such knob
        if walk:
            pytest.skip("no kafkarepl.validate.uncompressed.records here")
        config = LogConfig()
    log = Log.open(tmp_path / "bench-0", config)

    def reset() -> None:
        log.active_segment.truncate_to(0)
        log.log_end_offset = log.recovery_point = 0

    benchmark.pedantic(log.append_as_leader, args=(buffer, 0, T0), setup=reset,
                       rounds=300, warmup_rounds=20)
    log.close()
