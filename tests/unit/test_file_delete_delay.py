"""file.delete.delay.ms, a topic config (broker default log.segment.delete.delay.ms, 60 s):
how long a retired segment's data stays for readers. Kafka renames the files `.deleted`
and removes them after the delay; here they are unlinked at once and the .log's open
descriptor, which keeps the data, is closed after the topic's delay. Live-updatable as
every topic config (AlterConfigs, or the dynamic broker default)."""

from __future__ import annotations

import dataclasses
import os
import stat
import time

import pytest

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.server.config import BrokerConfig, ConfigError
from kafkarepl.server.config_types import ConfigType, broker_config_type
from kafkarepl.server.replica_storage import LogStorage, log_config
from kafkarepl.server.topics import validate_topic_configs
from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.janitor import JANITOR, FileJanitor
from tests.batches import build_batch
from tests.unit.test_storage_log import _closed

T0 = 1_700_000_000_000


def _log_with_old_segments(tmp_path, config: LogConfig) -> Log:
    lg = Log.open(tmp_path / "t-0", config)
    for i in range(10):
        lg.append_as_leader(build_batch([b"v" * 50], timestamp=T0 + i), 0, T0)
    assert len(lg.segments) >= 3
    return lg


def _retire_and_record(lg: Log, monkeypatch) -> tuple[set[int], list[tuple[int, float]]]:
    """Retire every segment but the active one; (their .log fds, what the closer got)."""
    from kafkarepl.storage import log as logmod

    handed: list[tuple[int, float]] = []
    real = logmod._closer.close
    monkeypatch.setattr(logmod._closer, "close", lambda fd, delay_s=0.0, owner=None: (
        handed.append((fd, delay_s)), real(fd, 0.0)))
    fds = {seg.fd for seg in lg.segments[:-1]}
    assert lg.delete_old_segments(T0) == len(fds)
    monkeypatch.setattr(logmod._closer, "close", real)
    return fds, handed


def test_the_topics_delay_governs_its_retired_segments(tmp_path, monkeypatch) -> None:
    lg = _log_with_old_segments(tmp_path, LogConfig(segment_bytes=200, retention_bytes=0, file_delete_delay_ms=1500))
    try:
        fds, handed = _retire_and_record(lg, monkeypatch)
        assert {fd for fd, d in handed if d == 1.5} == fds  # the .log descriptors: the topic's delay
        assert all(d == 0.0 for fd, d in handed if fd not in fds)  # the indexes': at once
    finally:
        lg.close()


def test_a_delay_of_zero_releases_the_data_at_once_and_keeps_the_number(tmp_path) -> None:
    # A Fetch answer built before the retirement holds the bare fd number (FileRange) and
    # may wait in a connection's queue. Closed at once, the number went to the next file
    # opened, and that answer sent the other file's bytes as this partition's records.
    lg = _log_with_old_segments(tmp_path, LogConfig(segment_bytes=200, retention_bytes=0, file_delete_delay_ms=0))
    try:
        sl = lg.read(0, 1 << 20)
        assert sl.size > 0
        fds = [seg.fd for seg in lg.segments[:-1]]
        names = [seg.log_path for seg in lg.segments[:-1]]
        assert sl.fd in fds
        assert lg.delete_old_segments(T0) == len(fds)
        assert not any(p.exists() for p in names)  # unlinked at once, whatever the delay
        assert JANITOR.wait(10)
        other = [os.open(tmp_path / f"other-{i}", os.O_CREAT | os.O_RDWR, 0o644) for i in range(len(fds))]
        try:
            for fd in other:
                os.write(fd, b"another partition's bytes")
            assert sl.fd not in other  # the number is still the retired descriptor's
            assert os.pread(sl.fd, sl.size, sl.position) == b""  # its data released: nothing to send
            assert all(stat.S_ISCHR(os.fstat(fd).st_mode) for fd in fds)  # /dev/null: the space is free
        finally:
            for fd in other:
                os.close(fd)
    finally:
        lg.close()
        JANITOR.close_now(tmp_path)
        assert JANITOR.wait(10)
    assert all(_closed(fd) for fd in fds)  # the owner's stop closes the numbers too


def test_a_short_delay_releases_at_the_delay_and_closes_after_the_guard(tmp_path, monkeypatch) -> None:
    from kafkarepl.storage import janitor as janitor_mod

    monkeypatch.setattr(janitor_mod, "REUSE_GUARD_S", 0.3)
    j = FileJanitor()
    path = tmp_path / "seg"
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDONLY)
    path.unlink()
    j.close(fd, 0.1, owner=tmp_path)
    assert os.pread(fd, 10, 0) == b"x" * 10  # before the delay: readable
    deadline = time.monotonic() + 10
    while not stat.S_ISCHR(os.fstat(fd).st_mode):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not _closed(fd)
    while not _closed(fd):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_changed_delay_applies_to_segments_retired_after_it(tmp_path, monkeypatch) -> None:
    cfg = LogConfig(segment_bytes=200, retention_bytes=0)
    lg = _log_with_old_segments(tmp_path, dataclasses.replace(cfg, retention_bytes=-1))
    try:
        lg.reconfigure(dataclasses.replace(cfg, file_delete_delay_ms=250))  # AlterConfigs
        fds, handed = _retire_and_record(lg, monkeypatch)
        assert {fd for fd, d in handed if d == 0.25} == fds
    finally:
        lg.close()


def test_a_deleted_partitions_descriptors_wait_the_topics_delay(tmp_path, monkeypatch) -> None:
    lg = _log_with_old_segments(tmp_path, LogConfig(segment_bytes=200, file_delete_delay_ms=3000))
    fds = {seg.fd for seg in lg.segments if seg.fd >= 0}
    from kafkarepl.storage import log as logmod

    handed: list[tuple[int, float]] = []
    real = logmod._closer.close
    monkeypatch.setattr(logmod._closer, "close", lambda fd, delay_s=0.0, owner=None: (
        handed.append((fd, delay_s)), real(fd, 0.0)))
    lg.close_for_deletion()
    assert {fd for fd, d in handed if d == 3.0} == fds


def test_broker_default_and_topic_override() -> None:
    assert LogConfig().file_delete_delay_ms == 60_000  # Kafka's default
    broker = BrokerConfig.from_props({"log.segment.delete.delay.ms": "5000"})
    assert log_config(broker, {}).file_delete_delay_ms == 5000
    assert log_config(broker, {"file.delete.delay.ms": "10"}).file_delete_delay_ms == 10
    storage = LogStorage(None, broker)  # type: ignore[arg-type]
    storage.set_dynamic_defaults({"file.delete.delay.ms": "20"})  # log.segment.delete.delay.ms, dynamic
    assert storage.log_config({}).file_delete_delay_ms == 20
    assert storage.log_config({"file.delete.delay.ms": "30"}).file_delete_delay_ms == 30
    with pytest.raises(ConfigError):
        BrokerConfig.from_props({"log.segment.delete.delay.ms": "-1"})


@pytest.mark.parametrize("name,value", [
    ("file.delete.delay.ms", "-1"), ("file.delete.delay.ms", "soon"), ("file.delete.delay.ms", str(2**63)),
    ("preallocate", "maybe"),
])
def test_bad_values_are_refused_as_kafka_does(name, value) -> None:
    # Kafka: file.delete.delay.ms is a LONG, atLeast(0); preallocate a BOOLEAN.
    with pytest.raises(KafkaError) as e:
        validate_topic_configs({name: value}, LogStorage(None, BrokerConfig()))  # type: ignore[arg-type]
    assert e.value.code is ErrorCode.INVALID_CONFIG


def test_good_values_are_taken() -> None:
    cfg = LogStorage(None, BrokerConfig()).log_config(  # type: ignore[arg-type]
        {"file.delete.delay.ms": str(2**63 - 1), "preallocate": "true"})
    assert cfg.file_delete_delay_ms == 2**63 - 1 and cfg.preallocate


def test_broker_config_types() -> None:
    assert broker_config_type("log.segment.delete.delay.ms") is ConfigType.LONG
    assert broker_config_type("log.preallocate") is ConfigType.BOOLEAN


def test_janitor_survives_a_delay_past_what_a_lock_timeout_takes(tmp_path) -> None:
    # file.delete.delay.ms may be Long.MAX_VALUE: the janitor's wait must not overflow
    # (its thread died with OverflowError, and every later close waited for a new one).
    j = FileJanitor()
    forever, soon = (os.open(tmp_path / n, os.O_CREAT | os.O_RDWR, 0o644) for n in "ab")
    j.close(forever, (2**63 - 1) / 1000, owner=tmp_path)
    time.sleep(0.2)
    assert j._thread is not None and j._thread.is_alive()
    j.close(soon, 0.05)
    deadline = time.monotonic() + 10
    while not _closed(soon):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not _closed(forever)
    j.close_now(tmp_path)
    assert j.wait(10) and _closed(forever)
