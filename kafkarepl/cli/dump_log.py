"""`kafkarepl dump-log PATH...` (or Kafka's `--files a,b`): show segment files, indexes
and checkpoints, as kafka-dump-log.sh does.

.log files: one line per batch in Kafka's format (offsets, sequences, producer, epoch,
flags, position, timestamp, size, codec, CRC and whether it matches); with
--deep-iteration a line per record under it, and with --print-data-log its key and value
(UTF-8), or with --offsets-decoder / --transaction-log-decoder the records of
__consumer_offsets / __transaction_state as Kafka 4's JSON. .index / .timeindex: their
entries (.index entries are checked against the batches of the .log beside it).
.txnindex: the aborted transactions; .snapshot: the producer state a roll left, one line
per producer with its newest batch (both in Kafka's words).
leader-epoch-checkpoint, *-checkpoint, producer-state-checkpoint: their content.
A directory dumps every such file in it. Exit code 1 when anything is corrupt.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kafkarepl import _core
from kafkarepl.errors import CheckpointCorruptError, KafkaError
from kafkarepl.protocol.coordinator_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    CONSUMER_PROTOCOL_VERSIONS,
    OFFSETS_TOPIC_RECORDS,
    TRANSACTION_TOPIC_RECORDS,
    read_versioned,
    to_json,
)
from kafkarepl.storage.index import OFFSET_DTYPE, TIME_DTYPE
from kafkarepl.storage.log import ROLL_SNAPSHOT_SUFFIX
from kafkarepl.storage.producer_state import ProducerStateTable
from kafkarepl.storage.records import (
    CODECS,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    batch_crc_valid,
    scan_windows,
)
from kafkarepl.storage.timestamps import read_varint, records_section
from kafkarepl.storage.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from kafkarepl.storage.txn_index import SUFFIX as TXN_INDEX_SUFFIX
from kafkarepl.storage.txn_index import VERSION as TXN_INDEX_VERSION
from kafkarepl.storage.txn_index import read_entries as read_txn_entries

_SUFFIXES = (".log", ".index", ".timeindex", TXN_INDEX_SUFFIX, ROLL_SNAPSHOT_SUFFIX)


def register(subparsers) -> None:
    p = subparsers.add_parser("dump-log", help="print segments, indexes and checkpoints",
                              description=__doc__)
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument("--files", help="Kafka's spelling: a comma separated list of files (or directories)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--deep-iteration", action="store_true", help="a line per record, under its batch")
    p.add_argument("--print-data-log", action="store_true",
                   help="each record's key and value too (implies --deep-iteration)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="record lines without offset, timestamp, sizes, sequence and header keys")
    decoder = p.add_mutually_exclusive_group()
    decoder.add_argument("--offsets-decoder", action="store_true",
                         help="records of __consumer_offsets as Kafka's JSON (implies --print-data-log)")
    decoder.add_argument("--transaction-log-decoder", action="store_true",
                         help="records of __transaction_state as Kafka's JSON (implies --print-data-log)")
    p.set_defaults(func=run)


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        return 0


def dump_log_file(path: Path, records: Callable[[memoryview], list[dict]] | None = None,
                  on_batch: Callable[[dict], None] | None = None) -> dict:
    """The file's batches; with `records` (deep iteration) each batch's records too. With
    `on_batch`, each batch goes there as it is read instead (the doc lists none): a
    segment's records are never all in memory at once."""
    batches: list[dict] = []
    error = None
    fd = os.open(path, os.O_RDONLY)
    try:
        # Walk structurally (no CRC) so every batch is listed with its CRC verdict.
        for w in scan_windows(fd, os.fstat(fd).st_size, False):  # reads, never a mapping (SCAN_WINDOW)
            base, data = w.position, w.data
            for b in w.batches:
                attrs = b.attributes
                ok = batch_crc_valid(data, b)
                position = base + b.position
                batches.append({
                    "baseOffset": b.base_offset,
                    "lastOffset": b.base_offset + b.last_offset_delta,
                    "count": b.records_count,
                    "position": position,
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
                    "lastSequence": _last_sequence(b.base_sequence, b.last_offset_delta),
                    "deleteHorizonMs": b.first_timestamp if attrs & DELETE_HORIZON_MASK else None,
                })
                if not ok and error is None:
                    error = {"position": position, "reason": "CRC32C mismatch"}
                if records is not None:
                    batch = memoryview(data)[b.position:b.position + b.size]
                    try:
                        batches[-1]["records"] = records(batch)
                    except (KafkaError, ValueError) as exc:
                        batches[-1]["records"] = []
                        if error is None:
                            error = {"position": position, "reason": f"records: {exc}"}
                if on_batch is not None:
                    on_batch(batches.pop())
            if w.error is not None and error is None:
                error = {"position": w.error_position, "reason": w.error}
    finally:
        os.close(fd)
    return {"path": str(path), "type": "log", "batches": batches, "error": error}


DELETE_HORIZON_MASK = 0x40  # KIP-534: the batch's base timestamp is its delete horizon
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def _last_sequence(base: int, delta: int) -> int:
    """Kafka's lastSequence: wraps past Integer.MAX_VALUE; -1 without a producer."""
    return -1 if base < 0 else (base + delta) % (1 << 31)


def batch_records(batch: memoryview, parse: Callable[[bytes | None, bytes | None], dict] | None) -> list[dict]:
    """The records of one whole v2 batch (inflated within the default decompression
    budget), each as Kafka's DumpLogSegments shows it; `parse` adds the key and payload."""
    (base_offset, _len, _epoch, _magic, _crc, attrs, _delta, base_ts, max_ts,
     _pid, _pe, base_seq, count) = HEADER.unpack_from(batch, 0)
    data = records_section(batch)
    out: list[dict] = []
    pos = 0
    for _ in range(count):
        length, pos = read_varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise ValueError(f"record {len(out)} runs past its batch")
        pos += 1  # attributes
        ts_delta, pos = read_varint(data, pos)
        off_delta, pos = read_varint(data, pos)
        key, pos = _varbytes(data, pos, end)
        value, pos = _varbytes(data, pos, end)
        n_headers, pos = read_varint(data, pos)
        header_keys = []
        for _ in range(max(n_headers, 0)):
            hkey, pos = _varbytes(data, pos, end)
            _hvalue, pos = _varbytes(data, pos, end)
            header_keys.append((hkey or b"").decode("utf-8", "replace"))
        if pos != end:
            raise ValueError(f"record {len(out)} is not its declared {length} bytes")
        rec: dict[str, Any] = {
            "offset": base_offset + off_delta,
            "timestamp": max_ts if attrs & TIMESTAMP_TYPE_MASK else base_ts + ts_delta,
            "keySize": -1 if key is None else len(key),
            "valueSize": -1 if value is None else len(value),
            "sequence": -1 if base_seq < 0 else (base_seq + off_delta) % (1 << 31),
            "headerKeys": header_keys,
        }
        if attrs & CONTROL_MASK:
            if key is not None and len(key) >= 4:
                ctype = struct.unpack_from(">h", key, 2)[0]
                rec["controlType"] = _CONTROL_TYPES.get(ctype, f"UNKNOWN({ctype})")
                if ctype in _CONTROL_TYPES and value is not None and len(value) >= 6:
                    rec["coordinatorEpoch"] = struct.unpack_from(">i", value, 2)[0]
        elif parse is not None:
            rec.update(parse(key, value))
        out.append(rec)
    return out


def _varbytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(data, pos)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise ValueError("a record field runs past its record")
    return data[pos:pos + n], pos + n


def parse_plain(key: bytes | None, value: bytes | None) -> dict:
    """Kafka's default StringDecoder for key and value."""
    out = {}
    if key is not None:
        out["key"] = key.decode("utf-8", "replace")
    if value is not None:
        out["payload"] = value.decode("utf-8", "replace")
    return out


def _json(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _parse_coordinator_record(records: dict[int, tuple[str, Any, Any, range, range]], key: bytes | None,
                              value: bytes | None) -> dict:
    """A coordinator record as Kafka 4's --offsets-decoder shows it: the key as
    {"type": key version, "data": ...}, the value as {"version": ..., "data": ...}, a
    tombstone as <DELETE>."""
    if key is None or len(key) < 2:
        return {"key": "Error: a coordinator record needs a key, skipping."}
    (kind,) = struct.unpack_from(">h", key, 0)
    if kind not in records:
        return {"key": f"Unknown record type {kind}, skipping."}
    name, key_fields, value_fields, value_versions, flexible = records[kind]
    try:
        kv, k = read_versioned(key, key_fields, range(kind, kind + 1))
        out = {"key": _json({"type": str(kv), "data": to_json(key_fields, kv, k)})}
        if value is None:
            out["payload"] = "<DELETE>"
            return out
        vv, v = read_versioned(value, value_fields, value_versions, flexible)
        data = to_json(value_fields, vv, v)
        if name == "GroupMetadata" and v.get("protocol_type") == "consumer":
            for member, decoded in zip(data["members"], v["members"], strict=True):
                _embedded(member, "subscription", decoded["subscription"], CONSUMER_PROTOCOL_SUBSCRIPTION)
                _embedded(member, "assignment", decoded["assignment"], CONSUMER_PROTOCOL_ASSIGNMENT)
        out["payload"] = _json({"version": str(vv), "data": data})
        return out
    except ValueError as exc:
        return {"key": f"Error: {name} record: {exc}, skipping."}


def _embedded(member: dict, field: str, raw: bytes, fields: Any) -> None:
    """As Kafka: the consumer protocol's subscription or assignment shown decoded; the
    base64 bytes kept when they do not decode."""
    try:
        version, body = read_versioned(bytes(raw), fields, CONSUMER_PROTOCOL_VERSIONS)
    except ValueError:
        return
    member[field] = to_json(fields, version, body)


def parse_offsets(key: bytes | None, value: bytes | None) -> dict:
    return _parse_coordinator_record(OFFSETS_TOPIC_RECORDS, key, value)


def parse_transactions(key: bytes | None, value: bytes | None) -> dict:
    return _parse_coordinator_record(TRANSACTION_TOPIC_RECORDS, key, value)


def _index_entries(path: Path, dtype: np.dtype) -> np.ndarray:
    data = path.read_bytes()
    arr = np.frombuffer(data[: len(data) - len(data) % dtype.itemsize], dtype=dtype)
    if not len(arr):  # a trimmed index without entries (its segment's batches all fit one interval)
        return arr
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


def dump_txn_index_file(path: Path) -> dict:
    """The aborted transactions of a .txnindex, read without changing it."""
    entries, error = read_txn_entries(path.read_bytes())
    return {"path": str(path), "type": "txnindex",
            "entries": [{"version": TXN_INDEX_VERSION, "producerId": t.producer_id, "firstOffset": t.first_offset,
                         "lastOffset": t.last_offset, "lastStableOffset": t.last_stable_offset}
                        for t in entries],
            "error": None if error is None else {"position": len(entries) * TXN_ENTRY_SIZE, "reason": error}}


def dump_snapshot_file(path: Path) -> dict:
    """A roll's producer snapshot: each producer with its newest retained batch (the one
    batch Kafka's snapshots keep)."""
    got = ProducerStateTable.read_snapshot(path)
    if got is None:
        return {"path": str(path), "type": "snapshot", "producers": [],
                "error": {"position": None, "reason": "corrupt or unreadable producer snapshot"}}
    table, _offset = got
    producers = []
    for e in table.producers.values():
        doc: dict[str, Any] = {"producerId": e.producer_id, "producerEpoch": e.producer_epoch,
                               "coordinatorEpoch": -1,
                               "currentTxnFirstOffset": None if e.current_txn_first_offset < 0
                               else e.current_txn_first_offset,
                               "lastTimestamp": e.last_timestamp}
        if e.batches:
            b = e.batches[-1]
            doc["batch"] = {"firstSequence": b.first_seq, "lastSequence": b.last_seq, "lastOffset": b.last_offset,
                            "offsetDelta": b.last_offset - b.first_offset, "timestamp": b.timestamp}
        producers.append(doc)
    return {"path": str(path), "type": "snapshot", "producers": producers, "error": None}


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


def dump_path(path: Path, records: Callable[[memoryview], list[dict]] | None = None,
              out: Any = None, skip_record_metadata: bool = False) -> list[dict]:
    """The docs of `path` (a directory: of each file in it). With `out` (text), each is
    printed there as it is made, a segment's batches as they are read."""
    if path.is_dir():
        docs = []
        for child in sorted(path.iterdir()):
            if child.is_dir() or child.suffix in _SUFFIXES or _is_checkpoint(child):
                docs.extend(dump_path(child, records, out, skip_record_metadata))
        return docs
    if out is not None and path.suffix == ".log" and path.exists():
        print(f"Dumping {path}", file=out)
        print(f"Log starting offset: {_base_offset(path)}", file=out)
        doc = dump_log_file(path, records, lambda b: _print_batch(b, out, skip_record_metadata))
        return [doc]
    docs = _dump_file(path, records)
    if out is not None:
        for d in docs:
            _print_text(d, out)
    return docs


def _dump_file(path: Path, records: Callable[[memoryview], list[dict]] | None) -> list[dict]:
    if not path.exists():
        return [{"path": str(path), "type": "missing", "error":
                 {"position": None, "reason": "no such file"}}]
    if path.suffix == ".log":
        return [dump_log_file(path, records)]
    if path.suffix in (".index", ".timeindex"):
        return [dump_index_file(path)]
    if path.suffix == TXN_INDEX_SUFFIX:
        return [dump_txn_index_file(path)]
    if path.suffix == ROLL_SNAPSHOT_SUFFIX:
        return [dump_snapshot_file(path)]
    if _is_checkpoint(path):
        return [dump_checkpoint_file(path)]
    return [{"path": str(path), "type": "unknown",
             "error": {"position": None, "reason": "not a .log/.index/.timeindex/.txnindex/.snapshot/checkpoint "
                                                   "file"}}]


def _describe_error(doc: dict) -> str:
    err = doc["error"]
    if doc["type"] == "log":
        return f"{doc['path']}: corrupt batch at position {err['position']}: {err['reason']}"
    if doc["type"] == "index":
        return f"{doc['path']}: corrupt index: {err['reason']}"
    return f"{doc['path']}: {err['reason']}"


def _print_batch(b: dict, out: Any, skip_record_metadata: bool) -> None:
    """A batch and its records, in Kafka's DumpLogSegments lines."""
    horizon = b["deleteHorizonMs"]
    print("baseOffset: {baseOffset} lastOffset: {lastOffset} count: {count} baseSequence: {baseSequence} "
          "lastSequence: {lastSequence} producerId: {producerId} producerEpoch: {producerEpoch} "
          "partitionLeaderEpoch: {partitionLeaderEpoch} isTransactional: {tx} isControl: {ctl} "
          "deleteHorizonMs: {horizon} position: {position} {timestampType}: {maxTimestamp} size: {size} "
          "magic: 2 compresscodec: {compression} crc: {crc} isvalid: {ok}".format(
              **b, tx=_bool(b["isTransactional"]), ctl=_bool(b["isControl"]), ok=_bool(b["crcValid"]),
              horizon="OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"), file=out)
    for r in b.get("records", ()):
        print(_record_line(r, b["timestampType"], skip_record_metadata), file=out)


def _print_text(doc: dict, out: Any) -> None:
    print(f"Dumping {doc['path']}", file=out)
    if doc["type"] == "index":
        for e in doc["entries"]:
            print(f"offset: {e['offset']} position: {e['position']}", file=out)
    elif doc["type"] == "timeindex":
        for e in doc["entries"]:
            print(f"timestamp: {e['timestamp']} offset: {e['offset']}", file=out)
    elif doc["type"] == "checkpoint":
        for line in doc["lines"]:
            print(line, file=out)
    elif doc["type"] == "txnindex":
        for t in doc["entries"]:
            print(f"version: {t['version']} producerId: {t['producerId']} firstOffset: {t['firstOffset']} "
                  f"lastOffset: {t['lastOffset']} lastStableOffset: {t['lastStableOffset']}", file=out)
    elif doc["type"] == "snapshot":
        for p in doc["producers"]:
            first = p["currentTxnFirstOffset"]
            line = (f"producerId: {p['producerId']} producerEpoch: {p['producerEpoch']} "
                    f"coordinatorEpoch: {p['coordinatorEpoch']} currentTxnFirstOffset: "
                    f"{'OptionalLong.empty' if first is None else f'OptionalLong[{first}]'} "
                    f"lastTimestamp: {p['lastTimestamp']} ")
            if "batch" in p:
                b = p["batch"]
                line += (f"firstSequence: {b['firstSequence']} lastSequence: {b['lastSequence']} "
                         f"lastOffset: {b['lastOffset']} offsetDelta: {b['offsetDelta']} timestamp: {b['timestamp']}")
            print(line, file=out)


def _bool(b: bool) -> str:
    return "true" if b else "false"


def _record_line(r: dict, timestamp_type: str, skip_metadata: bool) -> str:
    """A record under its batch, as Kafka's DumpLogSegments prints it."""
    parts = ["|"]
    if not skip_metadata:
        parts.append(f"offset: {r['offset']} {timestamp_type}: {r['timestamp']} keySize: {r['keySize']} "
                     f"valueSize: {r['valueSize']} sequence: {r['sequence']} "
                     f"headerKeys: [{','.join(r['headerKeys'])}]")
        if "controlType" in r:
            if "coordinatorEpoch" in r:
                parts.append(f"endTxnMarker: {r['controlType']} coordinatorEpoch: {r['coordinatorEpoch']}")
            else:
                parts.append(f"controlType: {r['controlType']}")
    if "key" in r:
        parts.append(f"key: {r['key']}")
    if "payload" in r:
        parts.append(f"payload: {r['payload']}")
    return " ".join(parts)


def _records_reader(args: argparse.Namespace) -> Callable[[memoryview], list[dict]] | None:
    if args.offsets_decoder:
        parse: Callable[[bytes | None, bytes | None], dict] | None = parse_offsets
    elif args.transaction_log_decoder:
        parse = parse_transactions
    elif args.print_data_log:
        parse = parse_plain
    elif args.deep_iteration:
        parse = None
    else:
        return None
    return lambda batch: batch_records(batch, parse)


def run(args: argparse.Namespace) -> int:
    paths = list(args.paths) + [p for p in (args.files or "").split(",") if p]
    if not paths:
        print("dump-log: give the files to dump (PATH... or --files a,b)", file=sys.stderr)
        return 2
    records = _records_reader(args)
    out = None if args.json else sys.stdout  # text: printed as read
    docs: list[dict] = []
    for p in paths:
        try:
            docs.extend(dump_path(Path(p), records, out, args.skip_record_metadata))
        except OSError as exc:
            doc = {"path": p, "type": "unreadable", "error": {"position": None, "reason": os.strerror(exc.errno or 0)}}
            docs.append(doc)
            if out is not None:
                _print_text(doc, out)
    failed = [d for d in docs if d.get("error")]
    if args.json:
        json.dump(docs, sys.stdout, indent=1)
        print()
    for d in failed:
        print(_describe_error(d), file=sys.stderr)
    return 1 if failed else 0
