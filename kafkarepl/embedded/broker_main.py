"""Body of a LocalCluster broker process:

    python -m kafkarepl.embedded.broker_main CONFIG [LOG_LEVEL] [--wait-zookeeper HOST:PORT]
        [--cpu N] [--die-with-parent PID]

Imports only what a broker needs (not every CLI sub-command). With --wait-zookeeper
(a ZooKeeper started at the same moment as this process), the imports run while that
ZooKeeper's JVM starts, then this waits until it answers "ruok" before connecting: a
kazoo connection made while ZooKeeper accepts but does not serve yet hangs for the
whole connect timeout (seconds), which the short probes here avoid. With --cpu (used by
`kafkarepl node start`) the process pins itself to that core before anything starts a
thread, so every thread it ever starts stays there too. With --die-with-parent (also
`kafkarepl node start`, whose main thread spawns every broker) the kernel sends SIGTERM
(a clean stop) when that parent dies, even by SIGKILL.
"""

from __future__ import annotations

import os
import sys
import time


def wait_zookeeper(hostport: str, timeout: float = 60.0) -> None:
    from kafkarepl.zk.local import four_letter_word

    host, _, port = hostport.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if four_letter_word(host, int(port), "ruok", timeout=0.05) == "imok":
            return
        time.sleep(0.01)


def die_with_parent(parent_pid: int) -> None:
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent_pid:  # it died before prctl took effect
        sys.exit(0)


def _take(argv: list[str], flag: str) -> tuple[list[str], str | None]:
    if flag not in argv:
        return argv, None
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:], argv[i + 1]


def main(argv: list[str]) -> int:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    argv, wait_for = _take(argv, "--wait-zookeeper")
    argv, cpu = _take(argv, "--cpu")
    argv, parent = _take(argv, "--die-with-parent")
    if parent is not None:
        die_with_parent(int(parent))
    if cpu is not None:
        os.sched_setaffinity(0, {int(cpu)})
    from kafkarepl.cli.broker import run_broker
    from kafkarepl.server import broker as _broker  # noqa: F401 - import while ZooKeeper starts
    from kafkarepl.server.config import BrokerConfig

    config = BrokerConfig.load(argv[0])
    if wait_for:
        wait_zookeeper(wait_for)
    return run_broker(config, argv[1] if len(argv) > 1 else "INFO")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
