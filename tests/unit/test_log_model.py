"""Hypothesis state machine: storage.Log against an in-memory list of batches.

Appends, reads, rolls, truncations, retention, clean reopen and crash (with a torn
tail) are interleaved at random on a log with tiny segments, and every read must
return exactly the batches the model holds. A follower log replicates the leader
through read + append_as_follower and must hold the same bytes and epochs.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkarepl.storage import Log, LogConfig
from kafkarepl.storage.janitor import JANITOR
from tests.batches import build_batch

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=600, index_interval_bytes=90, segment_index_bytes=96)


def crash(log: Log) -> None:
    for seg in log.segments:
        for idx in (seg.offset_index, seg.time_index):
            if idx._mm is not None:
                idx._mm.close()
            if idx._fd >= 0:  # an empty segment has no index files yet
                os.close(idx._fd)
        if seg.fd >= 0:  # an empty segment has no file yet
            os.close(seg.fd)
    # A killed process's janitor dies with it: a roll's index shrink has run or never
    # will. This process's must not run after the reopen below (the new mapping of the
    # longer file would fault past its end, SIGBUS).
    JANITOR.wait(30)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="logmodel"))
        self.dir = self.root / "m-0"
        self.log = Log.open(self.dir, CFG, clean_shutdown=False)
        self.follower = Log.open(self.root / "f-0", CFG, clean_shutdown=False)
        self.batches: list[tuple[int, int, bytes]] = []  # (base, last, bytes)
        self.start = 0
        self.leo = 0
        self.epoch = 0

    def teardown(self) -> None:
        self.log.close()
        self.follower.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- model helpers -------------------------------------------------------------
    def expected_from(self, offset: int) -> list[tuple[int, int, bytes]]:
        return [b for b in self.batches if b[1] >= offset]

    def read_all(self, offset: int) -> bytes:
        out = b""
        while offset < self.log.log_end_offset:
            s = self.log.read(offset, 1 << 20)
            assert s.size > 0
            out += os.pread(s.fd, s.size, s.position)
            offset = self.log.read(offset, 1).first_offset
            # advance past the batches just read
            nxt = [b for b in self.batches if b[0] >= offset]
            total, last = 0, offset
            for b in nxt:
                if total + len(b[2]) > s.size:
                    break
                total += len(b[2])
                last = b[1]
            offset = last + 1
        return out

    # -- rules ---------------------------------------------------------------------
    @rule(n=st.integers(1, 4), codec=st.sampled_from(["none", "gzip", "lz4"]),
          bump=st.booleans(), count=st.integers(1, 3))
    def append(self, n, codec, bump, count):
        if bump:
            self.epoch += 1
        bufs = [build_batch(n, compression=codec, timestamp=T0 + self.leo) for _ in range(count)]
        buf = bytearray().join(bufs)
        info = self.log.append_as_leader(buf, self.epoch, T0)
        assert info.first_offset == self.leo
        pos = 0
        for b in bufs:
            self.batches.append((self.leo, self.leo + n - 1, bytes(buf[pos:pos + len(b)])))
            pos += len(b)
            self.leo += n

    @precondition(lambda self: self.leo > self.start)
    @rule(data=st.data(), max_bytes=st.integers(1, 600))
    def read(self, data, max_bytes):
        offset = data.draw(st.integers(self.start, self.leo - 1))
        s = self.log.read(offset, max_bytes)
        got = os.pread(s.fd, s.size, s.position)
        exp = self.expected_from(offset)
        assert s.first_offset == exp[0][0]
        assert got.startswith(exp[0][2])  # at least the whole batch holding `offset`
        joined = b""
        for b in exp:
            if len(joined) == len(got):
                break
            joined += b[2]
        assert joined == got  # only whole batches, in order
        assert len(got) <= max_bytes or len(got) == len(exp[0][2])

    @rule()
    def read_everything(self):
        assert self.read_all(self.start) == b"".join(b[2] for b in self.batches)

    @rule(max_bytes=st.integers(1, 2000))
    def replicate(self, max_bytes):
        """The follower fetches from its LEO (as a replica fetcher would) until caught up."""
        f = self.follower
        if f.log_end_offset < self.start:  # fell behind retention
            f.truncate_fully_and_start_at(self.start)
        while f.log_end_offset < self.leo:
            s = self.log.read(f.log_end_offset, max_bytes)
            assert s.size > 0
            f.append_as_follower(os.pread(s.fd, s.size, s.position))
        assert f.log_end_offset == self.leo
        if self.batches:  # both hold the last batch, so the epoch it was written in
            assert f.latest_epoch() == self.log.latest_epoch()
        start = max(f.log_start_offset, self.start)
        assert self.read_all_of(f, start) == self.read_all_of(self.log, start)

    def read_all_of(self, log: Log, offset: int) -> bytes:
        out = b""
        while offset < log.log_end_offset:
            s = log.read(offset, 1 << 20)
            chunk = os.pread(s.fd, s.size, s.position)
            out += chunk
            nxt = [b for b in self.batches if b[0] >= s.first_offset]
            total = 0
            for b in nxt:
                if total == len(chunk):
                    break
                total += len(b[2])
                offset = b[1] + 1
        return out

    @rule()
    def roll(self):
        self.log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data):
        i = data.draw(st.integers(0, len(self.batches)))
        target = self.batches[i][0] if i < len(self.batches) else self.leo
        self.log.truncate_to(target)
        if self.follower.log_end_offset > target:
            self.follower.truncate_to(target)
        del self.batches[i:]
        self.leo = target

    @rule(limit=st.integers(0, 1500))
    def retention(self, limit):
        self.log.config = dataclasses.replace(CFG, retention_bytes=limit)
        self.log.delete_old_segments(T0)
        self.log.config = CFG
        self.start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b[1] >= self.start]
        assert not self.batches or self.batches[0][0] == self.start

    @rule()
    def reopen_clean(self):
        self.log.flush()
        self.log.close()
        self.log = Log.open(self.dir, CFG, log_start_offset=self.start, clean_shutdown=True)

    @rule(tear=st.integers(0, 200))
    def crash_and_recover(self, tear):
        rp = self.log.recovery_point
        active = self.log.active_segment
        crash(self.log)
        if tear and active.size and self.batches and self.batches[-1][0] >= active.base_offset:
            last = self.batches[-1]
            tear = min(tear, len(last[2]))
            with open(active.log_path, "r+b") as f:
                f.truncate(active.size - tear)
            self.batches.pop()
            self.leo = last[0]
            if self.follower.log_end_offset > self.leo:
                # what epoch-based truncation makes a follower of a shortened leader do
                self.follower.truncate_to(self.leo)
        self.log = Log.open(self.dir, CFG, recovery_point=rp, log_start_offset=self.start,
                            clean_shutdown=False)

    # -- invariants ----------------------------------------------------------------
    @invariant()
    def offsets_agree(self):
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.start
        assert self.log.read(self.leo, 100).size == 0


LogMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=30, deadline=None)
TestLogModel = LogMachine.TestCase
