"""`kafkarepl node start`: one broker process per core on one host, with real ZooKeeper and
real broker processes: derived ids/ports/dirs/listeners, core pinning (every thread),
broker.rack passed through, a crashed broker restarted by the node, clean stop; and two
simulated hosts (two loopback addresses) for host-aware replica placement."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkarepl.cli import wire
from kafkarepl.protocol import ApiKey
from tests.fixtures.cluster import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def free_ports(n: int, host: str = "127.0.0.1") -> int:
    """A base port with n consecutive free ports."""
    for _ in range(100):
        base = free_port()
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind((host, p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no run of free ports")


class Node:
    def __init__(self, tmp: Path, name: str, props: dict[str, str]) -> None:
        self.dir = tmp / name
        self.dir.mkdir(parents=True)
        self.config = self.dir / "node.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.out = self.dir / "node.out"
        self.data = Path(props["node.data.dir"])
        self.proc: subprocess.Popen | None = None

    def start(self) -> Node:
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "kafkarepl", "node", "start", "--config",
                                          str(self.config)], stdout=out, stderr=subprocess.STDOUT)
        return self

    def wait_for(self, text: str, timeout: float = 90.0, count: int = 1) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.output().count(text) >= count:
                return
            assert self.proc is not None and self.proc.poll() is None, self.output()
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} within {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def state(self) -> dict:
        return json.loads((self.data / "node.json").read_text())

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill_all(self) -> None:
        """Teardown after a failed test: the node and whatever brokers it left."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        try:
            pids = [b["pid"] for b in self.state()["brokers"]]
        except (OSError, ValueError):
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, TypeError):
                pass


def node_props(zk: str, data: Path, base_id: int, port: int, host: str, brokers: int, **extra: str) -> dict[str, str]:
    return {
        "zookeeper.connect": zk,
        "zookeeper.session.timeout.ms": "3000",
        "replica.lag.time.max.ms": "3000",
        "node.data.dir": str(data),
        "node.brokers": str(brokers),
        "node.base.broker.id": str(base_id),
        "node.base.port": str(port),
        "node.listen.host": host,
        "node.advertised.host": host,
        "node.restart.backoff.ms": "200",
        **extra,
    }


def _allowed_cpus(pid: int) -> set[str]:
    """Cpus_allowed_list of every thread of the process."""
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out.add(line.split(":", 1)[1].strip())
    return out


def test_node_one_broker_per_core(zk_chroot, tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    port = free_ports(2)
    node = Node(tmp_path, "node", node_props(zk_chroot, tmp_path / "data", 11, port, "127.0.0.1", 2,
                                              **{"broker.rack": "rack-a"}))
    try:
        node.start()
        node.wait_for("all 2 brokers serving")
        md = wire.metadata("127.0.0.1", port, [])
        assert sorted((b["node_id"], b["host"], b["port"], b["rack"]) for b in md["brokers"]) == [
            (11, "127.0.0.1", port, "rack-a"), (12, "127.0.0.1", port + 1, "rack-a")]
        state = node.state()
        for i, b in enumerate(state["brokers"]):
            assert b["cpu"] == cpus[i % len(cpus)]
            assert os.sched_getaffinity(b["pid"]) == {b["cpu"]}
            assert _allowed_cpus(b["pid"]) == {str(b["cpu"])}  # kazoo's and executor threads too
            assert (tmp_path / "data" / f"broker-{b['broker_id']}" / "logs").is_dir()
        assert subprocess.run([sys.executable, "-m", "kafkarepl", "node", "status", "--config", str(node.config)],
                              capture_output=True).returncode == 0

        # a crashed broker is restarted by the node, pinned again
        victim = state["brokers"][1]["pid"]
        os.kill(victim, signal.SIGKILL)
        node.wait_for("broker 12 restarted")
        node.wait_for("all 2 brokers serving", count=2)
        new = node.state()["brokers"][1]
        assert new["pid"] != victim and os.sched_getaffinity(new["pid"]) == {new["cpu"]}

        # logrotate's copytruncate (docs/node.md): the broker's log, opened append-only,
        # goes on from the start of the emptied file instead of leaving a hole of NULs
        broker_log = tmp_path / "data" / "broker-11" / "broker.log"
        rotated = broker_log.read_bytes()
        assert b"broker 11 shutting down" not in rotated
        os.truncate(broker_log, 0)

        pids = [b["pid"] for b in node.state()["brokers"]]
        assert node.stop() == 0
        after = broker_log.read_bytes()
        assert b"broker 11 shutting down" in after and b"\0" not in after
        assert b"ZooKeeper session lost" not in after  # its own close is no warning
        assert "stopped" in node.output()
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
        assert not (tmp_path / "data" / "node.json").exists()
    finally:
        node.kill_all()


def test_two_hosts_never_hold_two_replicas_of_a_partition_on_one_host(zk_chroot, tmp_path):
    nodes: list[Node] = []
    try:
        for i, host in enumerate(("127.0.0.1", "127.0.0.2")):
            port = free_ports(2, host)
            nodes.append(Node(tmp_path, f"host{i}", node_props(zk_chroot, tmp_path / f"data{i}", 1 + 10 * i,
                                                                 port, host, 2)).start())
        for n in nodes:
            n.wait_for("all 2 brokers serving")
        host, port = "127.0.0.1", nodes[0].state()["brokers"][0]["port"]
        deadline = time.monotonic() + 30
        while len(wire.metadata(host, port, [])["brokers"]) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        body = {"topics": [{"name": "spread", "num_partitions": 12, "replication_factor": 2, "assignments": [],
                            "configs": []}], "timeout_ms": 30000, "validate_only": False}
        resp = wire.call(host, port, ApiKey.CREATE_TOPICS, 5, body, timeout=35)
        assert resp["topics"][0]["error_code"] == 0, resp
        md = wire.metadata(host, port, ["spread"])
        host_of = {b["node_id"]: b["host"] for b in md["brokers"]}
        for p in md["topics"][0]["partitions"]:
            assert len({host_of[r] for r in p["replica_nodes"]}) == 2, (p, host_of)
    finally:
        for n in nodes:
            n.kill_all()


def test_brokers_stop_when_the_node_is_killed(zk_chroot, tmp_path):
    port = free_ports(1)
    node = Node(tmp_path, "node", node_props(zk_chroot, tmp_path / "data", 21, port, "127.0.0.1", 1))
    try:
        node.start()
        node.wait_for("all 1 brokers serving")
        pid = node.state()["brokers"][0]["pid"]
        assert node.proc is not None
        node.proc.kill()
        node.proc.wait()
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]:
            assert time.monotonic() < deadline, "broker outlived its SIGKILLed node"
            time.sleep(0.1)
    finally:
        node.kill_all()
