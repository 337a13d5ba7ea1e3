"""What a `flush.messages=1` partition costs its broker: its own produce throughput, and the
produce latency of another partition of the same broker meanwhile. Prints one JSON line
per round and a summary line.

    python bench/flush_messages_bench.py [--rounds 3] [--seconds 8] [--producers 4] [--rate 500]
    PYTHONPATH=<another checkout> python bench/flush_messages_bench.py ...   # that code's brokers

One broker (LocalCluster, on the kafkarepl that PYTHONPATH or this checkout gives; the
line names the tree the broker processes run, read from /proc/PID/environ). Each round,
twice, once with a new topic `load-<round>-sync` at flush.messages=1 and once with
`load-<round>-plain` without, in alternating order:
  - --producers confluent-kafka producers (acks=1, linger.ms 0, 5 requests in flight
    each) write 1 KiB records to it (1 partition) as fast as they are acknowledged, for
    --seconds;
  - meanwhile a probe producer sends 100-byte records to `probe` (another partition, no
    flush.messages) at --rate records/s on a fixed schedule, acks=1; each record's latency
    is send -> delivery report.
The figures: `load` records acknowledged per second, and the probe's p50/p99; the ratios
sync/plain of both. With the fsync on the event loop every connection of the broker
waits for each one (the probe's p99 grows by the fsync time) and `load` gets one request
per fsync; off it, the probe should not see the fsyncs and the requests in flight share
them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafkarepl import LocalCluster  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def load(bootstrap: str, topic: str, seconds: float, producers: int) -> int:
    """Records of 1 KiB acknowledged on `topic` in `seconds` by `producers` producers."""
    acked = [0] * producers
    value = os.urandom(1024)

    def run(i: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                      "max.in.flight.requests.per.connection": 5, "enable.idempotence": False})

        def done(err, _msg) -> None:
            if err is None:
                acked[i] += 1

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if len(p) < 5:
                p.produce(topic, value, on_delivery=done)
            p.poll(0.0005)
        counted = acked[i]
        p.flush(30)
        acked[i] = counted

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(acked)


def probe(bootstrap: str, seconds: float, rate: int, out: list[float]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    value = os.urandom(100)
    p.produce("probe", value)
    p.flush(10)  # connected before the clock starts
    step = 1 / rate
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        at = t0 + n * step
        wait = at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        sent = time.monotonic()
        p.produce("probe", value, on_delivery=lambda err, _m, s=sent: err is None and out.append(
            (time.monotonic() - s) * 1000))
        p.poll(0)
        n += 1
    p.flush(30)


def broker_tree(cl: LocalCluster) -> str:
    pid = cl.pid(1)
    env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    paths = [e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"PYTHONPATH=")]
    return paths[0] if paths else str(Path(__file__).resolve().parents[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--rate", type=int, default=500)
    args = ap.parse_args()
    rows = []
    with LocalCluster(brokers=1) as cl:
        b = cl.bootstrap_servers
        tree = broker_tree(cl)
        cl.create_topic("probe", partitions=1, replication_factor=1)
        for r in range(args.rounds):
            modes = ["plain", "sync"] if r % 2 == 0 else ["sync", "plain"]
            row: dict = {"round": r, "tree": tree, "load1": os.getloadavg()[0]}
            for mode in modes:
                topic_configs = {"flush.messages": "1"} if mode == "sync" else {}
                topic = f"load-{r}-{mode}"
                cl.create_topic(topic, partitions=1, replication_factor=1, configs=topic_configs)
                lat: list[float] = []
                t = threading.Thread(target=probe, args=(b, args.seconds, args.rate, lat))
                t.start()
                n = load(b, topic, args.seconds, args.producers)
                t.join()
                row[mode] = {"records_per_s": round(n / args.seconds), "probe_p50_ms": round(pct(lat, 0.5), 3),
                             "probe_p99_ms": round(pct(lat, 0.99), 3), "probe_n": len(lat)}
            row["throughput_sync_over_plain"] = round(row["sync"]["records_per_s"] / row["plain"]["records_per_s"], 3)
            row["probe_p99_sync_over_plain"] = round(row["sync"]["probe_p99_ms"] / row["plain"]["probe_p99_ms"], 2)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(json.dumps({"summary": True, "tree": tree, "rounds": len(rows),
                      "throughput_sync_over_plain_median": statistics.median(
                          r["throughput_sync_over_plain"] for r in rows),
                      "probe_p99_sync_over_plain_median": statistics.median(
                          r["probe_p99_sync_over_plain"] for r in rows)}), flush=True)


if __name__ == "__main__":
    main()
