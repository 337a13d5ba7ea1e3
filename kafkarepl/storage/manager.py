"""LogManager: every partition log under log.dirs, plus the broker-level checkpoints.

Each log dir holds partition directories and three checkpoint files (HW, recovery
point, log start offset; see storage.checkpoints). A clean shutdown leaves the
`.kafka_cleanshutdown` marker, which lets the next start skip recovery scans; the marker
is removed once the logs are loaded, so a crash from then on is detected.

JBOD moves (AlterReplicaLogDirs): a replica moving to another log dir has a future log
there, `<topic>-<partition>.<uuid>-future`, filled from the current one (storage.log_copy,
driven by server.log_dir_mover). The swap (replace_current_with_future), in the loop step
that copied the last bytes (nothing is appended between), goes:

1. the future log marked complete: a SWAP_MARKER file created in its directory, holding
   the log start offset, fsynced with that directory; from then on the marker says "this
   future log holds every batch of the current one" (the copy's bytes are as durable as
   the current log's: flushed by the mover up to the current log's recovery point), and
   where it starts (a DeleteRecords may have moved the start inside the first segment:
   the log-start checkpoint of the future's dir does not list the partition);
2. the current directory renamed to a `-delete` name, fsync of its log dir: the commit
   point;
3. the future directory renamed to `<topic>-<partition>`, fsync of its log dir;
4. the marker removed (not fsynced: see below).

Startup reads the outcome from what it finds (each step's effect is durable before the
next begins, so a crash at any point, power loss included, leaves one of these):

- a crash before 1 is durable: the current log and an unmarked future one; after 1,
  before 2: the current log and a marked future one. Either way the current log is the
  partition's: the future is dropped and the move restarted (`pending_moves`);
- after 2, before 3: a lone marked future log (and a `-delete` dir, finished): the swap
  had committed, it becomes the current log (and loses its marker);
- after 3 (marker removal lost or not): the current log, now in the new dir. A marker
  left in a current log's directory is never read: only a future directory's is, and a
  future directory is always made new (a fresh uuid name), so it cannot confuse a later
  move of the partition.

A lone future log WITHOUT the marker is not a swap: it is a partial copy whose current log
is gone although its dir is there (the disk was replaced by an empty one, or the dir
emptied, while the move ran). Taking it for the partition's log would serve a short log
as if it were whole, so it is dropped (renamed to `-delete`, an error logged) and the
broker has no replica of the partition: as after a disk replaced by an empty one, the
replica is created empty when the controller's LeaderAndIsr names it (in the move's
destination dir, remembered as the preferred dir) and fetched from the leader. While
some log dir is offline at startup, a lone future log, marked or not, is served neither
way: its current log may be on that dir (the partition stays offline until a restart).

Kafka's LogManager.replaceCurrentWithFutureLog renames the other way round (the future to
the partition's name first, then the current one to `-delete`); a crash between leaves two
`<topic>-<partition>` dirs and its loadLogs refuses to start ("Duplicate log directories
..."), for the operator to delete one. Its loadLogs never promotes a lone future log by
itself: it is loaded as a future log (ZooKeeper mode), or promoted once the controller's
metadata names its dir (KRaft, recoverAbandonedFutureLogs: the metadata is Kafka's mark
that the swap had begun). Here the marker file plays that part.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from kafkarepl import _core
from kafkarepl.errors import (
    CheckpointCorruptError,
    ErrorCode,
    KafkaError,
    KafkaStorageError,
)
from kafkarepl.storage.checkpoints import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
    read_offsets,
    write_offsets,
)
from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.disk_errors import disk_error
from kafkarepl.storage.fsync import fsync_dir
from kafkarepl.storage.janitor import JANITOR
from kafkarepl.storage.log import CLEAN_SHUTDOWN_FILE, Log, PendingFlush, parse_partition_dir
from kafkarepl.storage.log_copy import FUTURE_SUFFIX, future_dir_name, parse_future_dir

log = logging.getLogger("kafkarepl.storage")

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
DELETE_SUFFIX = "-delete"
LOCK_FILE = ".lock"
# In a future log's dir: the swap has begun, the future log holds every batch (module docstring).
SWAP_MARKER = ".swap_started"


class LogManager:
    def __init__(self, log_dirs: list[str] | list[Path], default_config: LogConfig,
                 topic_configs: Mapping[str, LogConfig] | None = None, *,
                 on_dir_failure: Callable[[Path, BaseException, int], None] | None = None,
                 on_flush: Callable[[Log, int], None] | None = None) -> None:
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [Path(d) for d in log_dirs]
        # Each dir's name as Kafka's LogManager has it (File.getAbsolutePath, against the
        # working directory at start): what DescribeLogDirs reports and what
        # AlterReplicaLogDirs must name exactly (log_dir).
        self._dir_names = {Path(d): java_absolute_path(str(d)) for d in log_dirs}
        # An I/O error writing to a log dir (Kafka's LogDirFailureChannel): called once per
        # dir, from whatever thread saw it, with the number of dirs not failed; the broker
        # takes that dir offline (take_offline), or halts when none is left.
        self.on_dir_failure = on_dir_failure
        # The flushes every log leaves to its owner (Log.on_flush: rolls, flush.messages):
        # the broker runs them off its event loop.
        self.on_flush = on_flush
        self.failed_dirs: set[Path] = set()  # reported (any thread)
        self.offline_dirs: set[Path] = set()  # taken offline (take_offline, the owner's thread)
        self.offline_partitions: set[TopicPartition] = set()
        self._failure_lock = threading.Lock()
        self.default_config = default_config
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._dir_counts: Counter[Path] | None = None
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        self._lock_fds: list[int] = []
        # JBOD moves: future logs being filled, the dir a replica not created yet is to be
        # created in (Kafka's preferredLogDirs), moves found interrupted at startup.
        self._futures: dict[TopicPartition, Log] = {}
        self._preferred: dict[TopicPartition, Path] = {}
        self.pending_moves: dict[TopicPartition, Path] = {}

    # ------------------------------------------------------------------ startup
    def startup(self) -> None:
        """Load every log of every dir, recovering those of dirs without the marker. A dir
        that cannot be created, locked or read is offline from the start (KIP-112), as
        long as another one loads; KafkaStorageError when none does."""
        try:
            for d in self.log_dirs:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                    self._lock(d)
                except OSError as exc:
                    self._offline_at_startup(d, exc)
            if not self.live_dirs():
                raise KafkaStorageError(f"no log dir could be used: {', '.join(map(str, self.log_dirs))}")
        except BaseException:
            self.release_locks()
            raise
        futures: list[tuple[TopicPartition, Path]] = []
        all_hws: dict[TopicPartition, int] = {}
        for d in self.live_dirs():
            try:
                self._load_dir(d, futures, all_hws)
            except (OSError, KafkaStorageError) as exc:
                if disk_error(exc) is None:
                    raise  # not the disk (e.g. a partition in two dirs)
                self._offline_at_startup(d, exc)
        if not self.live_dirs():
            self.release_locks()
            raise KafkaStorageError(f"no log dir could be loaded: {', '.join(map(str, self.log_dirs))}")
        for tp, path in futures:
            if path.parent in self.offline_dirs:
                continue
            if tp not in self._logs and self.offline_dirs:
                # Alone, it would be a swap to complete; but its current log may be on an
                # offline dir, and then it is a partial copy: serve neither, keep both.
                log.error("%s: the current log of %s-%d may be on an offline log dir; the partition is "
                          "offline until a restart", path, *tp)
                self.offline_partitions.add(tp)
                continue
            self._load_future(tp, path, all_hws.get(tp, 0))

    def _offline_at_startup(self, d: Path, exc: BaseException) -> None:
        log.error("Error while loading log dir %s: %s; it is offline until a restart", d, exc)
        self.failed_dirs.add(d)
        self.take_offline(d)  # the logs it loaded before the error go too

    def _load_dir(self, d: Path, futures: list[tuple[TopicPartition, Path]],
                  all_hws: dict[TopicPartition, int]) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[d] = clean
        recovery = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT,
                                         "every log in this dir is recovered from offset 0")
        starts = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT,
                                       "log start offsets fall back to the first segment")
        hws = self._read_checkpoint(d / HIGH_WATERMARK_CHECKPOINT,
                                    "high watermarks restart at 0 and are recomputed")
        all_hws.update(hws)
        for entry in sorted(os.listdir(d)):
            path = d / entry
            if not path.is_dir():
                continue
            if entry.endswith(DELETE_SUFFIX):
                log.info("finishing the deletion of %s", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if entry.endswith(FUTURE_SUFFIX):
                future_tp = parse_future_dir(entry)
                if future_tp is None:
                    log.warning("ignoring %s: not a future log directory", path)
                else:
                    futures.append((future_tp, path))
                continue
            try:
                tp = parse_partition_dir(entry)
            except ValueError:
                log.warning("ignoring %s: not a partition directory", path)
                continue
            if tp in self._logs:
                raise KafkaStorageError(
                    f"{tp[0]}-{tp[1]} exists in both {self._dir_of[tp]} and {d}")
            cfg = self.topic_configs.get(tp[0], self.default_config)
            lg = Log.open(path, cfg, recovery.get(tp, 0), starts.get(tp),
                          clean_shutdown=clean, lazy_empty=True)
            self._watch(lg, d)
            self._logs[tp] = lg
            self._dir_of[tp] = d
            self.high_watermarks[tp] = min(hws.get(tp, 0), lg.log_end_offset)
        if clean:
            marker.unlink()
            fsync_dir(d)

    def _load_future(self, tp: TopicPartition, path: Path, hw: int) -> None:
        """A future log found at startup (see the module docstring): with its current log,
        a move a crash (or a stop) interrupted: dropped, and remembered to be started again;
        alone and marked, a swap that had renamed the current log away: the future held
        every batch, it becomes current; alone and unmarked, a partial copy whose current
        log is gone: dropped, the replica is recreated empty and fetched from the leader."""
        d = path.parent
        if tp in self._logs:
            log.info("%s: a move of %s-%d to %s was interrupted; it starts again", path, *tp, d)
            self._remove_dir(path)
            if tp in self._logs and self._dir_of[tp] != d:
                self.pending_moves[tp] = d
            return
        if not (path / SWAP_MARKER).exists():
            log.error("%s: a future log of %s-%d whose current log is in no log dir, and the swap had not "
                      "begun: a partial copy (was the current log's disk replaced by an empty one?). It is "
                      "dropped: this broker has no replica of %s-%d until the controller names it, then "
                      "the replica is created empty in %s and fetched from the leader", path, *tp, *tp, d)
            self._remove_dir(path)
            self._preferred[tp] = d  # where the move was going
            return
        current = d / f"{tp[0]}-{tp[1]}"
        log.warning("%s: the swap with the current log of %s-%d was interrupted; completing it",
                    path, *tp)
        start = _marked_log_start(path / SWAP_MARKER)
        os.rename(path, current)
        fsync_dir(d)
        (current / SWAP_MARKER).unlink(missing_ok=True)  # not fsynced: a current log's marker is never read
        cfg = self.topic_configs.get(tp[0], self.default_config)
        lg = Log.open(current, cfg, 0, start, clean_shutdown=False, lazy_empty=True)
        self._watch(lg, d)
        self._logs[tp] = lg
        self._dir_of[tp] = d
        self.high_watermarks[tp] = min(hw, lg.log_end_offset)

    @staticmethod
    def _remove_dir(path: Path, durable: bool = True) -> None:
        """Renamed to `<topic>-<partition>.<uuid>-delete` (Kafka's name: a future log's is
        as long, so no name grows past what the dir may hold), made durable unless told
        not to (an fsync: not on the event loop), then removed on the janitor thread."""
        doomed = _delete_name(path)
        os.rename(path, doomed)
        if durable:
            fsync_dir(path.parent)
        JANITOR.remove_tree(doomed)

    def _lock(self, d: Path) -> None:
        """flock `<dir>/.lock` as Kafka does: two brokers on one log dir would corrupt it.
        The kernel drops the lock when the process dies, even by kill -9."""
        fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise KafkaStorageError(f"{d} is in use by another LogManager (locked {LOCK_FILE})") from None
        self._lock_fds.append(fd)

    def release_locks(self) -> None:
        for fd in self._lock_fds:
            os.close(fd)
        self._lock_fds.clear()

    @staticmethod
    def _read_checkpoint(path: Path, fallback: str) -> dict[TopicPartition, int]:
        try:
            return read_offsets(path)
        except CheckpointCorruptError as exc:
            log.error("%s; not trusting it: %s", exc, fallback)
            return {}

    # ------------------------------------------------------------------ logs
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int,
                          config: LogConfig | None = None, *, is_new: bool = True) -> Log:
        """The partition's log, created on the log dir holding the fewest partitions.
        A given config becomes the topic's config for logs created or loaded later.
        Not is_new (a replica that should exist) while a log dir is offline: refused, as
        Kafka, since its log may be on that dir (an empty one here could be elected)."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            if config is not None:
                existing.config = config
            return existing
        if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
            raise KafkaError(f"illegal topic name {topic!r}", ErrorCode.INVALID_TOPIC_EXCEPTION)
        if partition < 0:
            raise KafkaError(f"negative partition {partition}", ErrorCode.INVALID_PARTITIONS)
        if config is not None:
            self.topic_configs[topic] = config
        cfg = self.topic_configs.get(topic, self.default_config)
        live = self.live_dirs()
        if tp in self.offline_partitions or not live:
            raise KafkaStorageError(f"{topic}-{partition}: its log dir is offline")
        if not is_new and self.offline_dirs:
            raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log directories "
                                    f"{','.join(str(d) for d in sorted(self.offline_dirs))} are offline")
        d = live[0]
        preferred = self._preferred.pop(tp, None)
        if preferred is not None and preferred not in self.offline_dirs:
            d = preferred  # AlterReplicaLogDirs named it before the replica came
            if self._dir_counts is not None:
                self._dir_counts[d] += 1
        elif len(live) > 1:
            counts = self._partitions_per_dir()
            d = min(live, key=lambda x: counts[x])  # first dir wins ties
            counts[d] += 1
        try:
            try:
                lg = Log.create(d / f"{topic}-{partition}", cfg)
            except FileExistsError:  # left behind (e.g. not yet loaded): open what is there
                lg = Log.open(d / f"{topic}-{partition}", cfg, clean_shutdown=False, lazy_empty=True)
        except OSError as exc:  # the disk's (EIO): the dir fails, as Kafka's getOrCreateLog
            self.dir_failed(d, exc)
            raise KafkaStorageError(f"Error while creating log for {topic}-{partition} in dir {d}: {exc}") from exc
        lg.dir_entry_durable = False  # the first flush fsyncs d (see Log)
        self._watch(lg, d)
        self._logs[tp] = lg
        self._dir_of[tp] = d
        self.high_watermarks.setdefault(tp, 0)
        return lg

    def _partitions_per_dir(self) -> Counter[Path]:
        # Counted once, then kept up to date by creations (a recount after a deletion):
        # creating many partitions stays linear.
        if self._dir_counts is None:
            self._dir_counts = Counter(self._dir_of.values())
        return self._dir_counts

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and remove its directory: renamed to `<dir>.<uuid>-delete` first
        (atomic), so a crash mid-delete leaves a name startup finishes deleting; its files
        are removed on a background thread. A future log goes first: a crash between the
        two leaves no lone future log (one with the swap's marker would be taken for a swap)."""
        tp = (topic, partition)
        self._preferred.pop(tp, None)
        self.pending_moves.pop(tp, None)
        self.abort_future(tp)
        lg = self._logs.pop(tp, None)
        if lg is None:
            return
        self._dir_of.pop(tp, None)
        self._dir_counts = None
        self.high_watermarks.pop(tp, None)
        lg.close_for_deletion()
        self._remove_dir(lg.dir)

    # ------------------------------------------------------------------ JBOD moves
    def log_dir(self, path: str) -> Path | None:
        """The configured log dir `path` names, or None. As Kafka's LogManager.isLogDirOnline,
        `path` must be the dir's name exactly (dir_name: absolute, as java.io.File
        normalizes it): it is compared as sent, not resolved or normalized, so a relative
        path, a trailing slash, a doubled slash or a `.` component names no dir (Kafka
        answers LOG_DIR_NOT_FOUND for each)."""
        for d in self.log_dirs:
            if self._dir_names[d] == path:
                return d
        return None

    def dir_name(self, d: Path) -> str:
        """Log dir `d`'s name in DescribeLogDirs (Kafka's File.getAbsolutePath)."""
        return self._dir_names.get(d) or java_absolute_path(str(d))

    def preferred_count(self) -> int:
        return len(self._preferred)

    def set_preferred_dir(self, topic: str, partition: int, d: Path) -> None:
        """Kafka's maybeUpdatePreferredLogDir: a replica not created yet is created in `d`."""
        self._preferred[(topic, partition)] = d

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._futures.get((topic, partition))

    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._futures)

    def create_future_log(self, topic: str, partition: int, d: Path) -> Log:
        """An empty future log of the partition in log dir `d` (not its current one). The
        caller makes its directory entry durable (fsync of `d`) before relying on it."""
        tp = (topic, partition)
        current = self._logs.get(tp)
        if current is None:
            raise KafkaStorageError(f"{topic}-{partition} has no log here")
        if tp in self._futures:
            raise KafkaStorageError(f"{topic}-{partition} already has a future log")
        if self._dir_of[tp] == d:
            raise KafkaStorageError(f"{topic}-{partition} is already in {d}")
        if d in self.offline_dirs:
            raise KafkaStorageError(f"log dir {d} is offline")
        try:
            fut = Log.create(d / future_dir_name(topic, partition), current.config)
        except OSError as exc:
            self.dir_failed(d, exc)
            raise KafkaStorageError(f"Error while creating future log for {topic}-{partition} in dir {d}") \
                from exc
        self._watch(fut, d, flushes=False)  # filled on the mover's thread, which flushes it
        fut.dir_entry_durable = False
        self._futures[tp] = fut
        return fut

    def abort_future(self, tp: TopicPartition) -> None:
        """Drop the partition's future log (the move is cancelled), if any."""
        fut = self._futures.pop(tp, None)
        if fut is None:
            return
        fut.close_for_deletion()
        self._remove_dir(fut.dir)

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Make the future log, holding every batch of the current one, the partition's
        log; returns it. The future is marked, then the current directory renamed to a
        `-delete` name, then the future one to the partition's name, each step durable
        before the next (see the module docstring); the old files go on the janitor's
        thread. Blocking for three fsyncs of directories and one of an empty file.

        An error before the current log's rename (the commit point) leaves it the
        partition's log, open, and the future one registered: the caller drops that
        (abort_future), so no marked future outlives a swap that did not happen. After
        it, the future is the partition's log and a disk error fails its log dir instead
        of raising."""
        tp = (topic, partition)
        source, fut = self._logs[tp], self._futures[tp]
        old_dir, new_parent = self._dir_of[tp], fut.dir.parent
        _write_marker(fut.dir / SWAP_MARKER, b"%d\n" % fut.log_start_offset)
        source.rename_dir(_delete_name(source.dir))
        del self._futures[tp]  # committed (durable with the fsync below)
        source.close_for_deletion()
        self._logs[tp] = fut
        fut.on_flush = self.on_flush
        self._dir_of[tp] = new_parent
        self._dir_counts = None
        # Past the commit point the swap stands, whatever fails: a disk error fails its
        # dir (Kafka's logDirFailureChannel), which takes the partition offline if it is
        # the new one; the next start completes the swap from what is durable. The old
        # files go only once their rename away is durable: unlinks that outlived a lost
        # rename would leave a damaged log under the partition's name.
        try:
            fsync_dir(old_dir)
            JANITOR.remove_tree(source.dir)
        except OSError as exc:
            self.dir_failed(old_dir, exc)  # the next start of that dir finishes the deletion
        try:
            fut.rename_dir(new_parent / f"{topic}-{partition}")
            fsync_dir(new_parent)
        except OSError as exc:
            self.dir_failed(new_parent, exc)
            return fut
        fut.dir_entry_durable = True
        try:  # not fsynced, nor needed: a marker in a current log's dir is never read
            (fut.dir / SWAP_MARKER).unlink()
        except OSError as exc:
            log.warning("%s: could not remove the swap marker (harmless): %s", fut.dir, exc)
        return fut

    def wait_for_deletions(self, timeout: float | None = None) -> bool:
        """Until the directories of deleted logs are removed (shutdown waits for them)."""
        return JANITOR.wait(timeout)

    # ------------------------------------------------------------------ log dir failure
    def _watch(self, lg: Log, d: Path, flushes: bool = True) -> None:
        lg.on_io_error = functools.partial(self.dir_failed, d)
        lg.on_flush = self.on_flush if flushes else None

    def dir_failed(self, d: Path, exc: BaseException) -> None:
        """An I/O error on log dir `d` (a log's creation, write, flush or read, a checkpoint):
        reported once per dir to on_dir_failure. Thread-safe."""
        with self._failure_lock:
            if d in self.failed_dirs:
                return
            self.failed_dirs.add(d)
            remaining = len(set(self.log_dirs) - self.failed_dirs)
        log.error("log dir %s failed: %s", d, exc)
        if self.on_dir_failure is not None:
            self.on_dir_failure(d, exc, remaining)

    def metrics(self) -> dict[str, float]:
        """Kafka's LogManager gauges: OfflineLogDirectoryCount, LogDirectoryOffline per dir."""
        out: dict[str, float] = {"kafka_log_logmanager_offlinelogdirectorycount": len(self.offline_dirs)}
        for d in self.log_dirs:
            out[f'kafka_log_logmanager_logdirectoryoffline{{logDirectory="{d}"}}'] = int(d in self.offline_dirs)
        return out

    def live_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def take_offline(self, d: Path) -> list[TopicPartition]:
        """Stop using failed log dir `d` (KIP-112; on the thread that owns the logs): its
        logs and future logs are closed unflushed (nothing more is written to a disk
        whose state is unknown) and forgotten; their partitions are listed in
        offline_partitions, which refuses to create them again until a restart.
        Returns the partitions of current logs that went offline."""
        if d in self.offline_dirs:
            return []
        self.offline_dirs.add(d)
        gone = sorted(tp for tp, x in self._dir_of.items() if x == d)
        for tp in gone:
            lg = self._logs.pop(tp)
            self._dir_of.pop(tp, None)
            self.high_watermarks.pop(tp, None)
            self.offline_partitions.add(tp)
            lg.on_io_error = None
            lg.close_for_deletion()  # descriptors closed later: a fetch may still be sending
        for tp, fut in list(self._futures.items()):
            if fut.dir.parent == d or tp in self.offline_partitions:
                del self._futures[tp]  # a move to or from the failed dir: called off
                fut.on_io_error = None
                fut.close_for_deletion()
                if fut.dir.parent != d:
                    # Renamed to -delete first (never a half-removed future dir). Not fsynced
                    # (this runs on the event loop): if the rename is lost, the next start finds
                    # the future (unmarked: no swap began) with its current log (a move to start
                    # over), alone while that dir is offline (kept offline), or alone (dropped).
                    try:
                        self._remove_dir(fut.dir, durable=False)
                    except OSError as exc:
                        log.warning("could not remove %s: %s", fut.dir, exc)
        self._preferred = {tp: x for tp, x in self._preferred.items() if x != d}
        self._dir_counts = None
        log.error("Logs for partitions %s are offline due to failure on log directory %s",
                  ",".join(f"{t}-{p}" for t, p in gone), d)
        return gone

    def _write_checkpoint(self, d: Path, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            write_offsets(d / name, offsets)
        except OSError as exc:
            self.dir_failed(d, exc)
            raise KafkaStorageError(f"{d / name}: checkpoint write failed: {exc}") from exc

    # ------------------------------------------------------------------ checkpoints
    def _by_dir(self, values: Mapping[TopicPartition, int]) -> dict[Path, dict]:
        out: dict[Path, dict] = {d: {} for d in self.live_dirs()}
        for tp, d in list(self._dir_of.items()):  # the loop may change it meanwhile
            bucket = out.get(d)  # None: a dir taken offline meanwhile
            if bucket is not None and tp in values:
                bucket[tp] = values[tp]
        return out

    def checkpoint_high_watermarks(self, hws: Mapping[TopicPartition, int]) -> None:
        self.high_watermarks.update({tp: hw for tp, hw in hws.items() if tp in self._logs})
        # A snapshot: the broker calls this from an I/O thread while the loop may add logs.
        for d, offsets in self._by_dir(dict(self.high_watermarks)).items():
            self._write_checkpoint(d, HIGH_WATERMARK_CHECKPOINT, offsets)

    def recovery_points(self) -> dict[TopicPartition, int]:
        """Every log's recovery point, taken on the thread that owns the logs."""
        return {tp: lg.recovery_point for tp, lg in self._logs.items()}

    def checkpoint_recovery_points(self, points: Mapping[TopicPartition, int] | None = None) -> None:
        """Write the recovery points: `points` (recovery_points() taken on the owning
        thread, so this may run on another), or read now."""
        points = self.recovery_points() if points is None else points
        for d, offsets in self._by_dir(points).items():
            self._write_checkpoint(d, RECOVERY_POINT_CHECKPOINT, offsets)

    def log_start_offsets(self) -> dict[TopicPartition, int]:
        """Every log's start offset, taken on the thread that owns the logs."""
        return {tp: lg.log_start_offset for tp, lg in self._logs.items()}

    def checkpoint_log_start_offsets(self, starts: Mapping[TopicPartition, int] | None = None) -> None:
        """Write the log start offsets: `starts` (log_start_offsets() taken on the owning
        thread, so this may run on another), or read now."""
        starts = self.log_start_offsets() if starts is None else starts
        for d, offsets in self._by_dir(starts).items():
            self._write_checkpoint(d, LOG_START_OFFSET_CHECKPOINT, offsets)

    # ------------------------------------------------------------------ periodic work
    def flush_dirty(self, now_ms: int | None = None) -> int:
        """Flush logs whose flush.ms elapsed with unflushed data (flush.messages is
        enforced on append); checkpoints the recovery points when any moved. Returns
        how many logs were flushed. Blocking (fdatasync); for the event loop, use
        Log.begin_flush / PendingFlush.run (in a thread) / Log.complete_flush."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        due = self.begin_due_flushes(now_ms)
        for lg, pending in due:
            pending.run()
            lg.complete_flush(pending)
        if due:
            self.checkpoint_recovery_points()
        return len(due)

    def begin_due_flushes(self, now_ms: int) -> list[tuple[Log, PendingFlush]]:
        """flush_dirty's first step, on the thread that owns the logs: the flushes that
        flush.ms says are due, begun (PendingFlush.run off that thread, then
        Log.complete_flush back on it)."""
        return [(lg, lg.begin_flush()) for lg in list(self._logs.values()) if self.flush_due(lg, now_ms)]

    @staticmethod
    def flush_due(lg: Log, now_ms: int) -> bool:
        """Whether flush.ms says `lg` should be flushed now."""
        flush_ms = lg.config.flush_ms
        return (flush_ms is not None and lg.recovery_point < lg.log_end_offset
                and now_ms - lg.last_flush_ms >= flush_ms)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """producer.id.expiration.ms over every log; returns how many ids were forgotten."""
        return sum(lg.expire_producers(now_ms, expiration_ms) for lg in list(self._logs.values()))

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; checkpoints log start offsets when any moved."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        deleted = sum(lg.delete_old_segments(now_ms) for lg in list(self._logs.values()))
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    def _sync_log_dirs(self) -> None:
        for d in self.live_dirs():
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                _core.file_syncfs(fd)
            finally:
                os.close(fd)

    def shutdown(self, hws: Mapping[TopicPartition, int] | None = None) -> None:
        """Flush and close every log, write all checkpoints, then the clean marker.
        Idempotent: a second call does nothing (it must not overwrite the checkpoints
        with empty ones)."""
        if not self._lock_fds and not self._logs:
            return
        JANITOR.wait(30)  # removals under way end before the clean marker
        # Every log's unflushed data, then (below) every producer snapshot, made durable
        # by one syncfs per file system instead of an fsync per file: with thousands of
        # partitions those fsyncs were most of a clean stop's time.
        pending = [(lg, lg.begin_flush()) for lg in self._logs.values()]
        for _, p in pending:
            p.release()
        self._sync_log_dirs()
        for lg, p in pending:
            lg.complete_flush(p)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks(hws or {})
        for lg in self._logs.values():
            lg.close(sync=False)
        for fut in self._futures.values():  # unfinished moves: dropped and restarted at open
            fut.close(sync=False)
        self._futures.clear()
        for d in self.log_dirs:  # nothing reads deleted segments any more: no delay
            JANITOR.close_now(d)
        JANITOR.wait(30)  # their space is free when a stop returns
        self._sync_log_dirs()
        for d in self.live_dirs():  # a failed dir is recovered at the next start
            _write_marker(d / CLEAN_SHUTDOWN_FILE)
        self._logs.clear()
        self._dir_of.clear()
        self._dir_counts = None
        self.release_locks()


def _delete_name(path: Path) -> Path:
    """`<topic>-<partition>.<uuid>-delete` beside `path` (a log's or a future log's dir),
    Kafka's name for a dir being deleted; startup finishes the deletion of such dirs."""
    future = parse_future_dir(path.name)
    base = f"{future[0]}-{future[1]}" if future is not None else path.name
    return path.with_name(f"{base}.{uuid.uuid4().hex}{DELETE_SUFFIX}")


def _write_marker(path: Path, content: bytes = b"") -> None:
    """A small file, durable: the file and its directory entry fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if content:
            os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def _marked_log_start(marker: Path) -> int | None:
    """The log start offset a swap marker holds; None (the first segment's base, as
    without a checkpoint) for an empty or unreadable one."""
    try:
        text = marker.read_text().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def java_absolute_path(path: str, cwd: str | None = None) -> str:
    """`new File(path).getAbsolutePath()` on Unix, as Kafka names its log dirs: doubled
    slashes collapsed and a trailing one dropped (java.io.UnixFileSystem.normalize), a
    relative path put under the working directory; `.` and `..` are left as they are."""
    def normalize(p: str) -> str:
        p = re.sub("/{2,}", "/", p)
        return p[:-1] if len(p) > 1 and p.endswith("/") else p

    p = normalize(path)
    if p.startswith("/"):
        return p
    base = normalize(cwd if cwd is not None else os.getcwd())
    if not p:
        return base
    return base + p if base == "/" else f"{base}/{p}"
