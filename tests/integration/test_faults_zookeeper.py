"""ZooKeeper itself restarted under a running 3-broker cluster (its own ZooKeeper server,
so the shared one other tests use is left alone): the cluster carries on."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from kazoo.client import KazooClient

from kafkarepl.cli import wire
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.fixtures.cluster import TestCluster
from tests.fixtures.zk_proxy import CuttingProxy, create_request
from tests.integration.chaos import (
    ChaosProducer,
    all_logs,
    verify_acked,
    verify_replicas_identical,
    wait_until,
)
from tools.zookeeper import LocalZooKeeper

pytestmark = pytest.mark.integration


@pytest.fixture
def own_cluster(tmp_path, zookeeper):  # zookeeper: fails/skips like the shared one when missing
    zk = LocalZooKeeper(tmp_path / "zk", tick_ms=200)
    zk.start()
    client = KazooClient(hosts=zk.connect_string)
    client.start(timeout=10)
    client.ensure_path("/kr")
    client.stop()
    client.close()
    c = TestCluster(f"{zk.connect_string}/kr", tmp_path / "cluster", 3, {"min.insync.replicas": "2"})
    try:
        yield zk, c.start()
    finally:
        c.shutdown()
        zk.stop()


def zk_registered(c: TestCluster) -> tuple[list[str], bool]:
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=10)
    try:
        return sorted(zk.get_children("/brokers/ids")), zk.exists("/controller") is not None
    finally:
        zk.stop()
        zk.close()


def carries_on(c: TestCluster, topic: str, new_topic: str) -> None:
    """Every broker registered in ZooKeeper, a controller, the topic fully in sync, admin works."""
    wait_until(lambda: zk_registered(c) == (["1", "2", "3"], True), 30,
               f"3 brokers registered and a controller:\n{all_logs(c)}")
    wait_until(lambda: len(c.metadata([])["brokers"]) == 3 and c.metadata([])["controller_id"] > 0,
               30, f"brokers and controller in Metadata:\n{all_logs(c)}")
    c.wait_for_leaders(topic, 2, isr=3, timeout=30)
    c.create_topic(new_topic, partitions=2, rf=3, timeout=30)


def test_zookeeper_quick_restart_and_long_outage(own_cluster):
    zk, c = own_cluster
    c.create_topic("zr", partitions=2, rf=3)
    with ChaosProducer(c.bootstrap, "zr", 2, rate=300) as prod:
        prod.wait_acks(100)
        # Quick restart: sessions survive; produce keeps being acknowledged.
        zk.restart()
        prod.wait_acks(200)
        carries_on(c, "zr", "after-restart")
        # Outage past the session timeout (3 s): sessions may expire; brokers must come
        # back by themselves (re-register, a controller re-elected, state re-synced).
        zk.kill()
        time.sleep(4.5)
        zk.start()
        prod.wait_acks(200, timeout=45)
        carries_on(c, "zr", "after-outage")
        prod.wait_acks(100)
        stats = prod.stop()
    verify_acked(c.bootstrap, "zr", 2, stats.acked)
    verify_replicas_identical(c, "zr", 2)
    # The topics created across the restarts serve too.
    for t in ("after-restart", "after-outage"):
        with ChaosProducer(c.bootstrap, t, 2, rate=300) as prod:
            prod.wait_acks(100)
            stats = prod.stop()
        verify_acked(c.bootstrap, t, 2, stats.acked)


def test_admin_request_across_a_zookeeper_outage_is_answered(own_cluster):
    """A CreateTopics that reaches a broker while ZooKeeper is down, and whose session
    then expires, gets an answer with a Kafka error code (or succeeds): never a dropped
    connection."""
    zk, c = own_cluster
    zk.kill()
    time.sleep(0.5)
    result: list = []

    def create():
        body = {"topics": [{"name": "during", "num_partitions": 1, "replication_factor": 3, "assignments": [],
                            "configs": []}], "timeout_ms": 10000, "validate_only": False}
        try:
            result.append(wire.call("127.0.0.1", c.brokers[1].port, ApiKey.CREATE_TOPICS, 5, body, timeout=60))
        except (OSError, ConnectionError) as exc:
            result.append(exc)

    t = threading.Thread(target=create, daemon=True)
    t.start()
    time.sleep(4.0)  # past the 3 s session timeout: the sessions expire on reconnect
    zk.start()
    t.join(70)
    assert result, "CreateTopics never answered"
    r = result[0]
    print("CreateTopics during the outage:", r)
    assert isinstance(r, dict), f"broker 1 dropped the connection instead of answering: {r!r}\n{all_logs(c)}"
    code = r["topics"][0]["error_code"]
    assert code in (0, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER, ErrorCode.TOPIC_ALREADY_EXISTS,
                    ErrorCode.UNKNOWN_SERVER_ERROR), r
    # And the cluster carries on.
    wait_until(lambda: zk_registered(c) == (["1", "2", "3"], True), 30, "brokers registered again")
    c.create_topic("after", partitions=2, rf=3, timeout=30)



def test_quota_and_credential_changes_cut_off_by_a_blip_are_answered_per_entry(tmp_path, zookeeper):
    """AlterClientQuotas and AlterUserScramCredentials have no top-level error code: a
    ZooKeeper request of theirs cut off in flight answers that entry REQUEST_TIMED_OUT
    (retriable), instead of the connection being closed; the retry goes through."""
    zk = LocalZooKeeper(tmp_path / "zk", tick_ms=200).start()
    proxy = CuttingProxy(("127.0.0.1", zk.port), b"/kr/config/clients/app", outage_s=0.3, armed=False)
    c = TestCluster(f"127.0.0.1:{proxy.port}/kr", tmp_path / "cluster", 1, {})
    quotas = {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": "app"}],
         "ops": [{"key": "producer_byte_rate", "value": 1e6, "remove": False}]}]}
    scram = {"deletions": [], "upsertions": [{"name": "bob", "mechanism": 1, "iterations": 4096,
                                              "salt": b"s" * 16, "salted_password": b"p" * 32}]}
    try:
        c.start()
        port = c.brokers[1].port
        proxy.armed.set()
        r = wire.call("127.0.0.1", port, ApiKey.ALTER_CLIENT_QUOTAS, 1, quotas, timeout=30)
        assert proxy.triggered.is_set()
        assert [e["error_code"] for e in r["entries"]] == [ErrorCode.REQUEST_TIMED_OUT], r
        r = wire.call("127.0.0.1", port, ApiKey.ALTER_CLIENT_QUOTAS, 1, quotas, timeout=30)
        assert [e["error_code"] for e in r["entries"]] == [0], r
        proxy.trigger, proxy.triggered = b"/kr/config/users/bob", threading.Event()
        r = wire.call("127.0.0.1", port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, scram, timeout=30)
        assert proxy.triggered.is_set()
        assert [(x["user"], x["error_code"]) for x in r["results"]] == [("bob", ErrorCode.REQUEST_TIMED_OUT)], r
        r = wire.call("127.0.0.1", port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, scram, timeout=30)
        assert [(x["user"], x["error_code"]) for x in r["results"]] == [("bob", 0)], r
    finally:
        c.shutdown()
        proxy.close()
        zk.stop()


# Start-up steps, each by the first request naming a znode (a path is sent as a length
# and its bytes): the chroot, the layout, the cluster id, the registration, the dynamic
# broker configs (the step CI once saw a broker exit in).
@pytest.mark.parametrize("trigger, step", [
    (b"\x00\x00\x00\x03/kr", "chroot"),
    (b"/kr/config/users", "cluster layout"),
    (b"/kr/cluster/id", "cluster id"),
    (create_request("/kr/brokers/ids/1"), "registration"),
    (b"/kr/config/brokers/<default>", "dynamic broker configs"),
], ids=lambda v: v.replace(" ", "-") if isinstance(v, str) else "")
def test_broker_start_up_waits_out_a_zookeeper_outage(tmp_path, zookeeper, trigger, step):
    """ZooKeeper goes away at a given step of a broker's start-up, for longer than the
    session timeout: the broker waits for it and finishes starting, as Kafka's
    retryRequestsUntilConnected does, instead of exiting."""
    zk = LocalZooKeeper(tmp_path / "zk", tick_ms=200).start()
    proxy = CuttingProxy(("127.0.0.1", zk.port), trigger, outage_s=4.0)
    c = TestCluster(f"127.0.0.1:{proxy.port}/kr", tmp_path / "cluster", 1, {})
    try:
        c.brokers[1].start()
        assert proxy.triggered.wait(30), f"the broker never asked for {trigger!r}:\n{c.tail(1)}"
        c.wait_serving(1, 45, expect_brokers=1)
        wait_until(lambda: zk_registered(c) == (["1"], True), 30, f"registered, a controller:\n{c.tail(1)}")
        c.create_topic("after", partitions=1, rf=1, timeout=30)
        assert c.brokers[1].alive
        assert f"{step} interrupted" in c.brokers[1].log.read_text(errors="replace"), c.tail(1)
    finally:
        c.shutdown()
        proxy.close()
        zk.stop()


def test_re_registration_cut_off_by_a_blip_runs_again(tmp_path, zookeeper):
    """The broker's session expires (its connection cut past the session timeout); its
    re-registration on the new session is then cut off by a short blip. It registers
    again once connected instead of staying alive but unregistered (taken for dead)."""
    zk = LocalZooKeeper(tmp_path / "zk", tick_ms=200).start()
    proxy = CuttingProxy(("127.0.0.1", zk.port), create_request("/kr/brokers/ids/1"), outage_s=1.0, armed=False)
    c = TestCluster(f"127.0.0.1:{proxy.port}/kr", tmp_path / "cluster", 1, {})
    try:
        c.start()
        wait_until(lambda: zk_registered(c) == (["1"], True), 30, f"registered:\n{c.tail(1)}")
        proxy.armed.set()
        proxy.cut(5.0)  # past the 3 s session timeout: ZooKeeper expires the session
        assert proxy.triggered.wait(30), f"the broker never registered again:\n{c.tail(1)}"
        wait_until(lambda: zk_registered(c) == (["1"], True), 30, f"registered again:\n{c.tail(1)}")
        log_text = c.brokers[1].log.read_text(errors="replace")
        assert "new ZooKeeper session" in log_text and "registration interrupted" in log_text, c.tail(1)
        c.create_topic("after", partitions=1, rf=1, timeout=30)
    finally:
        c.shutdown()
        proxy.close()
        zk.stop()


def test_a_broker_waiting_out_an_outage_at_start_up_stops_on_sigterm(tmp_path, zookeeper):
    """SIGTERM while the broker's start-up waits for ZooKeeper stops it then (as a JVM's
    shutdown hook), not once ZooKeeper is back."""
    zk = LocalZooKeeper(tmp_path / "zk", tick_ms=200).start()
    proxy = CuttingProxy(("127.0.0.1", zk.port), create_request("/kr/brokers/ids/1"), outage_s=120.0)
    c = TestCluster(f"127.0.0.1:{proxy.port}/kr", tmp_path / "cluster", 1, {})
    b = c.brokers[1]
    try:
        b.start()
        assert proxy.triggered.wait(30), f"the broker never registered:\n{c.tail(1)}"
        wait_until(lambda: "registration interrupted" in b.log.read_text(errors="replace"), 10, "the wait")
        b.signal(signal.SIGTERM)
        assert b.proc.wait(40) == 0, c.tail(1)
        assert "stopped during start-up" in b.log.read_text(errors="replace"), c.tail(1)
    finally:
        c.shutdown()
        proxy.close()
        zk.stop()
