"""`kafkarepl broker-api-versions` (kafka-broker-api-versions.sh) and `kafkarepl cluster
cluster-id|unregister` (kafka-cluster.sh) against a real 2-broker cluster: each broker's
API versions block, a dead broker's ERROR line, and the cluster id a Kafka client reads."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkarepl.cli.broker_api_versions import brokers_in_kafka_order
from kafkarepl.cli.cluster_tool import NO_UNREGISTER
from kafkarepl.protocol.api import API
from kafkarepl.protocol.schema import ApiKey

pytestmark = pytest.mark.integration


def kafkarepl(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", *args], capture_output=True, text=True,
                       timeout=90)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def api_versions_blocks(stdout: str) -> dict[str, list[str]]:
    """`<node> -> (` ... `)` blocks (their API lines) and `<node> -> ERROR: ...` lines."""
    blocks: dict[str, list[str]] = {}
    lines = stdout.split("\n")
    assert lines[-1] == "", "every broker's text ends with a newline"
    i = 0
    while i < len(lines) - 1:
        node, _, rest = lines[i].partition(" -> ")
        if rest.startswith("ERROR: "):
            blocks[node] = [rest]
            i += 1
            continue
        assert rest == "(", lines[i]
        end = lines.index(")", i)
        body = lines[i + 1:end]
        assert all(line.startswith("\t") for line in body), body
        assert all(line.endswith(",") for line in body[:-1]) and not body[-1].endswith(","), body
        blocks[node] = [line[1:].rstrip(",") for line in body]
        i = end + 1
    return blocks


def test_broker_api_versions_and_cluster_id(cluster_factory) -> None:
    from confluent_kafka.admin import AdminClient

    # a long ZooKeeper session: a killed broker stays in the metadata long enough to be probed
    c = cluster_factory(2, zookeeper_session_timeout_ms=30000)
    ports = {i: b.port for i, b in c.brokers.items()}
    nodes = {i: f"127.0.0.1:{p} (id: {i} rack: null isFenced: false)" for i, p in ports.items()}

    r = kafkarepl("broker-api-versions", "--bootstrap-server", c.bootstrap)
    assert r.returncode == 0, r.stderr
    blocks = api_versions_blocks(r.stdout)
    md_brokers = [{"node_id": i, "host": "127.0.0.1", "port": p, "rack": None} for i, p in ports.items()]
    assert list(blocks) == [nodes[b["node_id"]] for b in brokers_in_kafka_order(md_brokers)]
    produce = API[ApiKey.PRODUCE]
    for lines in blocks.values():
        assert lines[0] == f"Produce(0): {produce.min_version} to {produce.max_version} [usable: {produce.max_version}]"
        assert "UpdateFeatures(57): UNSUPPORTED" in lines  # kafkarepl brokers do not serve it
        assert "ApiVersions(18): 0 to 3 [usable: 3]" in lines
        assert len(lines) == len(ApiKey)
    assert kafkarepl("broker-api-versions", "--version").stdout.strip()

    # kafka-cluster.sh cluster-id: the id Kafka's clients read with describeCluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    expected = admin.describe_cluster(request_timeout=20).result(timeout=30).cluster_id
    assert expected
    r = kafkarepl("cluster", "cluster-id", "--bootstrap-server", c.bootstrap)
    assert (r.returncode, r.stdout) == (0, f"Cluster ID: {expected}\n"), r.stderr
    # unregister is KRaft's: a ZooKeeper-mode cluster answers as Kafka's tool prints it
    r = kafkarepl("cluster", "unregister", "-b", c.bootstrap, "--id", "2")
    assert (r.returncode, r.stdout) == (0, NO_UNREGISTER + "\n"), r.stderr

    # a broker in the metadata that does not answer: Kafka's ERROR line, the other one as before
    c.kill(2)
    r = kafkarepl("broker-api-versions", "--bootstrap-server", f"127.0.0.1:{ports[1]}")
    assert r.returncode == 0, r.stderr
    after = api_versions_blocks(r.stdout)
    assert after[nodes[2]] == ["ERROR: org.apache.kafka.common.errors.DisconnectException"]
    assert after[nodes[1]] == blocks[nodes[1]]
    assert list(after) == list(blocks)
