"""kafkarepl.LocalCluster (docs/embedding.md) with real ZooKeeper, real broker processes
and a real client: start, produce/consume, faults, and teardown in every way a caller
can end (context exit, exception, interpreter exit, SIGKILL of the owner, a thread
pool). Stray processes are looked for with `ps`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

import kafkarepl
from kafkarepl.embedded import LocalClusterError
from kafkarepl.zk.local import ZooKeeperNotInstalledError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]


def _started(cluster: kafkarepl.LocalCluster) -> kafkarepl.LocalCluster:
    try:
        return cluster.start()
    except ZooKeeperNotInstalledError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def processes_mentioning(text: str) -> list[str]:
    """`ps` lines of live (non-zombie) processes whose command line contains `text`."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if text in line and not line.split()[1].startswith("Z")]


def wait_gone(pids: list[int], text: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        if not alive and not processes_mentioning(text):
            return
        time.sleep(0.1)
    raise AssertionError(f"stray processes: pids {alive}; ps: {processes_mentioning(text)}")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str = "all") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": 30000})
    errors: list[object] = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []


def consume(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_one_broker_produce_consume_describe_and_clean_exit(tmp_path):
    with _started(kafkarepl.LocalCluster(brokers=1)) as cluster:
        data_dir = cluster.data_dir
        assert data_dir is not None and data_dir.exists()
        pids = cluster.pids()
        assert len(pids) == 3  # broker, ZooKeeper, reaper
        cluster.create_topic("events", partitions=2, replication_factor=1, configs={"retention.ms": 600000})
        produce(cluster.bootstrap_servers, "events", [b"a", b"b", b"c"])
        assert sorted(consume(cluster.bootstrap_servers, "events", 3)) == [b"a", b"b", b"c"]
        d = cluster.describe()
        assert d["controller_id"] == 1
        assert d["brokers"][0]["state"] == "running" and d["brokers"][0]["registered"]
        events = next(t for t in d["topics"] if t["name"] == "events")
        assert [p["partition"] for p in events["partitions"]] == [0, 1]
        assert all(p["leader"] == 1 and p["isr"] == [1] for p in events["partitions"])
        assert cluster.startup_seconds is not None and cluster.startup_seconds < 60
    wait_gone(pids, str(data_dir))
    assert not data_dir.exists()  # a temporary data directory is removed
    assert not cluster.running


def test_exception_inside_the_block_still_tears_down():
    pids: list[int] = []
    marker = ""
    with pytest.raises(RuntimeError, match="boom"):
        with _started(kafkarepl.LocalCluster(brokers=1)) as cluster:
            pids = cluster.pids()
            marker = str(cluster.data_dir)
            raise RuntimeError("boom")
    wait_gone(pids, marker)


def test_given_data_dir_is_kept_and_reused(tmp_path):
    data = tmp_path / "cluster"
    with _started(kafkarepl.LocalCluster(brokers=1, data_dir=data)) as cluster:
        cluster.create_topic("kept")
        produce(cluster.bootstrap_servers, "kept", [b"x"])
        pids = cluster.pids()
    wait_gone(pids, str(data))
    assert (data / "broker-1" / "logs" / "kept-0").is_dir()
    assert (data / "broker-1" / "broker.log").exists()


def test_three_brokers_kill_pause_resume_restart():
    with _started(kafkarepl.LocalCluster(brokers=3, racks=["a", "b", "c"])) as cluster:
        cluster.create_topic("rf3", partitions=1, replication_factor=3, configs={"min.insync.replicas": 2})
        produce(cluster.bootstrap_servers, "rf3", [b"1", b"2"])
        leader = cluster.leader("rf3")
        assert leader in (1, 2, 3)
        assert [b["rack"] for b in cluster.describe()["brokers"]] == ["a", "b", "c"]
        # racks come with follower fetching (KIP-392's rack-aware selector)
        conf = (cluster.data_dir / "broker-1" / "server.properties").read_text()
        assert "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector\n" in conf

        cluster.kill(leader)
        assert cluster.describe()["brokers"][leader - 1]["state"] == "stopped"
        deadline = time.monotonic() + 30
        while cluster.leader("rf3") in (leader, -1):
            assert time.monotonic() < deadline, cluster.describe()
            time.sleep(0.1)
        produce(cluster.bootstrap_servers, "rf3", [b"3"])  # two replicas left: min ISR 2 holds

        cluster.restart(leader)
        cluster.wait_for_topic("rf3")  # the restarted broker is back in the ISR

        other = next(b for b in cluster.broker_ids if b != cluster.leader("rf3"))
        cluster.pause(other)
        assert cluster.describe()["brokers"][other - 1]["state"] == "paused"
        cluster.resume(other)
        cluster.stop_broker(other)
        cluster.restart(other)
        cluster.wait_for_topic("rf3")
        assert sorted(consume(cluster.bootstrap_servers, "rf3", 3)) == [b"1", b"2", b"3"]
        cluster.create_topic("placed", assignments={0: [3, 1], 1: [2, 3]})
        placed = next(t for t in cluster.describe()["topics"] if t["name"] == "placed")["partitions"]
        assert [(p["leader"], p["replicas"]) for p in placed] == [(3, [3, 1]), (2, [2, 3])]
        pids = cluster.pids()
        marker = str(cluster.data_dir)
    wait_gone(pids, marker)


def test_paused_broker_is_torn_down():
    with _started(kafkarepl.LocalCluster(brokers=1)) as cluster:
        cluster.pause(1)
        pids = cluster.pids()
        marker = str(cluster.data_dir)
    wait_gone(pids, marker)


def test_existing_zookeeper_gets_a_fresh_chroot_that_is_removed(zookeeper):
    from kazoo.client import KazooClient

    with _started(kafkarepl.LocalCluster(brokers=1, zookeeper=zookeeper.connect_string)) as cluster:
        hosts, _, chroot = cluster.zookeeper_connect.partition("/")
        assert hosts == zookeeper.connect_string and chroot.startswith("kafkarepl-")
        cluster.create_topic("in-chroot")
        assert len(cluster.pids()) == 2  # broker and reaper; ZooKeeper is not ours
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=10)
    try:
        assert client.exists("/" + chroot) is None
    finally:
        client.stop()
        client.close()


def test_thread_pool_starts_and_stops_clusters():
    """Two clusters started and used from worker threads (no signal handlers there),
    stopped from yet another thread."""

    def run(i: int) -> tuple[kafkarepl.LocalCluster, int]:
        c = _started(kafkarepl.LocalCluster(brokers=1))
        c.create_topic(f"t{i}")
        produce(c.bootstrap_servers, f"t{i}", [b"v"])
        return c, c.wait_for_topic(f"t{i}")["partitions"][0]["leader_id"]

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, range(2)))
    clusters = [c for c, _ in results]
    assert [leader for _, leader in results] == [1, 1]
    assert clusters[0].bootstrap_servers != clusters[1].bootstrap_servers
    pids = [p for c in clusters for p in c.pids()]
    with ThreadPoolExecutor(1) as pool:
        list(pool.map(lambda c: c.stop(), clusters))
    for c in clusters:
        wait_gone(pids, str(c.data_dir))


SCRIPT = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
import kafkarepl
cluster = kafkarepl.LocalCluster(brokers=1)
cluster.start()
print(cluster.data_dir, *cluster.pids(), flush=True)
if sys.argv[1] == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
elif sys.argv[1] == "exit":
    sys.exit(0)  # no stop(): interpreter exit must tear down
elif sys.argv[1] == "drop":
    del cluster  # garbage collected: torn down
    import gc; gc.collect()
    print("dropped", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill", "drop"])
def test_owner_ends_without_stop(tmp_path, how):
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(SCRIPT.format(root=str(ROOT))))
    proc = subprocess.Popen([sys.executable, str(script), how], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line, "the script did not start a cluster"
        data_dir, pids = line[0], [int(p) for p in line[1:]]
        assert len(pids) == 3
        if how == "drop":
            assert proc.stdout.readline().strip() == "dropped"
        else:
            proc.wait(30)
        if how == "sigkill":
            assert proc.returncode == -signal.SIGKILL
        wait_gone(pids, data_dir)
        deadline = time.monotonic() + 10
        while Path(data_dir).exists():  # the temporary data directory too
            assert time.monotonic() < deadline, f"{data_dir} left behind"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()


def test_bad_config_raises_and_cleans_up():
    cluster = kafkarepl.LocalCluster(brokers=1, broker_properties={"min.insync.replicas": "0"},
                                     start_timeout=30)
    with pytest.raises(LocalClusterError, match="min.insync.replicas"):
        _started(cluster)
    assert cluster.data_dir is not None
    wait_gone([], str(cluster.data_dir))
    with pytest.raises(LocalClusterError):
        cluster.start()  # stopped for good
