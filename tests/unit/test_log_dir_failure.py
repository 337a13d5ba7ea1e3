"""Log dir failure (Kafka's LogDirFailureChannel): an I/O error writing to a log dir is
reported once per dir to the broker's handler (which halts), a refused request that
also raises KafkaStorageError is not, and a short write leaves no partial batch behind."""

from __future__ import annotations

import errno
import os
import resource
import signal
import threading
from pathlib import Path

import pytest

from kafkarepl.errors import ErrorCode, KafkaStorageError
from kafkarepl.server.log_dir_failure import LogDirFailureHandler
from kafkarepl.storage import LogConfig, LogManager
from kafkarepl.storage.manager import SWAP_MARKER
from tests.batches import build_batch, decode

T = 1_700_000_000_000  # the batches' timestamp, passed as "now"


def batch(n: int = 3, size: int = 10) -> bytes:
    return build_batch([b"v" * size] * n, timestamp=T)


def at_offset(data: bytes, base_offset: int) -> bytes:
    """The batch with another base offset (outside its CRC)."""
    return base_offset.to_bytes(8, "big") + data[8:]


@pytest.fixture
def failures(tmp_path):
    seen: list[tuple[Path, BaseException]] = []
    lm = LogManager([tmp_path / "d1", tmp_path / "d2"], LogConfig(),
                    on_dir_failure=lambda d, exc, left: seen.append((d, exc)))
    lm.startup()
    yield lm, seen
    lm.release_locks()


def test_a_write_error_takes_the_dir_down_once(failures, tmp_path) -> None:
    lm, seen = failures
    lg = lm.get_or_create_log("t", 0)
    other = lm.get_or_create_log("t", 1)
    assert lm.log_dir_of("t", 0) != lm.log_dir_of("t", 1)
    lg.append_as_leader(batch(), 0, T)
    os.close(lg.active_segment.fd)  # the disk under it is gone: every write fails (EBADF)
    with pytest.raises(KafkaStorageError) as info:
        lg.append_as_leader(batch(), 0, T)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert [(d, type(e)) for d, e in seen] == [(lm.log_dir_of("t", 0), OSError)]
    with pytest.raises(KafkaStorageError):
        lg.append_as_leader(batch(), 0, T)
    assert len(seen) == 1 and lm.failed_dirs == {lm.log_dir_of("t", 0)}  # reported once per dir
    other.append_as_leader(batch(), 0, T)  # the other dir is untouched
    lg.active_segment.fd = -1  # already closed above
    # A checkpoint that cannot be written fails its dir too.
    d2 = lm.log_dir_of("t", 1)
    (d2 / "replication-offset-checkpoint.tmp").mkdir()  # the tmp file cannot be created
    with pytest.raises(KafkaStorageError):
        lm.checkpoint_high_watermarks({})
    assert [d for d, _ in seen] == [lm.log_dir_of("t", 0), d2]


def test_a_refused_follower_append_is_not_a_dir_failure(failures) -> None:
    lm, seen = failures
    lg = lm.get_or_create_log("t", 0)
    with pytest.raises(KafkaStorageError):  # starts above the log end offset: refused, no I/O
        lg.append_as_follower(at_offset(build_batch([b"x"], timestamp=T), 5))
    assert seen == [] and not lm.failed_dirs


def test_a_short_write_leaves_no_partial_batch(failures) -> None:
    """ENOSPC/EFBIG in the middle of a batch: the bytes that made it are cut, so the next
    append after space comes back is not behind garbage (RLIMIT_FSIZE makes the write
    short exactly as a full disk does)."""
    lm, seen = failures
    lg = lm.get_or_create_log("t", 0)
    lg.append_as_leader(batch(), 0, T)
    seg = lg.active_segment
    good = seg.size
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (good + 500, hard))  # for microseconds
    try:
        with pytest.raises(KafkaStorageError):
            lg.append_as_leader(batch(5, 400), 0, T)  # ~2 KB: 500 bytes fit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert os.fstat(seg.fd).st_size == good == seg.size
    assert len(seen) == 1
    # space is back: the next append follows the last whole batch
    lg.append_as_leader(batch(2), 0, T)
    data = os.pread(seg.fd, seg.size, 0)
    assert [o for o, *_ in decode(data)] == [0, 1, 2, 3, 4]


def test_the_handler_closes_the_session_then_halts_once() -> None:
    calls: list[str] = []
    handler = LogDirFailureHandler(1, lambda: calls.append("close"), halt=lambda rc: calls.append(f"halt {rc}"))
    handler(Path("/d"), OSError(28, "No space left on device"))
    handler(Path("/e"), OSError(5, "Input/output error"))
    assert calls == ["close", "halt 1"]
    slow = LogDirFailureHandler(1, lambda: threading.Event().wait(10), halt=lambda rc: calls.append("halted"),
                                grace_s=0.2)
    slow(Path("/d"), OSError(5, "EIO"))  # a hung ZooKeeper close does not hold the halt
    assert calls[-1] == "halted"


def test_a_failed_dir_goes_offline_and_the_others_serve(failures) -> None:
    """KIP-112 in the LogManager: the failed dir's logs are closed and forgotten, their
    partitions refused until a restart, checkpoints and new logs use the other dir."""
    lm, _seen = failures
    d1, d2 = lm.log_dirs
    a = lm.get_or_create_log("t", 0)
    lm.get_or_create_log("t", 1)
    assert lm.log_dir_of("t", 0) == d1 and lm.log_dir_of("t", 1) == d2
    a.append_as_leader(batch(), 0, T)
    assert lm.take_offline(d1) == [("t", 0)]
    assert lm.get_log("t", 0) is None and lm.offline_partitions == {("t", 0)} and lm.live_dirs() == [d2]
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log("t", 0)
    assert lm.log_dir_of(*("t", 2)) is None and lm.get_or_create_log("t", 2) is not None
    assert lm.log_dir_of("t", 2) == d2  # new logs only on live dirs
    before = (d1 / "replication-offset-checkpoint").read_bytes() \
        if (d1 / "replication-offset-checkpoint").exists() else None
    lm.checkpoint_high_watermarks({("t", 1): 0})
    after = (d1 / "replication-offset-checkpoint").read_bytes() \
        if (d1 / "replication-offset-checkpoint").exists() else None
    assert before == after  # nothing more written to the failed dir
    assert lm.take_offline(d1) == []
    m = lm.metrics()
    assert m["kafka_log_logmanager_offlinelogdirectorycount"] == 1
    assert m[f'kafka_log_logmanager_logdirectoryoffline{{logDirectory="{d1}"}}'] == 1
    assert m[f'kafka_log_logmanager_logdirectoryoffline{{logDirectory="{d2}"}}'] == 0


def test_the_handler_takes_a_dir_offline_while_others_are_left() -> None:
    calls: list[str] = []
    handler = LogDirFailureHandler(1, lambda: calls.append("close"), halt=lambda rc: calls.append("halt"),
                                   take_offline=lambda d: calls.append(f"offline {d}") is None)
    handler(Path("/d"), OSError(5, "EIO"), 1)
    assert calls == ["offline /d"]
    handler(Path("/e"), OSError(5, "EIO"), 0)  # the last one: halt
    assert calls == ["offline /d", "close", "halt"]
    cannot = LogDirFailureHandler(1, lambda: None, halt=lambda rc: calls.append("halted"),
                                  take_offline=lambda d: False)  # not serving yet
    cannot(Path("/d"), OSError(5, "EIO"), 1)
    assert calls[-1] == "halted"


def test_a_dir_that_cannot_be_used_at_startup_is_offline_from_the_start(tmp_path) -> None:
    """As Kafka: a log dir that cannot be created, locked or read at startup is offline
    (the broker starts on the others); a replica that should exist (not is_new) is then
    refused, since its log may be on that dir, while a new one is created; with no
    usable dir at all the start fails."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    lm = LogManager([d1, d2], LogConfig())
    lm.startup()
    lm.get_or_create_log("t", 0).append_as_leader(batch(), 0, T)  # in d1
    lm.get_or_create_log("t", 1).append_as_leader(batch(), 0, T)  # in d2
    lm.shutdown()
    os.rename(d1, tmp_path / "d1-gone")
    d1.write_text("not a directory: the disk is not mounted")
    again = LogManager([d1, d2], LogConfig())
    again.startup()
    try:
        assert again.offline_dirs == {d1} and again.live_dirs() == [d2]
        assert again.get_log("t", 0) is None and again.get_log("t", 1) is not None
        assert again.metrics()["kafka_log_logmanager_offlinelogdirectorycount"] == 1
        with pytest.raises(KafkaStorageError, match="are offline"):
            again.get_or_create_log("t", 0, is_new=False)
        assert again.get_or_create_log("new", 0, is_new=True) is not None
        assert again.log_dir_of("new", 0) == d2
    finally:
        again.shutdown()
    nowhere = LogManager([d1], LogConfig())
    with pytest.raises(KafkaStorageError, match="no log dir"):
        nowhere.startup()


@pytest.mark.parametrize("marked", [False, True], ids=["copying", "swap-marked"])
def test_a_future_log_alone_while_a_dir_is_offline_is_not_served(tmp_path, marked: bool) -> None:
    """A move d1 -> d2 in progress (the future log holds a prefix), then a start with d1
    unusable: the future is not taken for a completed swap (acked offsets would go), nor
    dropped. Marked or not: the current log may be on the offline dir, and two current
    logs would be found when it comes back."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    lm = LogManager([d1, d2], LogConfig())
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    for _ in range(10):
        lg.append_as_leader(batch(), 0, T)
    fut = lm.create_future_log("t", 0, d2)
    fut.append_as_follower(at_offset(batch(), 0))  # a copy of the first batch only
    if marked:
        (fut.dir / SWAP_MARKER).touch()
    lm.release_locks()  # a crash
    os.rename(d1, tmp_path / "d1-away")
    d1.write_text("not mounted")
    again = LogManager([d1, d2], LogConfig())
    again.startup()
    assert again.offline_dirs == {d1} and again.get_log("t", 0) is None
    assert ("t", 0) in again.offline_partitions
    with pytest.raises(KafkaStorageError):
        again.get_or_create_log("t", 0, is_new=False)
    assert fut.dir.is_dir() and (fut.dir / SWAP_MARKER).exists() == marked  # kept as it was
    again.shutdown()
    d1.unlink()
    os.rename(tmp_path / "d1-away", d1)  # the disk is back: the move starts over
    third = LogManager([d1, d2], LogConfig())
    third.startup()
    assert third.log_dir_of("t", 0) == d1 and third.get_log("t", 0).log_end_offset == 30
    assert third.pending_moves == {("t", 0): d2}
    third.shutdown()


def test_descriptors_used_up_at_a_roll_fail_the_dir_and_leave_the_log_readable(failures) -> None:
    """As Kafka: a write path's error fails the dir (the log may be half-rolled). The
    index mappings stay usable meanwhile: a mapping that cannot be made (mmap dups the
    descriptor) keeps the old one instead of leaving none."""
    lm, seen = failures
    lg = lm.get_or_create_log("t", 0)
    lg.config = LogConfig.from_props({"segment.bytes": "200", "index.interval.bytes": "1"})
    lg.append_as_leader(batch(), 0, T)
    lg.append_as_leader(batch(), 0, T)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hog: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(64, len(os.listdir("/proc/self/fd")) + 8), hard))
        try:
            while True:
                hog.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        with pytest.raises(KafkaStorageError):
            lg.append_as_leader(batch(), 0, T)  # the roll cannot map or open its files: EMFILE
    finally:
        for fd in hog:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [d for d, _e in seen] == [lm.log_dir_of("t", 0)]
    assert lg.read(0, 1 << 20).size > 0  # still readable until the dir is taken down


def test_the_broker_raises_its_descriptor_limit() -> None:
    from kafkarepl.cli.broker import raise_descriptor_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        assert raise_descriptor_limit(100) == hard == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_which_errors_are_the_disks() -> None:
    import errno

    from kafkarepl.storage.disk_errors import DISK_ONLY, disk_error

    eio, enoent = OSError(errno.EIO, "io"), OSError(errno.ENOENT, "gone")
    assert disk_error(eio) is eio and disk_error(enoent) is enoent
    wrapped = KafkaStorageError("append failed")
    wrapped.__cause__ = eio
    assert disk_error(wrapped) is eio and disk_error(KafkaStorageError("refused")) is None
    assert disk_error(enoent, DISK_ONLY) is None and disk_error(wrapped, DISK_ONLY) is eio


def test_a_leader_epoch_sync_that_fails_fails_the_dir(failures, tmp_path) -> None:
    """LeaderAndIsr's new epochs are made durable by one syncfs per file system; a file
    system that cannot be synced fails the dirs of its partitions (an epoch that is not
    durable must not be served as if it were), and does not stop the others' sync."""
    from kafkarepl.server.config import BrokerConfig
    from kafkarepl.server.replica_storage import LogStorage
    from kafkarepl.storage.epoch_cache import sync_file_systems

    lm, seen = failures
    storage = LogStorage(lm, BrokerConfig.from_props({"broker.id": "1", "log.dirs": ",".join(map(str, lm.log_dirs))}))
    lg = lm.get_or_create_log("t", 0)
    lg.append_as_leader(batch(), 0, T)
    with storage.deferred_syncs() as pending:
        lg.assign_epoch(3, 3)
        assert str(lg.dir) in pending.dirs
        gone = lm.log_dirs[1] / "t-1"
        gone.write_text("")  # stands for a dir whose file system fails (open fails: ENOTDIR)
        pending.dirs.add(str(gone))
    pending.run()
    assert [d for d, _e in seen] == [lm.log_dirs[1]]  # the healthy dir was synced, the other failed
    assert set(sync_file_systems({str(lg.dir), str(gone)})) == {str(gone)}


def fail_reads(fd: int) -> None:
    """Make every read of `fd` fail with a real EIO: /proc/self/mem put in its place
    answers EIO at the low, unmapped addresses a small segment's positions are."""
    mem = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        os.dup2(mem, fd)
    finally:
        os.close(mem)


def test_a_read_error_takes_the_dir_down_too(failures) -> None:
    """As Kafka's LocalLog.read: a log whose segment cannot be read (EIO) fails its dir,
    and the reader (a fetch) gets KAFKA_STORAGE_ERROR. Before, the OSError reached the
    fetch, answered UNKNOWN_SERVER_ERROR, and the dir went on serving."""
    lm, seen = failures
    lg = lm.get_or_create_log("t", 0)
    other = lm.get_or_create_log("t", 1)
    lg.append_as_leader(batch(), 0, T)
    lg.append_as_leader(batch(), 0, T)
    other.append_as_leader(batch(), 0, T)
    fail_reads(lg.active_segment.fd)
    with pytest.raises(KafkaStorageError) as info:
        lg.read(3, 1 << 20)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == 5
    assert [(d, getattr(e, "errno", None)) for d, e in seen] == [(lm.log_dir_of("t", 0), 5)]
    assert [o for o, *_ in decode(os.pread(other.active_segment.fd, 1 << 20, 0))] == [0, 1, 2]


def test_every_read_of_the_log_reports_a_disk_error(tmp_path) -> None:
    """read (a fetch), offset_for_timestamp (ListOffsets) and aborted_transactions (a
    read_committed fetch) each report an EIO to on_io_error and raise KafkaStorageError;
    a read at the log end reads nothing and fails nothing."""
    from kafkarepl.coordinator.records import build_marker
    from kafkarepl.storage import Log

    lg = Log.open(tmp_path / "t-0", LogConfig())
    seen: list[BaseException] = []
    lg.on_io_error = seen.append
    try:
        lg.append_as_leader(batch(), 0, T)  # 0-2
        lg.append_as_leader(build_batch([b"a"] * 2, timestamp=T, producer_id=7, producer_epoch=0,
                                        base_sequence=0, transactional=True), 0, T)  # 3-4
        lg.append_as_leader(build_marker(7, 0, False, 0, T), 0, T, control_allowed=True)  # 5: abort
        first = lg.read(0, 1)  # the first batch only: where it ends is read from the file
        assert first.size and lg.aborted_transactions(0, 6, first) == []  # the abort is after it
        assert lg.aborted_transactions(0, 6, lg.read(3, 1 << 20))
        fail_reads(lg.active_segment.fd)
        assert lg.read(lg.log_end_offset, 1 << 20).size == 0 and not seen
        for call in (lambda: lg.read(0, 1 << 20), lambda: lg.offset_for_timestamp(T),
                     lambda: lg.aborted_transactions(0, 6, first)):
            with pytest.raises(KafkaStorageError) as info:
                call()
            assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert [getattr(e, "errno", None) for e in seen] == [5, 5, 5]
    finally:
        lg.close_for_deletion()


def test_a_log_that_cannot_be_created_fails_its_dir(failures) -> None:
    """As Kafka's getOrCreateLog: an I/O error creating a partition's log (a dead disk
    answers mkdir with EIO) fails that dir and the LeaderAndIsr gets KAFKA_STORAGE_ERROR;
    before, the OSError went up as it was and the dir stayed online, every other new
    partition landing on it."""
    lm, seen = failures
    d1, d2 = lm.log_dirs
    lm.get_or_create_log("t", 0)  # d1
    lm.get_or_create_log("t", 1)  # d2
    (d1 / "t-2").write_text("not a directory")  # a stand-in for EIO: creating t-2 in d1 fails
    with pytest.raises(KafkaStorageError) as info:
        lm.get_or_create_log("t", 2)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert isinstance(info.value.__cause__, OSError)
    assert [d for d, _ in seen] == [d1]


def test_reading_a_slice_into_memory_reports_a_disk_error(failures) -> None:
    """Log.read_bytes (the coordinators' loads, ListOffsets' record lookup, a JBOD copy)
    fails the dir on EIO as read() does, instead of a bare OSError."""
    lm, seen = failures
    lg = lm.get_or_create_log("t", 0)
    lg.append_as_leader(batch(), 0, T)
    sl = lg.read(0, 1 << 20)
    assert [o for o, *_ in decode(lg.read_bytes(sl.fd, sl.position, sl.size))] == [0, 1, 2]
    # A descriptor whose reads fail with a size (/proc/self/mem has none, so file_pread
    # would read nothing): a directory's, EISDIR.
    d = os.open(lg.dir, os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(d, lg.active_segment.fd)
    os.close(d)
    for position in (sl.position, 0):
        with pytest.raises(KafkaStorageError) as info:
            lg.read_bytes(sl.fd, position, sl.size)
        assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR and isinstance(info.value.__cause__, OSError)
    assert [(d, getattr(e, "errno", None)) for d, e in seen] == [(lm.log_dir_of("t", 0), errno.EISDIR)]


def test_a_move_off_a_failed_dir_drops_its_future_log_even_with_a_long_name(failures) -> None:
    """The source dir fails mid-move: the future log on the healthy dir is renamed to
    Kafka's `<topic>-<partition>.<uuid>-delete` (as long as the future name, so a name
    that fit still fits) and removed; a lone future must not be left to look like a swap."""
    lm, seen = failures
    d1, d2 = lm.log_dirs
    topic = "x" * 213  # the longest whose future log's dir name fits in 255 bytes
    lg = lm.get_or_create_log(topic, 0)
    assert lm.log_dir_of(topic, 0) == d1
    lg.append_as_leader(batch(), 0, T)
    fut = lm.create_future_log(topic, 0, d2)
    assert len(fut.dir.name) == 255
    lm.take_offline(d1)
    assert lm.future_log(topic, 0) is None
    assert lm.wait_for_deletions(10)
    assert not [p.name for p in d2.iterdir() if p.name.startswith(topic)]
