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
    assert r.stdout.splitlines()[1] == "Log starting offset: 0"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("baseOffset")]
    assert len(lines) == 3
    # Kafka's DumpLogSegments batch line, field for field
    assert lines[0].startswith(
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 2 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: {T0} size: ")
    assert " magic: 2 compresscodec: gzip crc: " in lines[0] and lines[0].endswith(" isvalid: true")
    assert "baseSequence: 0 lastSequence: 0 producerId: 7 producerEpoch: 1" in lines[1]
    assert f"CreateTime: {T0 + 5} size: " in lines[1]
    assert "compresscodec: zstd" in lines[2] and "isvalid: true" in lines[2]


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
    assert "isvalid: false" in r.stdout
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


def _write_log(tmp_path: Path, name: str, batches: list[bytes]) -> Path:
    log = Log.open(tmp_path / name, LogConfig())
    for b in batches:
        log.append_as_leader(bytearray(b), 0, T0, control_allowed=True)
    log.close()
    return tmp_path / name / f"{0:020d}.log"


def test_records_with_print_data_log(tmp_path):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False, producer_id=3,
                                        producer_epoch=0, base_sequence=5, batch_size=1 << 20)
    builder.append(0, timestamp=T0, key=b"k\xc3\xa9", value=b"v0", headers=[("h1", b"x"), ("h2", None)])
    builder.append(1, timestamp=T0 + 2, key=None, value=None, headers=[])
    seg = _write_log(tmp_path, "data-0", [builder.build()])
    r = dump("--deep-iteration", str(seg))
    assert r.returncode == 0, r.stderr
    recs = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
    assert recs == [
        f"| offset: 0 CreateTime: {T0} keySize: 3 valueSize: 2 sequence: 5 headerKeys: [h1,h2]",
        f"| offset: 1 CreateTime: {T0 + 2} keySize: -1 valueSize: -1 sequence: 6 headerKeys: []",
    ]
    r = dump("--files", str(seg), "--print-data-log")  # Kafka's spelling
    recs = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
    assert recs[0].endswith("headerKeys: [h1,h2] key: k\u00e9 payload: v0")
    assert recs[1].endswith("headerKeys: []")  # null key and value: neither shown
    r = dump("--print-data-log", "--skip-record-metadata", str(seg))
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("|")] == ["| key: k\u00e9 payload: v0", "|"]
    docs = json.loads(dump("--json", "--print-data-log", str(seg)).stdout)
    assert [(x["offset"], x.get("key"), x.get("payload")) for x in docs[0]["batches"][0]["records"]] == [
        (0, "k\u00e9", "v0"), (1, None, None)]


def test_offsets_decoder_shows_kafka_json(tmp_path):
    from kafkarepl.coordinator import OffsetAndMetadata, build_batch, encode_key, encode_value
    from kafkarepl.coordinator.group_records import (
        GroupSnapshot,
        MemberSnapshot,
        encode_group_key,
        encode_group_value,
    )
    from kafkarepl.coordinator.records import build_marker

    subscription = bytes.fromhex("0001" "00000001" "0001" "74" "ffffffff" "00000000")  # v1: ["t"], no data
    assignment = bytes.fromhex("0000" "00000001" "0001" "74" "00000002" "00000000" "00000001" "ffffffff")
    member = MemberSnapshot("m-1", "inst-1", "c1", "/127.0.0.1", 60000, 45000, subscription, assignment)
    group = GroupSnapshot("consumer", 4, "range", "m-1", T0, (member,))
    seg = _write_log(tmp_path, "__consumer_offsets-0", [
        build_batch([(encode_key("g", "t", 1), encode_value(OffsetAndMetadata(42, 3, "md", T0)))], T0),
        build_batch([(encode_group_key("g"), encode_group_value(group))], T0),
        build_batch([(encode_key("g", "t", 1), None)], T0),
        build_marker(9, 0, True, 5, T0),
    ])
    r = dump("--offsets-decoder", str(seg))
    assert r.returncode == 0, r.stderr
    recs = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
    assert recs[0].endswith(
        ' key: {"type":"1","data":{"group":"g","topic":"t","partition":1}} payload: {"version":"3","data":'
        f'{{"offset":42,"leaderEpoch":3,"metadata":"md","commitTimestamp":{T0}}}}}')
    key, payload = recs[1].split(" key: ")[1].split(" payload: ")
    assert key == '{"type":"2","data":{"group":"g"}}'
    value = json.loads(payload)
    assert value["version"] == "3"
    assert {k: v for k, v in value["data"].items() if k != "members"} == {
        "protocolType": "consumer", "generation": 4, "protocol": "range", "leader": "m-1",
        "currentStateTimestamp": T0}
    assert value["data"]["members"] == [{
        "memberId": "m-1", "groupInstanceId": "inst-1", "clientId": "c1", "clientHost": "/127.0.0.1",
        "rebalanceTimeout": 60000, "sessionTimeout": 45000,
        # the consumer protocol's data shown decoded, as Kafka does
        "subscription": {"topics": ["t"], "userData": None, "ownedPartitions": []},
        "assignment": {"assignedPartitions": [{"topic": "t", "partitions": [0, 1]}], "userData": None}}]
    assert recs[2].endswith(' key: {"type":"1","data":{"group":"g","topic":"t","partition":1}} payload: <DELETE>')
    assert recs[3].endswith("endTxnMarker: COMMIT coordinatorEpoch: 5")


def test_transaction_log_decoder_shows_kafka_json(tmp_path):
    from kafkarepl.coordinator import build_batch
    from kafkarepl.coordinator.txn_log import TxnMetadata, TxnState, encode_key, encode_value

    meta = TxnMetadata("tx-1", 1000, 2, 60000, TxnState.ONGOING, {("t", 0), ("t", 2), ("u", 1)}, T0, T0 + 1)
    seg = _write_log(tmp_path, "__transaction_state-0", [
        build_batch([(encode_key("tx-1"), encode_value(meta))], T0),
        build_batch([(encode_key("tx-1"), None)], T0),
    ])
    r = dump("--transaction-log-decoder", str(seg))
    assert r.returncode == 0, r.stderr
    recs = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
    key, payload = recs[0].split(" key: ")[1].split(" payload: ")
    assert key == '{"type":"0","data":{"transactionalId":"tx-1"}}'
    assert json.loads(payload) == {"version": "0", "data": {
        "producerId": 1000, "producerEpoch": 2, "transactionTimeoutMs": 60000, "transactionStatus": 1,
        "transactionPartitions": [{"topic": "t", "partitionIds": [0, 2]}, {"topic": "u", "partitionIds": [1]}],
        "transactionLastUpdateTimestampMs": T0 + 1, "transactionStartTimestampMs": T0}}
    assert recs[1].endswith('{"type":"0","data":{"transactionalId":"tx-1"}} payload: <DELETE>')


def test_offsets_decoder_shows_consumer_group_records(tmp_path):
    import uuid

    from kafkarepl.coordinator import build_batch
    from kafkarepl.coordinator.consumer_group import (
        ConsumerGroup,
        ConsumerGroupConfig,
        HeartbeatRequest,
        TopicsView,
    )

    g = ConsumerGroup("g", ConsumerGroupConfig())
    tid = uuid.UUID(int=7)
    g.heartbeat(HeartbeatRequest("m-1", 0, instance_id="i-1", rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
                                 owned={}, client_id="c1", client_host="/127.0.0.1", version=1),
                TopicsView(1, {"t": (tid, 2)}), 0)
    seg = _write_log(tmp_path, "__consumer_offsets-0", [build_batch(g.pending_records(), T0),
                                                         build_batch(g.tombstones()[:1], T0)])
    r = dump("--offsets-decoder", str(seg))
    assert r.returncode == 0, r.stderr
    recs = [ln.split(" key: ", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("|")]
    shown = [(json.loads(k), v if v == "<DELETE>" else json.loads(v)) for k, v in (x.split(" payload: ") for x in recs)]
    topic = "AAAAAAAAAAAAAAAAAAAABw"  # uuid 7 as Kafka prints it
    parts = [{"topicId": topic, "partitions": [0, 1]}]
    assert shown == [
        ({"type": "5", "data": {"groupId": "g", "memberId": "m-1"}}, {"version": "0", "data": {
            "instanceId": "i-1", "rackId": None, "clientId": "c1", "clientHost": "/127.0.0.1",
            "subscribedTopicNames": ["t"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 30000,
            "serverAssignor": None}}),
        ({"type": "3", "data": {"groupId": "g"}}, {"version": "0", "data": {"epoch": 1}}),
        ({"type": "7", "data": {"groupId": "g", "memberId": "m-1"}}, {"version": "0", "data": {
            "topicPartitions": parts}}),
        ({"type": "6", "data": {"groupId": "g"}}, {"version": "0", "data": {"assignmentEpoch": 1}}),
        ({"type": "8", "data": {"groupId": "g", "memberId": "m-1"}}, {"version": "0", "data": {
            "memberEpoch": 1, "previousMemberEpoch": 0, "state": 0, "assignedPartitions": parts,
            "partitionsPendingRevocation": []}}),
        ({"type": "8", "data": {"groupId": "g", "memberId": "m-1"}}, "<DELETE>"),
    ]


def test_offsets_decoder_skips_what_it_cannot_read(tmp_path):
    from kafkarepl.coordinator import OffsetAndMetadata, build_batch, encode_key, encode_value

    value = encode_value(OffsetAndMetadata(42, 3, "md", T0))
    seg = _write_log(tmp_path, "__consumer_offsets-0", [
        build_batch([(b"\x00\x0a" + b"x" * 6, b"\x00\x00")], T0),  # a record type Kafka has and this does not
        build_batch([(encode_key("g", "t", 1), value[:-3])], T0),  # cut short
        build_batch([(None, value)], T0),  # no key
        build_batch([(encode_key("g", "t", 1), b"\x00\x09" + value[2:])], T0),  # an unknown value version
    ])
    r = dump("--offsets-decoder", str(seg))
    assert r.returncode == 0, r.stderr  # the log itself is sound
    recs = [ln.split(" key: ", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("|")]
    assert recs[0] == "Unknown record type 10, skipping."
    assert recs[1].startswith("Error: OffsetCommit record: malformed at version 3") and recs[1].endswith("skipping.")
    assert recs[2] == "Error: a coordinator record needs a key, skipping."
    assert recs[3] == "Error: OffsetCommit record: version 9, skipping."


@pytest.mark.parametrize("window", [64, 200, 1000, 1 << 20])
def test_read_in_windows_as_a_whole(tmp_path, monkeypatch, window):
    """dump-log reads a .log in windows (never mapped: a live broker may truncate it).
    Batches cut by a window's end, and batches larger than a window, read as from the
    whole file; a torn tail is reported where it starts."""
    from kafkarepl import _core
    from kafkarepl.cli import dump_log
    from kafkarepl.storage import records

    log = Log.open(tmp_path / "w-0", LogConfig(index_interval_bytes=50))
    for i in range(12):
        log.append_as_leader(build_batch(1 + i % 4, value_size=10 + 97 * (i % 5),
                                         compression="gzip" if i % 3 == 0 else "none"), 1, T0)
    log.close()
    seg = tmp_path / "w-0" / f"{0:020d}.log"
    whole = seg.read_bytes()
    expected = [(b.base_offset, b.position, b.size) for b in _core.validate_batches(whole)]
    assert max(size for _o, _p, size in expected) > 64  # some batches exceed the smallest window
    monkeypatch.setattr(records, "SCAN_WINDOW", window)
    doc = dump_log.dump_log_file(seg, records=lambda b: [len(b)])
    assert [(b["baseOffset"], b["position"], b["size"]) for b in doc["batches"]] == expected
    assert [b["records"] for b in doc["batches"]] == [[size] for _o, _p, size in expected]
    assert doc["error"] is None and all(b["crcValid"] for b in doc["batches"])

    torn_at = expected[-1][1]
    with open(seg, "r+b") as f:  # the last batch cut short, as by a crash
        f.truncate(torn_at + expected[-1][2] - 5)
    doc = dump_log.dump_log_file(seg)
    assert [b["baseOffset"] for b in doc["batches"]] == [o for o, _p, _s in expected[:-1]]
    assert doc["error"] is not None and doc["error"]["position"] == torn_at


def test_a_segment_truncated_while_read(tmp_path, monkeypatch):
    """A live broker truncates the segment between two reads (a follower's truncation):
    the tool lists what it read up to the new end and reports the torn batch there."""
    from kafkarepl import _core
    from kafkarepl.cli import dump_log
    from kafkarepl.storage import records

    log = Log.open(tmp_path / "t-0", LogConfig())
    for _ in range(10):
        log.append_as_leader(build_batch(2, value_size=150), 1, T0)
    log.close()
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    batches = _core.validate_batches(seg.read_bytes())
    new_end = batches[6].position + 3
    real_pread, reads = os.pread, []

    def pread(fd: int, n: int, pos: int) -> bytes:
        reads.append(pos)
        if len(reads) == 2:
            os.truncate(seg, new_end)
        return real_pread(fd, n, pos)

    monkeypatch.setattr(records, "SCAN_WINDOW", 1000)
    monkeypatch.setattr(os, "pread", pread)
    doc = dump_log.dump_log_file(seg)
    assert [b["baseOffset"] for b in doc["batches"]] == [b.base_offset for b in batches[:6]]
    assert doc["error"] is not None and doc["error"]["position"] == batches[6].position
    assert len(reads) < 10


def test_txnindex_and_roll_snapshot(tmp_path):
    """A roll's producer snapshot and a .txnindex, printed in Kafka's DumpLogSegments
    words; damaged ones reported (exit 1) without being changed."""
    from kafkarepl.coordinator.records import build_marker

    d = tmp_path / "tx-0"
    log = Log.open(d, LogConfig(segment_bytes=500))
    log.append_as_leader(build_batch(2, producer_id=7, producer_epoch=1, base_sequence=0, timestamp=T0), 0, T0)
    log.append_as_leader(build_batch(2, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True,
                                     timestamp=T0 + 1), 0, T0)  # 2-3, aborted at 4
    log.append_as_leader(build_marker(9, 0, False, 0, T0 + 2), 0, T0, control_allowed=True)
    log.append_as_leader(build_batch(1, producer_id=9, producer_epoch=0, base_sequence=2, transactional=True,
                                     timestamp=T0 + 3), 0, T0)  # 5: open across the roll below
    while len(log.segments) < 2:
        log.append_as_leader(build_batch(3, value_size=40), 0, T0)
    base = log.segments[1].base_offset
    log.close()
    txn, snap = d / f"{0:020d}.txnindex", d / f"{base:020d}.snapshot"
    r = dump(str(txn), str(snap))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"Dumping {txn}",
        "version: 0 producerId: 9 firstOffset: 2 lastOffset: 4 lastStableOffset: 5",
        f"Dumping {snap}",
        f"producerId: 7 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {T0} firstSequence: 0 lastSequence: 1 lastOffset: 1 offsetDelta: 1 timestamp: {T0}",
        f"producerId: 9 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[5] "
        f"lastTimestamp: {T0 + 3} firstSequence: 2 lastSequence: 2 lastOffset: 5 offsetDelta: 0 "
        f"timestamp: {T0 + 3}",
    ]
    docs = json.loads(dump("--json", str(d)).stdout)
    assert {doc["type"] for doc in docs} >= {"txnindex", "snapshot", "log", "index"}
    raw_txn, raw_snap = txn.read_bytes(), snap.read_bytes()
    txn.write_bytes(raw_txn + b"\x00" * 7)
    snap.write_bytes(raw_snap[:-5])
    r = dump(str(txn), str(snap))
    assert r.returncode == 1
    assert "version: 0 producerId: 9 firstOffset: 2" in r.stdout  # the sound entry still shown
    assert "torn entry 1 (7 bytes)" in r.stderr and "corrupt or unreadable producer snapshot" in r.stderr
    assert txn.read_bytes() == raw_txn + b"\x00" * 7 and snap.read_bytes() == raw_snap[:-5]
