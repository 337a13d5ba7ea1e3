"""`kafkarepl dump-log` through a real subprocess: text, --json, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkarepl.storage import Log, LogConfig
from tests.batches import build_batch

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000


def dump(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", "dump-log", *args],
                          capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def partition(tmp_path) -> Path:
    log = Log.open(tmp_path / "events-0", LogConfig(index_interval_bytes=50))
    log.append_as_leader(build_batch(3, compression="gzip", value_size=100), 2, T0)
    log.append_as_leader(build_batch(1, producer_id=7, producer_epoch=1, base_sequence=0,
                                     timestamp=T0 + 5), 2, T0)
    log.append_as_leader(build_batch(2, compression="zstd", value_size=100), 4, T0)
    log.close()
    return tmp_path / "events-0"


def test_text_output(partition):
    r = dump(str(partition / f"{0:020d}.log"))
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("baseOffset")]
    assert len(lines) == 3
    assert "baseOffset: 0 lastOffset: 2 count: 3 position: 0" in lines[0]
    assert "compression: gzip" in lines[0] and "partitionLeaderEpoch: 2" in lines[0]
    assert "producerId: 7 producerEpoch: 1 baseSequence: 0" in lines[1]
    assert f"maxTimestamp: {T0 + 5}" in lines[1] and "CreateTime" in lines[1]
    assert "compression: zstd" in lines[2] and "isValid: True" in lines[2]


def test_json_output_of_a_directory(partition):
    r = dump("--json", str(partition))
    assert r.returncode == 0, r.stderr
    docs = {Path(d["path"]).name: d for d in json.loads(r.stdout)}
    log_doc = docs[f"{0:020d}.log"]
    assert [b["baseOffset"] for b in log_doc["batches"]] == [0, 3, 4]
    assert all(b["crcValid"] for b in log_doc["batches"])
    assert docs[f"{0:020d}.index"]["entries"] == [
        {"offset": 3, "position": log_doc["batches"][1]["position"]},
        {"offset": 5, "position": log_doc["batches"][2]["position"]},
    ]
    assert docs[f"{0:020d}.timeindex"]["entries"][-1] == {"timestamp": T0 + 5, "offset": 3}
    assert docs["leader-epoch-checkpoint"]["lines"] == ["0", "2", "2 0", "4 4"]


def test_corrupt_batch_exit_code(partition):
    seg = partition / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    second = json.loads(dump("--json", str(seg)).stdout)[0]["batches"][1]["position"]
    data[second + 40] ^= 0xFF  # inside the CRC-covered part of the second batch
    seg.write_bytes(bytes(data))
    r = dump(str(seg))
    assert r.returncode == 1
    assert f"{seg}: corrupt batch at position {second}: CRC32C mismatch" in r.stderr
    assert "isValid: False" in r.stdout
    seg.write_bytes(bytes(data[: second + 30]))  # torn
    r = dump("--json", str(seg))
    assert r.returncode == 1
    assert f"corrupt batch at position {second}" in r.stderr
    assert json.loads(r.stdout)[0]["error"]["position"] == second


def test_corrupt_checkpoint_exit_code(partition):
    cp = partition / "leader-epoch-checkpoint"
    cp.write_bytes(cp.read_bytes().replace(b"4 4", b"4 5"))
    r = dump(str(cp))
    assert r.returncode == 1
    assert f"{cp}: corrupt checkpoint" in r.stderr


def test_missing_path(tmp_path):
    r = dump(str(tmp_path / "nope.log"))
    assert r.returncode == 1 and "no such file" in r.stderr


def test_index_entries_are_checked_against_the_log(partition):
    idx = partition / f"{0:020d}.index"
    assert dump(str(idx)).returncode == 0
    data = bytearray(idx.read_bytes())
    data[3] ^= 0x01  # first entry's relative offset
    idx.write_bytes(bytes(data))
    r = dump(str(idx))
    assert r.returncode == 1
    assert f"{idx}: corrupt index: index entry 0 says offset 2" in r.stderr
