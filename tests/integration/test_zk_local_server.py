"""The local ZooKeeper helper (kafkarepl.zk.local; CLI: python -m tools.zookeeper)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import kafkarepl.zk.local as tz

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_start_restart_keeps_data_kill(tmp_path, zookeeper):
    zk = tz.LocalZooKeeper(tmp_path, tick_ms=200)
    zk.start()
    try:
        assert zk.is_serving() and tz.four_letter_word("127.0.0.1", zk.port, "ruok") == "imok"
        cfg = zk.config_path.read_text()
        assert (
            "tickTime=200" in cfg
            and "minSessionTimeout=400" in cfg
            and "clientPortAddress=127.0.0.1" in cfg
        )
        c = KazooClient(hosts=zk.connect_string)
        c.start(timeout=10)
        c.create("/kept", b"v")
        c.stop()
        c.close()
        zk.restart()
        c = KazooClient(hosts=zk.connect_string)
        c.start(timeout=10)
        assert c.get("/kept")[0] == b"v"
        c.stop()
        c.close()
        pid = zk.pid
        zk.kill()
        assert zk.pid is None and not zk.is_serving()
        with pytest.raises(ProcessLookupError):
            import os

            os.kill(pid, 0)
    finally:
        zk.stop()


def test_missing_installation_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(tz, "ZK_JAR", tmp_path / "nope.jar")
    with pytest.raises(tz.ZooKeeperNotInstalledError, match="apt-get install zookeeper"):
        tz.LocalZooKeeper(tmp_path).start()


def test_cli_start_status_stop(tmp_path, zookeeper):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "tools.zookeeper", *args, "--data-dir", str(tmp_path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    port = tz.free_port()
    r = cli("start", "--port", str(port), "--tick-ms", "200")
    assert r.returncode == 0, r.stderr
    try:
        assert (tmp_path / "zookeeper.pid").exists()
        assert tz.four_letter_word("127.0.0.1", port, "ruok") == "imok"
        assert "already running" in cli("start", "--port", str(port)).stdout
        assert cli("status").returncode == 0
    finally:
        assert cli("stop").returncode == 0
    assert cli("status").returncode == 1
    assert tz.four_letter_word("127.0.0.1", port, "ruok", timeout=0.3) is None
