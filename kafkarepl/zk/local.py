"""Start and stop a local ZooKeeper server (Debian's `zookeeper` package) for tests,
the quickstart and `kafkarepl cluster up`.

Python API::

    zk = LocalZooKeeper("/tmp/zk", port=0, tick_ms=200)
    zk.start()                 # returns once the server answers "ruok"
    zk.connect_string          # "127.0.0.1:<port>"
    zk.restart(); zk.kill(); zk.stop()

CLI (daemonizes, writes <data-dir>/zookeeper.pid and zookeeper.port)::

    python -m kafkarepl.zk.local start --data-dir D [--port P] [--tick-ms T]
    python -m kafkarepl.zk.local stop --data-dir D
    python -m kafkarepl.zk.local status --data-dir D
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_CONF_DIR = Path("/etc/zookeeper/conf")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
PID_FILE = "zookeeper.pid"
PORT_FILE = "zookeeper.port"


class ZooKeeperNotInstalledError(RuntimeError):
    pass


class ZooKeeperStartError(RuntimeError):
    pass


def _java() -> str:
    java = shutil.which("java")
    if java is None or not ZK_JAR.exists():
        missing = "java" if java is None else str(ZK_JAR)
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper cannot start: {missing} not found. "
            "Install it with `apt-get install zookeeper` (it brings a Java runtime)."
        )
    return java


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str | None:
    """Send a ZooKeeper four-letter command; None when nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


class LocalZooKeeper:
    """One standalone ZooKeeper server process whose data lives in `data_dir`."""

    def __init__(
        self,
        data_dir: str | os.PathLike,
        port: int = 0,
        tick_ms: int = 200,
        max_session_timeout_ms: int = 60000,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.host = "127.0.0.1"
        self._proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    def write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = "\n".join(
            [
                f"tickTime={self.tick_ms}",
                f"dataDir={self.data_dir / 'data'}",
                f"clientPort={self.port}",
                f"clientPortAddress={self.host}",
                f"minSessionTimeout={2 * self.tick_ms}",
                f"maxSessionTimeout={self.max_session_timeout_ms}",
                "initLimit=10",
                "syncLimit=5",
                "maxClientCnxns=0",
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
                # Snapshots every 100k txns and purge of old ones: tests write a lot.
                "snapCount=100000",
                # No fsync per transaction: a local helper, and tests create many znodes.
                "forceSync=no",
                "autopurge.snapRetainCount=3",
                "autopurge.purgeInterval=1",
                "",
            ]
        )
        self.config_path.write_text(cfg)
        return self.config_path

    def command(self) -> list[str]:
        return [
            _java(),
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start-up; ZooKeeper is not our hot path
            "-Dzookeeper.root.logger=WARN,CONSOLE",
            "-cp",
            f"{ZK_CONF_DIR}:{ZK_JAR}",
            MAIN_CLASS,
            str(self.config_path),
        ]

    def is_serving(self, timeout: float = 0.5) -> bool:
        return four_letter_word(self.host, self.port, "ruok", timeout=timeout) == "imok"

    def start(self, timeout: float = 10.0, detach: bool = False) -> LocalZooKeeper:
        """Start the server and return once it answers "ruok"."""
        self.launch(detach=detach)
        return self.wait_serving(timeout)

    def launch(self, detach: bool = False) -> LocalZooKeeper:
        """Start the server process without waiting for it (see wait_serving): a caller
        can start the brokers meanwhile; they retry their ZooKeeper connection."""
        if self._proc is not None and self._proc.poll() is None:
            return self
        cmd = self.command()
        self.write_config()
        self._log = open(self.data_dir / "zookeeper.log", "ab")
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=detach,
        )
        return self

    def wait_serving(self, timeout: float = 10.0) -> LocalZooKeeper:
        if self._proc is None:
            raise ZooKeeperStartError("ZooKeeper was not started")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with {self._proc.returncode}; see {self.data_dir / 'zookeeper.log'}"
                )
            # A short probe timeout: while the JVM starts, ZooKeeper may accept a
            # connection before it answers 4-letter words; a long wait on that first
            # connection (0.5 s) used to dominate its ~0.2 s start.
            if self.is_serving(timeout=0.05):
                return self
            time.sleep(0.02)
        self.kill()
        raise ZooKeeperStartError(
            f"ZooKeeper did not serve on {self.connect_string} within {timeout}s"
        )

    def _end(self, sig: int, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self, timeout: float = 10.0) -> None:
        self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        self._end(signal.SIGKILL, 5.0)

    def restart(self, timeout: float = 10.0) -> LocalZooKeeper:
        """Stop and start again on the same port and data (sessions survive if quick)."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> LocalZooKeeper:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --- CLI -------------------------------------------------------------------------------


def _read_pid(data_dir: Path) -> int | None:
    try:
        pid = int((data_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid


def cli_start(data_dir: Path, port: int, tick_ms: int) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    pid = _read_pid(data_dir)
    if pid is not None:
        port = int((data_dir / PORT_FILE).read_text())
        print(f"zookeeper already running: pid {pid}, 127.0.0.1:{port}")
        return 0
    zk = LocalZooKeeper(data_dir, port=port, tick_ms=tick_ms)
    # Its own session: the server outlives this command and its terminal.
    zk.start(detach=True)
    (data_dir / PID_FILE).write_text(f"{zk.pid}\n")
    (data_dir / PORT_FILE).write_text(f"{zk.port}\n")
    print(f"zookeeper started: pid {zk.pid}, {zk.connect_string}")
    return 0


def cli_stop(data_dir: Path, timeout: float = 10.0) -> int:
    pid = _read_pid(data_dir)
    if pid is None:
        print("zookeeper not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
    (data_dir / PID_FILE).unlink(missing_ok=True)
    print(f"zookeeper stopped: pid {pid}")
    return 0


def cli_status(data_dir: Path) -> int:
    pid = _read_pid(data_dir)
    if pid is None:
        print("zookeeper not running")
        return 1
    port = int((data_dir / PORT_FILE).read_text())
    serving = four_letter_word("127.0.0.1", port, "ruok") == "imok"
    print(f"zookeeper pid {pid}, 127.0.0.1:{port}, {'serving' if serving else 'NOT serving'}")
    return 0 if serving else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkarepl.zk.local")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--port", type=int, default=2181)
    parser.add_argument("--tick-ms", type=int, default=2000)
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            return cli_start(args.data_dir, args.port, args.tick_ms)
        if args.action == "stop":
            return cli_stop(args.data_dir)
        return cli_status(args.data_dir)
    except (ZooKeeperNotInstalledError, ZooKeeperStartError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
