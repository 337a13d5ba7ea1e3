"""LogManager: log dirs, placement, checkpoints, clean-shutdown marker, deletion."""

from __future__ import annotations

import os

import pytest

from kafkarepl import _core
from kafkarepl.errors import KafkaError, KafkaStorageError
from kafkarepl.storage import LogConfig, LogManager
from kafkarepl.storage.checkpoints import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from tests.batches import build_batch

T0 = 1_700_000_000_000


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def fill(mgr: LogManager) -> None:
    for p in range(4):
        lg = mgr.get_or_create_log("orders", p)
        for _ in range(p + 1):
            lg.append_as_leader(build_batch(2), 0, T0)


def test_create_places_on_least_loaded_dir_and_reloads(dirs):
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    fill(mgr)
    placed = [mgr.log_dir_of("orders", p).name for p in range(4)]
    assert placed == ["d1", "d2", "d1", "d2"]
    mgr.shutdown({("orders", p): p for p in range(4)})
    for d in dirs:
        assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
        assert _core.checkpoint_read(os.path.join(d, HIGH_WATERMARK_CHECKPOINT)).startswith(b"0\n2\n")
    d1_rp = _core.checkpoint_read(os.path.join(dirs[0], RECOVERY_POINT_CHECKPOINT))
    assert d1_rp == b"0\n2\norders 0 2\norders 2 6\n"

    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    assert sorted(mgr.logs()) == [("orders", p) for p in range(4)]
    assert [mgr.get_log("orders", p).log_end_offset for p in range(4)] == [2, 4, 6, 8]
    assert mgr.high_watermarks == {("orders", p): p for p in range(4)}
    assert all(mgr.had_clean_shutdown.values())
    # the marker is consumed at startup: a crash from now on is unclean
    assert not any(os.path.exists(os.path.join(d, ".kafka_cleanshutdown")) for d in dirs)
    mgr.shutdown()


def test_unclean_start_recovers_and_clamps_hw(dirs):
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    fill(mgr)
    mgr.checkpoint_high_watermarks({("orders", 3): 8})
    lg = mgr.get_log("orders", 3)
    seg = lg.active_segment
    with open(seg.log_path, "r+b") as f:
        f.truncate(seg.size - 1)  # torn last batch, no marker
    with pytest.raises(KafkaStorageError, match="in use"):
        LogManager(dirs, LogConfig()).startup()
    mgr.release_locks()  # what the kernel does when the crashed process dies
    mgr2 = LogManager(dirs, LogConfig())
    mgr2.startup()
    assert not any(mgr2.had_clean_shutdown.values())
    assert mgr2.get_log("orders", 3).log_end_offset == 6
    assert mgr2.high_watermarks[("orders", 3)] == 6  # HW never above the LEO
    mgr2.shutdown()


@pytest.mark.parametrize("name", [HIGH_WATERMARK_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                                  LOG_START_OFFSET_CHECKPOINT])
def test_corrupt_checkpoint_is_reported_not_trusted(dirs, name, caplog):
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    fill(mgr)
    mgr.shutdown({("orders", p): 2 for p in range(4)})
    path = os.path.join(dirs[0], name)
    data = bytearray(open(path, "rb").read())
    data[data.index(b"orders 0 ") + 9] = ord("1")  # change a value, keep the syntax
    open(path, "wb").write(bytes(data))
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    assert "corrupt checkpoint" in caplog.text and name in caplog.text
    if name == HIGH_WATERMARK_CHECKPOINT:
        assert mgr.high_watermarks[("orders", 0)] == 0  # recomputed by replication
        assert mgr.high_watermarks[("orders", 1)] == 2  # other dir unaffected
    assert mgr.get_log("orders", 2).log_end_offset == 6
    mgr.shutdown()


def test_delete_log_and_interrupted_delete(dirs):
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    fill(mgr)
    path = mgr.get_log("orders", 1).dir
    mgr.delete_log("orders", 1)
    assert not path.exists() and mgr.get_log("orders", 1) is None
    assert mgr.wait_for_deletions(30)  # the files go on a background thread
    assert not [p for p in os.listdir(path.parent) if p.endswith("-delete")]
    # a crash between rename and rmtree: startup finishes the job
    leftover = path.parent / "orders-9.0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    mgr.shutdown()
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    assert not leftover.exists()
    assert sorted(mgr.logs()) == [("orders", 0), ("orders", 2), ("orders", 3)]
    mgr.shutdown()


def test_illegal_topic_names(dirs):
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    for bad in ("", "a/b", "..", "x" * 250, "sp ace"):
        with pytest.raises(KafkaError):
            mgr.get_or_create_log(bad, 0)
    mgr.shutdown()


def test_flush_policy_and_retention(dirs):
    cfg = LogConfig(flush_ms=1000, segment_bytes=200, retention_bytes=0)
    mgr = LogManager(dirs, cfg, topic_configs={"slow": LogConfig()})
    mgr.startup()
    fast = mgr.get_or_create_log("fast", 0)
    slow = mgr.get_or_create_log("slow", 0)
    for lg in (fast, slow):
        for _ in range(5):
            lg.append_as_leader(build_batch(1), 0, T0)
    assert fast.recovery_point == 0
    assert mgr.flush_dirty(fast.last_flush_ms + 999) == 0
    assert mgr.flush_dirty(fast.last_flush_ms + 1000) == 1
    assert fast.recovery_point == 5 and slow.recovery_point == 0
    rp = _core.checkpoint_read(os.path.join(dirs[0], RECOVERY_POINT_CHECKPOINT))
    assert b"fast 0 5" in rp
    assert mgr.delete_old_segments(T0) > 0
    assert fast.log_start_offset > 0 and slow.log_start_offset == 0
    lso = _core.checkpoint_read(str(mgr.log_dir_of("fast", 0) / LOG_START_OFFSET_CHECKPOINT))
    assert f"fast 0 {fast.log_start_offset}".encode() in lso
    mgr.shutdown()


def test_flush_messages(dirs):
    mgr = LogManager(dirs, LogConfig(flush_messages=3))
    mgr.startup()
    lg = mgr.get_or_create_log("t", 0)
    lg.append_as_leader(build_batch(2), 0, T0)
    assert lg.recovery_point == 0
    lg.append_as_leader(build_batch(1), 0, T0)
    assert lg.recovery_point == 3
    mgr.shutdown()


def test_config_from_kafka_props():
    cfg = LogConfig.from_props({"segment.bytes": "1024", "retention.ms": "-1",
                                "log.retention.hours": "1", "message.timestamp.type":
                                "LogAppendTime", "flush.messages": str(2**63 - 1),
                                "unclean.leader.election.enable": "true", "other": "x"})
    assert cfg.segment_bytes == 1024 and cfg.retention_ms == -1 and cfg.log_append_time
    assert cfg.flush_messages is None and cfg.unclean_leader_election_enable
    assert LogConfig.from_props({"log.retention.hours": "2"}).retention_ms == 7_200_000
    with pytest.raises(KafkaError):
        LogConfig.from_props({"segment.bytes": "lots"})
    with pytest.raises(KafkaError):
        LogConfig.from_props({"message.timestamp.type": "Whenever"})


def test_second_shutdown_keeps_checkpoints(dirs):
    mgr = LogManager(dirs, LogConfig())
    mgr.startup()
    fill(mgr)
    mgr.shutdown({("orders", 0): 2})
    before = open(os.path.join(dirs[0], HIGH_WATERMARK_CHECKPOINT), "rb").read()
    mgr.shutdown()
    assert open(os.path.join(dirs[0], HIGH_WATERMARK_CHECKPOINT), "rb").read() == before


def _deleted_files_open_under(d: str) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(d) and target.endswith(" (deleted)"):
            out.append(target)
    return out


def test_shutdown_closes_deleted_segments_at_once(dirs):
    """Descriptors of deleted segments wait file.delete.delay (60 s) for readers still
    sending from them; a stopped broker has none, so they close at its shutdown and an
    embedded broker's process frees the space then, not a minute later."""
    mgr = LogManager(dirs[:1], LogConfig(segment_bytes=200, retention_bytes=0))
    mgr.startup()
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(10):
        lg.append_as_leader(build_batch(3), 0, T0)
    assert mgr.delete_old_segments(T0) > 0
    assert _deleted_files_open_under(dirs[0])  # held for readers meanwhile
    mgr.shutdown()
    assert _deleted_files_open_under(dirs[0]) == []


@pytest.mark.parametrize("name, value", [
    ("segment.index.bytes", str(2**31)), ("segment.bytes", "9" * 40), ("max.message.bytes", str(-(2**31) - 1)),
    ("retention.ms", str(2**63)), ("min.compaction.lag.ms", "9" * 40), ("log.retention.hours", str(2**31)),
])
def test_numbers_outside_their_kafka_type_are_refused(name, value):
    with pytest.raises(KafkaError):
        LogConfig.from_props({name: value})


def test_numbers_at_the_edge_of_their_kafka_type_are_taken():
    cfg = LogConfig.from_props({"segment.index.bytes": str(2**31 - 1), "retention.ms": str(2**63 - 1)})
    assert (cfg.segment_index_bytes, cfg.retention_ms) == (2**31 - 1, 2**63 - 1)


@pytest.mark.parametrize("policy, valid", [
    ("delete", True), ("compact", True), ("compact,delete", True), ("delete, compact", True),
    ("xcompactx", False), ("compact,forever", False), ("x" * 30000, False),
])
def test_cleanup_policy_is_a_list_of_compact_and_delete(policy, valid):
    if valid:
        assert LogConfig.from_props({"cleanup.policy": policy}).cleanup_policy == policy
    else:
        with pytest.raises(KafkaError):
            LogConfig.from_props({"cleanup.policy": policy})


def test_log_dir_is_named_by_an_absolute_path_only(dirs, tmp_path, monkeypatch):
    # As Kafka's LogManager.isLogDirOnline: a relative path names no log dir (Kafka answers
    # AlterReplicaLogDirs with LOG_DIR_NOT_FOUND), even one that would resolve to a log dir
    # against this process's working directory.
    mgr = LogManager(dirs, LogConfig())
    monkeypatch.chdir(tmp_path)
    assert mgr.log_dir(dirs[1]) == mgr.log_dirs[1]
    assert mgr.log_dir("d2") is None and mgr.log_dir("./d1") is None and mgr.log_dir("") is None


def test_log_dir_is_named_exactly_as_kafka_compares_it(dirs, tmp_path):
    # Kafka compares the path as sent with each configured dir's File.getAbsolutePath
    # (java.io.File drops a trailing slash and doubled slashes of the configured one, and
    # resolves no `.`/`..`): "/data/d1/" names no dir configured as "/data/d1"; a dir
    # configured as "/data/d1/" is named "/data/d1" only.
    mgr = LogManager([dirs[0], dirs[1] + "//"], LogConfig())
    assert mgr.log_dir(dirs[0] + "/") is None
    assert mgr.log_dir(dirs[0].replace("/d1", "//d1")) is None
    assert mgr.log_dir(dirs[0].replace("/d1", "/./d1")) is None
    assert mgr.log_dir(str(tmp_path / "x" / ".." / "d1")) is None
    assert mgr.log_dir(dirs[1]) == mgr.log_dirs[1] and mgr.log_dir(dirs[1] + "/") is None
    assert mgr.dir_name(mgr.log_dirs[1]) == dirs[1]


def test_a_relative_log_dir_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mgr = LogManager(["rel/d1/"], LogConfig())
    assert mgr.dir_name(mgr.log_dirs[0]) == f"{tmp_path}/rel/d1"
    assert mgr.log_dir(f"{tmp_path}/rel/d1") == mgr.log_dirs[0]
    assert mgr.log_dir("rel/d1") is None and mgr.log_dir("rel/d1/") is None


@pytest.mark.parametrize("path,cwd,absolute", [
    ("/data/d1", "/w", "/data/d1"),
    ("/data/d1/", "/w", "/data/d1"),
    ("//data///d1//", "/w", "/data/d1"),
    ("/data/./d1/../d1", "/w", "/data/./d1/../d1"),  # no resolution of . and ..
    ("/", "/w", "/"),
    ("d1", "/w/", "/w/d1"),
    ("./d1/", "/w", "/w/./d1"),
    ("d1", "/", "/d1"),
    ("", "/w", "/w"),
])
def test_java_absolute_path(path, cwd, absolute):
    from kafkarepl.storage.manager import java_absolute_path

    assert java_absolute_path(path, cwd) == absolute
