"""The `kafkarepl` command: one sub-command per module of kafkarepl.cli.

Each module named in SUBCOMMANDS exposes `register(subparsers)`, which adds its parser
and sets `func` (called with the parsed args; returns the process exit code).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# The broker uses numpy only for mmap'd index arrays, never BLAS; without this numpy's
# OpenBLAS starts a worker per core that spins after import and takes CPU from the event
# loop (and from clients on the same host). Set before any sub-command imports numpy; a
# value in the environment wins. Brokers spawned by `cluster up` inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from kafkarepl.tls_stores import StoreError  # noqa: E402 - after the environment is set

SUBCOMMANDS = (
    "dump_log", "broker", "cluster", "node", "topics", "consumer_groups", "leader_election", "reassign",
    "produce_consume", "transactions", "acls", "configs", "delegation_tokens", "log_dirs", "get_offsets",
    "delete_records", "broker_api_versions",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkarepl", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"kafkarepl.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"kafkarepl.cli.{name}":
                raise
            continue  # sub-command not built yet
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except StoreError as exc:  # a --command-config's keystore or truststore
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
