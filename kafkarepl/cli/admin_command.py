"""The entry point shared by the admin sub-commands that talk to a cluster."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from kafkarepl.errors import KafkaError


def admin_command(main: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]) -> Callable[[argparse.Namespace], int]:
    """Runs `main`; a Kafka error, an I/O error or a bad argument prints `Error: ...` on
    stderr and exits 1, as Kafka's tools do."""

    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(main(args))
        except (KafkaError, OSError, ValueError) as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 1

    return run
