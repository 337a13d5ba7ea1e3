"""Broker configuration: Kafka property names, parsing, clear errors."""

import pytest

from kafkarepl.server.config import BrokerConfig, ConfigError, parse_listener, parse_properties
from kafkarepl.server.topics import validate_topic_name


def test_kafka_property_names_parse_to_typed_values():
    cfg = BrokerConfig.from_props(
        {
            "broker.id": "7",
            "listeners": "PLAINTEXT://127.0.0.1:19092",
            "unclean.leader.election.enable": "true",
            "min.insync.replicas": "2",
            "some.unknown.property": "kept",
        }
    )
    assert cfg.broker_id == 7
    assert cfg.listener() == ("127.0.0.1", 19092)
    assert cfg.unclean_leader_election_enable is True
    assert cfg.min_insync_replicas == 2
    assert cfg.extra == {"some.unknown.property": "kept"}
    # Round trip through Kafka names.
    again = BrokerConfig.from_props(cfg.as_props())
    assert again == cfg


def test_defaults_are_kafkas():
    cfg = BrokerConfig()
    assert cfg.replica_lag_time_max_ms == 30000
    assert cfg.zookeeper_session_timeout_ms == 18000
    assert cfg.min_insync_replicas == 1
    assert cfg.unclean_leader_election_enable is False
    assert cfg.topic_defaults()["min.insync.replicas"] == "1"


@pytest.mark.parametrize(
    "props, fragment",
    [
        ({"broker.id": "x"}, "broker.id"),
        ({"broker.id": "-1"}, "broker.id"),
        ({"unclean.leader.election.enable": "maybe"}, "unclean.leader.election.enable"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"listeners": "nonsense"}, "listener"),
    ],
)
def test_bad_values_name_the_property(props, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        BrokerConfig.from_props(props)


def test_properties_file_and_overrides(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\nbroker.id=3\nlog.dirs = /data/a,/data/b\n\n")
    cfg = BrokerConfig.load(f, ["broker.id=4"])
    assert cfg.broker_id == 4
    assert cfg.log_dir_list() == ["/data/a", "/data/b"]
    with pytest.raises(ConfigError):
        parse_properties("no separator here")
    with pytest.raises(ConfigError):
        BrokerConfig.load(None, ["missing-equals"])
    assert parse_listener("127.0.0.1:9") == ("127.0.0.1", 9)


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "bad/name"])
def test_invalid_topic_names(name):
    assert validate_topic_name(name) is not None


def test_valid_topic_name():
    assert validate_topic_name("orders.v1_x-2") is None
