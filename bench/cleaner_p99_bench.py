"""Produce latency while the log cleaner runs, against the same broker idle (issue 12: p99
no more than 1.2x). Prints one JSON line per round and a summary line.

    python bench/cleaner_p99_bench.py [--rounds 3] [--mib 2048] [--partitions 4] [--rate 1000] [--paired]
        [--compression none|lz4|...] [--props kafkarepl.log.cleaner.thread.nice=19,...]
        [--interference spin|read|burst|write|direct|clean|clean-shm]

One broker (LocalCluster). Each round:
  1. a topic `cmp-<round>` (--partitions partitions, cleanup.policy=delete at first) gets
     --mib MiB of keyed records (100-byte values, keys drawn at random from 1,000,000:
     most records superseded, ~250,000 keys per partition's offset map), then the page
     cache is written back (sync);
  2. idle: a confluent-kafka producer sends 100-byte records to the non-compacted topic
     `lat` at --rate records/s (acks=all, linger.ms 0), one at a time on a fixed
     schedule, for --idle seconds; each record's latency is send -> delivery report;
  3. cleaning: the producer goes on while `cmp-<round>` is switched to
     cleanup.policy=compact (IncrementalAlterConfigs); the cleaner (log.cleaner.backoff.ms
     200) cleans every partition. Records sent while a cleaning ran (from its plan to the
     end of its swap, as the broker logs them) are the "cleaning" sample;
  4. idle again for --idle seconds (the idle sample is both idle windows: the load of
     other processes on the host changes, this brackets the cleaning).
The figures: p50/p99/p99.9/max of both samples per round, and over all rounds pooled;
the ratio cleaning/idle of the p99s; the records sent during the swaps (the steps on the
event loop) on their own.

--interference: no cleaning. Step 3 is another process doing part of what a cleaning does,
partition after partition, for as long as the previous round's cleanings took (0.3 s each
in round 0): `spin` a core; `read` the partition's segments twice in 1 MiB pieces spread
over that time (the cleaner's reads at its pace), `burst` the same as fast as it can;
`write` 1/16 of their size into a file per segment, each fsynced (about what a cleaning
writes); `direct` the same with O_DIRECT (no page cache, no writeback by kernel
threads); `clean` the broker's cleaning code itself (map, clean, fsyncs, no swap) on the
segments, staged and dropped: the cleaner run from another process; `clean-shm` the same
staged in /dev/shm (no disk writes at all: what any way of writing the output, O_DIRECT
included, could at best bring a cleaner in its own process down to). The ratios are what that part alone costs the broker's p99 on this host.

--paired: two brokers on the host; the compacted topic and `lat` on broker 1, `lat-ref`
on broker 2, a producer for each running at the same time, the whole round long. The
figure is p99(lat) / p99(lat-ref) over the records sent while broker 1 cleaned: both
see the same host (other processes' load, disk), so what remains is what the cleaning
does to its own broker (event loop, GIL, swap); the cleaner's CPU use slows both.
Outside cleanings the same ratio shows how even the pairing is.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafkarepl import LocalCluster  # noqa: E402

VALUE = os.urandom(100)
KEYS = 1_000_000


def load(bootstrap: str, topic: str, mib: int, compression: str = "none") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": compression})
    rng = random.Random(7)
    target = mib << 20
    sent = 0
    while sent < target:
        key = b"key-%07d" % rng.randrange(KEYS)
        while True:
            try:
                p.produce(topic, VALUE, key)
                break
            except BufferError:
                p.poll(0.01)
        sent += len(key) + len(VALUE) + 20
    p.flush(120)


_INTERFERE = r"""
import json, os, sys, time
kind, seconds, paths = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
if kind in ("clean", "clean-shm"):  # imports and the map buffer's page faults before the span, as in a
    # broker whose cleaner thread has cleaned before
    import shutil
    from pathlib import Path
    from kafkarepl import _core
    from kafkarepl.storage.cleaner import STAGING_DIR, CleaningPlan, MapBuffer, SourceSegment, clean
    maps = MapBuffer(128 << 20)
    maps.offset_map(128 << 20, 0.9)
    maps._mem[:] = 1
t0, wall0 = time.monotonic(), time.time()  # spans in wall-clock time, as the samples
end = t0 + seconds
if kind == "spin":
    while time.monotonic() < end:
        pass
elif kind in ("write", "direct"):  # what the cleaner writes (~1/16 of what it reads), a
    # file per segment, each fsynced, then the directory; spread over the time
    import mmap
    d = os.path.dirname(paths[0])
    piece = mmap.mmap(-1, 1 << 20)  # page-aligned, for O_DIRECT
    each = max(1, sum(os.path.getsize(p) for p in paths) // 16 // len(paths))
    for i, _p in enumerate(paths):
        name = os.path.join(d, "interfere-%d.tmp" % i)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if kind == "direct" else 0)
        fd = os.open(name, flags, 0o644)
        os.unlink(name)
        left = each
        while left > 0:
            left -= os.write(fd, memoryview(piece)[:min(left, len(piece)) & ~4095 or 4096])  # whole pages
        os.fsync(fd)
        os.close(fd)
        ahead = t0 + seconds * (i + 1) / len(paths) - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
elif kind in ("clean", "clean-shm"):  # the whole cleaning (the broker's own code, without the swap) of
    # the partition's segments but the last, from another process, staged and dropped
    bases = [int(os.path.basename(p)[:-4]) for p in paths]
    segs = [SourceSegment(b, nb, os.path.getsize(p), os.open(p, os.O_RDONLY))
            for b, nb, p in zip(bases, bases[1:], paths)]
    d = Path(os.path.dirname(paths[0]))
    if kind == "clean-shm":  # staged in memory (tmpfs): no disk writes, no writeback
        d = Path("/dev/shm") / ("interfere-%d" % os.getpid())
        d.mkdir()
    plan = CleaningPlan(d, segs, 0, bases[-1], 64 << 20, 4096, 10 << 20, 86_400_000, {},
                        int(time.time() * 1000))
    _core.set_bulk_yield_interval(100_000)  # as a broker's cleaner thread
    clean(plan, None, None, 128 << 20, 0.9, maps).close()
    plan.close()
    shutil.rmtree(d / STAGING_DIR)
    if kind == "clean-shm":
        d.rmdir()
else:  # read the files in 1 MiB pieces, twice (the cleaner's map and clean passes),
    # spread evenly over the time (kind "read"), or at once ("burst")
    buf = bytearray(1 << 20)
    total = 2 * sum(os.path.getsize(p) for p in paths)
    done = 0
    for path in paths * 2:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                done += n
                ahead = t0 + seconds * done / total - time.monotonic()
                if kind == "read" and ahead > 0:
                    time.sleep(ahead)
print(json.dumps([wall0, time.time()]))
"""


def interfere(kind: str, broker_dir: Path, topic: str, durations: list[float],
              spans: list[tuple[float, float]], done: threading.Event) -> None:
    """One process per partition, one after the other 0.2 s apart (log.cleaner.backoff.ms),
    each spinning a core for that partition's cleaning time, or reading its segments twice
    (in that time, or as fast as it can)."""
    import subprocess
    for p, seconds in enumerate(durations):
        logs = sorted(str(f) for f in (broker_dir / "logs").glob(f"{topic}-{p}/*.log"))
        out = subprocess.run([sys.executable, "-c", _INTERFERE, kind, str(seconds), *logs],
                             capture_output=True, text=True, check=True).stdout
        a, b = json.loads(out)
        spans.append((a, b))
        time.sleep(0.2)
    done.set()


def set_policy(admin: AdminClient, topic: str, policy: str) -> None:
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)


CLEANED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO \[kafkarepl\.server\.log_cleaner\] "
                     r"(\S+)-(\d+): cleaned up to offset .* in ([\d.]+) s \(offset map ([\d.]+) s; swap ([\d.]+) ms")


def _logged(broker_log: Path, topic: str) -> list[tuple[float, float, float, float]]:
    """(end, seconds, offset map seconds, swap seconds) of each cleaning of `topic` the
    broker logged, its end in wall-clock time."""
    out = []
    for line in broker_log.read_text(errors="replace").splitlines():
        m = CLEANED.match(line)
        if m and m.group(2) == topic:
            end = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((end, float(m.group(4)), float(m.group(5)), float(m.group(6)) / 1000))
    return out


def cleanings(broker_log: Path, topic: str) -> list[tuple[float, float]]:
    """(start, end) wall-clock times of the cleanings of `topic` the broker logged: from
    the plan to the end of the swap."""
    return [(end - s - swap, end) for end, s, _m, swap in _logged(broker_log, topic)]


def map_passes(broker_log: Path, topic: str) -> dict[float, float]:
    """The cleanings' end -> how long their offset map pass (the first) took."""
    return {end: m for end, _s, m, _swap in _logged(broker_log, topic)}


def swaps_of(broker_log: Path, topic: str) -> list[tuple[float, float]]:
    """(start, end) wall-clock times of the swaps (the steps on the event loop) of the
    cleanings of `topic`."""
    return [(end - swap, end) for end, _s, _m, swap in _logged(broker_log, topic)]


class LatencyProducer:
    """Records sent one at a time at a fixed rate; (send time, latency) per delivery."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                           "enable.idempotence": False, "log.connection.close": False})
        self.topic = topic
        self.interval = 1.0 / rate
        self.samples: list[tuple[float, float]] = []  # (wall clock sent, latency s)
        self.errors = 0
        # Connected and metadata known before anything is measured: the first records of a
        # new producer wait for its connections (tens of ms), which no window should count.
        self.p.produce(topic, VALUE)
        self.p.flush(30)

    def run(self, seconds: float, until: threading.Event | None = None) -> None:
        next_t = time.monotonic()
        end = next_t + seconds
        while time.monotonic() < end and not (until is not None and until.is_set()):
            sent, wall = time.monotonic(), time.time()

            def done(err, _msg, sent=sent, wall=wall):  # noqa: ANN001 - librdkafka callback
                if err is not None:
                    self.errors += 1
                else:
                    self.samples.append((wall, time.monotonic() - sent))

            self.p.produce(self.topic, VALUE, on_delivery=done)
            next_t += self.interval
            while True:
                wait = next_t - time.monotonic()
                if wait <= 0:
                    break
                # librdkafka's timeout is whole ms: a shorter one polls without blocking,
                # and this loop would spin a core the broker then lacks (2-core hosts)
                self.p.poll(max(wait, 0.001))
        self.p.flush(30)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


def summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50_ms": round(pct(xs, 0.5), 2), "p99_ms": round(pct(xs, 0.99), 2),
            "p999_ms": round(pct(xs, 0.999), 2), "max_ms": round(max(xs) * 1000, 2) if xs else None}


def paired(args: argparse.Namespace, props: dict[str, str]) -> None:
    rows = []
    with LocalCluster(brokers=2, broker_properties=props, data_dir=args.data_dir) as cl:
        assert cl.data_dir is not None
        b = cl.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": b})
        cl.create_topic("lat", assignments={0: [1]})
        cl.create_topic("lat-ref", assignments={0: [2]})
        broker_log = cl.data_dir / "broker-1" / "broker.log"
        for r in range(args.rounds):
            topic = f"cmp-{r}"
            cl.create_topic(topic, assignments={p: [1] for p in range(args.partitions)},
                            configs={"cleanup.policy": "delete"})
            load(b, topic, args.mib, args.compression)
            os.sync()
            time.sleep(1)
            lp, ref = LatencyProducer(b, "lat", args.rate), LatencyProducer(b, "lat-ref", args.rate)
            done = threading.Event()
            threads = [threading.Thread(target=x.run, args=(600, done)) for x in (lp, ref)]
            for t in threads:
                t.start()
            time.sleep(args.idle)
            set_policy(admin, topic, "compact")
            while len(cleanings(broker_log, topic)) < args.partitions:
                time.sleep(0.1)
            time.sleep(args.idle)
            done.set()
            for t in threads:
                t.join()
            spans = cleanings(broker_log, topic)

            def covers(t: float, spans: list[tuple[float, float]] = spans) -> bool:
                return any(a <= t <= b for a, b in spans)

            row: dict = {"round": r, "cleanings_s": [round(b - a, 2) for a, b in spans],
                         "load1": round(os.getloadavg()[0], 2), "errors": lp.errors + ref.errors}
            for name, during in (("cleaning", True), ("idle", False)):
                a = [lat for t, lat in lp.samples if covers(t) == during]
                c = [lat for t, lat in ref.samples if covers(t) == during]
                row[name] = {"lat": summary(a), "lat_ref": summary(c),
                             "p99_ratio": round(pct(a, 0.99) / pct(c, 0.99), 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
            cl.delete_topic(topic)
    ratios = sorted(r["cleaning"]["p99_ratio"] for r in rows)
    even = sorted(r["idle"]["p99_ratio"] for r in rows)
    print(json.dumps({"bench": "cleaner-p99-paired", "cleaning_p99_ratios": ratios,
                      "median": ratios[len(ratios) // 2], "idle_p99_ratios": even}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mib", type=int, default=2048)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--props", default="", help="extra broker properties, k=v,k=v")
    ap.add_argument("--data-dir", default=None, help="keep the cluster's files here")
    ap.add_argument("--paired", action="store_true", help="a second broker as the reference")
    ap.add_argument("--compression", default="none",
                    help="the loaded records' codec (compressed batches are cleaned batch by batch in Python)")
    ap.add_argument("--interference", choices=["spin", "read", "burst", "write", "direct", "clean", "clean-shm"], default=None,
                    help="no cleaning: another process spins a core, or reads the topic's segments "
                         "twice (spread over the time, or at once), or writes and fsyncs what a "
                         "cleaning writes, for as long as the cleanings took in the previous "
                         "round (a floor: what one core less, or that much I/O, costs the broker "
                         "on this host)")
    args = ap.parse_args()
    props = {"log.cleaner.backoff.ms": "200", "log.segment.bytes": str(64 << 20),
             "offsets.topic.replication.factor": "1"}
    props.update(dict(kv.split("=", 1) for kv in args.props.split(",") if kv))
    if args.paired:
        paired(args, props)
        return
    results = []
    pooled_idle: list[float] = []
    pooled_cleaning: list[float] = []
    with LocalCluster(brokers=1, broker_properties=props, data_dir=args.data_dir) as cl:
        assert cl.data_dir is not None
        b = cl.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": b})
        cl.create_topic("lat", partitions=1, replication_factor=1)
        broker_log = cl.data_dir / "broker-1" / "broker.log"
        for r in range(args.rounds):
            topic = f"cmp-{r}"
            cl.create_topic(topic, partitions=args.partitions, replication_factor=1,
                            configs={"cleanup.policy": "delete"})
            t0 = time.monotonic()
            load(b, topic, args.mib, args.compression)
            load_s = time.monotonic() - t0
            os.sync()
            time.sleep(1)
            lp = LatencyProducer(b, "lat", args.rate)
            lp.run(args.idle)
            idle = [lat for _t, lat in lp.samples]
            lp.samples = []
            done = threading.Event()
            if args.interference:
                spans = []
                threading.Thread(target=interfere, daemon=True,
                                 args=(args.interference, cl.data_dir / "broker-1", topic,
                                       [0.3] * args.partitions if not results
                                       else results[-1]["cleanings_s"], spans, done)).start()
            else:
                set_policy(admin, topic, "compact")

                def finished(topic: str = topic, done: threading.Event = done) -> None:
                    while len(cleanings(broker_log, topic)) < args.partitions:
                        time.sleep(0.1)
                    done.set()

                threading.Thread(target=finished, daemon=True).start()
            lp.run(600, until=done)
            if not args.interference:
                spans = cleanings(broker_log, topic)

            def covers(t: float, spans: list[tuple[float, float]] = spans) -> bool:
                return any(a <= t <= b for a, b in spans)

            cleaning = [lat for t, lat in lp.samples if covers(t)]
            # the swap's share: records sent while a cleaning's swap ran on the loop
            swap_spans = [] if args.interference else swaps_of(broker_log, topic)
            in_swap = [lat for t, lat in lp.samples if any(a <= t <= b for a, b in swap_spans)]
            # the slowest records of the cleaning sample: when sent, in seconds after the
            # start of the cleaning they fell in, that cleaning's length and its map pass's
            slow = sorted(((lat, t) for t, lat in lp.samples if covers(t)), reverse=True)[:3]
            maps = map_passes(broker_log, topic)
            where = [(round(lat * 1000, 1), next((round(t - a, 3), round(b - a, 3), maps.get(b))
                                                for a, b in spans if a <= t <= b)) for lat, t in slow]
            lp.samples = []
            lp.run(args.idle)
            idle += [lat for _t, lat in lp.samples]
            pooled_idle += idle
            pooled_cleaning += cleaning
            row = {"round": r, "load_mib": args.mib, "load_s": round(load_s, 1), "rate": args.rate,
                   "cleanings_s": [round(b - a, 2) for a, b in spans], "idle": summary(idle),
                   "cleaning": summary(cleaning), "errors": lp.errors, "load1": round(os.getloadavg()[0], 2),
                   "slowest_during_cleaning": where, "during_swaps": summary(in_swap) if in_swap else None}
            row["p99_ratio"] = round(row["cleaning"]["p99_ms"] / row["idle"]["p99_ms"], 2)
            print(json.dumps(row), flush=True)
            results.append(row)
            cl.delete_topic(topic)
        swaps = [line.split("(swap ")[1].rstrip(")") for line in broker_log.read_text().splitlines()
                 if "(swap " in line]
    ratios = sorted(r["p99_ratio"] for r in results)
    pooled = {"idle": summary(pooled_idle), "cleaning": summary(pooled_cleaning)}
    print(json.dumps({"bench": "cleaner-p99", "per_round_ratios": ratios, "median_ratio": ratios[len(ratios) // 2],
                      "pooled": pooled, "pooled_p99_ratio": round(pooled["cleaning"]["p99_ms"]
                                                                  / pooled["idle"]["p99_ms"], 2),
                      "swaps": swaps}))


if __name__ == "__main__":
    main()
