#!/usr/bin/env python3
"""Control plane at scale (issue 16 item 4) on a 3-broker kafkarepl.LocalCluster.

Each figure is timed from outside, through the Kafka protocol, as an operator sees it:

  create         one CreateTopics of N partitions RF 3 until every partition has a live
                 leader and its full ISR in the Metadata of every broker
  metadata       full Metadata request round trip (median of 20), the client's decode excluded
  idle           CPU% (utime+stime over a window) and RSS of every broker with N partitions
  ctrl-failover  kill -9 of the controller: until a new controller is named and every
                 partition has a live leader in the survivors' Metadata
  restart        clean stop (controlled shutdown) of a non-controller broker, then start:
                 until it serves Metadata, and until every partition is led with full ISR
                 in the Metadata of every broker

Results are JSON lines (stdout, and --out). Kafka's figures: ../shared/reference/kafka-baseline.md.

    python bench/control_plane.py                  # 3,000 and 10,000 partitions, everything
    python bench/control_plane.py --partitions 3000 --only create
    python bench/control_plane.py --runs 3 --data-root /srv/bench --out cp.jsonl

Settings: Kafka's defaults where LocalCluster's test-friendly ones differ (session timeout
18 s, replica.lag.time.max.ms 30 s, replica.fetch.wait.max.ms 500 ms); a kill -9 is
noticed at once anyway (fast failover, server/liveness.py). Profile a broker with
KAFKAREPL_CPROFILE=<dir> (server/profiling.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafkarepl import LocalCluster  # noqa: E402
from kafkarepl.protocol import ApiKey, decode_response, encode_request  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
TOPIC = "cp"
WAIT_S = 300  # longest wait for a state (--wait); None in a result: not reached by then


def emit(result: dict[str, Any], out: str | None) -> None:
    result["load1"] = round(os.getloadavg()[0], 2)
    result["ts"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = json.dumps(result)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


# ------------------------------------------------------------------ raw Metadata


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def metadata_raw(port: int, topics: list[str] | None, timeout: float = 10.0) -> tuple[bytes, float]:
    """(response frame, seconds from send to last byte): the broker's time, no decode."""
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = encode_request(ApiKey.METADATA, 12, 1, "cp-bench", body)
        t0 = time.monotonic()
        s.sendall(req)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        frame = _recv_exact(s, size)
        return frame, time.monotonic() - t0


def metadata(port: int, topics: list[str] | None, timeout: float = 10.0) -> dict[str, Any]:
    frame, _ = metadata_raw(port, topics, timeout)
    return decode_response(ApiKey.METADATA, 12, memoryview(frame))[1]


def topic_state(port: int, topic: str, live: set[int]) -> tuple[int, int, int, int]:
    """(controller id, partitions, partitions with a live leader, of which with full ISR)
    as broker `port` reports them; full ISR = every replica on a live broker is in it."""
    md = metadata(port, [topic])
    t = md["topics"][0]
    if t["error_code"]:
        return md["controller_id"], 0, 0, 0
    led = full = 0
    for p in t["partitions"]:
        if p["leader_id"] in live:
            led += 1
            isr = p["isr_nodes"]
            if all(r in isr for r in p["replica_nodes"] if r in live):
                full += 1
    return md["controller_id"], len(t["partitions"]), led, full


def wait_all(
    ports: dict[int, int], topic: str, n: int, live: set[int], need_isr: bool, timeout: float,
    t0: float, poll: float = 0.05,
) -> float | None:
    """Seconds since t0 until every broker of `ports` reports n partitions, all led by live
    brokers (and with full ISR if need_isr). None on timeout."""
    deadline = t0 + timeout
    pending = dict(ports)
    while time.monotonic() < deadline:
        for b, port in list(pending.items()):
            try:
                _, count, led, full = topic_state(port, topic, live)
            except (OSError, ConnectionError):
                continue
            if count == n and led == n and (full == n or not need_isr):
                del pending[b]
        if not pending:
            return time.monotonic() - t0
        time.sleep(poll)
    return None


# ------------------------------------------------------------------ /proc


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# ------------------------------------------------------------------ workloads


def new_cluster(args: argparse.Namespace) -> LocalCluster:
    props = {
        # Kafka's defaults where LocalCluster's test-friendly ones differ: the figures
        # should not depend on short timers
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "replica.lag.time.max.ms": "30000",
        "replica.fetch.wait.max.ms": "500",
        "replica.fetch.backoff.ms": "1000",
    }
    c = LocalCluster(brokers=3, broker_properties=props, start_timeout=120,
                     log_level=args.log_level, data_dir=args.data_dir)
    c.start()
    return c


def ports_of(c: LocalCluster, skip: int | None = None) -> dict[int, int]:
    return {b: c.port(b) for b in c.broker_ids if b != skip and c.pid(b) is not None}


def fs_probe(root: str, n: int = 200) -> dict[str, float]:
    """Milliseconds per mkdir and per file create in `root` right now: what creating a
    partition waits on (on a busy shared disk 30-50x more than on a quiet one)."""
    d = os.path.join(root, f"fs-probe-{os.getpid()}")
    os.makedirs(d, exist_ok=True)
    try:
        t0 = time.perf_counter()
        for i in range(n):
            os.mkdir(os.path.join(d, str(i)))
        t1 = time.perf_counter()
        for i in range(n):
            os.close(os.open(os.path.join(d, str(i), "f"), os.O_WRONLY | os.O_CREAT, 0o644))
        t2 = time.perf_counter()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {"mkdir_ms": round((t1 - t0) / n * 1e3, 3), "create_ms": round((t2 - t1) / n * 1e3, 3)}


def bench_create(c: LocalCluster, n: int, out: str | None) -> bool:
    t0 = time.monotonic()
    c.create_topic(TOPIC, partitions=n, replication_factor=3, timeout=300, wait=False)
    t_acked = time.monotonic() - t0
    live = set(c.broker_ids)
    t_ready = wait_all(ports_of(c), TOPIC, n, live, True, WAIT_S, t0)
    emit({"bench": "create", "partitions": n, "rf": 3, "create_topics_s": round(t_acked, 3),
          "all_led_full_isr_s": None if t_ready is None else round(t_ready, 3),
          "fs_after": fs_probe(str(c.data_dir)), "data_dir": str(c.data_dir)}, out)
    return t_ready is not None


def bench_metadata(c: LocalCluster, n: int, out: str | None) -> None:
    port = c.port(c.broker_ids[0])
    times, size = [], 0
    for _ in range(20):
        frame, dt = metadata_raw(port, None)
        size = len(frame)
        times.append(dt)
    emit({"bench": "metadata-full", "partitions": n,
          "median_ms": round(statistics.median(times) * 1e3, 1),
          "min_ms": round(min(times) * 1e3, 1), "bytes": size}, out)


def bench_idle(c: LocalCluster, n: int, seconds: float, out: str | None) -> None:
    pids = {b: c.pid(b) for b in c.broker_ids}
    time.sleep(5)  # let creation's aftermath settle (checkpoints, first ISR checks)
    before = {b: cpu_seconds(p) for b, p in pids.items() if p}
    t0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    cpu = {b: round((cpu_seconds(p) - before[b]) / wall * 100, 1) for b, p in pids.items() if p}
    rss = {b: round(rss_mib(p), 1) for b, p in pids.items() if p}
    emit({"bench": "idle", "partitions": n, "seconds": round(wall, 1), "cpu_pct": cpu,
          "rss_mib": rss, "cpu_pct_max": max(cpu.values()), "rss_mib_max": max(rss.values())},
         out)


def controller_id(c: LocalCluster, ports: dict[int, int]) -> int:
    for port in ports.values():
        try:
            return int(metadata(port, [])["controller_id"])
        except (OSError, ConnectionError):
            continue
    return -1


def bench_controller_failover(c: LocalCluster, n: int, out: str | None) -> None:
    ctrl = controller_id(c, ports_of(c))
    survivors = ports_of(c, skip=ctrl)
    live = set(survivors)
    t0 = time.monotonic()
    c.kill(ctrl)
    t_ctrl = None
    deadline = t0 + 300
    while time.monotonic() < deadline and t_ctrl is None:
        cur = controller_id(c, survivors)
        if cur in live:
            t_ctrl = time.monotonic() - t0
            break
        time.sleep(0.02)
    t_led = wait_all(survivors, TOPIC, n, live, False, WAIT_S, t0, poll=0.02)
    t_restart0 = time.monotonic()
    c.restart(ctrl, timeout=300)
    serving = time.monotonic() - t_restart0
    t_isr = wait_all(ports_of(c), TOPIC, n, set(c.broker_ids), True, WAIT_S, t_restart0)
    emit({"bench": "controller-failover", "partitions": n, "killed": ctrl,
          "new_controller_s": None if t_ctrl is None else round(t_ctrl, 3),
          "all_led_s": None if t_led is None else round(t_led, 3),
          "killed_restart_serving_s": round(serving, 3),
          "killed_back_in_isr_s": None if t_isr is None else round(t_isr, 3)}, out)


def bench_restart(c: LocalCluster, n: int, out: str | None) -> None:
    ctrl = controller_id(c, ports_of(c))
    victim = max(b for b in c.broker_ids if b != ctrl)
    t0 = time.monotonic()
    c.stop_broker(victim, timeout=300)
    stop_s = time.monotonic() - t0
    t1 = time.monotonic()
    c.restart(victim, timeout=300)
    serving = time.monotonic() - t1
    t_isr = wait_all(ports_of(c), TOPIC, n, set(c.broker_ids), True, WAIT_S, t1)
    emit({"bench": "broker-restart", "partitions": n, "broker": victim,
          "controlled_shutdown_s": round(stop_s, 3), "start_serving_s": round(serving, 3),
          "all_in_isr_s": None if t_isr is None else round(t_isr, 3)}, out)


def run_cluster(c: LocalCluster, n: int, args: argparse.Namespace) -> None:
    emit({"bench": "fs-probe", "partitions": n, **fs_probe(str(c.data_dir))}, args.out)
    if not bench_create(c, n, args.out):  # the others need the topic, all led
        return
    steps = ["metadata", "idle"] + (["restart", "ctrl-failover"] if n >= args.heavy_from else [])
    for name in steps:
        if name not in args.only:
            continue
        try:
            if name == "metadata":
                bench_metadata(c, n, args.out)
            elif name == "idle":
                bench_idle(c, n, args.idle_seconds, args.out)
            elif name == "restart":
                bench_restart(c, n, args.out)
            else:
                bench_controller_failover(c, n, args.out)
        except (OSError, ConnectionError, RuntimeError) as exc:
            # A cluster that cannot answer in time (an old revision with 10,000
            # partitions): recorded, and its later steps are left out.
            emit({"bench": name, "partitions": n, "error": repr(exc)}, args.out)
            return


def run(args: argparse.Namespace) -> None:
    global WAIT_S
    WAIT_S = args.wait
    for i in range(args.runs):
        for n in args.partitions:
            if args.data_root:
                args.data_dir = os.path.join(args.data_root, f"cp-{n}-{i}-{os.getpid()}")
            c = new_cluster(args)
            try:
                run_cluster(c, n, args)
            finally:
                c.stop()
                if args.data_root and args.data_dir:
                    shutil.rmtree(args.data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, nargs="+", default=[3000, 10000])
    ap.add_argument("--only", nargs="+", default=["create", "metadata", "idle", "restart",
                                                  "ctrl-failover"])
    ap.add_argument("--heavy-from", type=int, default=10000,
                    help="controller failover and restart only from this many partitions")
    ap.add_argument("--idle-seconds", type=float, default=20)
    ap.add_argument("--session-timeout-ms", type=int, default=18000)
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--out", help="append the JSON lines here too")
    ap.add_argument("--data-dir", help="keep the cluster (logs) here instead of a temporary dir")
    ap.add_argument("--data-root", help="put each run's cluster in a fresh directory under this one "
                    "(removed after the run); default: a temporary directory")
    ap.add_argument("--runs", type=int, default=1, help="fresh clusters per partition count")
    ap.add_argument("--wait", type=float, default=WAIT_S, help="longest wait for a state, seconds")
    run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
