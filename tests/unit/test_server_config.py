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
        ({"replica.selector.class": "com.example.MySelector"}, "replica.selector.class"),
    ],
)
def test_bad_values_name_the_property(props, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        BrokerConfig.from_props(props)


def test_rack_aware_reads_only_with_the_rack_aware_selector():
    """KIP-392 is opt-in, as in Kafka: no selector (the default) or the leader selector
    keeps consumers on leaders."""
    assert not BrokerConfig.from_props({}).rack_aware_reads
    assert not BrokerConfig.from_props(
        {"replica.selector.class": "org.apache.kafka.common.replica.LeaderSelector"}).rack_aware_reads
    assert BrokerConfig.from_props(
        {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}).rack_aware_reads


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


def test_several_listeners_with_protocols_advertised_and_the_inter_broker_one():
    cfg = BrokerConfig.from_props({
        "listeners": "INTERNAL://10.0.0.5:9093,EXTERNAL://0.0.0.0:9094,PLAINTEXT://127.0.0.1:9092",
        "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT",
        "advertised.listeners": "EXTERNAL://kafka.example.com:19094",
        "inter.broker.listener.name": "internal",
    })
    assert [(s.name, s.port, s.protocol) for s in cfg.listener_specs()] == [
        ("INTERNAL", 9093, "SSL"), ("EXTERNAL", 9094, "SASL_SSL"), ("PLAINTEXT", 9092, "PLAINTEXT")]
    adv = cfg.advertised_specs()
    assert adv["EXTERNAL"] == ("kafka.example.com", 19094)  # advertised by name
    assert adv["INTERNAL"] == ("10.0.0.5", 9093)  # not advertised: the listener's own
    assert cfg.listener_name() == "INTERNAL" and cfg.security_protocol() == "SSL"
    assert cfg.advertised() == ("10.0.0.5", 9093)
    assert cfg.security_protocol("EXTERNAL") == "SASL_SSL"
    # Without inter.broker.listener.name: the listener named by security.inter.broker.protocol
    # (PLAINTEXT by default), else the first one.
    cfg.inter_broker_listener_name = ""
    assert cfg.listener_name() == "PLAINTEXT"
    cfg.listeners = "SSL://127.0.0.1:9093"
    cfg.advertised_listeners = ""
    assert cfg.listener_name() == "SSL"
    assert cfg.jaas_config("PLAIN") == ""


@pytest.mark.parametrize("props, message", [
    ({"listeners": "A://h:1,A://h:2", "listener.security.protocol.map": "A:PLAINTEXT"}, "twice"),
    ({"listeners": "A://h:1,B://h:1", "listener.security.protocol.map": "A:PLAINTEXT,B:SSL"}, "twice"),
    ({"listeners": "WEIRD://h:1"}, "unknown security protocol"),
    ({"listeners": "PLAINTEXT://h:1", "inter.broker.listener.name": "REPL"}, "not in listeners"),
    ({"listeners": "PLAINTEXT://h:1", "advertised.listeners": "SSL://x:2"}, "not in listeners"),
])
def test_bad_listeners_are_refused(props, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_props(props).validate()


def test_listener_jaas_config_by_listener_name():
    cfg = BrokerConfig.from_props({
        "listeners": "A://h:1,B://h:2", "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_SSL",
        "sasl.jaas.config": "default", "listener.name.b.plain.sasl.jaas.config": "for-b"})
    assert cfg.jaas_config("PLAIN", "B") == "for-b"
    assert cfg.jaas_config("PLAIN", "A") == cfg.jaas_config("PLAIN") == "default"


def test_plain_users_from_a_jaas_file(tmp_path):
    from kafkarepl.server.sasl import parse_jaas_users

    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text('''
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";
};
sasl_ssl.KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";
};
''')
    cfg = BrokerConfig.from_props({"listeners": "SASL_PLAINTEXT://h:1,SASL_SSL://h:2",
                                   "java.security.auth.login.config": str(jaas)})
    assert parse_jaas_users(cfg.jaas_config("PLAIN", "SASL_PLAINTEXT")) == {"admin": "admin-secret",
                                                                            "alice": "alice-secret"}
    assert parse_jaas_users(cfg.jaas_config("PLAIN", "SASL_SSL")) == {"admin": "admin-secret", "bob": "bob-secret"}
    # sasl.jaas.config (or the listener's) wins over the file, as in Kafka
    cfg = BrokerConfig.from_props({"listeners": "SASL_PLAINTEXT://h:1", "java.security.auth.login.config": str(jaas),
                                   "sasl.jaas.config": 'x required user_carol="c";'})
    assert parse_jaas_users(cfg.jaas_config("PLAIN")) == {"carol": "c"}


def test_sensitive_configs_as_kafka_decides_them():
    from kafkarepl.server.config import config_is_sensitive

    for name in ("ssl.key.password", "sasl.jaas.config", "ssl.keystore.key",
                 "listener.name.external.plain.sasl.jaas.config",
                 "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
                 "listener.name.internal.ssl.key.password",
                 "some.unknown.property"):  # type unknown: hidden to be safe
        assert config_is_sensitive(name), name
    for name in ("sasl.enabled.mechanisms", "min.insync.replicas", "ssl.keystore.location",
                 "listener.name.external.ssl.client.auth", "log.retention.hours", "log.dir"):
        assert not config_is_sensitive(name), name
    assert config_is_sensitive("leader.replication.throttled.rate")  # unknown to this file
    assert not config_is_sensitive("leader.replication.throttled.rate", {"leader.replication.throttled.rate"})


@pytest.mark.parametrize("props, retention_ms, roll_ms", [
    ({"log.retention.hours": "1"}, 3_600_000, 7 * 86_400_000),
    ({"log.retention.minutes": "5", "log.retention.hours": "1"}, 300_000, 7 * 86_400_000),
    ({"log.retention.ms": "1000", "log.retention.minutes": "5"}, 1000, 7 * 86_400_000),
    ({"log.retention.hours": "-1"}, -1, 7 * 86_400_000),
    ({"log.roll.hours": "2"}, 7 * 86_400_000, 7_200_000),
    ({"log.roll.ms": "500", "log.roll.hours": "2"}, 7 * 86_400_000, 500),
])
def test_retention_and_roll_in_coarser_units_as_kafka(props, retention_ms, roll_ms) -> None:
    """Kafka's server.properties sets log.retention.hours: the topics' retention.ms
    default follows it (the finer unit wins when several are set), as does segment.ms
    with log.roll.hours."""
    defaults = BrokerConfig.from_props(props).topic_defaults()
    assert (int(defaults["retention.ms"]), int(defaults["segment.ms"])) == (retention_ms, roll_ms)


def test_roll_jitter_in_hours_or_ms_as_kafka() -> None:
    assert BrokerConfig.from_props({}).topic_defaults()["segment.jitter.ms"] == "0"
    assert BrokerConfig.from_props({"log.roll.jitter.hours": "1"}).topic_defaults()["segment.jitter.ms"] == "3600000"
    both = {"log.roll.jitter.ms": "250", "log.roll.jitter.hours": "1"}
    assert BrokerConfig.from_props(both).topic_defaults()["segment.jitter.ms"] == "250"


def test_a_bad_coarse_time_setting_is_refused() -> None:
    with pytest.raises(ConfigError):
        BrokerConfig.from_props({"log.retention.hours": "a week"})


def test_log_dir_is_kafkas_single_directory_form() -> None:
    assert BrokerConfig.from_props({"log.dir": "/data/kafka"}).log_dirs == "/data/kafka"
    assert BrokerConfig.from_props({"log.dirs": "/a,/b", "log.dir": "/c"}).log_dirs == "/a,/b"


def test_connections_per_ip_overrides_as_kafka_writes_them():
    cfg = BrokerConfig.from_props({"max.connections.per.ip.overrides": "127.0.0.2:20, 10.0.0.1 : 5,[::1]:7,localhost:3"})
    assert cfg.connections_per_ip_overrides() == {"127.0.0.2": 20, "10.0.0.1": 5, "::1": 7, "127.0.0.1": 3}
    assert BrokerConfig.from_props({}).connections_per_ip_overrides() == {}
    for bad in ("127.0.0.2", "127.0.0.2:x", ":5"):
        with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
            BrokerConfig.from_props({"max.connections.per.ip.overrides": bad}).validate()


def test_listener_connection_creation_rates():
    cfg = BrokerConfig.from_props({"listeners": "PLAINTEXT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
                                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
                                   "listener.name.replication.max.connection.creation.rate": "7"})
    assert cfg.listener_connection_rates() == {"REPLICATION": 7}
    with pytest.raises(ConfigError, match="max.connection.creation.rate"):
        BrokerConfig.from_props({"listener.name.plaintext.max.connection.creation.rate": "-1"}).validate()
