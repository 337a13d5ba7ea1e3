"""Process-level helpers for the end-to-end bench: a kafkarepl cluster seen from outside.

Everything here goes through the `kafkarepl cluster` CLI and /proc, never through
kafkarepl's Python modules, so the bench measures what an operator would see.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cluster_cmd(data_dir: str, *args: str, timeout: float = 120) -> str:
    """Run `kafkarepl cluster ARGS --data-dir D` and return its stdout."""
    out = subprocess.run(
        ["kafkarepl", "cluster", *args, "--data-dir", data_dir],
        check=True, capture_output=True, text=True, timeout=timeout,
    )
    return out.stdout


def status(data_dir: str) -> dict:
    return json.loads(cluster_cmd(data_dir, "status", "--json"))


def broker_pids(data_dir: str) -> dict[int, int]:
    """broker id -> pid of every live broker."""
    return {b["broker_id"]: b["pid"] for b in status(data_dir)["brokers"] if b["alive"]}


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        # the command name may contain spaces: fields start after the last ')'
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise ValueError(f"no VmRSS for pid {pid}")


def cpu_snapshot(pids: list[int]) -> dict[int, float]:
    return {pid: proc_cpu_seconds(pid) for pid in pids}


def cpu_delta(before: dict[int, float]) -> float:
    """Total CPU seconds the processes of `before` used since then."""
    return sum(proc_cpu_seconds(pid) - t for pid, t in before.items())


def broker_property(data_dir: str, broker_id: int, key: str, default: str) -> str:
    """A property from a broker's server.properties in the cluster data dir."""
    path = Path(data_dir) / f"broker-{broker_id}" / "server.properties"
    for line in path.read_text().splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip() == key:
            return v.strip()
    return default


def timed_cluster_cmd(data_dir: str, *args: str) -> float:
    """Seconds a cluster sub-command takes (start-broker returns once serving)."""
    t0 = time.monotonic()
    cluster_cmd(data_dir, *args)
    return time.monotonic() - t0


def topic_segment_files(data_dir: str, topic: str) -> list[Path]:
    """Every .log segment of `topic` across the brokers' log dirs (for RF=1 topics)."""
    files = []
    for b in status(data_dir)["brokers"]:
        for log_dir in b["log_dirs"].split(","):
            files.extend(sorted(Path(log_dir).glob(f"{topic}-*/*.log")))
    return files
