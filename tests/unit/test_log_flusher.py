"""flush.messages off the event loop: the log leaves its flush to its owner (Log.on_flush)
and marks the appends that wait for it (flush_pending); the broker's LogFlusher runs
the fdatasyncs in its thread, one task per log that flushes up to the highest offset
asked meanwhile; produces (acks=1 and acks=all) are answered only once their flush is
done, as Kafka's append returns after flushing."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from pathlib import Path
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.replication import PartitionOrder, ReplicaManager, TopicPartition
from kafkarepl.server.config import BrokerConfig
from kafkarepl.server.log_flusher import LogFlusher
from kafkarepl.server.replica_storage import LogStorage
from kafkarepl.storage.config import LogConfig
from kafkarepl.storage.log import Log
from kafkarepl.storage.manager import LogManager
from tests.batches import build_batch
from tests.unit.test_txn_model import Clock, Outlets

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000


def test_a_log_with_an_owner_leaves_flush_messages_to_it(tmp_path: Path) -> None:
    asked: list[int] = []
    lg = Log.open(tmp_path / "t-0", LogConfig(flush_messages=2))
    lg.on_flush = lambda log_, offset: asked.append(offset)
    lg.append_as_leader(memoryview(build_batch(1)), 0, NOW)
    assert asked == [] and not lg.flush_pending(1)
    lg.append_as_leader(memoryview(build_batch(1)), 0, NOW)
    assert asked == [2] and lg.recovery_point == 0  # nothing synced in the append
    assert lg.flush_pending(2)
    pending = lg.begin_flush(2)
    pending.run()
    lg.complete_flush(pending)
    assert lg.recovery_point == 2 and not lg.flush_pending(2)
    lg.append_as_leader(memoryview(build_batch(1)), 0, NOW)  # the count restarted at the ask
    assert asked == [2] and not lg.flush_pending(3)
    lg.append_as_leader(memoryview(build_batch(1)), 0, NOW)
    assert asked == [2, 4] and lg.flush_pending(4)
    lg.truncate_to(3)  # a truncation: nothing above it waits any more
    assert not lg.flush_pending(4) and lg.flush_pending(3)
    lg.close()


def test_a_log_without_an_owner_flushes_inline(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(flush_messages=2))
    lg.append_as_leader(memoryview(build_batch(2)), 0, NOW)
    assert lg.recovery_point == 2 and not lg.flush_pending(2)
    lg.close()


class Held:
    """A one-thread executor whose thread the test can hold (an fsync taking long)."""

    def __init__(self) -> None:
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="test-flush")
        self.gate = threading.Event()

    def hold(self) -> None:
        self.gate.clear()
        self.executor.submit(self.gate.wait)

    def release(self) -> None:
        self.gate.set()


async def until(check: Any, what: str) -> None:
    for _ in range(5_000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"not within 5 s: {what}")


def test_produces_are_answered_once_their_flush_is_done(tmp_path: Path) -> None:
    async def run() -> None:
        held = Held()
        tasks: set[asyncio.Task] = set()
        flushed: list[int] = []
        rm: ReplicaManager | None = None

        def on_flushed(lg: Log) -> None:
            flushed.append(lg.recovery_point)
            assert rm is not None
            rm.log_flushed(TP)

        def spawn(coro: Any, what: str) -> None:
            t = asyncio.ensure_future(coro)
            tasks.add(t)
            t.add_done_callback(tasks.discard)

        flusher = LogFlusher(held.executor, spawn, on_flushed)
        flusher.active = True
        cfg = BrokerConfig.from_props({"broker.id": "1", "log.dirs": str(tmp_path),
                                       "log.flush.interval.messages": "1"})
        lm = LogManager([tmp_path], LogConfig(flush_messages=1), on_flush=flusher.request)
        out = Outlets()
        clock = Clock()
        clock.now = NOW  # the batches' timestamps
        rm = ReplicaManager(1, LogStorage(lm, cfg), out, out, clock)
        rm.broker_epoch = 5
        err, res = rm.become_leader_or_follower(1, 5, [PartitionOrder(TP, 1, 0, (1,), (1,), 0)], {})
        assert err is ErrorCode.NONE and res[TP] is ErrorCode.NONE
        lg = lm.get_log(TP.topic, TP.partition)
        assert lg is not None

        answers: list[tuple[int, Any]] = []
        held.hold()
        for acks in (1, -1, 1):
            rm.append_records(5_000, acks, {TP: memoryview(build_batch(2))},
                              lambda results, a=acks: answers.append((a, results[TP])))
            await asyncio.sleep(0.01)  # the first one's flush begins (and waits for the thread)
        await asyncio.sleep(0.05)
        assert answers == [], "answered before the flush"
        assert lg.log_end_offset == 6 and lg.recovery_point == 0
        # acks=0 is never answered and never waits: appended all the same
        rm.append_records(5_000, 0, {TP: memoryview(build_batch(1))}, lambda results: None)
        waiting = asyncio.ensure_future(flusher.flushed([lg]))  # a follower's next fetch
        await asyncio.sleep(0.01)
        assert not waiting.done()
        held.release()
        await until(lambda: len(answers) == 3, "the three answers")
        assert [(a, r.error, r.base_offset) for a, r in answers] == [
            (1, ErrorCode.NONE, 0), (-1, ErrorCode.NONE, 2), (1, ErrorCode.NONE, 4)]
        await asyncio.wait_for(waiting, 5)
        assert lg.recovery_point == 7
        # The appends that came while the first fsync was held shared the next flush.
        assert flushed == [2, 7], flushed
        await until(lambda: not tasks, "the flush task to end")
        held.executor.shutdown()
        lm.shutdown({})

    asyncio.run(run())


def test_a_failed_flush_ends_its_task_and_releases_its_waiters(tmp_path: Path, monkeypatch) -> None:
    """An fdatasync error (EIO) is the log dir's failure (reported by PendingFlush.run,
    which takes the dir offline): the flush task stops instead of retrying, the recovery
    point stays, and a follower waiting on it goes on (its partition leaves with the dir)."""
    import errno

    from kafkarepl import _core

    async def run() -> None:
        tasks: set[asyncio.Task] = set()
        flushed: list[Log] = []
        errors: list[BaseException] = []

        def spawn(coro: Any, what: str) -> None:
            t = asyncio.ensure_future(coro)
            tasks.add(t)
            t.add_done_callback(tasks.discard)

        executor = concurrent.futures.ThreadPoolExecutor(1)
        flusher = LogFlusher(executor, spawn, flushed.append)
        flusher.active = True
        lg = Log.open(tmp_path / "t-0", LogConfig(flush_messages=1))
        lg.on_flush = flusher.request
        lg.on_io_error = errors.append

        def eio(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(_core, "file_fdatasync", eio)
        lg.append_as_leader(memoryview(build_batch(2)), 0, NOW)
        assert lg.flush_pending(2)
        await asyncio.wait_for(flusher.flushed([lg]), 5)
        await until(lambda: not tasks, "the flush task to end")
        assert flushed == [] and lg.recovery_point == 0
        assert len(errors) == 1 and isinstance(errors[0], OSError)
        executor.shutdown()
        monkeypatch.undo()
        lg.close()

    asyncio.run(run())
