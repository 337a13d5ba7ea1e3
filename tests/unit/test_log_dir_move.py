"""JBOD moves: a future log filled from the current one (storage.log_copy), the swap and
its crash recovery (LogManager), and the mover service (server.log_dir_mover)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from kafkarepl import _core
from kafkarepl.errors import ErrorCode
from kafkarepl.replication import TopicPartition
from kafkarepl.server.log_dir_mover import LogDirMover
from kafkarepl.storage import Log, LogConfig, LogManager
from kafkarepl.storage import manager as manager_mod
from kafkarepl.storage.log_copy import FUTURE_SUFFIX, LogCopy, RestartCopy, parse_future_dir
from kafkarepl.storage.manager import SWAP_MARKER
from tests.batches import build_batch, decode

T0 = 1_700_000_000_000
SMALL = LogConfig.from_props({"segment.bytes": "2000"})  # a roll every few batches


def all_bytes(lg: Log) -> bytes:
    out = bytearray()
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        sl = lg.read(offset, 1 << 20)
        if sl.size == 0:
            break
        out += _core.file_pread(sl.fd, sl.size, sl.position)
        offset = decode(out)[-1][0] + 1
    return bytes(out)


def offsets(lg: Log) -> list[int]:
    return [r[0] for r in decode(all_bytes(lg))]


def append(lg: Log, n: int, epoch: int = 0, records: int = 3) -> None:
    for _ in range(n):
        lg.append_as_leader(build_batch(records, value_size=40), epoch, T0)


@pytest.fixture
def mgr(tmp_path):
    m = LogManager([tmp_path / "d1", tmp_path / "d2"], SMALL)
    m.startup()
    yield m
    if m._lock_fds:  # not "killed" by the test
        m.shutdown()


def start_move(mgr: LogManager) -> tuple[Log, Log]:
    src = mgr.get_or_create_log("t", 0)
    assert mgr.log_dir_of("t", 0).name == "d1"
    fut = mgr.create_future_log("t", 0, mgr.log_dirs[1])
    assert parse_future_dir(fut.dir.name) == ("t", 0) and fut.dir.name.endswith(FUTURE_SUFFIX)
    return src, fut


def copy_until(copy: LogCopy, remaining: int = 0, chunk: int = 700) -> None:
    while copy.remaining_bytes() > remaining:
        c = copy.next_chunk(chunk)
        if c is None:
            break
        copy.copy(c)


def test_copy_follows_appends_and_swaps(mgr):
    src, fut = start_move(mgr)
    append(src, 20)
    copy = LogCopy(src, fut)
    c = copy.next_chunk(700)
    append(src, 5)  # the source grows (and rolls) while a chunk is on its way
    copy.copy(c)
    copy_until(copy, remaining=300)
    append(src, 3, epoch=2)
    src.assign_epoch(3, src.log_end_offset)  # a new leader's epoch without records yet
    assert copy.finish(1 << 20)
    assert all_bytes(fut) == all_bytes(src)
    assert len(fut.segments) == len(src.segments) > 3
    assert fut.epoch_entries() == src.epoch_entries() == [(0, 0), (2, 75), (3, 84)]
    old_dir = src.dir
    new = mgr.replace_current_with_future("t", 0)
    assert new is fut and mgr.get_log("t", 0) is fut and mgr.future_log("t", 0) is None
    assert mgr.log_dir_of("t", 0) == mgr.log_dirs[1] and new.dir == mgr.log_dirs[1] / "t-0"
    assert not old_dir.exists()
    append(new, 2)  # the new log takes appends in its new place
    assert offsets(new) == list(range(90))
    assert all(p.exists() for s in new.segments if s.size for p in (s.log_path,))


def test_truncation_mid_copy_restarts(mgr):
    src, fut = start_move(mgr)
    append(src, 10)
    copy = LogCopy(src, fut)
    copy_until(copy)
    src.truncate_to(15)  # a follower diverged: what was copied past 15 is void
    src.append_as_follower(_batch_at(15, 5))
    assert copy.stale()
    with pytest.raises(RestartCopy):
        copy.next_chunk(700)
    assert not copy.finish(1 << 20)
    copy.restart()
    copy_until(copy)
    assert copy.finish(1 << 20)
    assert all_bytes(fut) == all_bytes(src) and offsets(fut) == list(range(18))


def _batch_at(base: int, epoch: int) -> bytearray:
    b = build_batch(3, value_size=41)
    b[0:8] = base.to_bytes(8, "big")
    b[12:16] = epoch.to_bytes(4, "big")  # partitionLeaderEpoch is outside the CRC
    return b


def test_retention_past_the_copy_skips_ahead(mgr):
    src, fut = start_move(mgr)
    append(src, 30)
    copy = LogCopy(src, fut)
    copy.copy(copy.next_chunk(700))
    src.maybe_increment_log_start_offset(40)
    assert src.delete_old_segments(T0) > 0  # the segments the copy had not reached yet
    copy_until(copy)
    assert copy.finish(1 << 20)
    assert fut.log_start_offset == src.log_start_offset == 40
    assert all_bytes(fut) == all_bytes(src)


def test_compacted_gaps_are_copied(tmp_path):
    src = Log.open(tmp_path / "d1" / "t-0", SMALL)
    for base in (0, 3, 10, 11 + 3, 40):  # holes, as a cleaned log has them
        src.append_as_follower(_batch_at(base, 1), gaps=True)
    fut = Log.open(tmp_path / "d2" / "t-0", SMALL)
    copy = LogCopy(src, fut)
    copy_until(copy, chunk=100)
    assert copy.finish(1 << 20)
    assert all_bytes(fut) == all_bytes(src) and fut.log_end_offset == 43


def test_crash_with_a_future_log_drops_it_and_remembers_the_move(tmp_path, mgr):
    src, fut = start_move(mgr)
    append(src, 10)
    copy = LogCopy(src, fut)
    copy.copy(copy.next_chunk(700))
    future_dir = fut.dir
    mgr.release_locks()  # kill -9: nothing closed, no marker, no checkpoint
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        assert offsets(again.get_log("t", 0)) == list(range(30))
        assert again.log_dir_of("t", 0) == mgr.log_dirs[0]
        assert again.pending_moves == {("t", 0): mgr.log_dirs[1]}
        again.wait_for_deletions(10)
        assert not future_dir.exists() and again.future_log("t", 0) is None
    finally:
        again.shutdown()


class Crash(BaseException):
    """kill -9 at this point: nothing after it runs (what is on disk stays)."""


def _crash_at(monkeypatch, point: str) -> None:
    """Make replace_current_with_future stop at `point` (the module docstring's steps)."""
    if point == "before-marker":
        def no_marker(path: Path, content: bytes = b"") -> None:
            raise Crash(point)
        monkeypatch.setattr(manager_mod, "_write_marker", no_marker)
        return
    renames = {"before-current-rename": 1, "before-future-rename": 2}[point]
    real = Log.rename_dir
    calls = []

    def rename_dir(self: Log, new_dir: Path) -> None:
        calls.append(new_dir)
        if len(calls) == renames:
            raise Crash(point)
        real(self, new_dir)

    monkeypatch.setattr(Log, "rename_dir", rename_dir)


def _empty(d: Path) -> None:
    """The log dir's disk replaced by an empty one: the dir is there, nothing in it."""
    for p in d.iterdir():
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def _crashed_swap(mgr: LogManager, monkeypatch, point: str) -> tuple[Log, Log]:
    src, fut = start_move(mgr)
    append(src, 12)
    copy = LogCopy(src, fut)
    copy_until(copy)
    assert copy.finish(1 << 20)
    _crash_at(monkeypatch, point)
    with pytest.raises(Crash):
        mgr.replace_current_with_future("t", 0)
    monkeypatch.undo()
    # A removal of the old files already handed to the janitor thread (past the commit
    # point) finishes first: the test then changes the dirs without racing it.
    mgr.wait_for_deletions(10)
    mgr.release_locks()  # kill -9: nothing closed, no marker, no checkpoint
    return src, fut


# (crash point, the source dir emptied) -> the start finds: the move to restart from the
# current log in d1, the swap to complete (the future in d2 has every offset), or no log.
@pytest.mark.parametrize(("point", "emptied", "outcome"), [
    ("before-marker", False, "restart"),
    ("before-marker", True, "none"),
    ("before-current-rename", False, "restart"),
    ("before-current-rename", True, "swapped"),
    ("before-future-rename", False, "swapped"),
    ("before-future-rename", True, "swapped"),
])
def test_a_crash_at_each_point_of_the_swap(tmp_path, mgr, monkeypatch, point: str, emptied: bool,
                                           outcome: str) -> None:
    src, fut = _crashed_swap(mgr, monkeypatch, point)
    d1, d2 = mgr.log_dirs
    assert fut.dir.parent == d2 and (fut.dir / SWAP_MARKER).exists() == (point != "before-marker")
    if emptied:
        _empty(d1)
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        again.wait_for_deletions(10)
        assert again.future_log("t", 0) is None and not fut.dir.exists()
        assert not [n for n in os.listdir(d2) if n.endswith(("-future", "-delete"))]
        assert not [n for n in os.listdir(d1) if n.endswith(("-future", "-delete"))]
        if outcome == "restart":
            lg = again.get_log("t", 0)
            assert again.log_dir_of("t", 0) == d1 and offsets(lg) == list(range(36))
            assert again.pending_moves == {("t", 0): d2}
        elif outcome == "swapped":
            lg = again.get_log("t", 0)
            assert again.log_dir_of("t", 0) == d2 and lg.dir == d2 / "t-0"
            assert offsets(lg) == list(range(36)) and lg.epoch_entries() == [(0, 0)]
            assert not again.pending_moves and not (lg.dir / SWAP_MARKER).exists()
        else:
            # A partial copy (here a whole one, but no swap began: nothing says so) whose
            # current log is gone: not served. The replica is created empty, in the dir the
            # move was going to, when the controller names it (a follower then fetches).
            assert again.get_log("t", 0) is None and again.log_dir_of("t", 0) is None
            assert not again.pending_moves and ("t", 0) not in again.high_watermarks
            assert ("t", 0) not in again.offline_partitions
            lg = again.get_or_create_log("t", 0, is_new=False)
            assert again.log_dir_of("t", 0) == d2 and lg.log_end_offset == 0
    finally:
        again.shutdown()


def test_a_partial_copy_whose_current_log_is_gone_is_dropped(tmp_path, mgr) -> None:
    """The current log's disk is replaced by an empty one while a move copies from it:
    the future log (a prefix of the log) must not be taken for the partition's log."""
    src, fut = start_move(mgr)
    append(src, 20)
    copy = LogCopy(src, fut)
    copy.copy(copy.next_chunk(700))  # a few batches of 20
    assert 0 < fut.log_end_offset < src.log_end_offset
    mgr.release_locks()
    _empty(mgr.log_dirs[0])
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        again.wait_for_deletions(10)
        assert again.get_log("t", 0) is None and not fut.dir.exists()
        assert not [n for n in os.listdir(mgr.log_dirs[1]) if n.startswith("t-0")]
        lg = again.get_or_create_log("t", 0, is_new=False)
        assert lg.dir == mgr.log_dirs[1] / "t-0" and lg.log_end_offset == 0
    finally:
        again.shutdown()


def test_a_marker_left_after_the_swap_does_not_confuse_a_later_move(tmp_path, mgr) -> None:
    """The marker's removal is not made durable: one left in the (now current) log's dir
    is harmless. The partition moves back, a crash mid-copy, the disk it was on replaced:
    the new future log has no marker (a new dir), so it is dropped, not served."""
    src, fut = start_move(mgr)
    append(src, 12)
    copy = LogCopy(src, fut)
    copy_until(copy)
    assert copy.finish(1 << 20)
    d1, d2 = mgr.log_dirs
    lg = mgr.replace_current_with_future("t", 0)
    assert not (lg.dir / SWAP_MARKER).exists()
    (lg.dir / SWAP_MARKER).touch()  # as after a power loss that lost the unlink
    mgr.release_locks()
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        lg = again.get_log("t", 0)
        assert again.log_dir_of("t", 0) == d2 and offsets(lg) == list(range(36))
        back = again.create_future_log("t", 0, d1)
        copy = LogCopy(lg, back)
        copy.copy(copy.next_chunk(700))
        assert not (back.dir / SWAP_MARKER).exists() and 0 < back.log_end_offset < 36
    finally:
        again.release_locks()
    _empty(d2)
    third = LogManager(mgr.log_dirs, SMALL)
    third.startup()
    try:
        third.wait_for_deletions(10)
        assert third.get_log("t", 0) is None and not back.dir.exists()
    finally:
        third.shutdown()


def test_a_swap_failing_before_its_commit_point_leaves_the_current_log_serving(tmp_path, mgr,
                                                                               monkeypatch) -> None:
    """An I/O error renaming the current log away: it stays the partition's log, open;
    the future one (marked by then) is still registered, for the caller to drop, so no
    marked future is left to be taken for a swap if the current log's disk is replaced."""
    src, fut = start_move(mgr)
    append(src, 12)
    copy = LogCopy(src, fut)
    copy_until(copy)
    assert copy.finish(1 << 20)
    real = Log.rename_dir

    def failing(self: Log, new_dir: Path) -> None:
        if self is src:
            raise OSError(5, "Input/output error")
        real(self, new_dir)

    monkeypatch.setattr(Log, "rename_dir", failing)
    with pytest.raises(OSError):
        mgr.replace_current_with_future("t", 0)
    monkeypatch.undo()
    assert mgr.get_log("t", 0) is src and mgr.future_log("t", 0) is fut
    assert (fut.dir / SWAP_MARKER).exists()
    mgr.abort_future(("t", 0))  # what the mover does with a failed move
    append(src, 1)  # still the partition's log
    assert offsets(src) == list(range(39))
    mgr.release_locks()
    _empty(mgr.log_dirs[0])
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        assert again.get_log("t", 0) is None  # nothing on d2 taken for the partition's log
    finally:
        again.shutdown()


def test_crash_after_the_swap_and_clean_restart(tmp_path, mgr):
    src, fut = start_move(mgr)
    append(src, 12)
    copy = LogCopy(src, fut)
    copy_until(copy)
    assert copy.finish(1 << 20)
    mgr.replace_current_with_future("t", 0)
    append(mgr.get_log("t", 0), 1)
    mgr.release_locks()
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        assert again.log_dir_of("t", 0) == mgr.log_dirs[1]
        assert offsets(again.get_log("t", 0)) == list(range(39))
    finally:
        again.shutdown()
    again = LogManager(mgr.log_dirs, SMALL)  # and a clean restart after it
    again.startup()
    try:
        assert offsets(again.get_log("t", 0)) == list(range(39))
    finally:
        again.shutdown()


def test_deleting_a_moving_log_removes_the_future_first(mgr):
    src, fut = start_move(mgr)
    append(src, 3)
    mgr.delete_log("t", 0)
    mgr.wait_for_deletions(10)
    assert mgr.future_log("t", 0) is None and not fut.dir.exists() and not src.dir.exists()


# ---------------------------------------------------------------------- the mover -----


class FakePartition:
    def __init__(self, log: Log) -> None:
        self.log = log


class FakeReplicas:
    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, FakePartition] = {}

    def get(self, tp: TopicPartition) -> FakePartition | None:
        return self.partitions.get(tp)


def test_mover_answers_and_moves_while_appends_go_on(mgr):
    async def main() -> None:
        replicas = FakeReplicas()
        paused: list[tuple] = []
        mover = LogDirMover(mgr, replicas, lambda tp: paused.append(("pause", tp)),  # type: ignore[arg-type]
                            lambda tp: paused.append(("resume", tp)), chunk_bytes=3000, final_bytes=1500)
        tp = TopicPartition("t", 0)
        d1, d2 = (str(d) for d in mgr.log_dirs)
        assert mover.alter(tp, "/nowhere") is ErrorCode.LOG_DIR_NOT_FOUND
        # Not here yet: remembered, and created there when it comes.
        assert mover.alter(tp, d2) is ErrorCode.REPLICA_NOT_AVAILABLE
        lg = mgr.get_or_create_log("t", 0)
        assert mgr.log_dir_of("t", 0) == mgr.log_dirs[1]
        replicas.partitions[tp] = p = FakePartition(lg)
        assert mover.alter(tp, d2) is ErrorCode.NONE and not mover.moves  # already there
        append(lg, 40)
        assert mover.alter(tp, d1) is ErrorCode.NONE
        move = mover.moves[tp]
        for _ in range(30):  # appends go on during the move
            append(p.log, 1)
            await asyncio.sleep(0)
        await asyncio.wait_for(move.done.wait(), 10)
        assert mgr.log_dir_of("t", 0) == mgr.log_dirs[0] and p.log is mgr.get_log("t", 0)
        assert p.log is not lg and offsets(p.log) == list(range(210))
        assert paused == [("pause", tp), ("resume", tp)] and mover.completed == 1
        await mover.shutdown()

    asyncio.run(main())


def test_mover_drops_the_marked_future_when_the_swap_fails_before_its_commit_point(mgr, monkeypatch):
    """The current log cannot be renamed away (EIO): the move fails, the partition goes
    on with its log, and the future log, marked by then, is removed (not left behind to
    be taken for a swap)."""
    async def main() -> None:
        replicas = FakeReplicas()
        mover = LogDirMover(mgr, replicas, lambda tp: None, lambda tp: None,  # type: ignore[arg-type]
                            chunk_bytes=3000, final_bytes=1500)
        tp = TopicPartition("t", 0)
        lg = mgr.get_or_create_log("t", 0)
        replicas.partitions[tp] = p = FakePartition(lg)
        append(lg, 40)
        real = Log.rename_dir
        marked: list[bool] = []

        def failing(self: Log, new_dir: Path) -> None:
            if self is lg:
                fut = mgr.future_log("t", 0)
                marked.append(fut is not None and (fut.dir / SWAP_MARKER).exists())
                raise OSError(5, "Input/output error")
            real(self, new_dir)

        monkeypatch.setattr(Log, "rename_dir", failing)
        assert mover.alter(tp, str(mgr.log_dirs[1])) is ErrorCode.NONE
        await asyncio.wait_for(mover.moves[tp].done.wait(), 10)
        monkeypatch.undo()
        assert marked == [True] and not mover.moves and mover.completed == 0
        assert mgr.future_log("t", 0) is None and p.log is lg and mgr.get_log("t", 0) is lg
        append(p.log, 1)
        assert offsets(p.log) == list(range(123))
        mgr.wait_for_deletions(10)
        assert not [n for n in os.listdir(mgr.log_dirs[1]) if n.startswith("t-0")]
        await mover.shutdown()

    asyncio.run(main())


def test_mover_throttle_and_redirect(mgr):
    async def main() -> None:
        replicas = FakeReplicas()
        mover = LogDirMover(mgr, replicas, lambda tp: None, lambda tp: None,  # type: ignore[arg-type]
                            chunk_bytes=4000, final_bytes=2000)
        tp = TopicPartition("t", 0)
        lg = mgr.get_or_create_log("t", 0)
        replicas.partitions[tp] = FakePartition(lg)
        append(lg, 200)  # ~40 KB
        mover.set_rate("20000")
        assert mover.alter(tp, str(mgr.log_dirs[1])) is ErrorCode.NONE
        await asyncio.sleep(0.3)
        fut = mgr.future_log("t", 0)
        assert fut is not None and 0 < mover.future_lag(tp) < 600  # 20 kB/s: ~6 kB of ~40 kB copied
        assert mover.alter(tp, str(mgr.log_dirs[0])) is ErrorCode.NONE  # back: the move is called off
        mover.set_rate(None)
        await asyncio.wait_for(mover.moves[tp].done.wait(), 10)
        assert mgr.future_log("t", 0) is None and mgr.log_dir_of("t", 0) == mgr.log_dirs[0]
        assert replicas.partitions[tp].log is lg
        await mover.shutdown()

    asyncio.run(main())


def test_interrupted_move_restarts(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    m = LogManager(dirs, SMALL)
    m.startup()
    append(m.get_or_create_log("t", 0), 10)
    m.create_future_log("t", 0, dirs[1])
    m.shutdown()  # a clean stop with a move in flight

    async def main() -> None:
        again = LogManager(dirs, SMALL)
        again.startup()
        assert again.pending_moves == {("t", 0): dirs[1]}
        mover = LogDirMover(again, FakeReplicas(), lambda tp: None, lambda tp: None)  # type: ignore[arg-type]
        mover.resume_interrupted()
        await asyncio.wait_for(mover.moves[TopicPartition("t", 0)].done.wait(), 10)
        assert again.log_dir_of("t", 0) == dirs[1] and offsets(again.get_log("t", 0)) == list(range(30))
        await mover.shutdown()
        again.shutdown()

    asyncio.run(main())
    assert [n for n in os.listdir(dirs[0]) if n.startswith("t-0")] == []
    assert Path(dirs[1] / "t-0").is_dir()


def test_mover_remembers_dirs_only_for_known_partitions_and_refuses_overlong_names(mgr):
    """Past its cap, a preferred dir is kept only for a partition the metadata knows (a
    client naming made-up partitions cannot grow the map); a topic whose future log's
    directory name would pass 255 bytes is refused, as Kafka does (KAFKA-4893)."""
    async def main() -> None:
        known = {TopicPartition("t", 0)}
        mover = LogDirMover(mgr, FakeReplicas(), lambda tp: None, lambda tp: None,  # type: ignore[arg-type]
                            known=lambda tp: tp in known, max_preferred=1)
        d2 = str(mgr.log_dirs[1])
        assert mover.alter(TopicPartition("early", 0), d2) is ErrorCode.REPLICA_NOT_AVAILABLE  # under the cap
        assert mover.alter(TopicPartition("made-up", 0), d2) is ErrorCode.REPLICA_NOT_AVAILABLE
        assert mover.alter(TopicPartition("t", 0), d2) is ErrorCode.REPLICA_NOT_AVAILABLE
        mgr.get_or_create_log("made-up", 0)
        mgr.get_or_create_log("t", 0)
        mgr.get_or_create_log("early", 0)
        assert mgr.log_dir_of("made-up", 0) == mgr.log_dirs[0]  # not remembered: the default placement
        assert mgr.log_dir_of("t", 0) == mgr.log_dirs[1] and mgr.log_dir_of("early", 0) == mgr.log_dirs[1]
        assert mover.alter(TopicPartition("x" * 249, 0), d2) is ErrorCode.INVALID_TOPIC_EXCEPTION
        await mover.shutdown()

    asyncio.run(main())


def test_a_move_to_a_dir_that_fails_is_dropped(mgr):
    """The destination fails mid-move (taken offline, its future log with it): the mover
    must not make a new future log there and swap the partition onto a failed disk."""
    async def main() -> None:
        mover = LogDirMover(mgr, FakeReplicas(), lambda tp: None, lambda tp: None,  # type: ignore[arg-type]
                            chunk_bytes=3000, final_bytes=1500)
        mover.set_rate("20000")  # slow: the move is still copying when the dir fails
        tp = TopicPartition("t", 0)
        lg = mgr.get_or_create_log("t", 0)
        append(lg, 200)
        d2 = mgr.log_dirs[1]
        move = mover.start(tp, d2)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if mgr.future_log("t", 0) is not None:
                break
        assert mgr.future_log("t", 0) is not None
        mgr.take_offline(d2)
        mover.set_rate(None)
        await asyncio.wait_for(move.done.wait(), 10)
        assert mgr.log_dir_of("t", 0) == mgr.log_dirs[0] and mgr.get_log("t", 0) is lg
        assert mgr.future_log("t", 0) is None
        assert len([p for p in d2.iterdir() if p.name.endswith(FUTURE_SUFFIX)]) == 1  # the first, left as it was
        with pytest.raises(Exception, match="offline"):
            mgr.create_future_log("t", 0, d2)
        await mover.shutdown()

    asyncio.run(main())


def test_a_dir_is_named_as_kafka_names_it_in_both_apis(tmp_path, monkeypatch):
    """AlterReplicaLogDirs names a dir exactly as Kafka's LogManager.isLogDirOnline compares
    it: the configured dir's File.getAbsolutePath (a configured trailing slash dropped, a
    relative dir made absolute), against the path as sent, so "<dir>/" is LOG_DIR_NOT_FOUND
    (and nothing is remembered for it); DescribeLogDirs reports those names."""
    from types import SimpleNamespace

    from kafkarepl.server.log_dir_apis import LogDirApis

    monkeypatch.chdir(tmp_path)
    m = LogManager([str(tmp_path / "d1") + "/", "d2"], SMALL)
    m.startup()
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")

    async def main() -> None:
        replicas = FakeReplicas()
        mover = LogDirMover(m, replicas, lambda tp: None, lambda tp: None)  # type: ignore[arg-type]
        tp = TopicPartition("t", 0)
        for bad in (d1 + "/", d2 + "/", "d2", d1.replace("/d1", "//d1"), d1.replace("/d1", "/./d1")):
            assert mover.alter(tp, bad) is ErrorCode.LOG_DIR_NOT_FOUND, bad
        assert m.preferred_count() == 0
        assert mover.alter(tp, d2) is ErrorCode.REPLICA_NOT_AVAILABLE  # remembered for its creation
        replicas.partitions[tp] = FakePartition(m.get_or_create_log("t", 0))
        assert m.log_dir_of("t", 0) == m.log_dirs[1]
        apis = LogDirApis(m, FakeReplicas(), mover)  # type: ignore[arg-type]
        resp = await apis.describe_log_dirs(SimpleNamespace(body={"topics": None}))  # type: ignore[arg-type]
        by_dir = {r["log_dir"]: [t["name"] for t in r["topics"]] for r in resp["results"]}
        assert by_dir == {d1: [], d2: ["t"]}
        await mover.shutdown()

    try:
        asyncio.run(main())
    finally:
        m.shutdown()


def test_a_completed_swap_keeps_a_log_start_moved_inside_the_first_segment(mgr, monkeypatch) -> None:
    """A DeleteRecords moved the log start inside the first segment: the swap completed
    at the next start keeps it (the marker holds it; the log-start checkpoint of the
    future's dir does not list the partition), else it would fall back to the first
    segment's base and the deleted records would be served again."""
    src, fut = start_move(mgr)
    append(src, 12)
    assert src.maybe_increment_log_start_offset(4) is True
    copy = LogCopy(src, fut)
    copy_until(copy)
    assert copy.finish(1 << 20)
    assert fut.log_start_offset == 4
    _crash_at(monkeypatch, "before-future-rename")
    with pytest.raises(Crash):
        mgr.replace_current_with_future("t", 0)
    monkeypatch.undo()
    mgr.release_locks()
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        lg = again.get_log("t", 0)
        assert again.log_dir_of("t", 0) == mgr.log_dirs[1]
        assert lg.log_start_offset == 4 and lg.log_end_offset == 36
    finally:
        again.shutdown()


def test_a_disk_error_past_the_commit_point_fails_the_dir_and_keeps_the_swap(mgr, monkeypatch) -> None:
    """The future's rename fails (EIO) after the current log was renamed away: the swap
    stands (the future, with every batch, is the partition's log), the destination dir is
    reported failed, as Kafka's logDirFailureChannel, and the next start completes it."""
    import errno

    failures: list[tuple[Path, BaseException, int]] = []
    mgr.on_dir_failure = lambda d, exc, remaining: failures.append((d, exc, remaining))
    src, fut = start_move(mgr)
    append(src, 12)
    copy = LogCopy(src, fut)
    copy_until(copy)
    assert copy.finish(1 << 20)
    real = Log.rename_dir
    calls: list[Path] = []

    def rename_dir(self: Log, new_dir: Path) -> None:
        calls.append(new_dir)
        if len(calls) == 2:
            raise OSError(errno.EIO, "injected")
        real(self, new_dir)

    monkeypatch.setattr(Log, "rename_dir", rename_dir)
    d1, d2 = mgr.log_dirs
    assert mgr.replace_current_with_future("t", 0) is fut
    assert mgr.get_log("t", 0) is fut and mgr.log_dir_of("t", 0) == d2
    assert [(d, r) for d, _e, r in failures] == [(d2, 1)]
    monkeypatch.undo()
    mgr.release_locks()
    again = LogManager(mgr.log_dirs, SMALL)
    again.startup()
    try:
        lg = again.get_log("t", 0)
        assert again.log_dir_of("t", 0) == d2 and offsets(lg) == list(range(36))
    finally:
        again.shutdown()
