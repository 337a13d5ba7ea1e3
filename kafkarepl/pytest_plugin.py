"""pytest plugin: a real kafkarepl cluster for any project's tests, no Docker.

Installed with kafkarepl (entry point `pytest11`: kafkarepl); see docs/embedding.md.

Fixtures
  kafkarepl_cluster          session: a started kafkarepl.LocalCluster (started on first
                             use, stopped at the end of the session)
  kafkarepl_bootstrap        session: its bootstrap servers, "127.0.0.1:p1,..."
  kafkarepl_topic            function: name of a fresh topic created for this test
                             (partitions 1, replication factor min(3, brokers) unless a
                             @pytest.mark.kafkarepl_topic(...) marker says otherwise)
  kafkarepl_faults           function: kill/stop/pause brokers in the test body; every
                             broker is running again after the test
  kafkarepl_cluster_factory  function: make(brokers=3, **LocalCluster kwargs) -> a new
                             started LocalCluster of its own, stopped after the test

Markers
  @pytest.mark.kafkarepl_topic(partitions=1, replication_factor=None, configs=None,
                               assignments=None, name=None)
  @pytest.mark.kafkarepl_kill(broker)    SIGKILL before the test; restarted after it
  @pytest.mark.kafkarepl_stop(broker)    clean stop before the test; restarted after it
  @pytest.mark.kafkarepl_pause(broker)   SIGSTOP before the test; resumed after it
      broker: a broker id, "leader" (leader of kafkarepl_topic's partition 0) or
      "controller"; kill/stop wait (wait=True) until every partition of
      kafkarepl_topic has a running leader again before the test body runs.

Options (command line, or the same name in the ini file with _ for -)
  --kafkarepl-brokers N            brokers in the session cluster (default 1)
  --kafkarepl-zookeeper HOST:PORT  use this ZooKeeper (fresh chroot) instead of starting one
  kafkarepl_broker_properties      (ini, lines of key=value) for every broker
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkarepl.embedded.cluster import LocalCluster, LocalClusterError

FAULT_MARKERS = ("kafkarepl_kill", "kafkarepl_stop", "kafkarepl_pause")
_CLUSTER_KEY = pytest.StashKey[LocalCluster]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkarepl", "kafkarepl cluster for tests")
    group.addoption("--kafkarepl-brokers", type=int, default=None,
                    help="brokers in the session cluster (default 1; ini kafkarepl_brokers)")
    group.addoption("--kafkarepl-zookeeper", default=None, metavar="HOST:PORT",
                    help="use a running ZooKeeper (a fresh chroot) instead of starting one")
    parser.addini("kafkarepl_brokers", "brokers in the session cluster", default="1")
    parser.addini("kafkarepl_zookeeper", "HOST:PORT of a running ZooKeeper to use", default="")
    parser.addini("kafkarepl_broker_properties", "key=value lines for every broker", type="linelist",
                  default=[])


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "kafkarepl_topic(partitions=1, replication_factor=None, configs=None, assignments=None, "
        "name=None): how the "
        "kafkarepl_topic fixture creates this test's topic",
        "kafkarepl_kill(broker, wait=True): SIGKILL a broker (id, 'leader' or 'controller') "
        "before the test; it is restarted after the test",
        "kafkarepl_stop(broker, wait=True): stop a broker cleanly before the test; restarted after",
        "kafkarepl_pause(broker): SIGSTOP a broker before the test; resumed after",
    ):
        config.addinivalue_line("markers", line)


def _settings(config: pytest.Config) -> dict[str, Any]:
    brokers = config.getoption("--kafkarepl-brokers") or int(config.getini("kafkarepl_brokers") or 1)
    zk = config.getoption("--kafkarepl-zookeeper") or config.getini("kafkarepl_zookeeper") or None
    props: dict[str, str] = {}
    for line in config.getini("kafkarepl_broker_properties"):
        if line.strip() and not line.strip().startswith("#"):
            k, sep, v = line.partition("=")
            if not sep:
                raise pytest.UsageError(f"kafkarepl_broker_properties: expected key=value, got {line!r}")
            props[k.strip()] = v.strip()
    return {"brokers": brokers, "zookeeper": zk, "broker_properties": props}


def _start(cluster: LocalCluster) -> LocalCluster:
    from kafkarepl.zk.local import ZooKeeperNotInstalledError

    try:
        return cluster.start()
    except ZooKeeperNotInstalledError as exc:
        pytest.fail(f"kafkarepl: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def kafkarepl_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """A LocalCluster shared by the whole session (see --kafkarepl-brokers)."""
    cluster = LocalCluster(**_settings(request.config))
    try:
        _start(cluster)
        request.config.stash[_CLUSTER_KEY] = cluster
        yield cluster
    finally:
        if _CLUSTER_KEY in request.config.stash:
            del request.config.stash[_CLUSTER_KEY]
        cluster.stop(graceful=False)


@pytest.fixture(scope="session")
def kafkarepl_bootstrap(kafkarepl_cluster: LocalCluster) -> str:
    return kafkarepl_cluster.bootstrap_servers


def _topic_name(nodeid: str) -> str:
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", nodeid.split("::", 1)[-1]).strip("-.")[:180]
    return f"test-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafkarepl_topic(request: pytest.FixtureRequest, kafkarepl_cluster: LocalCluster) -> str:
    """A fresh topic for this test, created and fully replicated before the test runs."""
    marker = request.node.get_closest_marker("kafkarepl_topic")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        kwargs.setdefault("partitions", marker.args[0])
    rf = kwargs.get("replication_factor") or min(3, kafkarepl_cluster.num_brokers)
    name = kwargs.get("name") or _topic_name(request.node.nodeid)
    kafkarepl_cluster.create_topic(name, int(kwargs.get("partitions", 1)), int(rf), kwargs.get("configs"),
                                   assignments=kwargs.get("assignments"))
    return name


class Faults:
    """Fault injection on a LocalCluster for one test; heal() (run after the test)
    restarts every stopped broker and resumes every paused one."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def resolve(self, broker: int | str, topic: str | None = None) -> int:
        if isinstance(broker, int):
            return broker
        if broker == "controller":
            return int(self.cluster.describe()["controller_id"])
        if broker == "leader":
            if topic is None:
                raise pytest.UsageError("broker='leader' needs the kafkarepl_topic fixture")
            return self.cluster.leader(topic, 0)
        if str(broker).isdigit():
            return int(broker)
        raise pytest.UsageError(f"broker must be an id, 'leader' or 'controller', got {broker!r}")

    def kill(self, broker: int | str, topic: str | None = None) -> int:
        broker_id = self.resolve(broker, topic)
        self.cluster.kill(broker_id)
        return broker_id

    def stop(self, broker: int | str, topic: str | None = None) -> int:
        broker_id = self.resolve(broker, topic)
        self.cluster.stop_broker(broker_id)
        return broker_id

    def pause(self, broker: int | str, topic: str | None = None) -> int:
        broker_id = self.resolve(broker, topic)
        self.cluster.pause(broker_id)
        return broker_id

    def resume(self, broker: int) -> None:
        self.cluster.resume(broker)

    def restart(self, broker: int) -> None:
        self.cluster.restart(broker)

    def wait_for_leaders(self, topic: str, timeout: float = 30.0) -> None:
        """Until every partition of `topic` is led by a running broker."""
        deadline = time.monotonic() + timeout
        while True:
            running = {b["broker_id"] for b in self.cluster.describe()["brokers"] if b["state"] == "running"}
            try:
                parts = self.cluster.metadata([topic])["topics"][0]["partitions"]
            except LocalClusterError:
                parts = []
            if parts and all(p["leader_id"] in running for p in parts):
                return
            if time.monotonic() > deadline:
                raise LocalClusterError(f"{topic}: no running leader for every partition within {timeout}s")
            time.sleep(0.1)

    def heal(self) -> None:
        heal(self.cluster)


def heal(cluster: LocalCluster) -> None:
    for b in cluster.describe()["brokers"]:
        if b["state"] == "paused":
            cluster.resume(b["broker_id"])
        elif b["state"] == "stopped":
            cluster.restart(b["broker_id"])


@pytest.fixture
def kafkarepl_faults(kafkarepl_cluster: LocalCluster) -> Iterator[Faults]:
    faults = Faults(kafkarepl_cluster)
    try:
        yield faults
    finally:
        faults.heal()


@pytest.fixture(autouse=True)
def _kafkarepl_fault_markers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Applies kafkarepl_kill/stop/pause markers; after any test, heals the session
    cluster if it was started (a test may have stopped brokers by hand)."""
    markers = [m for m in request.node.iter_markers() if m.name in FAULT_MARKERS]
    if markers:
        faults: Faults = request.getfixturevalue("kafkarepl_faults")
        topic: str | None = None
        if any(_broker_arg(m) == "leader" for m in markers) or "kafkarepl_topic" in request.fixturenames:
            topic = request.getfixturevalue("kafkarepl_topic")
        waits = False
        for m in reversed(markers):  # closest marker last: outermost (class/module) first
            broker = _broker_arg(m)
            if m.name == "kafkarepl_pause":
                faults.pause(broker, topic)
            else:
                (faults.kill if m.name == "kafkarepl_kill" else faults.stop)(broker, topic)
                waits = waits or bool(m.kwargs.get("wait", True))
        if waits and topic is not None and faults.cluster.num_brokers > 1:
            faults.wait_for_leaders(topic)
    yield
    cluster = request.config.stash.get(_CLUSTER_KEY, None)
    if cluster is not None and cluster.running:
        heal(cluster)


def _broker_arg(marker: pytest.Mark) -> int | str:
    if marker.args:
        return marker.args[0]
    if "broker" in marker.kwargs:
        return marker.kwargs["broker"]
    raise pytest.UsageError(f"@pytest.mark.{marker.name} needs a broker: an id, 'leader' or 'controller'")


@pytest.fixture
def kafkarepl_cluster_factory() -> Iterator[Callable[..., LocalCluster]]:
    """make(brokers=3, **kwargs) starts a LocalCluster of this test's own."""
    made: list[LocalCluster] = []

    def make(brokers: int = 3, **kwargs: Any) -> LocalCluster:
        cluster = LocalCluster(brokers, **kwargs)
        made.append(cluster)
        return _start(cluster)

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop(graceful=False)
