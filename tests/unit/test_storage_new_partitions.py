"""What creating, closing and reopening many empty partitions costs on disk, and that the
cheaper paths keep recovery exact: lazy index files, the epoch checkpoint's first write
without fsync, producer snapshots synced by one syncfs at shutdown (issue 16 item 4)."""

from __future__ import annotations

import os

import pytest

from kafkarepl import _core
from kafkarepl.errors import CheckpointCorruptError
from kafkarepl.storage import LeaderEpochCache, Log, LogConfig, LogManager
from kafkarepl.storage.epoch_cache import CHECKPOINT_NAME
from kafkarepl.storage.producer_state import SNAPSHOT_NAME
from tests.batches import build_batch

T0 = 1_700_000_000_000


@pytest.fixture
def writes(monkeypatch):
    """Every checkpoint write as (file name, sync), passed through to the real one."""
    seen: list[tuple[str, bool]] = []
    real = _core.checkpoint_write

    def spy(path, payload, sync=True):
        seen.append((os.path.basename(str(path)), sync))
        real(path, payload, sync=sync)

    monkeypatch.setattr(_core, "checkpoint_write", spy)
    return seen


def test_new_log_is_a_directory_until_its_first_records(tmp_path):
    lg = Log.create(tmp_path / "t-0", LogConfig())
    lg.assign_epoch(0, 0)  # becomes leader: the epoch is kept, written with the first records
    assert os.listdir(tmp_path / "t-0") == []
    assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (0, 0, 0)
    assert lg.latest_epoch() == 0 and lg.read(0, 1 << 20).size == 0
    assert lg.end_offset_for_epoch(0) == (0, 0)
    with pytest.raises(FileExistsError):
        Log.create(tmp_path / "t-0", LogConfig())
    lg.close()
    assert os.listdir(tmp_path / "t-0") == []  # a clean close adds nothing either
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True, lazy_empty=True)
    assert os.listdir(tmp_path / "t-0") == [] and lg.log_end_offset == 0
    lg.append_as_leader(build_batch(2), 1, T0)
    assert sorted(os.listdir(tmp_path / "t-0")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        CHECKPOINT_NAME]
    lg.close()
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    assert lg.log_end_offset == 2 and lg.leader_epoch_cache.epochs() == [(1, 0)]
    lg.close()


def test_a_plain_open_of_an_empty_directory_still_makes_its_segment_file(tmp_path):
    (tmp_path / "t-0").mkdir()
    lg = Log.open(tmp_path / "t-0", LogConfig())  # tools and tests read seg.fd directly
    assert os.listdir(tmp_path / "t-0") == ["00000000000000000000.log"]
    lg.close()


def test_index_files_come_with_the_first_data_and_survive_reopen(tmp_path):
    lg = Log.create(tmp_path / "t-0", LogConfig(index_interval_bytes=1))
    lg.append_as_leader(build_batch(3), 0, T0)
    names = set(os.listdir(tmp_path / "t-0"))
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= names
    lg.append_as_leader(build_batch(2), 0, T0)
    lg.close()
    lg = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=1), clean_shutdown=True)
    assert lg.log_end_offset == 5
    assert lg.read(3, 1 << 20).size > 0
    lg.close()


def test_missing_index_of_a_non_empty_segment_is_rebuilt(tmp_path):
    cfg = LogConfig(index_interval_bytes=1)
    lg = Log.create(tmp_path / "t-0", cfg)
    for _ in range(4):
        lg.append_as_leader(build_batch(2), 0, T0)
    lg.close()
    os.unlink(tmp_path / "t-0" / "00000000000000000000.index")
    lg = Log.open(tmp_path / "t-0", cfg, clean_shutdown=True)
    assert lg.log_end_offset == 8
    assert lg.segments[0].offset_index.n_entries > 0  # rebuilt from the log
    lg.close()


def test_epoch_checkpoint_first_write_unsynced_then_synced(tmp_path, writes):
    lg = Log.create(tmp_path / "t-0", LogConfig())
    lg.assign_epoch(0, 0)  # a new leader of a new partition: no fsync
    lg.append_as_leader(build_batch(2), 0, T0)
    lg.assign_epoch(3, 2)  # an epoch over a file on disk: atomic and fsynced
    lg.append_as_leader(build_batch(1), 3, T0)
    assert [w for w in writes if w[0] == CHECKPOINT_NAME] == [
        (CHECKPOINT_NAME, False),
        (CHECKPOINT_NAME, True),
    ]
    lg.close()
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    assert lg.leader_epoch_cache.epochs() == [(0, 0), (3, 2)]
    lg.close()


def test_empty_cache_without_a_file_writes_nothing(tmp_path, writes):
    cache, trusted = LeaderEpochCache.load(tmp_path / CHECKPOINT_NAME)
    assert not trusted
    cache.replace([])
    cache.clear()
    assert writes == [] and not (tmp_path / CHECKPOINT_NAME).exists()


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_lost_first_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path, damage):
    """What a crash may leave of the unsynced first write: nothing, or a torn file."""
    lg = Log.create(tmp_path / "t-0", LogConfig())
    lg.assign_epoch(2, 0)
    lg.append_as_leader(build_batch(2), 2, T0)
    lg.close()
    path = tmp_path / "t-0" / CHECKPOINT_NAME
    if damage == "missing":
        path.unlink()
    else:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        with pytest.raises(CheckpointCorruptError):
            _core.checkpoint_read(str(path))
    lg = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=False)
    assert lg.leader_epoch_cache.epochs() == [(2, 0)]
    lg.close()


def test_truncations_are_written_unsynced_and_reapplied(tmp_path, writes):
    lg = Log.create(tmp_path / "t-0", LogConfig())
    lg.assign_epoch(1, 0)
    lg.append_as_leader(build_batch(2), 1, T0)
    lg.assign_epoch(4, 2)
    writes.clear()
    lg.truncate_to(2)  # nothing at or past 2 in the log, the entry (4, 2) stays
    lg.truncate_to(1)
    assert (CHECKPOINT_NAME, False) in writes and (CHECKPOINT_NAME, True) not in writes
    lg.close()


def test_shutdown_syncs_once_and_reopens_exactly(tmp_path, writes):
    mgr = LogManager([str(tmp_path / "d")], LogConfig())
    mgr.startup()
    for p in range(20):
        lg = mgr.get_or_create_log("t", p)
        if p % 2:
            lg.assign_epoch(0, 0)
            lg.append_as_leader(build_batch(3, producer_id=7, producer_epoch=0, base_sequence=0), 0, T0)
    writes.clear()
    mgr.shutdown({("t", p): 0 for p in range(20)})
    snapshots = [w for w in writes if w[0] == SNAPSHOT_NAME]
    assert len(snapshots) == 10 and not any(sync for _, sync in snapshots)  # only non-empty logs
    mgr = LogManager([str(tmp_path / "d")], LogConfig())
    mgr.startup()
    assert all(mgr.had_clean_shutdown.values())
    for p in range(20):
        lg = mgr.get_log("t", p)
        assert lg is not None and lg.log_end_offset == (3 if p % 2 else 0)
        assert lg.recovery_point == lg.log_end_offset
        if p % 2:
            assert 7 in lg.producer_state.producers  # from the snapshot, not a rescan
    mgr.shutdown()


def test_many_new_partitions_scale_linearly_in_placement(tmp_path):
    """Choosing a log dir for a new partition must not count every partition again."""
    mgr = LogManager([str(tmp_path / "a"), str(tmp_path / "b")], LogConfig())
    mgr.startup()
    for p in range(50):
        mgr.get_or_create_log("t", p)
    dirs = [mgr.log_dir_of("t", p).name for p in range(50)]
    assert dirs.count("a") == dirs.count("b") == 25
    mgr.delete_log("t", 0)
    mgr.delete_log("t", 2)
    assert mgr.log_dir_of("t", 50) is None
    mgr.get_or_create_log("t", 50)
    mgr.get_or_create_log("t", 51)
    assert [mgr.log_dir_of("t", p).name for p in (50, 51)] == ["a", "a"]
    mgr.shutdown()


def test_syncfs(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _core.file_syncfs(fd)
    finally:
        os.close(fd)
    with pytest.raises(ValueError):
        _core.file_syncfs(-1)


def test_deferred_syncs_write_new_epochs_atomically_and_sync_once(tmp_path, writes, monkeypatch):
    from kafkarepl.storage import epoch_cache

    synced: list[str] = []
    real_syncfs = _core.file_syncfs
    monkeypatch.setattr(_core, "file_syncfs", lambda fd: (synced.append(fd), real_syncfs(fd)))
    logs = []
    for p in range(5):
        lg = Log.create(tmp_path / f"t-{p}", LogConfig())
        lg.assign_epoch(0, 0)  # first write: in place, unsynced
        lg.append_as_leader(build_batch(1), 0, T0)
        logs.append(lg)
    writes.clear()
    with epoch_cache.deferred_syncs() as pending:
        with epoch_cache.deferred_syncs() as inner:  # nested: the outer block's
            assert inner is pending
            for lg in logs:
                lg.assign_epoch(3, 1)
        assert synced == []
        assert not any(sync for _, sync in writes)  # no fsync per file
    assert synced == []  # the caller runs it, off the event loop
    pending.run()
    assert len(synced) == 1  # one syncfs: all on one file system
    assert not any(n.endswith(".tmp") for p in range(5) for n in os.listdir(tmp_path / f"t-{p}"))
    for lg in logs:
        lg.append_as_leader(build_batch(1), 3, T0)
        lg.close()
    for p in range(5):
        lg = Log.open(tmp_path / f"t-{p}", LogConfig(), clean_shutdown=True)
        assert lg.leader_epoch_cache.epochs() == [(0, 0), (3, 1)]
        lg.close()


def test_a_broker_restart_keeps_empty_partitions_fileless(tmp_path):
    d = tmp_path / "d"
    mgr = LogManager([str(d)], LogConfig())
    mgr.startup()
    for p in range(4):
        mgr.get_or_create_log("t", p).assign_epoch(0, 0)
    mgr.get_log("t", 3).append_as_leader(build_batch(1), 0, T0)
    mgr.shutdown({("t", p): 0 for p in range(4)})
    mgr = LogManager([str(d)], LogConfig())
    mgr.startup()  # clean start: nothing created for the empty ones
    assert [os.listdir(d / f"t-{p}") for p in range(3)] == [[], [], []]
    assert mgr.get_log("t", 3).log_end_offset == 1
    lg = mgr.get_log("t", 1)
    lg.append_as_leader(build_batch(2), 2, T0)
    assert lg.log_end_offset == 2 and lg.read(0, 1 << 20).size > 0
    mgr.shutdown()
    mgr = LogManager([str(d)], LogConfig())
    mgr.startup()
    assert mgr.get_log("t", 1).leader_epoch_cache.epochs() == [(2, 0)]
    mgr.shutdown()
