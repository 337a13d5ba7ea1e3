"""`kafkarepl node start|configs|status --config node.properties`: one host, one broker
process per core.

node.properties holds the node's own settings (`node.*`, below) and any broker property
(Kafka names: zookeeper.connect, broker.rack, min.insync.replicas, ...), which every
broker of the node gets. Per broker i (0-based) the node derives:

    broker.id            node.base.broker.id + i
    listeners            PLAINTEXT://<node.listen.host>:<node.base.port + i>
    advertised.listeners PLAINTEXT://<node.advertised.host>:<node.base.port + i>
    log.dirs             <disk>/broker-<id>/logs, disks from node.log.dirs round-robin
                         (default node.data.dir)

and runs it pinned to one core (os.sched_setaffinity) of node.cpus. Node settings:

    node.data.dir             configs, broker logs, state (default /var/lib/kafkarepl)
    node.brokers              broker processes (default: one per usable core)
    node.base.broker.id       first broker id (default 1); unique across the cluster
    node.base.port            first listener port (default 9092)
    node.listen.host          bind address (default 0.0.0.0)
    node.advertised.host      what clients and other brokers connect to (default: this
                              host's FQDN); also the host identity replica placement
                              keeps replicas of one partition apart by
    node.log.dirs             comma list of disks for the brokers' logs (round-robin)
    node.cpus                 cores to pin to, e.g. 0-7,16-23 (default: the affinity set)
    node.pin.cores            true|false (default true)
    node.restart.on.failure   restart a broker that dies (default true)
    node.restart.backoff.ms   wait before such a restart (default 1000)
    node.shutdown.timeout.ms  SIGTERM -> SIGKILL for brokers at node stop (default 120000)

`start` runs in the foreground (a systemd unit's ExecStart): SIGTERM/SIGINT stop every
broker cleanly (controlled shutdown, all at once) and then the node.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkarepl.server.config import BrokerConfig, ConfigError, parse_properties

STATE_FILE = "node.json"
DERIVED = ("broker.id", "listeners", "advertised.listeners", "log.dirs")
NODE_DEFAULTS: dict[str, str] = {
    "node.data.dir": "/var/lib/kafkarepl",
    "node.base.broker.id": "1",
    "node.base.port": "9092",
    "node.listen.host": "0.0.0.0",
    "node.pin.cores": "true",
    "node.restart.on.failure": "true",
    "node.restart.backoff.ms": "1000",
    "node.shutdown.timeout.ms": "120000",
}


@dataclass
class BrokerPlan:
    broker_id: int
    port: int
    cpu: int | None
    dir: Path
    props: dict[str, str]

    @property
    def config_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"


@dataclass
class NodePlan:
    data_dir: Path
    advertised_host: str
    brokers: list[BrokerPlan]
    restart_on_failure: bool
    restart_backoff_s: float
    shutdown_timeout_s: float


def parse_cpus(spec: str) -> list[int]:
    """"0-3,8,10-11" -> [0, 1, 2, 3, 8, 10, 11]."""
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    return sorted(set(out))


def _bool(props: dict[str, str], key: str) -> bool:
    v = props[key].strip().lower()
    if v not in ("true", "false"):
        raise ConfigError(f"{key} must be true or false, got {props[key]!r}")
    return v == "true"


def plan_node(node_props: dict[str, str], available_cpus: list[int] | None = None) -> NodePlan:
    """The broker processes a node.properties describes (pure: nothing is started)."""
    props = {**NODE_DEFAULTS, **node_props}
    clash = [k for k in DERIVED if k in node_props]
    if clash:
        raise ConfigError(f"node.properties must not set {', '.join(clash)}: derived per broker "
                          "from node.base.broker.id, node.base.port, node.*.host and node.log.dirs")
    if "zookeeper.connect" not in props:
        raise ConfigError("node.properties needs zookeeper.connect (the cluster's ZooKeeper ensemble)")
    cpus = (parse_cpus(props["node.cpus"]) if props.get("node.cpus")
            else sorted(available_cpus if available_cpus is not None else os.sched_getaffinity(0)))
    if not cpus:
        raise ConfigError("node.cpus is empty")
    try:
        count = int(props.get("node.brokers") or len(cpus))
        base_id = int(props["node.base.broker.id"])
        base_port = int(props["node.base.port"])
        backoff = int(props["node.restart.backoff.ms"]) / 1000
        shutdown = int(props["node.shutdown.timeout.ms"]) / 1000
    except ValueError as exc:
        raise ConfigError(f"node.properties: {exc}") from None
    if count < 1:
        raise ConfigError("node.brokers must be >= 1")
    if base_id < 0 or not 0 < base_port <= 65535 - count + 1:
        raise ConfigError("node.base.broker.id must be >= 0 and node.base.port leave room for every broker")
    pin = _bool(props, "node.pin.cores")
    data_dir = Path(props["node.data.dir"])
    disks = [Path(d.strip()) for d in props.get("node.log.dirs", "").split(",") if d.strip()] or [data_dir]
    listen = props["node.listen.host"]
    advertised = props.get("node.advertised.host") or socket.getfqdn()
    shared = {k: v for k, v in props.items() if not k.startswith("node.")}
    brokers: list[BrokerPlan] = []
    for i in range(count):
        bid, port = base_id + i, base_port + i
        bprops = dict(shared)
        bprops.update({
            "broker.id": str(bid),
            "listeners": f"PLAINTEXT://{listen}:{port}",
            "advertised.listeners": f"PLAINTEXT://{advertised}:{port}",
            "log.dirs": str(disks[i % len(disks)] / f"broker-{bid}" / "logs"),
        })
        BrokerConfig.from_props(bprops)  # raises ConfigError on a bad broker property
        brokers.append(BrokerPlan(bid, port, cpus[i % len(cpus)] if pin else None,
                                  data_dir / f"broker-{bid}", bprops))
    return NodePlan(data_dir, advertised, brokers, _bool(props, "node.restart.on.failure"), backoff, shutdown)


def load_plan(path: str, overrides: list[str]) -> NodePlan:
    props = parse_properties(Path(path).read_text())
    for item in overrides:
        k, sep, v = item.partition("=")
        if not sep:
            raise ConfigError(f"override must be key=value, got {item!r}")
        props[k.strip()] = v.strip()
    return plan_node(props)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("node", help="run one broker per core on this host")
    sub = p.add_subparsers(dest="node_command", metavar="ACTION")

    def add(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--config", required=True, help="node.properties")
        sp.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
        sp.set_defaults(func=func)
        return sp

    st = add("start", "start the node's brokers in the foreground until SIGTERM/SIGINT", cmd_start)
    st.add_argument("--log-level", default="INFO")
    st.add_argument("--timeout", type=float, default=120.0, help="seconds for every broker to serve")
    add("configs", "print each broker's derived server.properties (nothing is started)", cmd_configs)
    s = add("status", "the node's brokers: pid, port, core, serving", cmd_status)
    s.add_argument("--json", action="store_true")


def cmd_configs(args: argparse.Namespace) -> int:
    try:
        plan = load_plan(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"kafkarepl node: {exc}", file=sys.stderr)
        return 2
    for b in plan.brokers:
        print(f"# broker {b.broker_id}: {b.config_path} (core {b.cpu if b.cpu is not None else 'any'})")
        print("".join(f"{k}={v}\n" for k, v in b.props.items()))
    return 0


def _spawn(b: BrokerPlan, log_level: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "kafkarepl.embedded.broker_main", str(b.config_path), log_level]
    if b.cpu is not None:
        cmd += ["--cpu", str(b.cpu)]
    cmd += ["--die-with-parent", str(os.getpid())]  # a SIGKILLed node leaves no brokers behind
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    with open(b.log_path, "ab") as log:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)


def _serving(host: str, port: int) -> bool:
    from kafkarepl.cli import wire

    try:
        md = wire.metadata(host, port, [], timeout=2)
    except (OSError, ConnectionError):
        return False
    return md["controller_id"] >= 0


def _probe_host(listen_host: str) -> str:
    return "127.0.0.1" if listen_host in ("0.0.0.0", "", "::") else listen_host


def _write_state(plan: NodePlan, procs: dict[int, subprocess.Popen]) -> None:
    state = {"pid": os.getpid(), "advertised_host": plan.advertised_host,
             "brokers": [{"broker_id": b.broker_id, "port": b.port, "cpu": b.cpu,
                          "pid": procs[b.broker_id].pid if b.broker_id in procs else None,
                          "config": str(b.config_path), "log": str(b.log_path),
                          "listen_host": _probe_host(b.props["listeners"].split("://")[1].rsplit(":", 1)[0])}
                         for b in plan.brokers]}
    tmp = plan.data_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(plan.data_dir / STATE_FILE)


def _log(msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} kafkarepl node: {msg}", flush=True)


def cmd_start(args: argparse.Namespace) -> int:
    try:
        plan = load_plan(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"kafkarepl node: {exc}", file=sys.stderr)
        return 2
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    for b in plan.brokers:
        b.dir.mkdir(parents=True, exist_ok=True)
        b.config_path.write_text("".join(f"{k}={v}\n" for k, v in b.props.items()))

    stopping = False

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    procs: dict[int, subprocess.Popen] = {b.broker_id: _spawn(b, args.log_level) for b in plan.brokers}
    _write_state(plan, procs)
    _log(f"started brokers {plan.brokers[0].broker_id}..{plan.brokers[-1].broker_id} "
         f"(advertised as {plan.advertised_host}, ports {plan.brokers[0].port}..{plan.brokers[-1].port})")
    by_id = {b.broker_id: b for b in plan.brokers}
    pending = set(by_id)
    deadline = time.monotonic() + args.timeout
    restart_at: dict[int, float] = {}
    while not stopping:
        for bid in sorted(pending):
            b = by_id[bid]
            if _serving(_probe_host(b.props["listeners"].split("://")[1].rsplit(":", 1)[0]), b.port):
                pending.discard(bid)
                if not pending:
                    _log(f"all {len(plan.brokers)} brokers serving")
        if pending and time.monotonic() > deadline:
            _log(f"brokers {sorted(pending)} not serving after {args.timeout}s (see their broker.log)")
            deadline = float("inf")
        for bid, proc in list(procs.items()):
            if proc.poll() is None or stopping:
                continue
            if bid not in restart_at:
                _log(f"broker {bid} (pid {proc.pid}) exited with {proc.returncode}"
                     + ("" if plan.restart_on_failure else "; not restarting (node.restart.on.failure=false)"))
                restart_at[bid] = time.monotonic() + plan.restart_backoff_s if plan.restart_on_failure else float("inf")
            elif time.monotonic() >= restart_at[bid]:
                del restart_at[bid]
                procs[bid] = _spawn(by_id[bid], args.log_level)
                pending.add(bid)
                _write_state(plan, procs)
                _log(f"broker {bid} restarted (pid {procs[bid].pid})")
        time.sleep(0.1 if pending else 0.5)
    _log("stopping: SIGTERM to every broker (controlled shutdown)")
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    end = time.monotonic() + plan.shutdown_timeout_s
    for bid, proc in procs.items():
        try:
            proc.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            _log(f"broker {bid} did not stop within {plan.shutdown_timeout_s}s: SIGKILL")
            proc.kill()
            proc.wait()
    (plan.data_dir / STATE_FILE).unlink(missing_ok=True)
    _log("stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from kafkarepl.cli.cluster import alive

    try:
        plan = load_plan(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"kafkarepl node: {exc}", file=sys.stderr)
        return 2
    path = plan.data_dir / STATE_FILE
    if not path.exists():
        print(f"kafkarepl node: not running (no {path})", file=sys.stderr)
        return 1
    state = json.loads(path.read_text())
    rows = []
    for b in state["brokers"]:
        up = alive(b["pid"])
        rows.append({**b, "alive": up, "serving": up and _serving(b["listen_host"], b["port"])})
    if args.json:
        print(json.dumps({"pid": state["pid"], "brokers": rows}, indent=2))
    else:
        for r in rows:
            print(f"broker {r['broker_id']}: {'serving' if r['serving'] else 'alive' if r['alive'] else 'DOWN'} "
                  f"pid {r['pid']} port {r['port']} core {r['cpu'] if r['cpu'] is not None else 'any'}")
    return 0 if all(r["serving"] for r in rows) else 1
