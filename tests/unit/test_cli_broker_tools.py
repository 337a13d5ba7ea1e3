"""`kafkarepl broker-api-versions` (BrokerApiVersionsCommand) and `kafkarepl cluster
cluster-id|unregister` (ClusterTool): the text they print, checked against Kafka's
NodeApiVersions.toString(true), Node.toString() and java.util.HashMap order."""

from __future__ import annotations

import pytest

from kafkarepl.cli import cluster_tool
from kafkarepl.cli.broker_api_versions import (
    DISCONNECTED,
    brokers_in_kafka_order,
    error_text,
    java_hashmap_order,
    java_string_hash,
    node_api_versions_text,
    node_hash,
    node_text,
)
from kafkarepl.cli.main import build_parser
from kafkarepl.client.connection import BrokerConnectionError, RequestTimeoutError
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol.api import API
from kafkarepl.protocol.schema import ApiKey
from kafkarepl.server.handlers import api_versions_list


def test_node_api_versions_text_as_kafka_prints_it() -> None:
    produce = API[ApiKey.PRODUCE]
    broker = {
        0: (produce.min_version, produce.max_version + 2),  # newer broker: usable is ours
        1: (4, 4),  # one version: no "to"
        2: (50, 60),  # only versions newer than ours
        3: (0, 0),  # only versions older than ours (Metadata: we have 0-12, so 0 is usable)
        18: (0, 2),
        999: (0, 2),  # a key kafkarepl does not know
    }
    lines = node_api_versions_text(broker).split("\n")
    assert lines[0] == "(" and lines[-1] == ")"
    body = lines[1:-1]
    assert all(line.startswith("\t") for line in body)
    assert all(line.endswith(",") for line in body[:-1]) and not body[-1].endswith(",")
    text = [line[1:].rstrip(",") for line in body]
    assert text[:4] == [f"Produce(0): {produce.min_version} to {produce.max_version + 2} "
                        f"[usable: {produce.max_version}]",
                        "Fetch(1): 4 [usable: 4]",
                        "ListOffsets(2): 50 to 60 [unusable: node too new]",
                        "Metadata(3): 0 [usable: 0]"]
    assert text[4] == "LeaderAndIsr(4): UNSUPPORTED"
    assert "ApiVersions(18): 0 to 2 [usable: 2]" in text
    assert "UpdateFeatures(57): UNSUPPORTED" in text  # known by name, not declared
    assert text[-1] == "UNKNOWN(999): 0 to 2"
    keys = [int(t.split("(", 1)[1].split(")", 1)[0]) for t in text]
    assert keys == sorted(keys) and set(keys) == {int(k) for k in ApiKey} | {999}


def test_node_too_old_and_one_line_form() -> None:
    dlr = API[ApiKey.DESCRIBE_LOG_DIRS]
    assert dlr.min_version >= 1
    one_line = node_api_versions_text({35: (0, 0)}, line_breaks=False)
    assert one_line.startswith("(Produce(0): UNSUPPORTED, Fetch(1): UNSUPPORTED, ")
    assert ", DescribeLogDirs(35): 0 [unusable: node too old], " in one_line and one_line.endswith(")")


def test_a_kafkarepl_broker_against_the_kafkarepl_client() -> None:
    served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in api_versions_list()}
    text = node_api_versions_text(served)
    p = API[ApiKey.PRODUCE]
    assert f"\tProduce(0): {p.min_version} to {p.max_version} [usable: {p.max_version}],\n" in text
    assert "\tUpdateFeatures(57): UNSUPPORTED,\n" in text
    assert f"\tListTransactions(66): 0 to {API[ApiKey.LIST_TRANSACTIONS].max_version} " \
           f"[usable: {API[ApiKey.LIST_TRANSACTIONS].max_version}],\n" in text
    assert text.endswith("\tConsumerGroupHeartbeat(68): 0 to 1 [usable: 1],\n"
                         "\tConsumerGroupDescribe(69): 0 [usable: 0]\n)")


def test_node_text() -> None:
    # Kafka 4.x's Node.toString (kafka-clients 4.3 here: host, port, idString, rack, isFenced)
    assert node_text("127.0.0.1", 9092, 1, None) == "127.0.0.1:9092 (id: 1 rack: null isFenced: false)"
    assert node_text("h", 9093, 2, "r1") == "h:9093 (id: 2 rack: r1 isFenced: false)"


def test_java_hashes() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -2147483648  # overflows to Integer.MIN_VALUE
    # Kafka 4.3's Node(1, "127.0.0.1", 9092): 3.x's fields, then isFenced folded in (1237)
    assert node_hash("127.0.0.1", 9092, 1, None) == -1073917100


# HashMap<Node, ...> iteration order printed by Kafka 4.3's classes (Collectors.toMap) for
# the first n of NODES.
NODES = [(i + 1, "127.0.0.1" if i % 3 == 0 else f"broker-{i}.example.com", 9092 + i * 7,
          None if i % 2 == 0 else f"rack-é{i}") for i in range(40)]
JAVA_ORDERS = {
    2: "2,1",
    6: "5,6,2,1,3,4",
    13: "11,6,12,1,3,4,9,5,8,10,2,7,13",
    25: "23,16,11,6,12,19,24,4,15,9,5,8,13,22,21,20,18,1,3,25,17,10,14,2,7",
    40: "23,16,28,11,6,12,31,19,40,24,4,15,33,9,35,5,8,29,39,13,22,34,21,38,30,20,18,1,3,25,17,26,10,14,2,7,"
        "32,27,36,37",
}


@pytest.mark.parametrize("n", sorted(JAVA_ORDERS))
def test_java_hashmap_order(n: int) -> None:
    hashes = [node_hash(h, p, i, r) for i, h, p, r in NODES[:n]]
    assert ",".join(str(NODES[i][0]) for i in java_hashmap_order(hashes)) == JAVA_ORDERS[n]


def test_brokers_in_kafka_order_is_a_permutation() -> None:
    brokers = [{"node_id": i, "host": h, "port": p, "rack": r} for i, h, p, r in NODES[:5]]
    ordered = brokers_in_kafka_order(brokers)
    assert sorted(b["node_id"] for b in ordered) == [1, 2, 3, 4, 5]
    hashes = [node_hash(h, p, i, r) for i, h, p, r in NODES[:5]]
    assert [b["node_id"] for b in ordered] == [brokers[i]["node_id"] for i in java_hashmap_order(hashes)]


def test_error_text() -> None:
    assert error_text(BrokerConnectionError("connect to h:1: refused")) == DISCONNECTED
    assert error_text(RequestTimeoutError("no answer")) == DISCONNECTED
    assert error_text(OSError("reset")) == DISCONNECTED
    assert error_text(KafkaError("Authentication failed: bad password", ErrorCode.SASL_AUTHENTICATION_FAILED)) == \
        "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed: bad password"
    assert error_text(KafkaError("", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)) == \
        "org.apache.kafka.common.errors.ClusterAuthorizationException"


def test_cluster_tool_text_and_options(tmp_path, capsys) -> None:
    assert cluster_tool.cluster_id_text("abc") == "Cluster ID: abc"
    assert cluster_tool.cluster_id_text(None) == "No cluster ID found. The Kafka version is probably too old."
    args = build_parser().parse_args(["cluster", "cluster-id", "-b", "h:1", "--command-config", "f"])
    assert (args.bootstrap_server, args.config) == ("h:1", "f")
    args = build_parser().parse_args(["cluster", "unregister", "--config", "f", "-i", "3"])
    assert (args.bootstrap_server, args.config, args.id) == (None, "f", 3)
    # no bootstrap server anywhere: ClusterTool's TerseException
    assert build_parser().parse_args(["cluster", "cluster-id"]).func(
        build_parser().parse_args(["cluster", "cluster-id"])) == 1
    assert capsys.readouterr().err == "Please specify --bootstrap-server.\n"
    # bootstrap.servers from the config file: an unreachable one fails as an admin command
    props = tmp_path / "client.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\n")
    args = build_parser().parse_args(["cluster", "cluster-id", "-c", str(props)])
    assert args.func(args) == 1
    assert args.bootstrap_server == "127.0.0.1:1"
    assert capsys.readouterr().err.startswith("Error: ")
