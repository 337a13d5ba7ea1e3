"""`kafkarepl cluster up|status|down|stop-broker|start-broker`: a local replicated cluster.
(`kafkarepl cluster cluster-id|unregister` are kafka-cluster.sh's: see cluster_tool.py.)

`up` starts ZooKeeper (unless one is given) and N broker processes with multiprocessing
(spawned interpreters in their own sessions, so they outlive this command), waits until
every broker serves and a controller is elected, and records what it started in
DATA_DIR/cluster.json. The other sub-commands act on that record.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from kafkarepl.cli import cluster_security, cluster_tool, wire
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.security import ClientSecurity
from kafkarepl.server.config import RACK_AWARE_SELECTOR, BrokerConfig, ConfigError, parse_properties

DEFAULT_DATA_DIR = os.environ.get("KAFKAREPL_DATA_DIR", str(Path.home() / ".kafkarepl" / "cluster"))
STATE_FILE = "cluster.json"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cluster", help="run a local replicated cluster; cluster-id / unregister "
                                              "as kafka-cluster.sh")
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION")

    def add(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"cluster directory (default {DEFAULT_DATA_DIR})")
        sp.set_defaults(func=func)
        return sp

    up = add("up", "start ZooKeeper (unless given) and N brokers; return when serving", cmd_up)
    up.add_argument("--brokers", type=int, default=os.cpu_count() or 1, help="broker count (default: one per core)")
    up.add_argument("--zookeeper", help="HOST:PORT of an existing ZooKeeper (default: start one)")
    up.add_argument("--base-port", type=int, default=9092, help="broker i listens on base-port + i - 1")
    up.add_argument("--config", help="server.properties applied to every broker")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    up.add_argument("--racks", help="comma list of broker.rack values, one per broker")
    up.add_argument("--timeout", type=float, default=60.0)
    up.add_argument("--security", action="store_true",
                    help="TLS + SCRAM (SASL_SSL) on every listener, ACLs on; writes client property files")
    st = add("status", "show brokers, pids, ports, racks, liveness, controller", cmd_status)
    st.add_argument("--json", action="store_true")
    add("down", "stop every broker and the ZooKeeper this cluster started", cmd_down)
    sb = add("stop-broker", "stop one broker (SIGTERM, or SIGKILL with --kill)", cmd_stop_broker)
    sb.add_argument("broker_id", type=int)
    sb.add_argument("--kill", action="store_true")
    sb.add_argument("--timeout", type=float, default=30.0)
    sa = add("start-broker", "start a stopped broker on its data; return when it serves", cmd_start_broker)
    sa.add_argument("broker_id", type=int)
    sa.add_argument("--timeout", type=float, default=60.0)
    cluster_tool.add_actions(sub)


# ----------------------------------------------------------------------- state -------
def _load(data_dir: str) -> dict[str, Any]:
    path = Path(data_dir) / STATE_FILE
    if not path.exists():
        raise SystemExit(f"kafkarepl cluster: no cluster in {data_dir} (run `kafkarepl cluster up --data-dir {data_dir}`)")
    return json.loads(path.read_text())


def _save(data_dir: str, state: dict[str, Any]) -> None:
    path = Path(data_dir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still "exists": reap it and call it dead.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ----------------------------------------------------------------- processes -------
def _broker_process(config_path: str, log_path: str) -> None:
    """Body of a broker process (spawned by multiprocessing)."""
    os.setsid()  # own session: survives the terminal and the `cluster up` command
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    from kafkarepl.cli.broker import run_broker

    config = BrokerConfig.load(config_path)
    sys.exit(run_broker(config, os.environ.get("KAFKAREPL_LOG_LEVEL", "INFO")))


def _spawn_broker(broker: dict[str, Any]) -> int:
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_broker_process, args=(broker["config"], broker["log"]), daemon=False)
    # The child (and multiprocessing's resource tracker, started with the first child)
    # would inherit our stdout/stderr and keep a caller's pipe open after we exit.
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        proc.start()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
    # Let the broker outlive us: multiprocessing would otherwise join it at exit.
    multiprocessing.process._children.discard(proc)  # type: ignore[attr-defined]
    assert proc.pid is not None  # set by start()
    return proc.pid


def _security(state: dict[str, Any]) -> ClientSecurity | None:
    """How this command reaches a --security cluster: its client.properties."""
    return load_client_security(state.get("security", {}).get("client_properties"))


def _wait_serving(host: str, port: int, pid: int, timeout: float, expect_brokers: int = 0,
                  security: ClientSecurity | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive(pid):
            raise SystemExit(f"kafkarepl cluster: broker on port {port} exited during start-up (see its log)")
        try:
            md = wire.metadata(host, port, [], timeout=2, security=security)
            if md.get("controller_id", -1) >= 0 and len(md["brokers"]) >= expect_brokers:
                return md
        except (OSError, ConnectionError) as exc:
            last = exc
        time.sleep(0.1)
    raise SystemExit(f"kafkarepl cluster: broker on port {port} did not serve within {timeout}s ({last})")


def _start_zookeeper(data_dir: Path, port: int) -> tuple[str, int]:
    from kafkarepl.zk.local import LocalZooKeeper

    zk = LocalZooKeeper(data_dir / "zookeeper", port=port, tick_ms=500)
    zk.start(detach=True)
    return zk.connect_string, zk.pid or 0


def _broker_props(args: argparse.Namespace, broker_id: int, zk: str, data_dir: Path, rack: str | None,
                  security: dict[str, str] | None = None) -> dict[str, str]:
    props: dict[str, str] = {}
    if args.config:
        props.update(parse_properties(Path(args.config).read_text()))
    props.update(security or {})
    port = args.base_port + broker_id - 1
    props.update(
        {
            "broker.id": str(broker_id),
            "listeners": f"{'SASL_SSL' if security else 'PLAINTEXT'}://127.0.0.1:{port}",
            "log.dirs": str(data_dir / f"broker-{broker_id}" / "logs"),
            "zookeeper.connect": zk,
        }
    )
    props.setdefault("zookeeper.session.timeout.ms", "6000")
    props.setdefault("replica.lag.time.max.ms", "10000")
    # `cluster down` stops every broker at once: partitions left with no other live replica
    # would hold each stop for Kafka's 3 x 5 s of controlled shutdown retries
    props.setdefault("controlled.shutdown.retry.backoff.ms", "200")
    if rack:  # racks here are for trying rack features: follower fetching included
        props["broker.rack"] = rack
        props["replica.selector.class"] = RACK_AWARE_SELECTOR
    for item in args.override:
        k, _, v = item.partition("=")
        props[k.strip()] = v.strip()
    return props


# ----------------------------------------------------------------- commands --------
def cmd_up(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if (data_dir / STATE_FILE).exists():
        previous = json.loads((data_dir / STATE_FILE).read_text())
        running = [b for b, info in previous["brokers"].items() if alive(info.get("pid"))]
        if running:
            print(f"kafkarepl cluster: already up in {data_dir} (brokers {', '.join(running)}); "
                  "use `kafkarepl cluster down` first", file=sys.stderr)
            return 1
    if args.brokers < 1:
        print("kafkarepl cluster: --brokers must be >= 1", file=sys.stderr)
        return 2
    racks = args.racks.split(",") if args.racks else []
    zk_pid = None
    if args.zookeeper:
        zk = args.zookeeper
    else:
        zk, zk_pid = _start_zookeeper(data_dir, args.base_port - 1 if args.base_port > 1024 else 0)
    state: dict[str, Any] = {"zookeeper": zk, "zookeeper_pid": zk_pid, "brokers": {}}
    secured: dict[int, dict[str, str]] = {}
    if args.security:
        secured, client, rdkafka = cluster_security.prepare(data_dir / "security", zk,
                                                            list(range(1, args.brokers + 1)))
        state["security"] = {"client_properties": str(client), "librdkafka_properties": str(rdkafka)}
    try:
        for i in range(1, args.brokers + 1):
            props = _broker_props(args, i, zk, data_dir, racks[i - 1] if i - 1 < len(racks) else None,
                                  secured.get(i))
            BrokerConfig.from_props(props)  # validate before starting anything
            bdir = data_dir / f"broker-{i}"
            bdir.mkdir(parents=True, exist_ok=True)
            cfg = bdir / "server.properties"
            cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            port = int(props["listeners"].rsplit(":", 1)[1])
            state["brokers"][str(i)] = {
                "pid": None, "host": "127.0.0.1", "port": port, "config": str(cfg),
                "log": str(bdir / "broker.log"), "log_dirs": props["log.dirs"], "rack": props.get("broker.rack"),
            }
    except (ConfigError, OSError) as exc:
        print(f"kafkarepl cluster: {exc}", file=sys.stderr)
        return 2
    for info in state["brokers"].values():
        info["pid"] = _spawn_broker(info)
    _save(str(data_dir), state)
    t0 = time.monotonic()
    for info in state["brokers"].values():
        _wait_serving(info["host"], info["port"], info["pid"], args.timeout, expect_brokers=args.brokers,
                      security=_security(state))
    print(f"cluster up in {time.monotonic() - t0:.1f}s: {args.brokers} brokers, ZooKeeper {zk}, data in {data_dir}")
    print("bootstrap servers: " + ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"].values()))
    if args.security:
        sec = state["security"]
        print(f"security: SASL_SSL with {cluster_security.MECHANISM} as user {cluster_security.ADMIN} "
              "(super user; ACLs on for everyone else)\n"
              f"  Kafka tools / kafkarepl --command-config: {sec['client_properties']}\n"
              f"  kcat -F / confluent-kafka:                {sec['librdkafka_properties']}")
    sys.stdout.flush()
    return 0


def _controller(state: dict[str, Any]) -> int:
    for info in state["brokers"].values():
        if alive(info.get("pid")):
            try:
                return wire.metadata(info["host"], info["port"], [], timeout=2, security=_security(state))["controller_id"]
            except (OSError, ConnectionError):
                continue
    return -1


def cmd_status(args: argparse.Namespace) -> int:
    state = _load(args.data_dir)
    controller = _controller(state)
    rows = []
    for bid, info in sorted(state["brokers"].items(), key=lambda kv: int(kv[0])):
        rows.append({"broker_id": int(bid), "pid": info["pid"], "host": info["host"], "port": info["port"],
                     "rack": info.get("rack"), "alive": alive(info.get("pid")),
                     "controller": int(bid) == controller, "config": info["config"], "log_dirs": info["log_dirs"]})
    out = {"zookeeper": state["zookeeper"], "controller": controller, "brokers": rows}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"ZooKeeper: {state['zookeeper']}   controller: broker {controller}")
    for r in rows:
        print(f"broker {r['broker_id']}: {'alive' if r['alive'] else 'DOWN '} pid {r['pid']} "
              f"{r['host']}:{r['port']} rack {r['rack'] or '-'}{'  (controller)' if r['controller'] else ''}\n"
              f"    config {r['config']}  log.dirs {r['log_dirs']}")
    return 0


def _stop_pid(pid: int, kill: bool, timeout: float) -> bool:
    if not alive(pid):
        return True
    os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    return not alive(pid)


def cmd_down(args: argparse.Namespace) -> int:
    state = _load(args.data_dir)
    for info in state["brokers"].values():
        if alive(info.get("pid")):
            os.kill(info["pid"], signal.SIGTERM)
    for info in state["brokers"].values():
        _stop_pid(info.get("pid") or 0, False, 30)
    if state.get("zookeeper_pid"):
        _stop_pid(state["zookeeper_pid"], False, 10)
    (Path(args.data_dir) / STATE_FILE).unlink(missing_ok=True)
    print("cluster down")
    return 0


def cmd_stop_broker(args: argparse.Namespace) -> int:
    state = _load(args.data_dir)
    info = state["brokers"].get(str(args.broker_id))
    if info is None:
        print(f"kafkarepl cluster: no broker {args.broker_id}", file=sys.stderr)
        return 2
    ok = _stop_pid(info.get("pid") or 0, args.kill, args.timeout)
    print(f"broker {args.broker_id} {'killed' if args.kill else 'stopped'}" if ok else f"broker {args.broker_id} did not stop")
    return 0 if ok else 1


def cmd_start_broker(args: argparse.Namespace) -> int:
    state = _load(args.data_dir)
    info = state["brokers"].get(str(args.broker_id))
    if info is None:
        print(f"kafkarepl cluster: no broker {args.broker_id}", file=sys.stderr)
        return 2
    if alive(info.get("pid")):
        print(f"kafkarepl cluster: broker {args.broker_id} is already running (pid {info['pid']})", file=sys.stderr)
        return 1
    info["pid"] = _spawn_broker(info)
    _save(args.data_dir, state)
    _wait_serving(info["host"], info["port"], info["pid"], args.timeout, security=_security(state))
    print(f"broker {args.broker_id} serving on {info['host']}:{info['port']} (pid {info['pid']})")
    return 0
