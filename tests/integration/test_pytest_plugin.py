"""The pytest plugin (kafkarepl.pytest_plugin, entry point pytest11) run as a user would:
a separate pytest process (pytester.runpytest_subprocess) over example test files that
talk to the fixture's cluster with confluent-kafka. Afterwards no process of that run's
clusters is left (their data directories live under the run's TMPDIR)."""

from __future__ import annotations

import os
import textwrap
import time
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import tomllib

from tests.integration.test_local_cluster import processes_mentioning

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _needs_zookeeper() -> None:
    """The inner runs start ZooKeeper: without it, fail under CI, skip elsewhere (as the
    suite's zookeeper fixture does)."""
    from kafkarepl.zk.local import ZooKeeperNotInstalledError, _java

    try:
        _java()
    except ZooKeeperNotInstalledError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))

EXAMPLE = '''
import uuid

import pytest
from confluent_kafka import Consumer, Producer


def roundtrip(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    for _ in range(120):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
        if len(got) == len(values):
            break
    c.close()
    return got


def test_roundtrip(kafkarepl_bootstrap, kafkarepl_topic):
    assert kafkarepl_topic.startswith("test-test_roundtrip-")
    assert roundtrip(kafkarepl_bootstrap, kafkarepl_topic, [b"a", b"b"]) == [b"a", b"b"]


def test_fresh_topic_per_test(kafkarepl_cluster, kafkarepl_topic):
    md = kafkarepl_cluster.metadata([kafkarepl_topic])["topics"][0]
    assert md["error_code"] == 0 and len(md["partitions"]) == 1
    names = [t["name"] for t in kafkarepl_cluster.describe()["topics"]]
    assert len([n for n in names if n.startswith("test-test_roundtrip-")]) == 1


@pytest.mark.kafkarepl_topic(partitions=3, configs={"retention.ms": 60000})
def test_topic_marker(kafkarepl_cluster, kafkarepl_topic):
    parts = kafkarepl_cluster.describe()["topics"]
    t = next(t for t in parts if t["name"] == kafkarepl_topic)
    assert len(t["partitions"]) == 3
'''

FAULTS = '''
import pytest
from confluent_kafka import Producer


def produce(bootstrap, topic, n):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    errors = []
    for i in range(n):
        p.produce(topic, str(i).encode(), on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(30) == 0 and errors == []


@pytest.mark.kafkarepl_kill("leader")
@pytest.mark.kafkarepl_topic(replication_factor=3, configs={"min.insync.replicas": 2})
def test_leader_killed(kafkarepl_cluster, kafkarepl_bootstrap, kafkarepl_topic):
    states = {b["broker_id"]: b["state"] for b in kafkarepl_cluster.describe()["brokers"]}
    assert sorted(states.values()) == ["running", "running", "stopped"]
    leader = kafkarepl_cluster.leader(kafkarepl_topic)
    assert states[leader] == "running"  # failed over before the test body
    produce(kafkarepl_bootstrap, kafkarepl_topic, 10)


def test_healed_after_the_kill(kafkarepl_cluster):
    assert [b["state"] for b in kafkarepl_cluster.describe()["brokers"]] == ["running"] * 3


@pytest.mark.kafkarepl_pause(2)
def test_paused(kafkarepl_cluster):
    assert kafkarepl_cluster.describe()["brokers"][1]["state"] == "paused"


def test_faults_fixture(kafkarepl_cluster, kafkarepl_faults, kafkarepl_topic):
    assert [b["state"] for b in kafkarepl_cluster.describe()["brokers"]] == ["running"] * 3
    victim = kafkarepl_faults.kill("leader", kafkarepl_topic)
    kafkarepl_faults.wait_for_leaders(kafkarepl_topic)
    assert kafkarepl_cluster.leader(kafkarepl_topic) != victim
    kafkarepl_cluster.stop_broker(victim % 3 + 1)  # by hand: healed after the test too


def test_all_healed_again(kafkarepl_cluster):
    assert [b["state"] for b in kafkarepl_cluster.describe()["brokers"]] == ["running"] * 3


def test_own_cluster(kafkarepl_cluster_factory):
    c = kafkarepl_cluster_factory(brokers=2)
    c.create_topic("mine", replication_factor=2)
    assert c.bootstrap_servers.count(",") == 1
'''


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    tmp = pytester.path / "tmp"
    tmp.mkdir(exist_ok=True)
    monkeypatch.setenv("TMPDIR", str(tmp))  # LocalCluster data dirs land here
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    plugin: tuple[str, ...] = ()
    if not any(ep.value == "kafkarepl.pytest_plugin" for ep in entry_points(group="pytest11")):
        plugin = ("-p", "kafkarepl.pytest_plugin")  # an uninstalled checkout
    result = pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider", "-v", *args, timeout=240)
    deadline = time.monotonic() + 15
    while processes_mentioning(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(tmp)) == []
    return result


def test_fixtures_with_a_real_client(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_example=textwrap.dedent(EXAMPLE))
    result = _run(pytester, monkeypatch)
    result.assert_outcomes(passed=3)


def test_fault_markers_and_healing(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_faults=textwrap.dedent(FAULTS))
    result = _run(pytester, monkeypatch, "--kafkarepl-brokers=3")
    result.assert_outcomes(passed=6)


def test_ini_settings(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(
        """
        [pytest]
        kafkarepl_brokers = 2
        kafkarepl_broker_properties =
            num.partitions=4
            offsets.topic.num.partitions=2
        """
    )
    pytester.makepyfile(
        test_ini="""
        def test_settings(kafkarepl_cluster, kafkarepl_topic):
            assert kafkarepl_cluster.num_brokers == 2
            t = kafkarepl_cluster.wait_for_topic(kafkarepl_topic)
            assert len(t["partitions"][0]["replica_nodes"]) == 2  # min(3, brokers)
            assert "num.partitions=4" in open(kafkarepl_cluster.data_dir / "broker-1" / "server.properties").read()
        """
    )
    _run(pytester, monkeypatch).assert_outcomes(passed=1)


def test_plugin_not_started_by_tests_that_do_not_ask(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_plain="def test_nothing():\n    pass\n")
    result = _run(pytester, monkeypatch)
    result.assert_outcomes(passed=1)
    assert not list((pytester.path / "tmp").glob("kafkarepl-*"))


def test_entry_point_declared() -> None:
    """pyproject.toml registers the plugin under pytest11 (an editable install picks it
    up at its next `pip install -e .`)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"kafkarepl": "kafkarepl.pytest_plugin"}
