"""The broker's cleaner scheduling (server/log_cleaner.py) over a real LogManager: a log
whose kept tombstones pass their delete horizon (KIP-534) is cleaned again without any new
write, and the horizon survives a restart of the service (its checkpoint file)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Iterator

import pytest

from kafkarepl import _core
from kafkarepl.server.config import BrokerConfig, ConfigError
from kafkarepl.server.io_priority import IOPRIO_CLASS_SHIFT, parse_io_priority, thread_io_priority
from kafkarepl.server.log_cleaner import HORIZON_CHECKPOINT, LogCleanerService
from kafkarepl.storage import LogConfig
from kafkarepl.storage.manager import LogManager
from tests.batches import build_batch, decode

T0 = 1_700_000_000_000
DAY = 86_400_000


def service(lm: LogManager, clock: list[int]) -> LogCleanerService:
    cfg = BrokerConfig.from_props({"broker.id": "0", "log.dirs": str(lm.log_dirs[0]),
                                   "log.cleaner.dedupe.buffer.size": str(1 << 20)})
    return LogCleanerService(lm, cfg, lambda t, p: lm.get_log(t, p).log_end_offset, lambda: clock[0])


def keys_in(lm: LogManager) -> list[tuple[int, bytes | None, bytes | None]]:
    lg = lm.get_log("t", 0)
    out = []
    for seg in lg.segments:
        out += [(o, k, v) for o, _ts, k, v in decode(os.pread(seg.fd, seg.size, 0))]
    return out


def two_keys_log(tmp_path) -> tuple[LogManager, list[tuple[object, BaseException]]]:
    """A compacted log of 40 records over two keys, and the dir failures its manager reports."""
    lcfg = LogConfig(cleanup_policy="compact", segment_bytes=400, min_cleanable_dirty_ratio=0.01)
    failed: list[tuple[object, BaseException]] = []
    lm = LogManager([tmp_path / "logs"], lcfg, on_dir_failure=lambda d, exc, left: failed.append((d, exc)))
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    for i in range(40):
        lg.append_as_leader(build_batch([b"x%d" % i * 20], keys=[b"k%d" % (i % 2)], timestamp=T0), 0, T0)
    return lm, failed


def test_an_expired_delete_horizon_triggers_a_cleaning_without_new_writes(tmp_path) -> None:
    lcfg = LogConfig(cleanup_policy="compact", segment_bytes=400, delete_retention_ms=DAY,
                     min_cleanable_dirty_ratio=0.01)
    lm = LogManager([tmp_path / "logs"], lcfg)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    old = T0 - 30 * DAY  # the tombstone's own timestamp is long past delete.retention.ms
    lg.append_as_leader(build_batch([b"v"], keys=[b"gone"], timestamp=old), 0, old)
    lg.append_as_leader(build_batch([None], keys=[b"gone"], timestamp=old), 0, old)
    for i in range(40):
        lg.append_as_leader(build_batch([b"x%d" % i], keys=[b"k%d" % (i % 2)], timestamp=old), 0, old)
    clock = [T0]
    svc = service(lm, clock)
    try:
        assert asyncio.run(svc.run_once()) == 1
        assert (1, b"gone", None) in keys_in(lm)  # kept by the first cleaning
        assert svc.delete_horizon(("t", 0)) == T0 + DAY
        clock[0] = T0 + DAY - 1
        assert asyncio.run(svc.run_once()) == 0  # nothing dirty, horizon not reached
    finally:
        svc.shutdown()
    # A restarted service knows the horizon from its checkpoint file.
    assert (tmp_path / "logs" / HORIZON_CHECKPOINT).exists()
    clock[0] = T0 + DAY
    svc = service(lm, clock)
    try:
        assert asyncio.run(svc.run_once()) == 1  # no new write: the expired horizon alone
        assert not [r for r in keys_in(lm) if r[1] == b"gone"]
        assert svc.delete_horizon(("t", 0)) is None
        assert asyncio.run(svc.run_once()) == 0
    finally:
        svc.shutdown()
        lm.shutdown()


@pytest.mark.parametrize("setting, ns", [(None, 100_000), ("250", 250_000), ("0", 0)])
def test_cleaner_threads_segment_passes_yield_at_the_configured_interval(tmp_path, setting, ns) -> None:
    lm = LogManager([tmp_path / "logs"], LogConfig())
    lm.startup()
    props = {"broker.id": "0", "log.dirs": str(tmp_path / "logs")}
    if setting is not None:
        props["kafkarepl.log.cleaner.yield.interval.us"] = setting
    svc = LogCleanerService(lm, BrokerConfig.from_props(props), lambda t, p: None, lambda: T0)
    try:
        assert svc._executor.submit(_core.bulk_yield_interval).result() == ns
        assert _core.bulk_yield_interval() == 0  # per thread: the loop's own passes never yield
    finally:
        svc.shutdown()
        lm.shutdown()


@contextlib.contextmanager
def _cleaner_threads(tmp_path, prop: str, value: str) -> Iterator[concurrent.futures.Executor]:
    """A cleaner service configured with `prop`; yields its threads' executor."""
    lm = LogManager([tmp_path / "logs"], LogConfig())
    lm.startup()
    cfg = BrokerConfig.from_props({"broker.id": "0", "log.dirs": str(tmp_path / "logs"), prop: value})
    svc = LogCleanerService(lm, cfg, lambda t, p: None, lambda: T0)
    try:
        yield svc._executor
    finally:
        svc.shutdown()
        lm.shutdown()


def test_cleaner_threads_run_at_the_configured_nice_value(tmp_path) -> None:
    with _cleaner_threads(tmp_path, "kafkarepl.log.cleaner.thread.nice", "7") as threads:
        # getpriority(PRIO_PROCESS, 0) is the calling thread's own nice value on Linux
        assert threads.submit(os.getpriority, os.PRIO_PROCESS, 0).result() == 7
        assert os.getpriority(os.PRIO_PROCESS, 0) == 0  # the loop's thread untouched


def test_cleaner_threads_can_run_sched_idle(tmp_path) -> None:
    with _cleaner_threads(tmp_path, "kafkarepl.log.cleaner.thread.sched.idle", "true") as threads:
        assert threads.submit(os.sched_getscheduler, 0).result() == os.SCHED_IDLE
        assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the loop's thread untouched


def test_cleaner_threads_run_at_the_configured_io_priority(tmp_path) -> None:
    with _cleaner_threads(tmp_path, "kafkarepl.log.cleaner.thread.io.priority", "idle") as threads:
        idle = 3 << IOPRIO_CLASS_SHIFT
        assert threads.submit(lambda: thread_io_priority(threading.get_native_id())).result() == idle
        assert thread_io_priority(threading.get_native_id()) != idle  # the loop's thread untouched


@pytest.mark.parametrize(("text", "value"), [("idle", 3 << 13), ("best-effort:7", (2 << 13) | 7),
                                             ("best-effort", (2 << 13) | 4), ("realtime:0", 1 << 13)])
def test_io_priorities_parse_as_ionice_classes(text: str, value: int) -> None:
    assert parse_io_priority(text) == value


@pytest.mark.parametrize("text", ["idle:3", "best-effort:8", "background", "best-effort:x"])
def test_a_bad_io_priority_fails_the_broker_config(text: str) -> None:
    with pytest.raises(ConfigError, match="io.priority"):
        BrokerConfig.from_props({"broker.id": "0", "kafkarepl.log.cleaner.thread.io.priority": text}).validate()


def _compacted(tmp_path, **kw) -> tuple[LogManager, object]:
    lcfg = LogConfig(**{"cleanup_policy": "compact", "segment_bytes": 400, "min_cleanable_dirty_ratio": 0.01, **kw})
    lm = LogManager([tmp_path / "logs"], lcfg)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    for i in range(40):
        lg.append_as_leader(build_batch([b"x%d" % i], keys=[b"k%d" % (i % 2)], timestamp=T0), 0, T0)
    return lm, lg


def test_a_log_whose_cleaning_fails_is_marked_uncleanable_until_recreated(tmp_path, caplog) -> None:
    """As Kafka's LogCleanerManager: a log the cleaner cannot clean (here a corrupt batch
    in a cleanable segment) is skipped from then on, not read again every backoff, and
    counted in the uncleanable gauges of its log dir; a recreated log is cleaned again."""
    lm, lg = _compacted(tmp_path)
    seg = lg.segments[1]
    fd = os.open(seg.log_path, os.O_WRONLY)  # (the segment's own fd appends)
    os.pwrite(fd, b"\x7e", 61)  # the first record's length: past its batch
    os.close(fd)
    clock = [T0]
    svc = service(lm, clock)
    label = f'{{logDirectory="{tmp_path / "logs"}"}}'
    try:
        assert asyncio.run(svc.run_once()) == 0
        m = svc.metrics()
        assert m[f"kafka_log_logcleanermanager_uncleanable_partitions_count{label}"] == 1
        assert m[f"kafka_log_logcleanermanager_uncleanable_bytes{label}"] > 0
        assert asyncio.run(svc.run_once()) == 0
        assert len([r for r in caplog.records if "uncleanable" in r.getMessage()]) == 1  # tried once
        lm.delete_log("t", 0)
        lg = lm.get_or_create_log("t", 0)
        for i in range(40):
            lg.append_as_leader(build_batch([b"y%d" % i], keys=[b"k%d" % (i % 2)], timestamp=T0), 0, T0)
        assert asyncio.run(svc.run_once()) == 1
        assert svc.metrics()[f"kafka_log_logcleanermanager_uncleanable_partitions_count{label}"] == 0
    finally:
        svc.shutdown()
        lm.shutdown()


def test_cleaner_gauges_as_kafka_computes_them(tmp_path) -> None:
    lm, lg = _compacted(tmp_path)
    size_before = lg.size_in_bytes
    clock = [T0]
    svc = service(lm, clock)
    try:
        m = svc.metrics()
        assert m["kafka_log_logcleaner_cleaner_recopy_percent"] == 0  # nothing cleaned yet
        assert asyncio.run(svc.run_once()) == 1
        m = svc.metrics()
        st = svc._last_stats[-1]
        assert 0 < st.bytes_written < st.bytes_read < size_before
        assert m["kafka_log_logcleaner_cleaner_recopy_percent"] == int(100 * st.bytes_written / st.bytes_read)
        # 2 keys mapped in a 1 MiB buffer (65,536 slots): under 1%
        assert st.buffer_utilization == 2 / ((1 << 20) // 16)
        assert m["kafka_log_logcleaner_max_buffer_utilization_percent"] == 0
        assert m["kafka_log_logcleanermanager_max_dirty_percent"] == 100  # nothing was clean before
        clock[0] = T0 + 1234
        assert svc.metrics()["kafka_log_logcleanermanager_time_since_last_run_ms"] == 1234
    finally:
        svc.shutdown()
        lm.shutdown()


def test_max_compaction_lag_counts_from_the_earliest_dirty_record(tmp_path) -> None:
    """KIP-354 as Kafka's maxCompactionDelay: a log under min.cleanable.dirty.ratio is
    cleaned once the first batch of a dirty segment is older than max.compaction.lag.ms,
    even when later records of that segment are recent; the delay past the lag is the
    max-compaction-delay-secs gauge."""
    lm = LogManager([tmp_path / "logs"], LogConfig(cleanup_policy="compact", segment_bytes=400,
                                                   min_cleanable_dirty_ratio=0.01))
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    for i in range(60):  # distinct keys: a cleaning keeps them all (a large clean head)
        lg.append_as_leader(build_batch([b"x%d" % i], keys=[b"k%d" % i], timestamp=T0), 0, T0)
    clock = [T0]
    svc = service(lm, clock)
    try:
        assert asyncio.run(svc.run_once()) == 1
        lg.reconfigure(LogConfig(cleanup_policy="compact", segment_bytes=400, min_cleanable_dirty_ratio=0.99,
                                 max_compaction_lag_ms=DAY))
        old = T0 - DAY - 5_000
        lg.append_as_leader(build_batch([b"old"], keys=[b"a"], timestamp=old), 0, old)
        for i in range(12):  # recent records after it, in its segment and the next ones
            lg.append_as_leader(build_batch([b"y%d" % i], keys=[b"n%d" % i], timestamp=T0), 0, T0)
        dirty = [seg for seg in lg.segments[:-1] if seg.first_batch_timestamp == old]
        assert dirty and dirty[0].largest_timestamp == T0
        assert asyncio.run(svc.run_once()) == 1  # the dirty ratio alone would not
        assert svc.metrics()["kafka_log_logcleaner_max_compaction_delay_secs"] == 5
    finally:
        svc.shutdown()
        lm.shutdown()


def test_the_cleaner_offset_and_delete_horizon_follow_a_move_between_log_dirs(tmp_path) -> None:
    """JBOD: a compacted log moved to another log dir keeps its cleaner offset and delete
    horizon (Kafka's alterCheckpointDir): not cleaned again from its start, the horizon
    kept, and both read back from the new dir's files by a restarted service."""
    from kafkarepl.storage.checkpoints import read_offsets
    from kafkarepl.storage.log_copy import LogCopy

    lcfg = LogConfig(cleanup_policy="compact", segment_bytes=400, delete_retention_ms=DAY,
                     min_cleanable_dirty_ratio=0.01)
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    lm = LogManager([d1, d2], lcfg)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    assert lm.log_dir_of("t", 0) == d1
    lg.append_as_leader(build_batch([None], keys=[b"gone"], timestamp=T0), 0, T0)
    for i in range(40):
        lg.append_as_leader(build_batch([b"x%d" % i], keys=[b"k%d" % (i % 2)], timestamp=T0), 0, T0)
    clock = [T0]
    svc = service(lm, clock)
    try:
        assert asyncio.run(svc.run_once()) == 1
        cleaned_to, horizon = svc.first_dirty(("t", 0)), svc.delete_horizon(("t", 0))
        assert cleaned_to > 0 and horizon == T0 + DAY
        copy = LogCopy(lg, lm.create_future_log("t", 0, d2))
        while (chunk := copy.next_chunk(1 << 20)) is not None:
            copy.copy(chunk)
        assert copy.finish(1 << 20)
        lm.replace_current_with_future("t", 0)
        asyncio.run(svc.alter_checkpoint_dir(("t", 0), d1, d2))
        assert svc.first_dirty(("t", 0)) == cleaned_to and svc.delete_horizon(("t", 0)) == horizon
        assert asyncio.run(svc.run_once()) == 0  # nothing dirty: not cleaned again from offset 0
    finally:
        svc.shutdown()
    assert ("t", 0) not in read_offsets(d1 / "cleaner-offset-checkpoint")
    assert read_offsets(d2 / "cleaner-offset-checkpoint")[("t", 0)] == cleaned_to
    svc = service(lm, clock)
    try:
        assert svc.first_dirty(("t", 0)) == cleaned_to and svc.delete_horizon(("t", 0)) == horizon
    finally:
        svc.shutdown()
        lm.shutdown()


def test_a_disk_error_while_cleaning_fails_the_log_dir_not_the_log(tmp_path) -> None:
    """As Kafka's cleaner on an IOException: the log dir is reported failed (the broker
    takes it offline or halts), the log is not marked uncleanable. RLIMIT_FSIZE makes the
    cleaner's writes fail with EFBIG as a full disk makes them fail with ENOSPC."""
    import errno
    import resource
    import signal

    lm, failed = two_keys_log(tmp_path)
    svc = service(lm, [T0])
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, hard))
    try:
        assert asyncio.run(svc.run_once()) == 0
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
        svc.shutdown()
    assert [(d, getattr(e, "errno", None)) for d, e in failed] == [(tmp_path / "logs", errno.EFBIG)]
    key = 'kafka_log_logcleanermanager_uncleanable_partitions_count{logDirectory="%s"}' % (tmp_path / "logs")
    assert svc.metrics()[key] == 0  # not the log's fault
    lm.shutdown()


def test_a_checkpoint_that_cannot_be_written_after_a_cleaning_fails_the_dir_only(tmp_path) -> None:
    """The cleaning is done and swapped in; its cleaner-offset checkpoint cannot be
    written: the dir is reported (any OSError of a checkpoint, as Kafka), the cleaning
    counts, and the log is not marked uncleanable."""
    from kafkarepl.server.log_cleaner import CLEANER_CHECKPOINT

    lm, failed = two_keys_log(tmp_path)
    (tmp_path / "logs" / (CLEANER_CHECKPOINT + ".tmp")).mkdir()  # the checkpoint's tmp file cannot be made
    svc = service(lm, [T0])
    try:
        assert asyncio.run(svc.run_once()) == 1
    finally:
        svc.shutdown()
    assert [d for d, _e in failed] == [tmp_path / "logs"]
    key = 'kafka_log_logcleanermanager_uncleanable_partitions_count{logDirectory="%s"}' % (tmp_path / "logs")
    assert svc.metrics()[key] == 0
    assert len({k for _o, k, _v in keys_in(lm)}) == 2  # cleaned: one record per key left
    lm.shutdown()
