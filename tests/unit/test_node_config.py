"""`kafkarepl node`: the broker processes a node.properties describes (kafkarepl.cli.node.plan_node)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkarepl.cli.node import parse_cpus, plan_node
from kafkarepl.server.config import BrokerConfig, ConfigError

BASE = {"zookeeper.connect": "zk1:2181,zk2:2181/kafka", "node.data.dir": "/data/kr",
        "node.advertised.host": "host-a.example", "broker.rack": "r1", "min.insync.replicas": "2"}


def test_one_broker_per_core_with_derived_ids_ports_dirs_and_listeners():
    plan = plan_node({**BASE, "node.base.broker.id": "100", "node.base.port": "9100"}, available_cpus=[0, 1, 2, 3])
    assert [b.broker_id for b in plan.brokers] == [100, 101, 102, 103]
    assert [b.port for b in plan.brokers] == [9100, 9101, 9102, 9103]
    assert [b.cpu for b in plan.brokers] == [0, 1, 2, 3]
    b = plan.brokers[2]
    assert b.dir == Path("/data/kr/broker-102")
    cfg = BrokerConfig.from_props(b.props)
    assert cfg.broker_id == 102
    assert cfg.listeners == "PLAINTEXT://0.0.0.0:9102"
    assert cfg.advertised() == ("host-a.example", 9102)
    assert cfg.log_dirs == "/data/kr/broker-102/logs"
    assert cfg.broker_rack == "r1" and cfg.min_insync_replicas == 2
    assert cfg.zookeeper_connect == "zk1:2181,zk2:2181/kafka"
    assert not any(k.startswith("node.") for k in b.props)


def test_explicit_count_cpus_disks_and_no_pinning():
    plan = plan_node({**BASE, "node.brokers": "5", "node.cpus": "2-3,7", "node.log.dirs": "/d1, /d2"},
                     available_cpus=[0])
    assert [b.cpu for b in plan.brokers] == [2, 3, 7, 2, 3]
    assert [b.props["log.dirs"] for b in plan.brokers] == [
        "/d1/broker-1/logs", "/d2/broker-2/logs", "/d1/broker-3/logs", "/d2/broker-4/logs", "/d1/broker-5/logs"]
    plan = plan_node({**BASE, "node.pin.cores": "false"}, available_cpus=[0, 1])
    assert [b.cpu for b in plan.brokers] == [None, None]


@pytest.mark.parametrize("bad", [
    {"broker.id": "3"},
    {"listeners": "PLAINTEXT://0.0.0.0:1"},
    {"log.dirs": "/x"},
    {"node.brokers": "0"},
    {"node.base.port": "65535", "node.brokers": "2"},
    {"node.pin.cores": "maybe"},
    {"min.insync.replicas": "0"},
    {"node.brokers": "many"},
])
def test_bad_node_properties(bad):
    with pytest.raises(ConfigError):
        plan_node({**BASE, **bad}, available_cpus=[0, 1])


def test_zookeeper_connect_required():
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        plan_node({"node.data.dir": "/x"}, available_cpus=[0])


def test_parse_cpus():
    assert parse_cpus("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpus("3,1,1") == [1, 3]
