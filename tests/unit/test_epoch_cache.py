"""LeaderEpochCache: Kafka's endOffsetFor (KIP-279) cases, truncation, the checkpoint."""

from __future__ import annotations

import pytest

from kafkarepl import _core
from kafkarepl.storage import LeaderEpochCache, Log, LogConfig
from kafkarepl.storage.epoch_cache import CHECKPOINT_NAME
from tests.batches import build_batch

T0 = 1_700_000_000_000


@pytest.fixture
def cache(tmp_path):
    c = LeaderEpochCache(tmp_path / CHECKPOINT_NAME)
    for epoch, start in [(1, 0), (3, 100), (6, 250)]:
        assert c.assign(epoch, start)
    return c


def test_end_offset_for_kafka_cases(cache):
    leo = 400
    assert cache.end_offset_for(-1, leo) == (-1, -1)  # UNDEFINED_EPOCH asked
    assert cache.end_offset_for(6, leo) == (6, leo)  # latest epoch: LEO
    assert cache.end_offset_for(1, leo) == (1, 100)  # known epoch: next epoch's start
    assert cache.end_offset_for(3, leo) == (3, 250)
    assert cache.end_offset_for(2, leo) == (1, 100)  # unknown epoch: the one below it
    assert cache.end_offset_for(5, leo) == (3, 250)
    assert cache.end_offset_for(0, leo) == (0, 0)  # below every epoch: first start
    assert cache.end_offset_for(7, leo) == (-1, -1)  # above the latest: undefined
    assert LeaderEpochCache(None).end_offset_for(0, leo) == (-1, -1)  # empty cache


def test_assign_rules(cache):
    assert not cache.assign(6, 300)  # same epoch: no change
    assert not cache.assign(4, 300)  # older epoch: ignored
    assert cache.epochs() == [(1, 0), (3, 100), (6, 250)]
    # a newer epoch starting before existing entries replaces them (Kafka's assign)
    assert cache.assign(7, 250)
    assert cache.epochs() == [(1, 0), (3, 100), (7, 250)]
    assert cache.assign(8, 260)
    assert cache.latest_epoch == 8
    assert cache.epoch_for_offset(99) == 1 and cache.epoch_for_offset(255) == 7


def test_truncate_from_end_and_start(cache):
    cache.truncate_from_end(300)
    assert cache.epochs() == [(1, 0), (3, 100), (6, 250)]
    cache.truncate_from_end(250)
    assert cache.epochs() == [(1, 0), (3, 100)]
    cache.truncate_from_start(150)
    assert cache.epochs() == [(3, 150)]
    cache.truncate_from_start(100)  # before the first entry: no change
    assert cache.epochs() == [(3, 150)]


def test_checkpoint_format_and_reload(cache, tmp_path):
    path = tmp_path / CHECKPOINT_NAME
    assert _core.checkpoint_read(str(path)) == b"0\n3\n1 0\n3 100\n6 250\n"
    assert path.read_bytes().splitlines()[-1].startswith(b"xxh64 ")
    loaded, trusted = LeaderEpochCache.load(path)
    assert trusted and loaded.epochs() == cache.epochs()


def test_corrupt_checkpoint_is_not_trusted(cache, tmp_path, caplog):
    path = tmp_path / CHECKPOINT_NAME
    data = bytearray(path.read_bytes())
    data[4] = ord("9")  # "3 100" -> "9 100" keeps the syntax, breaks the hash
    path.write_bytes(bytes(data))
    loaded, trusted = LeaderEpochCache.load(path)
    assert not trusted and loaded.epochs() == []
    assert "corrupt checkpoint" in caplog.text


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_log_rebuilds_cache_from_batches(tmp_path, damage):
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for epoch in (0, 0, 2, 2, 2, 5):
        log.append_as_leader(build_batch(2), epoch, T0)
    expected = log.leader_epoch_cache.epochs()
    assert expected == [(0, 0), (2, 4), (5, 10)]
    log.close()
    path = tmp_path / "t-0" / CHECKPOINT_NAME
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:-5])
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300), clean_shutdown=True)
    assert log.leader_epoch_cache.epochs() == expected
    log.close()  # the rebuilt cache is written with the log's next records or its close
    assert _core.checkpoint_read(str(path)) == b"0\n3\n0 0\n2 4\n5 10\n"


def test_log_truncation_and_retention_update_the_cache(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200, retention_bytes=0))
    for epoch in (1, 1, 3, 3, 4):
        log.append_as_leader(build_batch(1), epoch, T0)
    log.truncate_to(4)
    assert log.epoch_entries() == [(1, 0), (3, 2)]
    log.assign_epoch(7, 4)  # a leader that appended nothing, then lost leadership
    log.truncate_to(4)  # at the LEO: still drops the empty trailing epoch (Kafka)
    assert log.latest_epoch() == 3
    assert log.end_offset_for_epoch(1) == (1, 2)
    log.delete_old_segments(T0)
    assert log.log_start_offset == 2  # segments [0,1] [2,3]: only the active one stays
    assert log.epoch_entries() == [(3, 2)]
    log.close()
