#!/usr/bin/env python3
"""Broker CPU per request for a fixed request stream, revisions alternating.

librdkafka adapts its batches to the broker's speed, so the broker CPU of an end-to-end
produce run mixes the broker's cost per request with how many requests the client chose
to send. Here the requests are fixed: each is one Produce (acks=1) of `--partitions`
batches of 100 records x 100 B (what librdkafka sends under load), or one Fetch of the
same partitions from where the previous one stopped; `--depth` in flight on one
connection. The broker's CPU time (utime + stime of its process, /proc) over the stream
divided by the requests is the figure; a one-broker cluster per revision and round,
rounds alternating the order of the revisions to cancel drift.

    python bench/broker_cpu_bench.py --rev old=/tmp/wt-old --rev new=/work/main --rounds 5

Each --rev is a source tree with its C core built (the cluster runs with PYTHONPATH and
cwd set to it); the client side (this script) is this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkarepl.cli import wire  # noqa: E402
from kafkarepl.coordinator.records import build_batch  # noqa: E402
from kafkarepl.protocol import ApiKey, encode_request  # noqa: E402

TOPIC = "cpu"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def mark(pid: int) -> None:
    """With KAFKAREPL_CPROFILE=<dir> set, the broker's cProfile is dumped at each phase's
    start and end (server/profiling.py): broker-<pid>-2.prof holds the produce phase,
    -3 the fetch phase."""
    if os.environ.get("KAFKAREPL_CPROFILE"):
        os.kill(pid, signal.SIGUSR2)
        time.sleep(0.5)


def recv_exact(s: socket.socket, n: int) -> None:
    while n:
        chunk = s.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        n -= len(chunk)


def stream(port: int, frames: list[bytes], depth: int) -> None:
    """Send every frame, `depth` in flight; read (and drop) every answer."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        sent = 0
        for _ in range(min(depth, len(frames))):
            s.sendall(frames[sent])
            sent += 1
        for _ in range(len(frames)):
            head = bytearray(4)
            view = memoryview(head)
            got = 0
            while got < 4:
                n = s.recv_into(view[got:])
                if not n:
                    raise ConnectionError("broker closed the connection")
                got += n
            recv_exact(s, struct.unpack(">i", head)[0])
            if sent < len(frames):
                s.sendall(frames[sent])
                sent += 1


def produce_frames(n: int, partitions: int) -> list[bytes]:
    value = b"v" * 100
    batch = bytes(build_batch([(None, value)] * 100, int(time.time() * 1000)))
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": p, "records": batch} for p in range(partitions)]}]}
    return [encode_request(ApiKey.PRODUCE, 9, i & 0x7FFFFFFF, "cpu-bench", body) for i in range(n)]


def fetch_frames(n: int, partitions: int, per_partition: int) -> list[bytes]:
    """Consumer fetches walking the log: request i asks each partition from where
    request i - 1 stopped (batches of the produce phase are all the same size)."""
    batch_size = len(build_batch([(None, b"v" * 100)] * 100, 0))
    step = max(1, per_partition // batch_size) * 100  # offsets one answer carries
    frames = []
    for i in range(n):
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": TOPIC, "partitions": [{
                    "partition": p, "current_leader_epoch": -1, "fetch_offset": i * step,
                    "log_start_offset": -1, "partition_max_bytes": per_partition} for p in range(partitions)]}],
                "forgotten_topics_data": [], "rack_id": ""}
        frames.append(encode_request(ApiKey.FETCH, 11, i, "cpu-bench", body))
    return frames


def run_one(name: str, src: str, args: argparse.Namespace) -> dict:
    data = tempfile.mkdtemp(prefix=f"cpu-bench-{name}-", dir=args.data_root)
    env = {**os.environ, "PYTHONPATH": src}
    cli = [sys.executable, "-m", "kafkarepl.cli.main", "cluster"]
    subprocess.run([*cli, "up", "--brokers", "1", "--base-port", str(args.base_port), "--data-dir", data],
                   cwd=src, env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        state = json.loads((Path(data) / "cluster.json").read_text())
        [broker] = state["brokers"].values()
        pid, port = broker["pid"], args.base_port
        maps = {line.split()[-1] for line in open(f"/proc/{pid}/maps") if "/kafkarepl/_core" in line}
        assert all(m.startswith(src) for m in maps) and maps, (src, maps)
        body = {"topics": [{"name": TOPIC, "num_partitions": args.partitions, "replication_factor": 1,
                            "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}
        assert wire.call("127.0.0.1", port, ApiKey.CREATE_TOPICS, 5, body, timeout=30)["topics"][0]["error_code"] == 0
        deadline = time.monotonic() + 30
        while any(p["leader_id"] < 0 for p in wire.metadata("127.0.0.1", port, [TOPIC])["topics"][0]["partitions"]):
            assert time.monotonic() < deadline, "topic not led"
            time.sleep(0.05)
        stream(port, produce_frames(args.warmup, args.partitions), args.depth)
        frames = produce_frames(args.requests, args.partitions)
        mark(pid)
        before = cpu_seconds(pid)
        stream(port, frames, args.depth)
        produce_us = (cpu_seconds(pid) - before) / args.requests * 1e6
        mark(pid)
        frames = fetch_frames(args.requests, args.partitions, args.fetch_bytes)
        before = cpu_seconds(pid)
        stream(port, frames, args.depth)
        fetch_us = (cpu_seconds(pid) - before) / args.requests * 1e6
        mark(pid)
        return {"rev": name, "produce_us": round(produce_us, 1), "fetch_us": round(fetch_us, 1),
                "load1": os.getloadavg()[0]}
    finally:
        subprocess.run([*cli, "down", "--data-dir", data], cwd=src, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", action="append", required=True, help="NAME=SOURCE_DIR (two or more)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--depth", type=int, default=5, help="requests in flight (librdkafka's default)")
    ap.add_argument("--fetch-bytes", type=int, default=65536, help="partition_max_bytes of the fetches")
    ap.add_argument("--base-port", type=int, default=27192)
    ap.add_argument("--data-root", default=None)
    args = ap.parse_args()
    revs = [tuple(r.split("=", 1)) for r in args.rev]
    results: list[dict] = []
    for rnd in range(args.rounds):
        order = revs if rnd % 2 == 0 else revs[::-1]
        for name, src in order:
            r = run_one(name, os.path.abspath(src), args)
            r["round"] = rnd
            print(json.dumps(r), flush=True)
            results.append(r)
    base = revs[0][0]
    for kind in ("produce_us", "fetch_us"):
        for name, _ in revs[1:]:
            ratios = [next(r[kind] for r in results if r["rev"] == name and r["round"] == k)
                      / next(r[kind] for r in results if r["rev"] == base and r["round"] == k)
                      for k in range(args.rounds)]
            mine = [r[kind] for r in results if r["rev"] == name]
            theirs = [r[kind] for r in results if r["rev"] == base]
            print(f"{kind}: {base} median {statistics.median(theirs):.1f}, {name} median "
                  f"{statistics.median(mine):.1f}; {name}/{base} per round "
                  f"{', '.join(f'{x:.3f}' for x in ratios)} (median {statistics.median(ratios):.3f})")


if __name__ == "__main__":
    main()
