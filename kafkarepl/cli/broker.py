"""`kafkarepl broker start`: run one broker in the foreground until SIGTERM/SIGINT/SIGHUP."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from kafkarepl.server.config import BrokerConfig, ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("broker", help="run a broker")
    sub = p.add_subparsers(dest="broker_command", metavar="ACTION")
    start = sub.add_parser("start", help="start a broker in the foreground")
    start.add_argument("--config", help="server.properties file (Kafka property names)")
    start.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a property"
    )
    start.add_argument("--log-level", default="INFO")
    start.set_defaults(func=cmd_start)


def setup_logging(level: str, path: str | None = None) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s [%(name)s] %(message)s",
        filename=path,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def raise_descriptor_limit(max_connections: int) -> int:
    """The process's soft RLIMIT_NOFILE raised to its hard limit (as servers do, and as
    Kafka's operators do with `ulimit -n`): a broker holds a descriptor per connection and
    several per segment, and running out fails the log dir of the write that hit it
    (storage.disk_errors). Returns the limit now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            logging.getLogger(__name__).warning("could not raise the descriptor limit from %d: %s", soft, exc)
    if soft < max_connections + 1000:
        logging.getLogger(__name__).warning(
            "the descriptor limit (%d) is below max.connections (%d) plus the log segments' files: "
            "running out fails a log dir; raise it (ulimit -n, systemd LimitNOFILE)", soft, max_connections)
    return soft


def run_broker(config: BrokerConfig, log_level: str = "INFO", log_file: str | None = None) -> int:
    """Entry point of a broker process (the CLI and `cluster up`'s multiprocessing)."""
    from kafkarepl.server import profiling
    from kafkarepl.server.broker import run

    setup_logging(log_level, log_file)
    raise_descriptor_limit(config.max_connections)
    profiling.install_from_env()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(run(config))
    except KeyboardInterrupt:
        pass
    except ConfigError as exc:  # found while building the broker: a listener's keystore, ...
        logging.getLogger("kafkarepl.broker").error("not started: %s", exc)
        print(f"kafkarepl broker: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"kafkarepl broker: {exc}", file=sys.stderr)
        return 2
    return run_broker(config, args.log_level)
