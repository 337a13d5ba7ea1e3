"""ACLs with Kafka's semantics on a SASL cluster: a principal without ACLs is refused
with Kafka's *_AUTHORIZATION_FAILED codes and sees no topics; `kafkarepl acls` (as
kafka-acls.sh) grants and revokes, and every broker applies the change within seconds;
super users and the brokers themselves are not held back."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kafkarepl.cli import wire
from kafkarepl.client.security import ClientSecurity
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests.batches import build_batch
from tests.fixtures.zk_proxy import CuttingProxy
from tests.integration.chaos import wait_until
from tests.integration.test_sasl import conf

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def configure(c) -> None:
    for b in c.brokers.values():
        text = b.config.read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
        text += (f"sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\nsasl.jaas.config={JAAS}\n"
                 "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\nsuper.users=User:admin\n")
        b.config.write_text(text)


def start(cluster_factory, n: int = 3, **props):
    c = cluster_factory(n, start=False, **props)
    configure(c)
    for b in c.brokers.values():
        b.start()
    return c


def acls(c, tmp_path, *args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess:
    cfg = tmp_path / "admin.properties"
    cfg.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS}\n")
    return subprocess.run([sys.executable, "-m", "kafkarepl", "acls", "--bootstrap-server", bootstrap or c.bootstrap,
                           "--command-config", str(cfg), *args], capture_output=True, text=True, timeout=60)


def produce(c, user: str, topic: str, partitions: int = 3) -> list:
    from confluent_kafka import Producer

    results: list = []
    p = Producer({**conf(c, user, f"{user}-secret"), "message.timeout.ms": 4000, "error_cb": lambda _e: None})
    for i in range(partitions):
        p.produce(topic, value=b"v", partition=i, on_delivery=lambda err, _m: results.append(err))
    p.flush(10)
    return results


def test_acls_grant_and_revoke_on_every_broker(cluster_factory, tmp_path) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    c = start(cluster_factory)
    admin = AdminClient(conf(c, "admin", "admin-secret"))
    deadline = time.monotonic() + 60
    while True:
        try:
            if len(admin.list_topics(timeout=5).brokers) == 3:
                break
        except Exception:  # noqa: BLE001 - starting
            pass
        assert time.monotonic() < deadline
        time.sleep(0.2)
    admin.create_topics([NewTopic("orders", 3, 3)])["orders"].result(30)  # a super user may
    time.sleep(1.0)
    # alice: no ACLs -> refused, and the topic is not listed for her.
    errs = produce(c, "alice", "orders")
    assert errs and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs), errs
    alice_admin = AdminClient(conf(c, "alice", "alice-secret"))
    assert "orders" not in alice_admin.list_topics(timeout=10).topics
    r = acls(c, tmp_path, "--list")
    assert r.returncode == 0 and r.stdout == "", r.stderr
    r = acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation",
             "Describe", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10  # every partition leader (3 brokers) applies it
    while any(e is not None for e in produce(c, "alice", "orders")):
        assert time.monotonic() < deadline, "the grant did not reach every broker"
        time.sleep(0.3)
    assert "orders" in alice_admin.list_topics(timeout=10).topics
    listed = acls(c, tmp_path, "--list", "--topic", "orders")
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed.stdout
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    # Reading needs READ on the topic and on the group.
    from confluent_kafka import Consumer

    cons = Consumer({**conf(c, "alice", "alice-secret"), "group.id": "alice-g", "auto.offset.reset": "earliest",
                     "error_cb": lambda _e: None})
    cons.subscribe(["orders"])
    seen_error = None
    deadline = time.monotonic() + 15
    while seen_error is None and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is not None:
            seen_error = m.error().code()
    cons.close()
    assert seen_error in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED), seen_error
    # Revoke: refused again.
    r = acls(c, tmp_path, "--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10
    while not all(e is not None for e in produce(c, "alice", "orders")):
        assert time.monotonic() < deadline, "the revoke did not reach every broker"
        time.sleep(0.3)
    # A prefixed DENY beats an ALLOW.
    acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "orders")
    acls(c, tmp_path, "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "ord",
         "--resource-pattern-type", "prefixed")
    time.sleep(1.0)
    assert all(e is not None for e in produce(c, "alice", "orders"))


def test_each_kind_of_resource_refused_with_its_error(cluster_factory, tmp_path) -> None:
    """alice, with no ACLs, asks for one thing of every kind; each answer carries Kafka's
    error for the resource (topic, group, transactional id, cluster), listings leave out
    what she may not describe, and the super user still gets everything."""
    import asyncio

    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    from kafkarepl.client import BrokerConnection
    from kafkarepl.client.security import ClientSecurity
    from kafkarepl.protocol import ApiKey

    c = start(cluster_factory, 1, offsets_topic_num_partitions=1, transaction_state_log_num_partitions=1)
    admin = AdminClient(conf(c, "admin", "admin-secret"))

    def retried(what) -> None:  # the cluster (and its internal topics) may still be starting
        deadline = time.monotonic() + 60
        while True:
            try:
                what()
                return
            except (KafkaException, TimeoutError):
                assert time.monotonic() < deadline
                time.sleep(0.5)

    def create() -> None:
        try:
            admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
        except KafkaException as exc:
            if exc.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS: an earlier try made it
                raise

    retried(create)
    admin.create_topics([NewTopic("secret", 1, 1)])["secret"].result(30)
    g = Consumer({**conf(c, "admin", "admin-secret"), "group.id": "g-admin", "enable.auto.commit": False})
    retried(lambda: g.commit(offsets=[TopicPartition("orders", 0, 0)], asynchronous=False))
    g.close()
    shared = Consumer({**conf(c, "admin", "admin-secret"), "group.id": "g-shared", "enable.auto.commit": False})
    retried(lambda: shared.commit(offsets=[TopicPartition("orders", 0, 3), TopicPartition("secret", 0, 4)],
                                  asynchronous=False))
    shared.close()
    tp = Producer({**conf(c, "admin", "admin-secret"), "transactional.id": "tx-admin"})
    tp.init_transactions(60)

    topic_denied, group_denied, txn_denied, cluster_denied = 29, 30, 53, 31
    # alice may see the topic (so her client finds its leader) and read one group (its
    # offsets: READ implies DESCRIBE), nothing more (the group's ACL first: once the
    # topic's shows, so does the group's).
    assert acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                "--group", "g-shared").returncode == 0
    assert acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
                "--topic", "orders").returncode == 0
    alice = AdminClient(conf(c, "alice", "alice-secret"))
    deadline = time.monotonic() + 10
    while "orders" not in alice.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    with pytest.raises(KafkaException) as e:
        alice.delete_records([TopicPartition("orders", 0, 0)])[TopicPartition("orders", 0, 0)].result(20)
    assert e.value.args[0].code() == topic_denied
    with pytest.raises(KafkaException) as e:
        alice.create_partitions([NewPartitions("orders", 2)])["orders"].result(20)
    assert e.value.args[0].code() == topic_denied
    with pytest.raises(KafkaException) as e:
        alice.describe_consumer_groups(["g-admin"])["g-admin"].result(20)
    assert e.value.args[0].code() == group_denied
    with pytest.raises(KafkaException) as e:
        alice.delete_consumer_groups(["g-admin"])["g-admin"].result(20)
    assert e.value.args[0].code() == group_denied
    assert "g-admin" not in {x.group_id for x in alice.list_consumer_groups().result(20).valid}
    assert "g-admin" in {x.group_id for x in admin.list_consumer_groups().result(20).valid}
    with pytest.raises(KafkaException) as e:
        Producer({**conf(c, "alice", "alice-secret"), "transactional.id": "tx-alice"}).init_transactions(20)
    assert e.value.args[0].code() == txn_denied

    port = next(iter(c.brokers.values())).port

    async def raw() -> None:
        conn = BrokerConnection("127.0.0.1", port, security=ClientSecurity(None, "PLAIN", "alice", "alice-secret"))
        await conn.connect()
        try:
            r = await conn.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx-admin"]})
            assert [(t["transactional_id"], t["error_code"]) for t in r["transaction_states"]] == [
                ("tx-admin", txn_denied)]
            r = await conn.send(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
            assert r["transaction_states"] == []
            r = await conn.send(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "orders", "partition_indexes": [0]}]})
            assert r["topics"][0]["partitions"][0]["error_code"] == topic_denied  # needs READ
            r = await conn.send(ApiKey.OFFSET_FETCH, 7, {"group_id": "g-admin", "topics": None,
                                                         "require_stable": False})
            assert r["error_code"] == group_denied
            # of all a group's offsets, only the topics she may describe; OffsetFetch v8+:
            # each group refused or answered on its own, each topic too
            r = await conn.send(ApiKey.OFFSET_FETCH, 7, {"group_id": "g-shared", "topics": None,
                                                         "require_stable": False})
            assert [(t["name"], [p["committed_offset"] for p in t["partitions"]]) for t in r["topics"]] == [
                ("orders", [3])]
            r = await conn.send(ApiKey.OFFSET_FETCH, 9, {"require_stable": False, "groups": [
                {"group_id": "g-admin", "topics": None}, {"group_id": "g-shared", "topics": None},
                {"group_id": "g-shared", "topics": [{"name": "orders", "partition_indexes": [0]},
                                                    {"name": "secret", "partition_indexes": [0]}]}]})
            assert [(g["group_id"], g["error_code"], [(t["name"], [(p["committed_offset"], p["error_code"])
                                                                   for p in t["partitions"]]) for t in g["topics"]])
                    for g in r["groups"]] == [
                ("g-shared", 0, [("orders", [(3, 0)])]),
                ("g-shared", 0, [("orders", [(3, 0)]), ("secret", [(-1, topic_denied)])]),
                ("g-admin", group_denied, [])]
            # KIP-848's heartbeat needs READ on the group, ConsumerGroupDescribe DESCRIBE
            r = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                "group_id": "g-alice", "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": ["orders"], "topic_partitions": []})
            assert r["error_code"] == group_denied and r["assignment"] is None
            # and DESCRIBE on every topic it names, as Kafka (a regex is resolved by the broker)
            join = {"group_id": "g-shared", "member_id": "m-2", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                    "subscribed_topic_names": ["orders", "secret"], "topic_partitions": []}
            r = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join)
            assert r["error_code"] == topic_denied and r["assignment"] is None, r
            r = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, dict(join, subscribed_topic_names=["orders"]))
            assert r["error_code"] == 0 and r["member_epoch"] > 0, r
            r = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "g-shared", "member_id": "m-2",
                                                                     "member_epoch": -1})
            assert r["error_code"] == 0, r
            # a regex resolves to the topics she may describe only (KAFKA-18813)
            r = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, dict(
                join, member_id="m-3", subscribed_topic_names=None, subscribed_topic_regex="orders|secret"))
            assert r["error_code"] == 0 and len(r["assignment"]["topic_partitions"]) == 1, r

            async def described() -> dict:
                d = await conn.send(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g-shared"],
                                                                        "include_authorized_operations": False})
                return d["groups"][0]

            g = await described()
            assert g["error_code"] == 0 and [(tp["topic_name"], tp["partitions"]) for m in g["members"]
                                             for tp in m["assignment"]["topic_partitions"]] == [("orders", [0])], g
            # a group with a member on a topic she may not describe is not shown to her
            su = BrokerConnection("127.0.0.1", port, security=ClientSecurity(None, "PLAIN", "admin", "admin-secret"))
            await su.connect()
            try:
                r = await su.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, dict(join, member_id="m-admin",
                                                                          subscribed_topic_names=["secret"]))
                assert r["error_code"] == 0, r
                g = await described()
                assert (g["error_code"], g["members"]) == (topic_denied, []), g
                await su.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "g-shared", "member_id": "m-admin",
                                                                    "member_epoch": -1})
            finally:
                su.close()
            await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "g-shared", "member_id": "m-3",
                                                                 "member_epoch": -1})
            r = await conn.send(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g-admin"],
                                                                    "include_authorized_operations": False})
            assert [(g["group_id"], g["error_code"]) for g in r["groups"]] == [("g-admin", group_denied)]
            r = await conn.send(ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": None,
                                                          "timeout_ms": 5000})
            assert r["error_code"] == cluster_denied
            # answered entry by entry (these responses have no top-level error code),
            # not by closing the connection
            r = await conn.send(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [
                {"entity": [{"entity_type": "user", "entity_name": "alice"}],
                 "ops": [{"key": "producer_byte_rate", "value": 1e9, "remove": False}]}]})
            assert [(e["entity"][0]["entity_name"], e["error_code"]) for e in r["entries"]] == [
                ("alice", cluster_denied)]
            r = await conn.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
            assert r["error_code"] == cluster_denied
            r = await conn.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"upsertions": [], "deletions": [
                {"name": "admin", "mechanism": 1}]})
            assert [(x["user"], x["error_code"]) for x in r["results"]] == [("admin", cluster_denied)]
            r = await conn.send(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [  # ALTER on the cluster
                {"path": "/anywhere", "topics": [{"name": "orders", "partitions": [0, 1]}]}]})
            assert [(t["topic_name"], p["partition_index"], p["error_code"]) for t in r["results"]
                    for p in t["partitions"]] == [("orders", 0, cluster_denied), ("orders", 1, cluster_denied)]
            await topics_by_id(conn)
        finally:
            conn.close()

    async def topics_by_id(conn: BrokerConnection) -> None:
        """Topics named by id (Metadata v12, DeleteTopics v6; KIP-516) are authorized by
        their names: deleting by id needs DELETE as by name does (it once bypassed the
        ACLs), and the name of a topic she may not describe stays hidden."""
        su = BrokerConnection("127.0.0.1", port, security=ClientSecurity(None, "PLAIN", "admin", "admin-secret"))
        await su.connect()
        try:
            r = await su.send(ApiKey.METADATA, 12, {"topics": [{"name": "orders"}, {"name": "secret"}],
                                                     "allow_auto_topic_creation": False})
            ids = {t["name"]: t["topic_id"] for t in r["topics"]}
        finally:
            su.close()
        r = await conn.send(ApiKey.METADATA, 12, {"topics": [{"name": None, "topic_id": ids["orders"]},
                                                             {"name": None, "topic_id": ids["secret"]}],
                                                  "allow_auto_topic_creation": False})
        got = {t["topic_id"]: (t["error_code"], t["name"], len(t["partitions"])) for t in r["topics"]}
        assert got == {ids["orders"]: (0, "orders", 1), ids["secret"]: (topic_denied, None, 0)}
        r = await conn.send(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": ids["orders"]},
                                                                 {"name": None, "topic_id": ids["secret"]}],
                                                      "timeout_ms": 5000})
        got = {x["topic_id"]: (x["error_code"], x["name"]) for x in r["responses"]}
        assert got == {ids["orders"]: (topic_denied, "orders"), ids["secret"]: (topic_denied, None)}

    asyncio.run(raw())
    assert {"orders", "secret"} <= set(admin.list_topics(timeout=10).topics)  # neither deleted
    # Granted DESCRIBE on the group and the transactional id: now they show.
    for args in (("--operation", "Describe", "--group", "g-admin"),
                 ("--operation", "Describe", "--transactional-id", "tx-admin")):
        assert acls(c, tmp_path, "--add", "--allow-principal", "User:alice", *args).returncode == 0
    deadline = time.monotonic() + 10
    while "g-admin" not in {x.group_id for x in alice.list_consumer_groups().result(20).valid}:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert alice.describe_consumer_groups(["g-admin"])["g-admin"].result(20).group_id == "g-admin"

    async def regex_follows_acls() -> None:
        """A KIP-848 regex is resolved again when ACLs change, not only topics: granted
        DESCRIBE on `secret`, her member gets its partition at a later heartbeat."""
        conn = BrokerConnection("127.0.0.1", port, security=ClientSecurity(None, "PLAIN", "alice", "alice-secret"))
        await conn.connect()
        try:
            beat = {"group_id": "g-shared", "member_id": "m-re", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                    "subscribed_topic_names": None, "subscribed_topic_regex": "orders|secret",
                    "topic_partitions": []}
            r = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat)
            assert r["error_code"] == 0 and len(r["assignment"]["topic_partitions"]) == 1, r
            assert acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
                        "--topic", "secret").returncode == 0
            deadline = time.monotonic() + 15
            topics = 1
            while topics < 2:
                assert time.monotonic() < deadline, r
                await asyncio.sleep(0.3)
                r = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                    "group_id": "g-shared", "member_id": "m-re", "member_epoch": r["member_epoch"],
                    "topic_partitions": None})
                assert r["error_code"] == 0, r
                if r["assignment"] is not None:
                    topics = len(r["assignment"]["topic_partitions"])
            await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "g-shared", "member_id": "m-re",
                                                                 "member_epoch": -1})
        finally:
            conn.close()

    asyncio.run(regex_follows_acls())


def test_a_revoke_read_cut_off_by_a_zookeeper_blip_still_applies(cluster_factory, tmp_path, zk_chroot) -> None:
    """Broker 2 loses its ZooKeeper connection as it reads the notification of a revoke
    (for less than the session timeout): it reads it again once connected, and the
    principal loses its access there too. Dropping the notification left it granted."""
    hostport, chroot = zk_chroot.split("/", 1)
    host, port = hostport.rsplit(":", 1)
    proxy = CuttingProxy((host, int(port)), f"/{chroot}/kafka-acl-extended-changes/acl_changes_".encode(),
                         outage_s=0.3, armed=False)  # well inside the 3 s session timeout
    c = cluster_factory(2, start=False)
    configure(c)
    cfg = c.brokers[2].config
    cfg.write_text(cfg.read_text().replace(f"zookeeper.connect={hostport}/", f"zookeeper.connect=127.0.0.1:{proxy.port}/"))
    for b in c.brokers.values():
        b.start()

    def call(user: str, broker: int, api: int, version: int, body: dict) -> dict:
        sec = ClientSecurity(sasl_mechanism="PLAIN", sasl_username=user, sasl_password=f"{user}-secret")
        return wire.call("127.0.0.1", c.brokers[broker].port, api, version, body, timeout=10, security=sec)

    def topic_leaders() -> dict[int, int]:
        [t] = call("admin", 1, ApiKey.METADATA, 9, {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False})["topics"]
        return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}

    def alice_writes() -> int:  # the error code of alice's write to broker 2's partition
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "orders", "partition_data": [{"index": on_broker_2, "records": bytes(build_batch(1))}]}]}
        return call("alice", 2, ApiKey.PRODUCE, 7, body)["responses"][0]["partition_responses"][0]["error_code"]

    try:
        wait_until(lambda: len(call("admin", 1, ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                                                      "include_topic_authorized_operations": False})[
            "brokers"]) == 2, 60, "2 brokers")
        create = {"topics": [{"name": "orders", "num_partitions": 2, "replication_factor": 1, "assignments": [],
                              "configs": []}], "timeout_ms": 10000, "validate_only": False}
        assert call("admin", 1, ApiKey.CREATE_TOPICS, 5, create)["topics"][0]["error_code"] == 0
        wait_until(lambda: sorted(topic_leaders().values()) == [1, 2], 30, "a leader on each broker")
        [on_broker_2] = [p for p, leader in topic_leaders().items() if leader == 2]
        via_1 = f"127.0.0.1:{c.brokers[1].port}"  # its ZooKeeper connection is direct
        assert acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                    "--operation", "Describe", "--topic", "orders", bootstrap=via_1).returncode == 0
        wait_until(lambda: alice_writes() == 0, 20, "the grant on broker 2")
        proxy.armed.set()
        assert acls(c, tmp_path, "--remove", "--allow-principal", "User:alice", "--operation", "Write",
                    "--topic", "orders", "--force", bootstrap=via_1).returncode == 0
        assert proxy.triggered.wait(10), f"broker 2 never read the revoke:\n{c.tail(2)}"
        wait_until(lambda: alice_writes() == ErrorCode.TOPIC_AUTHORIZATION_FAILED, 20,
                   f"the revoke on broker 2:\n{c.tail(2)}")
        log_text = c.brokers[2].log.read_text(errors="replace")
        assert "ACL change interrupted" in log_text and "new ZooKeeper session" not in log_text, c.tail(2)
    finally:
        proxy.close()


def test_producer_and_consumer_roles_as_kafka_acls(cluster_factory, tmp_path) -> None:
    """kafka-acls.sh's --producer (with --transactional-id and --idempotent) and --consumer
    expand to the ACLs each role needs: alice then runs a transactional producer and a
    group consumer; --list --principal shows hers only; removing the producer role takes
    them away again."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    c = start(cluster_factory, 1, offsets_topic_num_partitions=1, transaction_state_log_num_partitions=1)
    admin = AdminClient(conf(c, "admin", "admin-secret"))
    deadline = time.monotonic() + 60
    while "orders" not in admin.list_topics(timeout=5).topics:  # the broker may still be starting
        try:
            admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(10)
        except (KafkaException, TimeoutError):
            assert time.monotonic() < deadline
            time.sleep(0.5)
    producer_role = ("--allow-principal", "User:alice", "--producer", "--topic", "orders", "--transactional-id",
                     "tx-alice", "--idempotent")
    for role in (producer_role, ("--allow-principal", "User:alice", "--consumer", "--topic", "orders", "--group",
                                 "g-alice")):
        r = acls(c, tmp_path, "--add", *role)
        assert r.returncode == 0, r.stderr
    listed = acls(c, tmp_path, "--list", "--principal", "User:alice").stdout
    granted = {(block.split("resourceType=")[1].split(",")[0], line.split("operation=")[1].split(",")[0])
               for block in listed.split("Current ACLs for resource `")[1:]
               for line in block.splitlines() if "operation=" in line}
    assert granted == {("TOPIC", "WRITE"), ("TOPIC", "DESCRIBE"), ("TOPIC", "CREATE"), ("TOPIC", "READ"),
                       ("TRANSACTIONAL_ID", "WRITE"), ("TRANSACTIONAL_ID", "DESCRIBE"),
                       ("CLUSTER", "IDEMPOTENT_WRITE"), ("GROUP", "READ")}, listed
    assert acls(c, tmp_path, "--list", "--principal", "User:bob").stdout == ""

    p = Producer({**conf(c, "alice", "alice-secret"), "transactional.id": "tx-alice"})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce("orders", b"committed")
    p.commit_transaction(30)
    cons = Consumer({**conf(c, "alice", "alice-secret"), "group.id": "g-alice", "auto.offset.reset": "earliest",
                     "isolation.level": "read_committed", "enable.auto.commit": False})
    cons.subscribe(["orders"])
    got = None
    deadline = time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            got = m.value()
    assert got == b"committed"
    # consume-transform-produce: the consumed offsets committed in alice's transaction
    p.begin_transaction()
    p.produce("orders", b"transformed")
    p.send_offsets_to_transaction(cons.position(cons.assignment()), cons.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    committed = cons.committed(cons.assignment(), timeout=20)
    cons.close()
    assert [tp.offset for tp in committed] == [1], committed  # past the record read (no auto-commit)

    r = acls(c, tmp_path, "--remove", *producer_role)
    assert r.returncode == 0, r.stderr
    time.sleep(1.0)
    with pytest.raises(KafkaException) as e:
        Producer({**conf(c, "alice", "alice-secret"), "transactional.id": "tx-alice"}).init_transactions(20)
    assert e.value.args[0].code() == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    still = acls(c, tmp_path, "--list", "--principal", "User:alice").stdout
    assert "operation=READ" in still and "operation=WRITE" not in still, still
    r = acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", "orders")
    assert r.returncode == 1 and "--group" in r.stderr
