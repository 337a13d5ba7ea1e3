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


def run_broker(config: BrokerConfig, log_level: str = "INFO", log_file: str | None = None) -> int:
    """Entry point of a broker process (the CLI and `cluster up`'s multiprocessing)."""
    from kafkarepl.server import profiling
    from kafkarepl.server.broker import run

    setup_logging(log_level, log_file)
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
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"kafkarepl broker: {exc}", file=sys.stderr)
        return 2
    return run_broker(config, args.log_level)
