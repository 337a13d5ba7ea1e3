"""The aborted-transaction index of a segment: `<base offset>.txnindex`.

Kafka's on-disk format: 34-byte entries, one per transaction aborted by a marker in the
segment, in marker order: version (int16, 0), producer id (int64), first offset (int64),
last offset (int64, the marker's), last stable offset (int64; see CompletedTxn). A
read_committed Fetch gets the aborted transactions overlapping what it returns, and its
client drops their records.

The entries are small and few, so each index keeps them in memory as well; the file is
appended with one write per entry and rewritten on truncation. It is trusted after a
clean shutdown and rebuilt from the markers otherwise (with the producer state).
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger("kafkarepl.storage")

SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def read_entries(data: bytes) -> tuple[list[AbortedTxn], str | None]:
    """The sound entries of a .txnindex's bytes, up to the first unsound one, and what
    ended them early (None: every byte read)."""
    entries: list[AbortedTxn] = []
    n = len(data) // _ENTRY.size
    for i in range(n):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, i * _ENTRY.size)
        if version != VERSION or first > last:
            return entries, f"unsound entry {i}"
        entries.append(AbortedTxn(pid, first, last, lso))
    if len(data) % _ENTRY.size:
        return entries, f"torn entry {n} ({len(data) % _ENTRY.size} bytes)"
    return entries, None


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []

    @classmethod
    def load(cls, path: Path) -> TransactionIndex:
        """Read the file if there is one; a torn last entry (a crash mid-write) is
        dropped, an entry of an unknown version ends the valid part."""
        idx = cls(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return idx
        idx.entries, error = read_entries(data)
        if len(idx.entries) < len(data) // _ENTRY.size:  # an unsound entry (not only a torn tail)
            log.warning("%s: %s; keeping the %d before it", path, error, len(idx.entries))
        if len(idx.entries) * _ENTRY.size != len(data):
            idx._rewrite()
        return idx

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted txn ending at {txn.last_offset} is not "
                             f"after {self.entries[-1].last_offset}")
        self.entries.append(txn)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(VERSION, *txn))
        finally:
            os.close(fd)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset`."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def reset(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)

    def delete(self) -> None:
        self.reset()

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Append the entries overlapping [fetch_offset, upper_bound) to `out`; True once
        an entry's last stable offset reaches upper_bound (no later segment can add one:
        Kafka's TxnIndexSearchResult.isComplete)."""
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return True
        return False

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(VERSION, *e) for e in self.entries))
        os.replace(tmp, self.path)
