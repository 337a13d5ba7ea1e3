"""`kafkarepl dump-log PATH...`: show segment files, indexes and checkpoints.

.log files: one line per batch (offsets, position, size, epoch, timestamps, producer
fields, codec, flags, CRC and whether it matches). .index / .timeindex: their entries
(.index entries are checked against the batches of the .log beside it).
leader-epoch-checkpoint, *-checkpoint, producer-state-checkpoint: their content.
A directory dumps every such file in it. Exit code 1 when anything is corrupt.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
from pathlib import Path

import numpy as np

from kafkarepl import _core
from kafkarepl.errors import CheckpointCorruptError
from kafkarepl.storage.index import OFFSET_DTYPE, TIME_DTYPE
from kafkarepl.storage.records import (
    CODECS,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    batch_crc_valid,
)

_SUFFIXES = (".log", ".index", ".timeindex")


def register(subparsers) -> None:
    p = subparsers.add_parser("dump-log", help="print segments, indexes and checkpoints",
                              description=__doc__)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run)


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        return 0


def dump_log_file(path: Path) -> dict:
    batches = []
    error = None
    size = path.stat().st_size
    if size:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
            # Walk structurally (no CRC) so every batch is listed with its CRC verdict.
            infos, valid, reason, position = _core.scan_batches(mm, 0, False)
            for b in infos:
                attrs = b.attributes
                ok = batch_crc_valid(mm, b)
                batches.append({
                    "baseOffset": b.base_offset,
                    "lastOffset": b.base_offset + b.last_offset_delta,
                    "count": b.records_count,
                    "position": b.position,
                    "size": b.size,
                    "partitionLeaderEpoch": b.partition_leader_epoch,
                    "timestampType": "LogAppendTime" if attrs & TIMESTAMP_TYPE_MASK else "CreateTime",
                    "firstTimestamp": b.first_timestamp,
                    "maxTimestamp": b.max_timestamp,
                    "producerId": b.producer_id,
                    "producerEpoch": b.producer_epoch,
                    "baseSequence": b.base_sequence,
                    "compression": CODECS.get(attrs & COMPRESSION_MASK, f"unknown({attrs & COMPRESSION_MASK})"),
                    "isTransactional": bool(attrs & TRANSACTIONAL_MASK),
                    "isControl": bool(attrs & CONTROL_MASK),
                    "crc": b.crc,
                    "crcValid": ok,
                })
                if not ok and error is None:
                    error = {"position": b.position, "reason": "CRC32C mismatch"}
            if reason is not None and error is None:
                error = {"position": position, "reason": reason}
    return {"path": str(path), "type": "log", "batches": batches, "error": error}


def _index_entries(path: Path, dtype: np.dtype) -> np.ndarray:
    data = path.read_bytes()
    arr = np.frombuffer(data[: len(data) - len(data) % dtype.itemsize], dtype=dtype)
    # A preallocated (untrimmed) index ends in zero entries: show only the written part.
    nonzero = np.flatnonzero(arr.view(np.uint8).reshape(len(arr), -1).any(axis=1))
    return arr[: nonzero[-1] + 1] if len(nonzero) else arr[:0]


def dump_index_file(path: Path) -> dict:
    base = _base_offset(path)
    if path.suffix == ".index":
        arr = _index_entries(path, OFFSET_DTYPE)
        entries = [{"offset": base + int(r), "position": int(p)}
                   for r, p in zip(arr["relative_offset"], arr["position"], strict=True)]
        kind = "index"
    else:
        arr = _index_entries(path, TIME_DTYPE)
        entries = [{"timestamp": int(t), "offset": base + int(r)}
                   for t, r in zip(arr["timestamp"], arr["relative_offset"], strict=True)]
        kind = "timeindex"
    error = _check_index_against_log(path, entries) if kind == "index" else None
    return {"path": str(path), "type": kind, "entries": entries, "error": error}


def _check_index_against_log(path: Path, entries: list[dict]) -> dict | None:
    """Each .index entry must point at a batch start whose last offset is the entry's
    offset (Kafka indexes a batch by its last offset)."""
    log_path = path.with_suffix(".log")
    if not log_path.exists():
        return None
    with open(log_path, "rb") as f:
        fd = f.fileno()
        for i, e in enumerate(entries):
            head = os.pread(fd, HEADER.size, e["position"])
            if len(head) < HEADER.size:
                return {"position": e["position"],
                        "reason": f"index entry {i} (offset {e['offset']}) points past the log end"}
            base, _len, _ple, magic, _crc, _attr, delta, *_ = HEADER.unpack(head)
            if magic != 2 or base + delta != e["offset"]:
                return {"position": e["position"],
                        "reason": f"index entry {i} says offset {e['offset']} but the batch "
                                  f"at position {e['position']} ends at {base + delta}"}
    return None


def dump_checkpoint_file(path: Path) -> dict:
    try:
        payload = _core.checkpoint_read(str(path))
    except CheckpointCorruptError as exc:
        return {"path": str(path), "type": "checkpoint", "lines": [],
                "error": {"position": None, "reason": f"corrupt checkpoint: {exc.reason}"}}
    return {"path": str(path), "type": "checkpoint",
            "lines": payload.decode("utf-8", "replace").splitlines(), "error": None}


def _is_checkpoint(path: Path) -> bool:
    return path.name.endswith("checkpoint")


def dump_path(path: Path) -> list[dict]:
    if path.is_dir():
        out = []
        for child in sorted(path.iterdir()):
            if child.is_dir() or child.suffix in _SUFFIXES or _is_checkpoint(child):
                out.extend(dump_path(child))
        return out
    if not path.exists():
        return [{"path": str(path), "type": "missing", "error":
                 {"position": None, "reason": "no such file"}}]
    if path.suffix == ".log":
        return [dump_log_file(path)]
    if path.suffix in (".index", ".timeindex"):
        return [dump_index_file(path)]
    if _is_checkpoint(path):
        return [dump_checkpoint_file(path)]
    return [{"path": str(path), "type": "unknown",
             "error": {"position": None, "reason": "not a .log/.index/.timeindex/checkpoint file"}}]


def _describe_error(doc: dict) -> str:
    err = doc["error"]
    if doc["type"] == "log":
        return f"{doc['path']}: corrupt batch at position {err['position']}: {err['reason']}"
    if doc["type"] == "index":
        return f"{doc['path']}: corrupt index: {err['reason']}"
    return f"{doc['path']}: {err['reason']}"


def _print_text(doc: dict, out) -> None:
    print(f"Dumping {doc['path']}", file=out)
    if doc["type"] == "log":
        for b in doc["batches"]:
            print("baseOffset: {baseOffset} lastOffset: {lastOffset} count: {count} "
                  "position: {position} size: {size} partitionLeaderEpoch: "
                  "{partitionLeaderEpoch} {timestampType} firstTimestamp: {firstTimestamp} "
                  "maxTimestamp: {maxTimestamp} producerId: {producerId} producerEpoch: "
                  "{producerEpoch} baseSequence: {baseSequence} compression: {compression} "
                  "isTransactional: {isTransactional} isControl: {isControl} crc: {crc} "
                  "isValid: {crcValid}".format(**b), file=out)
    elif doc["type"] == "index":
        for e in doc["entries"]:
            print(f"offset: {e['offset']} position: {e['position']}", file=out)
    elif doc["type"] == "timeindex":
        for e in doc["entries"]:
            print(f"timestamp: {e['timestamp']} offset: {e['offset']}", file=out)
    elif doc["type"] == "checkpoint":
        for line in doc["lines"]:
            print(line, file=out)


def run(args: argparse.Namespace) -> int:
    docs: list[dict] = []
    for p in args.paths:
        try:
            docs.extend(dump_path(Path(p)))
        except OSError as exc:
            docs.append({"path": p, "type": "unreadable",
                         "error": {"position": None, "reason": os.strerror(exc.errno or 0)}})
    failed = [d for d in docs if d.get("error")]
    if args.json:
        json.dump(docs, sys.stdout, indent=1)
        print()
    else:
        for d in docs:
            _print_text(d, sys.stdout)
    for d in failed:
        print(_describe_error(d), file=sys.stderr)
    return 1 if failed else 0
