#!/usr/bin/env python3
"""End-to-end bench against any Kafka-protocol bootstrap address, with confluent-kafka.

Workloads follow ../shared/reference/kafka-baseline.md. Every result is printed as one
JSON line so runs (kafkarepl vs Kafka, or over time) can be compared mechanically.

    e2e.py produce --bootstrap B --topic T --records N --size 100 --acks all
    e2e.py consume --bootstrap B --topic T
    e2e.py consume-kcat --bootstrap B --topic T
    e2e.py latency --bootstrap B --topic T --rate 5000 --seconds 20 --warmup 2
    e2e.py failover --data-dir D --topic T --rate 2000 [--clean]
    e2e.py controller-failover --data-dir D --topic T
    e2e.py idle --data-dir D
    e2e.py sendfile-compare --data-dir D --topic T
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from itertools import pairwise

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_cluster as ec  # noqa: E402

STAMP = struct.Struct(">q")  # send time (monotonic ns) or record id, first 8 bytes of a value


def emit(result: dict) -> None:
    result["load1"] = round(os.getloadavg()[0], 2)
    result["ts"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(result), flush=True)


def pct(values, *ps: float) -> dict[str, float]:
    """Percentiles in ms of values given in seconds."""
    if len(values) == 0:
        return {f"p{p:g}_ms": None for p in ps}
    ms = sorted(v * 1e3 for v in values)
    return {f"p{p:g}_ms": round(percentile(ms, p), 3) for p in ps}


def percentile(ordered: list[float], p: float) -> float:
    """Linear-interpolated percentile of a sorted list (numpy's default method).

    Pure Python on purpose: importing numpy in the client process starts an OpenBLAS
    thread that spins for a while and takes CPU from the client being measured.
    """
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def producer_config(args, acks: str) -> dict:
    return {
        "bootstrap.servers": args.bootstrap,
        "acks": acks,
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "compression.type": "none",
        "enable.idempotence": args.idempotence,
        "queue.buffering.max.messages": 100000,
    }


def consumer_config(bootstrap: str, **extra) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "e2e-bench",  # required by the client; assign() never joins it
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        **extra,
    }


def partitions_of(client, topic: str) -> list[int]:
    md = client.list_topics(topic, timeout=10)
    t = md.topics[topic]
    if t.error is not None:
        raise KafkaException(t.error)
    return sorted(t.partitions)


# ---------------------------------------------------------------- produce


def cmd_produce(args) -> None:
    p = Producer(producer_config(args, args.acks))
    partitions_of(p, args.topic)  # metadata warm before the clock starts
    value = os.urandom(args.size)
    latencies: list[float] = []
    errors = [0]
    lat_append = latencies.append

    def on_delivery(err, msg):
        if err is not None:
            errors[0] += 1
        else:
            lat_append(msg.latency())

    pids = list(ec.broker_pids(args.data_dir).values()) if args.data_dir else []
    broker_cpu0 = ec.cpu_snapshot(pids)
    cpu0 = time.process_time()
    t0 = time.monotonic()
    produce, poll, topic = p.produce, p.poll, args.topic
    for i in range(args.records):
        while True:
            try:
                produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:  # queue.buffering.max.messages in flight: wait for acks
                poll(0.005)
        if i & 1023 == 0:
            poll(0)
    remaining = p.flush(300)
    wall = time.monotonic() - t0
    client_cpu = time.process_time() - cpu0
    broker_cpu = ec.cpu_delta(broker_cpu0) if pids else None
    acked = len(latencies)
    result = {
        "bench": "produce", "topic": args.topic, "acks": args.acks, "size": args.size,
        "records": args.records, "acked": acked, "errors": errors[0], "unflushed": remaining,
        "seconds": round(wall, 3), "rec_per_s": round(acked / wall),
        "mb_per_s": round(acked * args.size / wall / 1e6, 2),
        **pct(latencies, 50, 99),
        "client_cpu_s": round(client_cpu, 2),
    }
    if broker_cpu is not None:
        result["broker_cpu_s"] = round(broker_cpu, 2)
        result["broker_vs_client_cpu"] = round(broker_cpu / client_cpu, 3)
    emit(result)


# ---------------------------------------------------------------- consume


def assign_all(c: Consumer, topic: str) -> int:
    """assign() every partition from its log start; returns records up to the HW."""
    tps, total = [], 0
    for part in partitions_of(c, topic):
        low, high = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        tps.append(TopicPartition(topic, part, low))
        total += high - low
    c.assign(tps)
    return total


def cmd_consume(args) -> None:
    c = Consumer(consumer_config(
        args.bootstrap, **{"queued.min.messages": 1000000, "fetch.queue.backoff.ms": 0}))
    expected = assign_all(c, args.topic)
    pids = list(ec.broker_pids(args.data_dir).values()) if args.data_dir else []
    broker_cpu0 = ec.cpu_snapshot(pids)
    count = nbytes = errors = 0
    cpu0 = time.process_time()
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    while count < expected and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            v = m.value()
            if v is None and m.error() is not None:
                errors += 1
                continue
            count += 1
            nbytes += len(v)
    wall = time.monotonic() - t0
    client_cpu = time.process_time() - cpu0
    c.close()
    result = {
        "bench": "consume", "topic": args.topic, "expected": expected, "records": count,
        "errors": errors, "seconds": round(wall, 3), "rec_per_s": round(count / wall),
        "mb_per_s": round(nbytes / wall / 1e6, 2), "client_cpu_s": round(client_cpu, 2),
    }
    if pids:
        result["broker_cpu_s"] = round(ec.cpu_delta(broker_cpu0), 2)
    emit(result)


def cmd_consume_kcat(args) -> None:
    """The same consume with kcat (librdkafka without Python on top).

    kcat stops after exactly the records up to the HW (-c), not at partition EOF: with
    -e it would wait out a fetch.wait.max.ms long poll per partition at the end, which
    measures the protocol's EOF detection rather than throughput. The wall time is the
    kcat process's whole life (start-up, metadata and connections included).
    """
    c = Consumer(consumer_config(args.bootstrap))
    expected = assign_all(c, args.topic)
    c.close()
    pids = list(ec.broker_pids(args.data_dir).values()) if args.data_dir else []
    broker_cpu0 = ec.cpu_snapshot(pids)
    cmd = ["kcat", "-C", "-b", args.bootstrap, "-t", args.topic, "-o", "beginning",
           "-c", str(expected), "-q", "-f", "%S\n", "-X", "queued.min.messages=1000000"]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, timeout=args.timeout).stdout
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    sizes = out.split()  # %S: value size of every record, so the count and bytes are checked
    result = {
        "bench": "consume-kcat", "topic": args.topic, "expected": expected,
        "records": len(sizes), "seconds": round(wall, 3),
        "rec_per_s": round(len(sizes) / wall),
        "mb_per_s": round(sum(map(int, sizes)) / wall / 1e6, 2),
        "client_cpu_s": round(ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime, 2),
    }
    if pids:
        result["broker_cpu_s"] = round(ec.cpu_delta(broker_cpu0), 2)
    emit(result)


# ---------------------------------------------------------------- latency


def cmd_latency_consumer(args) -> None:
    """Child process: read from given offsets, report receive - send stamp."""
    c = Consumer(consumer_config(args.bootstrap, **{"fetch.queue.backoff.ms": 0}))
    starts = json.loads(args.starts)
    c.assign([TopicPartition(args.topic, int(p), off) for p, off in starts.items()])
    print("ready", flush=True)
    measure_from = int(sys.stdin.readline())  # producer's start + warm-up, monotonic ns
    lat = []
    seen = 0
    deadline = time.monotonic() + args.timeout
    while seen < args.expect and time.monotonic() < deadline:
        # poll() returns on the first message; consume(n, t) would wait for n of them
        m = c.poll(0.1)
        now = time.monotonic_ns()
        if m is None or m.error() is not None:
            continue
        seen += 1
        sent = STAMP.unpack_from(m.value())[0]
        if sent >= measure_from:
            lat.append((now - sent) / 1e9)
    c.close()
    out = {"received": seen, **pct(lat, 50, 99, 99.9), "measured": len(lat)}
    if lat:
        out["max_ms"] = round(max(lat) * 1e3, 3)
    print(json.dumps(out), flush=True)


def cmd_latency(args) -> None:
    p = Producer(producer_config(args, "all"))
    c = Consumer(consumer_config(args.bootstrap))
    starts = {}
    for part in partitions_of(c, args.topic):
        starts[part] = c.get_watermark_offsets(TopicPartition(args.topic, part), timeout=10)[1]
    c.close()
    total = int(args.rate * (args.seconds + args.warmup))
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "_latency-consumer",
         "--bootstrap", args.bootstrap, "--topic", args.topic,
         "--starts", json.dumps(starts), "--expect", str(total),
         "--timeout", str(args.seconds * 3 + 30)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # let the consumer's first fetches reach the brokers
    errors = [0]
    ack_lat: list[float] = []

    def on_delivery(err, msg):
        if err is not None:
            errors[0] += 1
        else:
            ack_lat.append(msg.latency())

    pad = os.urandom(max(0, args.size - STAMP.size))
    t0 = time.monotonic_ns()
    child.stdin.write(f"{t0 + int(args.warmup * 1e9)}\n")
    child.stdin.flush()
    interval = 1e9 / args.rate
    for i in range(total):
        due = t0 + int(i * interval)
        now = time.monotonic_ns()
        if due > now:
            p.poll(0)
            now = time.monotonic_ns()
            if due > now:
                time.sleep((due - now) / 1e9)
        p.produce(args.topic, STAMP.pack(time.monotonic_ns()) + pad, on_delivery=on_delivery)
        p.poll(0)
    p.flush(60)
    out, _ = child.communicate(timeout=args.seconds * 3 + 60)
    res = json.loads(out.strip().splitlines()[-1])
    emit({"bench": "latency", "topic": args.topic, "rate": args.rate, "seconds": args.seconds,
          "sent": total, "errors": errors[0], **res,
          **{f"ack_{k}": v for k, v in pct(ack_lat[len(ack_lat) // 10:], 50, 99).items()}})


# ---------------------------------------------------------------- failover


def leader_of(client, topic: str, partition: int) -> int:
    return client.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def consume_ids(bootstrap: str, topic: str, nonce: bytes) -> list[int]:
    """Record ids (first 8 bytes of a value) of this run's records (bytes 8-16 = nonce)."""
    c = Consumer(consumer_config(bootstrap))
    expected = assign_all(c, topic)
    ids: list[int] = []
    seen = 0
    idle_deadline = time.monotonic() + 30
    while seen < expected and time.monotonic() < idle_deadline:
        msgs = c.consume(10000, 1.0)
        if msgs:
            idle_deadline = time.monotonic() + 30
        for m in msgs:
            v = m.value()
            if m.error() is None:
                seen += 1
                if v[8:16] == nonce:
                    ids.append(STAMP.unpack_from(v)[0])
    c.close()
    return ids


def proc_gone(pid: int) -> bool:
    """True once the process has exited: missing, or a zombie its reaper has not collected."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except FileNotFoundError:
        return True


def wait_exit(pid: int, out: list[float]) -> None:
    """Record the moment a process is gone (the CLI's own start-up is not the kill time)."""
    while not proc_gone(pid):
        time.sleep(0.001)
    out.append(time.monotonic())


def cmd_failover(args) -> None:
    st = ec.status(args.data_dir)
    bootstrap = ",".join(f"{b['host']}:{b['port']}" for b in st["brokers"] if b["alive"])
    p = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
        "batch.size": 65536, "queue.buffering.max.messages": 100000,
    })
    victim = leader_of(p, args.topic, 0)
    victim_pid = next(b["pid"] for b in st["brokers"] if b["broker_id"] == victim)
    session_ms = int(ec.broker_property(args.data_dir, victim, "zookeeper.session.timeout.ms",
                                        "18000"))
    acks: list[tuple[float, int, int]] = []  # (ack time, partition, id)
    errors = [0]

    def on_delivery(err, msg):
        if err is not None:
            errors[0] += 1
        else:
            acks.append((time.monotonic(), msg.partition(), STAMP.unpack_from(msg.value())[0]))

    nonce = os.urandom(8)
    pad = nonce + os.urandom(84)
    total = int(args.rate * (args.before + session_ms / 1000 * 2 + args.after))
    t0 = time.monotonic()
    kill_at = t0 + args.before
    died: list[float] = []
    threads: list[threading.Thread] = []
    for i in range(total):
        due = t0 + i / args.rate
        while True:
            now = time.monotonic()
            if not threads and now >= kill_at:
                # stop-broker runs in a thread so the producer keeps its offered rate
                cmd = ["stop-broker", str(victim)] + ([] if args.clean else ["--kill"])
                threads = [threading.Thread(target=ec.cluster_cmd, args=(args.data_dir, *cmd)),
                           threading.Thread(target=wait_exit, args=(victim_pid, died))]
                for th in threads:
                    th.start()
            if now >= due:
                break
            p.poll(min(due - now, 0.01))
        p.produce(args.topic, STAMP.pack(i) + pad, on_delivery=on_delivery)
        p.poll(0)
    unflushed = p.flush(120)
    for th in threads:
        th.join()
    t_dead = died[0]
    times = [a[0] for a in acks]
    gaps = [b - a for a, b in pairwise(times)]
    gi = max(range(len(gaps)), key=gaps.__getitem__)
    p0 = [a[0] for a in acks if a[1] == 0]
    p0_after = [t for t in p0 if t > t_dead]
    restart_s = ec.timed_cluster_cmd(args.data_dir, "start-broker", str(victim))
    acked_ids = {a[2] for a in acks}
    present = consume_ids(bootstrap, args.topic, nonce)
    present_set = set(present)
    longest = float(gaps[gi])
    emit({
        "bench": "failover-clean" if args.clean else "failover-kill9", "topic": args.topic,
        "rate": args.rate, "victim": victim, "sent": total, "acked": len(acks),
        "errors": errors[0], "unflushed": unflushed, "lost": len(acked_ids - present_set),
        "duplicates": len(present) - len(present_set),
        "longest_ack_gap_s": round(longest, 3),
        "gap_start_minus_exit_s": round(float(times[gi] - t_dead), 3),
        # partition 0 (led by the victim): process exit -> first ack from its new leader
        "p0_exit_to_first_ack_s": round(float(p0_after[0] - t_dead), 3) if len(p0_after)
        else None,
        "p0_longest_gap_s": round(max(b - a for a, b in pairwise(p0)), 3) if len(p0) > 1
        else None,
        "session_timeout_ms": session_ms,
        "gap_vs_session_timeout": round(longest * 1000 / session_ms, 3),
        "victim_restart_s": round(restart_s, 2),
    })


def cmd_controller_failover(args) -> None:
    st = ec.status(args.data_dir)
    ctrl = st["controller"]
    survivors = [b for b in st["brokers"] if b["alive"] and b["broker_id"] != ctrl]
    bootstrap = ",".join(f"{b['host']}:{b['port']}" for b in survivors)
    c = Consumer(consumer_config(bootstrap))
    n = len(partitions_of(c, args.topic))
    t0 = time.monotonic()
    ec.cluster_cmd(args.data_dir, "stop-broker", str(ctrl), "--kill")
    t_killed = time.monotonic()
    new_ctrl, t_ctrl, leaderless = None, None, n
    while time.monotonic() - t0 < args.timeout:
        parts = c.list_topics(args.topic, timeout=10).topics[args.topic].partitions
        leaderless = sum(1 for pm in parts.values() if pm.leader in (-1, ctrl))
        if t_ctrl is None:
            cur = ec.status(args.data_dir)["controller"]
            if cur not in (None, ctrl):
                new_ctrl, t_ctrl = cur, time.monotonic()
        if leaderless == 0 and len(parts) == n:
            break
        time.sleep(0.05)
    t_led = time.monotonic()
    c.close()
    restart_s = ec.timed_cluster_cmd(args.data_dir, "start-broker", str(ctrl))
    session_ms = int(ec.broker_property(args.data_dir, ctrl, "zookeeper.session.timeout.ms",
                                        "18000"))
    emit({
        "bench": "controller-failover", "topic": args.topic, "partitions": n,
        "killed_controller": ctrl, "new_controller": new_ctrl,
        "kill_cmd_s": round(t_killed - t0, 3),
        "new_controller_s": None if t_ctrl is None else round(t_ctrl - t0, 3),
        "all_partitions_led_s": round(t_led - t0, 3) if leaderless == 0 else None,
        "leaderless_at_end": leaderless, "session_timeout_ms": session_ms,
        "killed_broker_restart_s": round(restart_s, 2),
    })


# ---------------------------------------------------------------- idle / start


def cmd_idle(args) -> None:
    pids = ec.broker_pids(args.data_dir)
    rss = {bid: ec.proc_rss_kib(pid) for bid, pid in sorted(pids.items())}
    restart = {}
    for bid in sorted(pids)[: args.restart]:
        ec.cluster_cmd(args.data_dir, "stop-broker", str(bid))
        restart[bid] = round(ec.timed_cluster_cmd(args.data_dir, "start-broker", str(bid)), 3)
    emit({"bench": "idle", "rss_mib": {b: round(k / 1024, 1) for b, k in rss.items()},
          "start_broker_s": restart})


# ---------------------------------------------------------------- sendfile ceiling


def bare_sendfile(files: list[str]) -> tuple[int, float]:
    """Send every file over loopback TCP with os.sendfile, drained by recv_into."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def sender():
        conn, _ = srv.accept()
        with conn:
            for path in files:
                fd = os.open(path, os.O_RDONLY)
                try:
                    size, off = os.fstat(fd).st_size, 0
                    while off < size:
                        off += os.sendfile(conn.fileno(), fd, off, size - off)
                finally:
                    os.close(fd)

    th = threading.Thread(target=sender)
    th.start()
    buf = bytearray(1 << 20)
    got = 0
    cli = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    while True:
        n = cli.recv_into(buf)
        if n == 0:
            break
        got += n
    wall = time.monotonic() - t0
    th.join()
    cli.close()
    srv.close()
    return got, wall


def cmd_sendfile_compare(args) -> None:
    files = [str(f) for f in ec.topic_segment_files(args.data_dir, args.topic)]
    ceilings = []
    for _ in range(args.rounds):
        nbytes, wall = bare_sendfile(files)
        ceilings.append(nbytes / wall / 1e6)
    emit({"bench": "bare-sendfile", "topic": args.topic, "files": len(files),
          "bytes": nbytes, "mb_per_s_rounds": [round(x, 1) for x in ceilings],
          "mb_per_s": round(statistics.median(ceilings), 1)})


# ---------------------------------------------------------------- CLI


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def client_args(sp, topic=True):
        sp.add_argument("--bootstrap", required=True)
        if topic:
            sp.add_argument("--topic", required=True)
        sp.add_argument("--linger-ms", type=int, default=5)
        sp.add_argument("--batch-size", type=int, default=65536)
        sp.add_argument("--idempotence", action="store_true")

    sp = sub.add_parser("produce")
    client_args(sp)
    sp.add_argument("--records", type=int, default=1_000_000)
    sp.add_argument("--size", type=int, default=100)
    sp.add_argument("--acks", choices=["0", "1", "all"], default="1")
    sp.add_argument("--data-dir", help="kafkarepl cluster dir: also measure broker CPU")
    sp.set_defaults(fn=cmd_produce)

    for name, fn in (("consume", cmd_consume), ("consume-kcat", cmd_consume_kcat)):
        sp = sub.add_parser(name)
        sp.add_argument("--bootstrap", required=True)
        sp.add_argument("--topic", required=True)
        sp.add_argument("--timeout", type=float, default=300)
        sp.add_argument("--data-dir", help="kafkarepl cluster dir: also measure broker CPU")
        sp.set_defaults(fn=fn)

    sp = sub.add_parser("latency")
    client_args(sp)
    sp.add_argument("--rate", type=int, default=5000)
    sp.add_argument("--seconds", type=float, default=20)
    sp.add_argument("--warmup", type=float, default=2)
    sp.add_argument("--size", type=int, default=100)
    sp.set_defaults(fn=cmd_latency)

    sp = sub.add_parser("_latency-consumer")
    sp.add_argument("--bootstrap", required=True)
    sp.add_argument("--topic", required=True)
    sp.add_argument("--starts", required=True)
    sp.add_argument("--expect", type=int, required=True)
    sp.add_argument("--timeout", type=float, required=True)
    sp.set_defaults(fn=cmd_latency_consumer)

    sp = sub.add_parser("failover")
    sp.add_argument("--data-dir", required=True)
    sp.add_argument("--topic", required=True)
    sp.add_argument("--rate", type=int, default=2000)
    sp.add_argument("--before", type=float, default=5, help="seconds of producing before")
    sp.add_argument("--after", type=float, default=5,
                    help="seconds after 2x the session timeout")
    sp.add_argument("--clean", action="store_true", help="SIGTERM instead of kill -9")
    sp.set_defaults(fn=cmd_failover)

    sp = sub.add_parser("controller-failover")
    sp.add_argument("--data-dir", required=True)
    sp.add_argument("--topic", required=True)
    sp.add_argument("--timeout", type=float, default=120)
    sp.set_defaults(fn=cmd_controller_failover)

    sp = sub.add_parser("idle")
    sp.add_argument("--data-dir", required=True)
    sp.add_argument("--restart", type=int, default=3, help="brokers to stop+start, timed")
    sp.set_defaults(fn=cmd_idle)

    sp = sub.add_parser("sendfile-compare")
    sp.add_argument("--data-dir", required=True)
    sp.add_argument("--topic", required=True)
    sp.add_argument("--rounds", type=int, default=3)
    sp.set_defaults(fn=cmd_sendfile_compare)

    args = ap.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
