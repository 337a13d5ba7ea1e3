"""Produce and consume over TLS against plaintext, one broker each, in one run (issue 14's
speed figure). Prints one JSON line per figure.

    python bench/tls_bench.py [--records 500000]

Each mode gets a fresh broker on the same private ZooKeeper; confluent-kafka produces
N x 100-byte records (acks=1, linger.ms 5) to a 6-partition topic, then one consumer
reads them all (fetch.queue.backoff.ms 10). Over TLS the broker encrypts in user space:
record bytes are read with pread and written through OpenSSL instead of sendfile.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kafkarepl.tls_certs import make_ca, make_cert  # noqa: E402
from kafkarepl.zk.local import LocalZooKeeper  # noqa: E402

VALUE = os.urandom(100)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_mode(mode: str, zk: str, root: Path, n: int, ca: Path | None, cert: Path | None) -> dict[str, float]:
    port = free_port()
    d = root / mode
    d.mkdir()
    props = {"broker.id": "1", "listeners": f"{mode}://127.0.0.1:{port}", "log.dirs": str(d / "logs"),
             "zookeeper.connect": f"{zk}/{mode.lower()}", "offsets.topic.replication.factor": "1"}
    client = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if mode == "SSL":
        props |= {"ssl.keystore.location": str(cert), "ssl.truststore.location": str(ca)}
        client |= {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    (d / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    proc = subprocess.Popen([sys.executable, "-m", "kafkarepl.cli.main", "broker", "start", "--config",
                             str(d / "server.properties")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        admin = AdminClient(client)
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.list_topics(timeout=2)
                break
            except Exception:  # noqa: BLE001 - starting
                assert time.monotonic() < deadline, f"{mode} broker not serving"
                time.sleep(0.2)
        admin.create_topics([NewTopic("b", 6, 1)])["b"].result(30)
        p = Producer({**client, "acks": 1, "linger.ms": 5, "queue.buffering.max.messages": 500000})
        p.produce("b", VALUE)
        p.flush(30)
        t0 = time.perf_counter()
        for _ in range(n):
            while True:
                try:
                    p.produce("b", VALUE)
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush(60)
        produce = n / (time.perf_counter() - t0)
        c = Consumer({**client, "group.id": "tls-bench", "fetch.queue.backoff.ms": 10})
        c.assign([TopicPartition("b", i, 0) for i in range(6)])
        got, t0 = 0, time.perf_counter()
        while got < n:
            msgs = c.consume(10000, 5.0)
            if not msgs:
                break
            got += len(msgs)
        consume = got / (time.perf_counter() - t0)
        c.close()
        return {"produce": produce, "consume": consume}
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    n = ap.parse_args().records
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ca, ca_key, ca_cert = make_ca(root)
        cert = make_cert(root, "broker", ca_key, ca_cert)
        zk = LocalZooKeeper(root / "zk", tick_ms=200)
        zk.start()
        try:
            plain = run_mode("PLAINTEXT", zk.connect_string, root, n, None, None)
            tls = run_mode("SSL", zk.connect_string, root, n, ca, cert)
        finally:
            zk.stop()
    for k in ("produce", "consume"):
        print(json.dumps({"bench": f"{k}-tls-vs-plaintext", "records": n, "plaintext_rec_per_s": round(plain[k]),
                          "tls_rec_per_s": round(tls[k]), "ratio": round(tls[k] / plain[k], 3),
                          "load1": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
