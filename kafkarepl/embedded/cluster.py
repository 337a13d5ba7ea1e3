"""LocalCluster: a real kafkarepl cluster (ZooKeeper + broker processes) for a Python
program, a notebook or a test suite. See docs/embedding.md.

Brokers run as separate processes (`python -m kafkarepl.embedded.broker_main`), never
threads: a broker owns its process (signal handlers, os._exit at shutdown, one asyncio
loop). The calling thread needs no signal handlers, so a notebook or a thread pool can
use it. Teardown always happens: on context exit, on stop(), when the object is
garbage collected, at interpreter exit, and, if the calling process dies without running
any of those (SIGKILL, os._exit), a small reaper process kills what was started.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkarepl.zk.local import LocalZooKeeper

# Broker properties for a fast, local, test-friendly cluster; `broker_properties` wins.
DEFAULT_BROKER_PROPERTIES: dict[str, str] = {
    # a killed or paused broker leaves the cluster after 3 s (ZooKeeper ticks are 200 ms)
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "100",
    "controlled.shutdown.retry.backoff.ms": "200",
    # consumer groups: no 3 s wait for more members; a small offsets topic
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
}

# ----------------------------------------------------------------------------- reaper
# Reads "<pid> <start time>" and "dir <path>" lines on stdin; at EOF (the owner closed the
# pipe or died) kills every listed process that still exists with the same start time (so
# a recycled pid is never hit), then removes the listed temporary directories. Runs with
# -I -S: no site import, starts in ~10 ms.
_REAPER = r"""
import os, shutil, signal, sys, time
procs = {}
dirs = []
def start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
for line in sys.stdin:
    kind, _, arg = line.rstrip("\n").partition(" ")
    if kind == "dir":
        dirs.append(arg)
    elif kind.isdigit():
        procs[int(kind)] = arg
for pid, started in procs.items():
    if start_time(pid) == started:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
if dirs:
    deadline = time.monotonic() + 5
    def running(pid, started):  # a zombie counts as gone: it holds no files
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return False
        return fields[0] != "Z" and fields[19] == started
    while time.monotonic() < deadline and any(running(p, s) for p, s in procs.items()):
        time.sleep(0.05)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
"""


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class LocalClusterError(RuntimeError):
    """The cluster could not start, or a broker did not come back; the message carries
    the tail of the relevant log."""


_reserved_ports: set[int] = set()
_ports_lock = threading.Lock()
# Its own generator: a test framework that seeds the global one (hypothesis does, per
# test) must not make two processes of one run, or two runs, pick the same ports.
_port_rng = random.Random()


def free_port(host: str = "127.0.0.1") -> int:
    """A free port below Linux's ephemeral range (32768+): a broker restarted on its old
    port never finds it taken by some outgoing connection's source port."""
    with _ports_lock:
        for _ in range(500):
            port = _port_rng.randrange(20000, 32000)
            if port in _reserved_ports:
                continue
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _reserved_ports.add(port)
            return port
    raise LocalClusterError("no free port in 20000-32000")


@dataclass
class _Broker:
    broker_id: int
    port: int
    rack: str | None
    dir: Path
    proc: subprocess.Popen | None = None
    paused: bool = False
    props: dict[str, str] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def state(self) -> str:
        if not self.running:
            return "stopped"
        return "paused" if self.paused else "running"


class _Resources:
    """Everything a LocalCluster started, kept apart from the LocalCluster object so a
    weakref finalizer (garbage collection, interpreter exit) can tear it down."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.brokers: dict[int, _Broker] = {}
        self.zookeeper: LocalZooKeeper | None = None
        self.reaper: subprocess.Popen | None = None
        self.external_zk: str | None = None  # "host:port" of a ZooKeeper we did not start
        self.chroot: str | None = None  # ours to delete on that external ZooKeeper
        self.remove_dir: Path | None = None
        self.closed = False

    def start_reaper(self) -> None:
        self.reaper = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def watch_dir(self, path: Path) -> None:
        """A temporary directory for the reaper to remove if we die."""
        self._tell(f"dir {path}\n")

    def _tell(self, line: str) -> None:
        if self.reaper is None or self.reaper.stdin is None:
            return
        try:
            self.reaper.stdin.write(line.encode())
            self.reaper.stdin.flush()
        except (OSError, ValueError):
            pass

    def watch(self, pid: int | None) -> None:
        """Tell the reaper about a process to kill if we die."""
        if pid is None or self.reaper is None or self.reaper.stdin is None:
            return
        started = _start_time(pid)
        if started is not None:
            self._tell(f"{pid} {started}\n")

    def teardown(self, graceful: bool = True, timeout: float = 10.0) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            procs = [b.proc for b in self.brokers.values() if b.proc is not None]
            for p in procs:
                if p.poll() is None:
                    _signal(p, signal.SIGCONT)
                    _signal(p, signal.SIGTERM if graceful else signal.SIGKILL)
            deadline = time.monotonic() + timeout
            for p in procs:
                try:
                    p.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _signal(p, signal.SIGKILL)
                    p.wait()
            with _ports_lock:
                for b in self.brokers.values():
                    _reserved_ports.discard(b.port)
            if self.zookeeper is not None:
                if graceful and self.remove_dir is None:
                    self.zookeeper.stop()  # its data is kept: let it close cleanly
                else:
                    self.zookeeper.kill()
            elif self.external_zk and self.chroot:
                _delete_chroot(self.external_zk, self.chroot)
            if self.reaper is not None:
                if self.reaper.stdin is not None:
                    try:
                        self.reaper.stdin.close()
                    except OSError:
                        pass
                try:
                    self.reaper.wait(5)
                except subprocess.TimeoutExpired:
                    self.reaper.kill()
                    self.reaper.wait()
            if self.remove_dir is not None:
                shutil.rmtree(self.remove_dir, ignore_errors=True)


def _signal(proc: subprocess.Popen, sig: int) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _ensure_chroot(zk_connect: str) -> None:
    from kazoo.client import KazooClient

    hosts, _, chroot = zk_connect.partition("/")
    client = KazooClient(hosts=hosts)
    client.start(timeout=10)
    try:
        client.ensure_path("/" + chroot)
    finally:
        client.stop()
        client.close()


def _delete_chroot(zk_hosts: str, chroot: str) -> None:
    """Best effort: remove a cluster's znodes from a shared ZooKeeper."""
    try:
        from kazoo.client import KazooClient

        client = KazooClient(hosts=zk_hosts)
        client.start(timeout=5)
        try:
            client.delete(chroot, recursive=True)
        finally:
            client.stop()
            client.close()
    except Exception:  # noqa: BLE001 - cleanup of a throwaway namespace
        pass


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class LocalCluster:
    """ZooKeeper plus `brokers` kafkarepl broker processes on this machine.

    ::

        with kafkarepl.LocalCluster(brokers=3) as cluster:
            cluster.create_topic("events", partitions=3, replication_factor=3)
            producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
            ...
            cluster.kill(cluster.leader("events", 0))

    Arguments (all optional):
      brokers            number of broker processes (ids 1..brokers)
      zookeeper          "host:port[/chroot]" of a running ZooKeeper to use instead of
                         starting one; a fresh chroot is made (and deleted at the end)
                         unless one is given
      data_dir           where logs, configs and ZooKeeper data go; default: a temporary
                         directory removed at stop() (a given directory is kept)
      broker_properties  server.properties entries for every broker (Kafka names),
                         over DEFAULT_BROKER_PROPERTIES
      racks              broker.rack per broker, in broker id order (with racks the
                         brokers also get the rack-aware replica.selector.class unless
                         broker_properties name one: consumers read from their rack)
      host               address the brokers listen on and advertise (127.0.0.1)
      start_timeout      seconds for everything to serve before start() fails
      log_level          broker log level; logs are in data_dir/broker-<id>/broker.log
      python             interpreter for the broker processes (default sys.executable)
    """

    def __init__(
        self,
        brokers: int = 1,
        *,
        zookeeper: str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        broker_properties: dict[str, Any] | None = None,
        racks: list[str] | None = None,
        host: str = "127.0.0.1",
        start_timeout: float = 60.0,
        log_level: str = "INFO",
        python: str | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("brokers must be >= 1")
        if racks is not None and len(racks) != brokers:
            raise ValueError("racks must name one rack per broker")
        self.num_brokers = brokers
        self.host = host
        self.start_timeout = start_timeout
        self.log_level = log_level
        self.python = python or sys.executable
        self._requested_zk = zookeeper
        self._given_dir = Path(data_dir) if data_dir is not None else None
        self._racks = racks
        self._props = {**DEFAULT_BROKER_PROPERTIES,
                       **{k: str(v) for k, v in (broker_properties or {}).items()}}
        self._res = _Resources()
        self._finalizer = weakref.finalize(self, _Resources.teardown, self._res, False, 5.0)
        self._started = False
        self.data_dir: Path | None = None
        self.zookeeper_connect: str = ""
        self.startup_seconds: float | None = None
        # seconds from start() until: "zookeeper" serves (0 when given), every broker was
        # "spawned", "serving" (all brokers answer, a controller is elected)
        self.startup_phases: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle -----
    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalCluster:
        """Start ZooKeeper (unless given) and every broker; return once every broker
        serves Metadata, knows all brokers and a controller is elected."""
        with self._res.lock:
            if self._res.closed:
                raise LocalClusterError("a stopped LocalCluster cannot be started again")
            if self._started:
                return self
            self._started = True
            t0 = time.monotonic()
            try:
                self._start(t0)
            except BaseException:
                self.stop(graceful=False)
                raise
            self.startup_seconds = time.monotonic() - t0
            return self

    def _start(self, t0: float) -> None:
        res = self._res
        if self._given_dir is not None:
            self.data_dir = self._given_dir.resolve()
            self.data_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.data_dir = Path(tempfile.mkdtemp(prefix="kafkarepl-"))
            res.remove_dir = self.data_dir
        res.start_reaper()
        if res.remove_dir is not None:
            res.watch_dir(res.remove_dir)
        if self._requested_zk is None:
            zk = LocalZooKeeper(self.data_dir / "zookeeper", tick_ms=200)
            res.zookeeper = zk
            # Start ZooKeeper without waiting: the brokers' interpreters start meanwhile
            # and retry their ZooKeeper connection until it serves.
            zk.launch(detach=True)
            res.watch(zk.pid)
            self.zookeeper_connect = zk.connect_string
        else:
            hosts, slash, chroot = self._requested_zk.partition("/")
            chroot = chroot.strip("/")
            if not chroot:
                chroot = f"kafkarepl-{uuid.uuid4().hex[:12]}"
                res.external_zk, res.chroot = hosts, "/" + chroot
            self.zookeeper_connect = f"{hosts}/{chroot}"
            _ensure_chroot(self.zookeeper_connect)
        for i in range(1, self.num_brokers + 1):
            rack = self._racks[i - 1] if self._racks else None
            b = _Broker(i, free_port(self.host), rack, self.data_dir / f"broker-{i}")
            b.dir.mkdir(parents=True, exist_ok=True)
            res.brokers[i] = b
            self._write_config(b)
            self._spawn(b)
        self.startup_phases["spawned"] = time.monotonic() - t0
        if res.zookeeper is not None:
            res.zookeeper.wait_serving(max(1.0, self.start_timeout - (time.monotonic() - t0)))
        self.startup_phases["zookeeper"] = time.monotonic() - t0 if res.zookeeper else 0.0
        deadline = t0 + self.start_timeout
        for b in res.brokers.values():
            self._wait_serving(b, deadline, expect_brokers=self.num_brokers)
        self.startup_phases["serving"] = time.monotonic() - t0

    def stop(self, graceful: bool = True, timeout: float = 10.0) -> None:
        """Stop every broker (SIGTERM, SIGKILL after `timeout`; graceful=False: SIGKILL at
        once), then ZooKeeper if it was started here, and remove the temporary data
        directory. Idempotent; never raises for processes that are already gone."""
        self._res.teardown(graceful=graceful, timeout=timeout)
        self._finalizer.detach()

    close = stop

    @property
    def running(self) -> bool:
        return self._started and not self._res.closed

    # ------------------------------------------------------------------ addresses -----
    @property
    def bootstrap_servers(self) -> str:
        """"host:port,host:port,..." of every broker (running or not)."""
        return ",".join(f"{self.host}:{b.port}" for b in self._res.brokers.values())

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._res.brokers)

    def port(self, broker_id: int) -> int:
        return self._broker(broker_id).port

    def pid(self, broker_id: int) -> int | None:
        b = self._broker(broker_id)
        return b.proc.pid if b.running and b.proc is not None else None

    def pids(self) -> list[int]:
        """Pids of every process this cluster runs (brokers, ZooKeeper, the reaper)."""
        out = [b.proc.pid for b in self._res.brokers.values() if b.running and b.proc]
        zk = self._res.zookeeper
        if zk is not None and zk.pid is not None:
            out.append(zk.pid)
        reaper = self._res.reaper
        if reaper is not None and reaper.poll() is None:
            out.append(reaper.pid)
        return out

    def log_path(self, broker_id: int) -> Path:
        return self._broker(broker_id).log_path

    def log_tail(self, broker_id: int, lines: int = 40) -> str:
        return _tail(self._broker(broker_id).log_path, lines)

    # ---------------------------------------------------------------- processes -------
    def _broker(self, broker_id: int) -> _Broker:
        try:
            return self._res.brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id} (brokers: {self.broker_ids})") from None

    def _write_config(self, b: _Broker) -> None:
        props = dict(self._props)
        props.update(
            {
                "broker.id": str(b.broker_id),
                "listeners": f"PLAINTEXT://{self.host}:{b.port}",
                "log.dirs": str(b.dir / "logs"),
                "zookeeper.connect": self.zookeeper_connect,
            }
        )
        from kafkarepl.server.config import RACK_AWARE_SELECTOR, BrokerConfig, ConfigError

        if b.rack:  # racks here are for trying rack features: follower fetching included
            props["broker.rack"] = b.rack
            props.setdefault("replica.selector.class", RACK_AWARE_SELECTOR)

        try:
            BrokerConfig.from_props(props)  # fail here, not in a broker's log
        except ConfigError as exc:
            raise LocalClusterError(f"broker {b.broker_id}: {exc}") from None
        b.props = props
        b.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _spawn(self, b: _Broker) -> None:
        import kafkarepl

        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        # The broker must import this same kafkarepl, installed or not.
        root = str(Path(kafkarepl.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        cmd = [self.python, "-m", "kafkarepl.embedded.broker_main", str(b.config_path), self.log_level]
        if self._res.zookeeper is not None:
            cmd += ["--wait-zookeeper", self._res.zookeeper.connect_string]
        with open(b.log_path, "ab") as log:
            b.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # Own session: a Ctrl-C meant for the caller does not hit the brokers
                # half-way; the caller's teardown stops them.
                start_new_session=True,
            )
        b.paused = False
        self._res.watch(b.proc.pid)

    def _wait_serving(self, b: _Broker, deadline: float, expect_brokers: int = 0) -> dict[str, Any]:
        from kafkarepl.cli import wire

        last: Exception | None = None
        while True:
            if not b.running:
                log = _tail(b.log_path)
                if "Address already in use" in log and b.proc is not None and b.proc.returncode != 0:
                    # Someone took the port between our check and the broker's bind.
                    b.port = free_port(self.host)
                    self._write_config(b)
                    self._spawn(b)
                    continue
                raise LocalClusterError(f"broker {b.broker_id} exited during start-up:\n{log}")
            try:
                md = wire.metadata(self.host, b.port, [], timeout=2)
                ids = {x["node_id"] for x in md["brokers"]}
                if md["controller_id"] >= 0 and b.broker_id in ids and len(ids) >= expect_brokers:
                    return md
            except (OSError, ConnectionError) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise LocalClusterError(
                    f"broker {b.broker_id} not serving on {self.host}:{b.port} ({last}):\n{_tail(b.log_path)}"
                )
            time.sleep(0.01)

    def kill(self, broker_id: int) -> None:
        """SIGKILL the broker (a crash: no controlled shutdown, unflushed data lost)."""
        with self._res.lock:
            b = self._broker(broker_id)
            if b.proc is not None and b.running:
                _signal(b.proc, signal.SIGKILL)
                b.proc.wait()
            b.paused = False

    def stop_broker(self, broker_id: int, timeout: float = 30.0) -> None:
        """Stop the broker cleanly (SIGTERM: controlled shutdown), SIGKILL after timeout."""
        with self._res.lock:
            b = self._broker(broker_id)
            if b.proc is not None and b.running:
                _signal(b.proc, signal.SIGCONT)
                _signal(b.proc, signal.SIGTERM)
                try:
                    b.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    _signal(b.proc, signal.SIGKILL)
                    b.proc.wait()
            b.paused = False

    def pause(self, broker_id: int) -> None:
        """SIGSTOP the broker: it keeps its sockets but answers nothing (a GC pause, a
        hung host); its ZooKeeper session expires after zookeeper.session.timeout.ms."""
        with self._res.lock:
            b = self._broker(broker_id)
            if b.proc is not None and b.running:
                _signal(b.proc, signal.SIGSTOP)
                b.paused = True

    def resume(self, broker_id: int) -> None:
        """SIGCONT a paused broker."""
        with self._res.lock:
            b = self._broker(broker_id)
            if b.proc is not None and b.running:
                _signal(b.proc, signal.SIGCONT)
            b.paused = False

    def restart(self, broker_id: int, timeout: float = 60.0) -> None:
        """Stop the broker if it runs (cleanly), start it again on its data and port,
        and return once it serves with a controller known. Also starts a killed one."""
        with self._res.lock:
            if self._res.closed:
                raise LocalClusterError("the cluster is stopped")
            b = self._broker(broker_id)
            if b.running:
                self.stop_broker(broker_id, timeout)
            self._spawn(b)
            self._wait_serving(b, time.monotonic() + timeout)

    # --------------------------------------------------------------------- admin ------
    def _call(self, api_key: int, version: int, body: dict[str, Any], timeout: float = 35.0) -> dict[str, Any]:
        from kafkarepl.cli import wire

        last: Exception | None = None
        for b in self._res.brokers.values():
            if b.state != "running":
                continue
            try:
                return wire.call(self.host, b.port, api_key, version, body, timeout=timeout)
            except (OSError, ConnectionError) as exc:
                last = exc
        raise LocalClusterError(f"no running broker answers ({last})")

    def metadata(self, topics: list[str] | None = None) -> dict[str, Any]:
        """A Metadata v12 response (all topics when `topics` is None) from a running broker."""
        from kafkarepl.protocol import ApiKey

        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        return self._call(ApiKey.METADATA, 12, body, timeout=5)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: dict[str, Any] | None = None,
        *,
        assignments: dict[int, list[int]] | None = None,
        timeout: float = 30.0,
        wait: bool = True,
    ) -> None:
        """Create a topic (CreateTopics) and, with wait=True, return once every partition
        has a leader and every replica on a running broker is in sync. Topic configs use
        Kafka's names, e.g. {"min.insync.replicas": 2, "retention.ms": 60000}.
        `assignments` ({partition: [broker ids], preferred leader first}) places the
        replicas explicitly; partitions and replication_factor are then ignored."""
        from kafkarepl.errors import ErrorCode
        from kafkarepl.protocol import ApiKey

        explicit = [{"partition_index": int(p), "broker_ids": [int(b) for b in bs]}
                    for p, bs in sorted((assignments or {}).items())]
        body = {
            "topics": [{"name": name,
                        "num_partitions": -1 if explicit else partitions,
                        "replication_factor": -1 if explicit else replication_factor,
                        "assignments": explicit,
                        "configs": [{"name": k, "value": str(v)} for k, v in (configs or {}).items()]}],
            "timeout_ms": int(timeout * 1000),
            "validate_only": False,
        }
        deadline = time.monotonic() + timeout
        timed_out = False
        while True:
            resp = self._call(ApiKey.CREATE_TOPICS, 5, body, timeout=timeout + 5)
            t = resp["topics"][0]
            code = t["error_code"]
            # After a REQUEST_TIMED_OUT the write may have landed: TOPIC_ALREADY_EXISTS
            # then means success (Kafka's admin clients retry the same way).
            if code == 0 or (timed_out and code == ErrorCode.TOPIC_ALREADY_EXISTS):
                break
            if code == ErrorCode.REQUEST_TIMED_OUT and time.monotonic() < deadline:
                timed_out = True
                time.sleep(0.2)
                continue
            raise LocalClusterError(
                f"create_topic {name!r}: {ErrorCode(code).name} {t.get('error_message') or ''}".rstrip()
            )
        if wait:
            self.wait_for_topic(name, timeout=max(1.0, deadline - time.monotonic()))

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        from kafkarepl.errors import ErrorCode
        from kafkarepl.protocol import ApiKey

        resp = self._call(ApiKey.DELETE_TOPICS, 4, {"topic_names": [name], "timeout_ms": int(timeout * 1000)},
                          timeout=timeout + 5)
        code = resp["responses"][0]["error_code"]
        if code:
            raise LocalClusterError(f"delete_topic {name!r}: {ErrorCode(code).name}")

    def wait_for_topic(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        """Until every partition of `name` has a leader and every replica on a running
        broker is in its ISR, as seen by every running broker. Returns the topic's
        Metadata entry."""
        from kafkarepl.cli import wire

        deadline = time.monotonic() + timeout
        seen: Any = None
        while True:
            running = {b.broker_id: b for b in self._res.brokers.values() if b.state == "running"}
            ok = bool(running)
            for b in running.values():
                try:
                    t = wire.metadata(self.host, b.port, [name], timeout=2)["topics"][0]
                except (OSError, ConnectionError) as exc:
                    seen, ok = exc, False
                    break
                seen = t
                if t["error_code"] or not t["partitions"] or any(
                    p["leader_id"] not in running
                    or any(r in running and r not in p["isr_nodes"] for r in p["replica_nodes"])
                    for p in t["partitions"]
                ):
                    ok = False
                    break
            if ok:
                return seen
            if time.monotonic() > deadline:
                raise LocalClusterError(f"topic {name!r} not fully led and in sync within {timeout}s: {seen}")
            time.sleep(0.02)

    def leader(self, topic: str, partition: int = 0) -> int:
        """Broker id of the partition's leader (-1: none)."""
        t = self.metadata([topic])["topics"][0]
        for p in t["partitions"]:
            if p["partition_index"] == partition:
                return int(p["leader_id"])
        raise KeyError(f"{topic}-{partition}: no such partition")

    def describe(self) -> dict[str, Any]:
        """The cluster as a plain dict: ZooKeeper, bootstrap servers, controller, each
        broker (id, host, port, rack, pid, state running|paused|stopped, log), and each
        topic's partitions (leader, replicas, isr) as a running broker reports them."""
        brokers = [
            {"broker_id": b.broker_id, "host": self.host, "port": b.port, "rack": b.rack,
             "pid": b.proc.pid if b.running and b.proc else None, "state": b.state, "log": str(b.log_path)}
            for b in sorted(self._res.brokers.values(), key=lambda x: x.broker_id)
        ]
        out: dict[str, Any] = {
            "zookeeper": self.zookeeper_connect,
            "bootstrap_servers": self.bootstrap_servers,
            "data_dir": str(self.data_dir) if self.data_dir else None,
            "cluster_id": None,
            "controller_id": -1,
            "brokers": brokers,
            "topics": [],
        }
        try:
            md = self.metadata(None)
        except LocalClusterError:
            return out
        out["cluster_id"] = md.get("cluster_id")
        out["controller_id"] = md["controller_id"]
        registered = {x["node_id"] for x in md["brokers"]}
        for b in brokers:
            b["registered"] = b["broker_id"] in registered
        for t in sorted(md["topics"], key=lambda t: t["name"] or ""):
            out["topics"].append(
                {
                    "name": t["name"],
                    "internal": bool(t.get("is_internal")),
                    "partitions": [
                        {"partition": p["partition_index"], "leader": p["leader_id"],
                         "replicas": list(p["replica_nodes"]), "isr": list(p["isr_nodes"])}
                        for p in sorted(t["partitions"], key=lambda p: p["partition_index"])
                    ],
                }
            )
        return out

    def __repr__(self) -> str:
        state = "running" if self.running else ("stopped" if self._res.closed else "not started")
        return f"<LocalCluster brokers={self.num_brokers} {state} bootstrap={self.bootstrap_servers!r}>"


__all__ = ["DEFAULT_BROKER_PROPERTIES", "LocalCluster", "LocalClusterError", "free_port"]
