"""KIP-848's consumer group protocol (`group.protocol=consumer`) with real clients:
librdkafka (confluent-kafka) and Kafka's own Java consumer, against broker processes.
The broker assigns; members move partitions without any member stopping to rejoin. (A
Java member and a librdkafka one in one group: test_consumer_groups.py's
test_java_and_librdkafka_share_a_group[consumer].)"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kafkarepl.coordinator.offsets import partition_for
from kafkarepl.errors import ErrorCode as E
from kafkarepl.protocol import ApiKey
from tests import java_tools
from tests.fixtures.cluster import TestCluster
from tests.integration.test_cli_admin import cli
from tests.integration.test_consumer_groups import (
    FAST,
    JavaGroupMember,
    assigned,
    confluent_consumer,
    consumer_protocol_member,
    drain,
    find_coordinator,
    group_call,
    java_owns,
    produce,
    wait_until,
)
from tests.integration.test_metrics import scrape

pytestmark = pytest.mark.integration


member = consumer_protocol_member


def describe(c: TestCluster, group: str):
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    result = admin.describe_consumer_groups([group])[group].result(timeout=20)
    del admin  # only once its call is answered
    return result


def test_librdkafka_members_split_the_partitions_and_hand_them_over(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    topic, group = "kip848", "kip848-group"
    c.create_topic(topic, 6, 1)
    m1, m2 = member(c, group), member(c, group)
    seen: dict[int, list] = {1: [], 2: []}
    try:
        m1.subscribe([topic])
        wait_until(lambda: (drain(m1, seen[1]), assigned(m1) == set(range(6)))[1], 30, "the first member owning all")
        m2.subscribe([topic])

        def split() -> bool:
            drain(m1, seen[1])
            drain(m2, seen[2])
            a, b = assigned(m1), assigned(m2)
            assert not (a & b), (a, b)  # never one partition on two members
            return len(a) == 3 and len(b) == 3

        wait_until(split, 40, "3 partitions each")
        sent = produce(c.bootstrap, topic, 6, 20)
        wait_until(lambda: (drain(m1, seen[1]), drain(m2, seen[2]), len(seen[1]) + len(seen[2]) >= len(sent))[2],
                   30, "every record")
        assert sorted(v for _, _, v in seen[1] + seen[2]) == sorted(sent)  # each exactly once
        for i, cons in ((1, m1), (2, m2)):
            assert {p for p, _, _ in seen[i]} == assigned(cons)
        m1.commit(asynchronous=False)  # OffsetCommit v9 with its member epoch

        d = describe(c, group)
        assert d.type == ConsumerGroupType.CONSUMER and str(d.state).endswith("STABLE"), d
        owned = {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
        assert sorted(map(len, owned.values())) == [3, 3] and set().union(*owned.values()) == set(range(6))
        admin = AdminClient({"bootstrap.servers": c.bootstrap})  # kept: a dropped client cancels its calls
        listed = admin.list_consumer_groups().result(timeout=20)
        assert [(g.group_id, g.type) for g in listed.valid] == [(group, ConsumerGroupType.CONSUMER)], (listed.valid, listed.errors)
        # kafka-consumer-groups.sh's --describe: each partition with its member, offsets and lag
        r = cli("consumer-groups", "--bootstrap-server", c.bootstrap, "--describe", "--group", group)
        rows = [line.split() for line in r.stdout.splitlines() if line.strip()]
        assert r.returncode == 0 and rows[0][6] == "CONSUMER-ID", r.stdout + r.stderr
        by_partition = {int(row[2]): row[6] for row in rows[1:]}
        assert {m: {p for p, who in by_partition.items() if who == m} for m in owned} == owned, rows
        committed = {int(row[2]): row[3] for row in rows[1:]}
        assert all(committed[p] == "20" for p in assigned(m1)), rows  # m1 committed its own

        m2.close()  # leaves with epoch -1: the rest moves at once, no session timeout
        wait_until(lambda: (drain(m1, seen[1]), assigned(m1) == set(range(6)))[1], 30,
                   "the remaining member taking every partition")
        more = produce(c.bootstrap, topic, 6, 5, tag="more-")
        wait_until(lambda: (drain(m1, seen[1]), more <= {v for _, _, v in seen[1]})[1], 30, "the new records")
    finally:
        m1.close()


def test_a_regex_subscription_picks_up_new_topics(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    c.create_topic("rx-one", 2, 1)
    c.create_topic("other", 2, 1)
    m = member(c, "rx-group")
    try:
        m.subscribe(["^rx-.*"])  # sent as SubscribedTopicRegex, resolved by the broker
        wait_until(lambda: (m.poll(0.1), {tp.topic for tp in m.assignment()} == {"rx-one"})[1], 30,
                   "rx-one assigned")
        c.create_topic("rx-two", 1, 1)
        wait_until(lambda: (m.poll(0.1), {tp.topic for tp in m.assignment()} == {"rx-one", "rx-two"})[1], 40,
                   "the new rx-two assigned too")
    finally:
        m.close()


@pytest.mark.parametrize("librdkafka", ["consumer", "classic"])
def test_members_of_a_failed_over_coordinator_carry_on_in_their_epochs(cluster_factory, librdkafka: str) -> None:
    """The group's records (ConsumerGroupMemberMetadata, ...CurrentMemberAssignment, ...)
    let the next coordinator resume it: a librdkafka member and Kafka's Java consumer keep
    their partitions (nothing revoked or lost: a member the coordinator forgot would lose
    its partitions and rejoin), read on without rereading, and commit at their epochs.
    classic: the librdkafka member speaks the classic protocol in the KIP-848 group (a
    group mid-migration), recorded with its protocols and resumed in its generation."""
    c = cluster_factory(3, **{**FAST, "offsets_topic_replication_factor": 3,
                               "group_consumer_heartbeat_interval_ms": 1000})
    topic, group = "fo848", "fo848-group"
    c.create_topic(topic, 4, 3)
    moved: list[tuple[str, list[int]]] = []
    m = member(c, group) if librdkafka == "consumer" else confluent_consumer(
        c, group, **{"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 20000})
    m.subscribe([topic], on_revoke=lambda _c, ps: moved.append(("revoke", [p.partition for p in ps])),
                on_lost=lambda _c, ps: moved.append(("lost", [p.partition for p in ps])))
    java = JavaGroupMember(c.bootstrap, group, topic, "consumer:uniform")
    seen: list = []
    try:
        wait_until(lambda: (drain(m, seen), len(assigned(m)) == len(java_owns(java.lines)) == 2)[1], 60,
                   f"2 partitions each: {java.lines}")
        first = produce(c.bootstrap, topic, 4, 10)
        wait_until(lambda: (drain(m, seen), len(seen) >= 20)[1], 60, "the first records of its partitions")
        m.commit(asynchronous=False)
        before = describe(c, group)
        owned = {x.member_id: {tp.partition for tp in x.assignment.topic_partitions} for x in before.members}
        moved.clear()
        java_lines = len(java.lines)
        coordinator = find_coordinator(c, group)
        c.kill(coordinator)
        second = produce(c.bootstrap, topic, 4, 10, tag="second-")
        wait_until(lambda: (drain(m, seen), len(seen) >= 40)[1], 90, "the records written after the coordinator died")
        m.commit(asynchronous=False)  # at its epoch: the new coordinator knows it
        after = describe(c, group)  # the Java member has heartbeated to the new coordinator too
        assert {x.member_id: {tp.partition for tp in x.assignment.topic_partitions} for x in after.members} == owned
        assert str(after.state).endswith("STABLE"), after
        time.sleep(3)  # a few more heartbeats of both
        java.tell("stop")  # it stops polling and commits what it read
        wait_until(lambda: any(ln.startswith("records ") for ln in java.lines), 60, f"the Java member's count: {java.lines}")
        assert "commit ok" in java.lines, java.lines
        assert not [ln for ln in java.lines[java_lines:] if ln.split(" ")[0] in ("revoked", "lost")], java.lines
        assert moved == [], moved
        assert next(ln for ln in java.lines if ln.startswith("records ")) == "records 40", java.lines
        mine = assigned(m)  # each of its records read once: "[tag]p<partition>-<i>"
        assert sorted(v for _, _, v in seen) == sorted(
            v for v in first | second if int(v.rsplit(b"-", 1)[0].rsplit(b"p", 1)[1]) in mine)
    finally:
        java.kill()
        m.close()


def test_a_member_that_left_while_its_group_could_not_be_written_stays_gone_after_a_failover(cluster_factory) -> None:
    """A member leaves while the group's `__consumer_offsets` partition cannot take writes
    (min.insync.replicas 3, a replica down): its tombstones fail with the write. They go
    out again with the group's next records once the partition is whole, so the next
    coordinator, replaying the log, has only the member that stayed, owning every
    partition (it used to bring the departed member back, with partitions the other owned
    by then)."""
    c = cluster_factory(3, **{**FAST, "offsets_topic_replication_factor": 3, "replica_lag_time_max_ms": 3000,
                               "group_consumer_heartbeat_interval_ms": 500})
    topic, group = "gone848", "gone848-group"
    c.create_topic(topic, 4, 3)
    a, b = member(c, group), member(c, group)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        wait_until(lambda: (a.poll(0.1), b.poll(0.1), len(assigned(a)) == len(assigned(b)) == 2)[2], 60,
                   "2 partitions each")
        coordinator = find_coordinator(c, group)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets", incremental_configs=[
            ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)])
        [fut] = admin.incremental_alter_configs([res]).values()
        assert fut.result(timeout=20) is None
        other = next(i for i in c.brokers if i != coordinator)
        c.kill(other)
        # once it is out of the partition's ISR the group's writes are refused before they
        # are appended (NOT_ENOUGH_REPLICAS; one waiting for it would be appended anyway)
        part = partition_for(group, int(FAST["offsets_topic_num_partitions"]))

        def isr() -> list[int]:
            [t] = c.metadata(["__consumer_offsets"])["topics"]
            return next(p["isr_nodes"] for p in t["partitions"] if p["partition_index"] == part)
        wait_until(lambda: other not in isr(), 30, "the dead replica out of the ISR")
        stayed = next(x.member_id for x in describe(c, group).members if {tp.partition for tp in
                      x.assignment.topic_partitions} == assigned(b))
        a.close()  # its leave is answered with the write's error; the coordinator forgets it anyway
        end = time.monotonic() + 8
        while time.monotonic() < end:  # b's heartbeats: a new assignment, whose writes fail too
            b.poll(0.2)
        c.restart(other)
        # once the partition is whole again, b's records are written, a's tombstones with them
        wait_until(lambda: (b.poll(0.1), assigned(b) == {0, 1, 2, 3})[1], 90, "b owning every partition")
        wait_until(lambda: (b.poll(0.1), [x.member_id for x in describe(c, group).members] == [stayed])[1], 60,
                   "only b in the group")
        end = time.monotonic() + 3
        while time.monotonic() < end:
            b.poll(0.2)
        c.kill(coordinator)

        def replayed():  # the group as the next coordinator loaded it (before any session ends)
            try:
                return describe(c, group)
            except Exception:  # the partition moving: asked again
                return None
        d = wait_until(replayed, 60, "the next coordinator's answer")
        assert [(x.member_id, {tp.partition for tp in x.assignment.topic_partitions}) for x in d.members] == [
            (stayed, {0, 1, 2, 3})], d
        wait_until(lambda: (b.poll(0.1), str(describe(c, group).state).endswith("STABLE"))[1], 60, "b carrying on")
        assert assigned(b) == {0, 1, 2, 3}
    finally:
        a.close()
        b.close()


def test_offsets_of_a_member_follow_its_epoch_and_groups_are_fetched_together(cluster_factory) -> None:
    """OffsetCommit and OffsetFetch v9 carry a KIP-848 member's id and epoch, checked as
    Kafka's coordinator checks them (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, and
    UNSUPPORTED_VERSION for a member's commit before v9); Kafka's admin client fetches the
    offsets of many groups in one OffsetFetch (v8+) per coordinator."""
    c = cluster_factory(3, start=False, **{**FAST, "offsets_topic_replication_factor": 3})
    metrics = c.serve_metrics()
    c.start()
    topic = "epochs"
    c.create_topic(topic, 2, 3)
    groups = [f"og-{i}" for i in range(6)]
    m = member(c, groups[0])
    try:
        m.subscribe([topic])
        wait_until(lambda: (m.poll(0.1), assigned(m) == {0, 1})[1], 40, "the member owning both partitions")
        d = group_call(c, groups[0], ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [groups[0]]})
        [who] = d["groups"][0]["members"]
        mid, epoch = who["member_id"], who["member_epoch"]

        def commit(group: str, version: int, member_id: str, member_epoch: int, offset: int) -> set[int]:
            r = group_call(c, group, ApiKey.OFFSET_COMMIT, version, {
                "group_id": group, "generation_id_or_member_epoch": member_epoch, "member_id": member_id,
                "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": offset + p}
                                                          for p in (0, 1)]}]})
            return {p["error_code"] for t in r["topics"] for p in t["partitions"]}

        assert commit(groups[0], 9, mid, epoch, 5) == {E.NONE}
        assert commit(groups[0], 9, mid, epoch - 1, 7) == {E.STALE_MEMBER_EPOCH}
        assert commit(groups[0], 8, mid, epoch, 7) == {E.UNSUPPORTED_VERSION}
        for i, g in enumerate(groups[1:], 1):  # an admin's commits (no member) to groups with none
            assert commit(g, 9, "", -1, 10 * i) == {E.NONE}

        def fetch(member_id: str | None, member_epoch: int) -> dict:
            r = group_call(c, groups[0], ApiKey.OFFSET_FETCH, 9, {"groups": [
                {"group_id": groups[0], "member_id": member_id, "member_epoch": member_epoch, "topics": None}]})
            return r["groups"][0]

        ok = fetch(mid, epoch)
        assert ok["error_code"] == 0 and [p["committed_offset"] for p in ok["topics"][0]["partitions"]] == [5, 6]
        assert fetch(mid, epoch + 1)["error_code"] == E.STALE_MEMBER_EPOCH
        assert fetch("nobody", 1)["error_code"] == E.UNKNOWN_MEMBER_ID
        assert fetch(None, -1)["error_code"] == 0  # an admin client names no member
        # kafka-consumer-groups.sh --describe --all-groups: the Java admin batches the groups
        # by coordinator (FindCoordinator v4, OffsetFetch v9 with many groups)
        def fetches() -> float:
            return sum(scrape(port).get('kafka_network_requestmetrics_requests_total{request="OffsetFetch",version="9"}', 0)
                       for port in metrics.values())

        before = fetches()
        shown = java_tools.run("group-offsets", c.bootstrap, *groups).split(" | ")
        assert shown == [f"{g} [{topic}-0={10 * i if i else 5}, {topic}-1={10 * i + 1 if i else 6}]"
                         for i, g in enumerate(groups)], shown
        coordinators = {find_coordinator(c, g) for g in groups}
        assert len(coordinators) > 1 and fetches() - before == len(coordinators)  # one request each
    finally:
        m.close()


def test_consumer_group_describe_and_list_name_the_group_types(cluster_factory) -> None:
    """A classic group is described by DescribeGroups after ConsumerGroupDescribe answers
    GROUP_ID_NOT_FOUND (the admin client falls back), and each is listed with its type."""
    c = cluster_factory(1, **FAST)
    c.create_topic("types", 1, 1)
    classic = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "classic-g", "auto.offset.reset": "earliest",
                        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    new = member(c, "consumer-g")
    try:
        classic.subscribe(["types"])
        new.subscribe(["types"])
        wait_until(lambda: (classic.poll(0.1), new.poll(0.1), describe(c, "classic-g").members
                            and describe(c, "consumer-g").members)[2], 40, "both groups with a member")
        assert describe(c, "classic-g").type == ConsumerGroupType.CLASSIC
        assert describe(c, "consumer-g").type == ConsumerGroupType.CONSUMER
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        listed = {g.group_id: g.type for g in admin.list_consumer_groups().result(timeout=20).valid}
        assert listed == {"classic-g": ConsumerGroupType.CLASSIC, "consumer-g": ConsumerGroupType.CONSUMER}
        only = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=20).valid
        assert [g.group_id for g in only] == ["consumer-g"]
    finally:
        classic.close()
        new.close()




def test_a_restarted_static_java_member_gets_its_partitions_back_without_a_rebalance(cluster_factory) -> None:
    """Kafka's consumer with group.instance.id leaves with epoch -2 on close: its
    partitions wait for it (the session timeout), the other member keeps exactly its own,
    and the same instance started again gets the same partitions."""
    c = cluster_factory(1, **FAST)
    topic, group = "st848", "st848-group"
    c.create_topic(topic, 4, 1)
    first = JavaGroupMember(c.bootstrap, group, topic, "consumer", "static-a")
    second = None
    rd = member(c, group)
    seen: list = []
    try:
        wait_until(lambda: java_owns(first.lines) == {0, 1, 2, 3}, 60, f"the Java member owning all: {first.lines}")
        rd.subscribe([topic])
        wait_until(lambda: (drain(rd, seen), len(assigned(rd)) == 2 and java_owns(first.lines) == {0, 1, 2, 3}
                            - assigned(rd))[1], 60, f"2 partitions each: {first.lines}")
        mine, theirs = assigned(rd), java_owns(first.lines)
        first.tell("stop")
        wait_until(lambda: "commit ok" in first.lines, 60, f"the commit: {first.lines}")
        first.tell("close")
        first.proc.wait(timeout=60)
        deadline = time.monotonic() + 8  # the static member's partitions are not handed over
        while time.monotonic() < deadline:
            drain(rd, seen)
            assert assigned(rd) == mine
        second = JavaGroupMember(c.bootstrap, group, topic, "consumer", "static-a")
        wait_until(lambda: java_owns(second.lines) == theirs, 60, f"the same partitions back: {second.lines}")
        for _ in range(10):
            drain(rd, seen)
            assert assigned(rd) == mine  # the other member never moved
        assert not any(ln.startswith(("revoked", "lost")) for ln in second.lines), second.lines
    finally:
        rd.close()
        first.kill()
        if second is not None:
            second.kill()


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_a_rolling_upgrade_and_downgrade_between_the_protocols(cluster_factory, strategy: str) -> None:
    """Kafka's online migration (group.consumer.migration.policy=bidirectional): a classic
    group's members restart one by one with group.protocol=consumer; the first converts the
    group, the classic one left keeps consuming in it (its heartbeats answered
    REBALANCE_IN_PROGRESS when it has partitions to give up or take, its commits checked
    against its member epoch), and no partition is ever on two members. When the last
    consumer-protocol member leaves, the group is classic again."""
    c = cluster_factory(1, **FAST)
    topic, group = "migrate", "migrate-group"
    c.create_topic(topic, 6, 1)
    classic = {"partition.assignment.strategy": strategy}
    old1, old2 = confluent_consumer(c, group, **classic), confluent_consumer(c, group, **classic)
    seen: dict[str, list] = {"old1": [], "old2": [], "new2": []}
    new2 = None
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def group_type() -> ConsumerGroupType:
        listed = admin.list_consumer_groups().result(timeout=20)
        return {g.group_id: g.type for g in listed.valid}[group]

    def split(a, na: str, b, nb: str) -> bool:
        drain(a, seen[na])
        drain(b, seen[nb])
        x, y = assigned(a), assigned(b)
        assert not (x & y), (x, y)  # never one partition on two members
        return len(x) == 3 and len(y) == 3

    try:
        old1.subscribe([topic])
        old2.subscribe([topic])
        wait_until(lambda: split(old1, "old1", old2, "old2"), 40, "the classic members splitting the partitions")
        assert group_type() == ConsumerGroupType.CLASSIC
        sent = produce(c.bootstrap, topic, 6, 10, tag="classic-")
        wait_until(lambda: split(old1, "old1", old2, "old2") and
                   sent <= {v for _, _, v in seen["old1"] + seen["old2"]}, 30, "the first records")
        old2.commit(asynchronous=False)
        old2.close()  # restarted with the consumer protocol: the group converts
        new2 = consumer_protocol_member(c, group)
        new2.subscribe([topic])
        wait_until(lambda: split(old1, "old1", new2, "new2"), 60, "the classic and the new member splitting them")
        assert group_type() == ConsumerGroupType.CONSUMER
        d = describe(c, group)
        assert d.type == ConsumerGroupType.CONSUMER and len(d.members) == 2, d
        more = produce(c.bootstrap, topic, 6, 10, tag="mixed-")
        wait_until(lambda: split(old1, "old1", new2, "new2") and
                   more <= {v for _, _, v in seen["old1"] + seen["new2"]}, 30, "the records produced meanwhile")
        old1.commit(asynchronous=False)  # OffsetCommit in its generation, the member epoch
        new2.commit(asynchronous=False)
        new2.close()  # the last consumer-protocol member leaves: the group is classic again
        new2 = None

        def alone() -> bool:
            drain(old1, seen["old1"])
            return assigned(old1) == set(range(6))

        wait_until(alone, 60, "the classic member taking every partition")
        wait_until(lambda: group_type() == ConsumerGroupType.CLASSIC, 20, "the group listed as classic again")
        last = produce(c.bootstrap, topic, 6, 5, tag="downgraded-")
        wait_until(lambda: (drain(old1, seen["old1"]), last <= {v for _, _, v in seen["old1"]})[1], 30,
                   "the records produced after the downgrade")
        old1.commit(asynchronous=False)
        committed = old1.committed([TopicPartition(topic, p) for p in range(6)], timeout=20)
        assert sum(tp.offset for tp in committed) == 6 * 25  # every record consumed and committed
    finally:
        for cons in (old1, old2, new2):
            if cons is not None:
                try:
                    cons.close()
                except RuntimeError:
                    pass  # closed already


def test_a_static_member_restarted_as_classic_downgrades_the_group_without_a_rebalance(cluster_factory) -> None:
    """A rolling downgrade of static members: a Java consumer-protocol member with a
    group.instance.id, sharing a group with a librdkafka classic member, is restarted
    with the classic protocol under the same instance id. The group is classic again at
    once (as Kafka's validateOnlineDowngradeWithReplacedMemberId): the restarted member
    gets the partitions its instance held, and the other member is not disturbed (no
    rebalance: nothing revoked or assigned on its side)."""
    c = cluster_factory(1, **FAST)
    topic, group = "sdown", "sdown-group"
    c.create_topic(topic, 4, 1)
    moved: list = []
    rd = confluent_consumer(c, group, **{"partition.assignment.strategy": "cooperative-sticky"})
    java = again = None
    try:
        rd.subscribe([topic], on_assign=lambda _c, ps: moved.append(("assign", [p.partition for p in ps])),
                     on_revoke=lambda _c, ps: moved.append(("revoke", [p.partition for p in ps])))
        wait_until(lambda: (rd.poll(0.1), assigned(rd) == {0, 1, 2, 3})[1], 40, "the classic member owning all 4")
        java = JavaGroupMember(c.bootstrap, group, topic, "consumer:uniform", instance_id="j1")

        def split() -> bool:
            rd.poll(0.1)
            mine = assigned(rd)
            return len(mine) == 2 and java_owns(java.lines) == {0, 1, 2, 3} - mine

        wait_until(split, 60, f"2 partitions each: {java.lines}")
        wait_until(lambda: (rd.poll(0.1), str(describe(c, group).state).endswith("STABLE"))[1], 30, "stable")
        theirs, mine = java_owns(java.lines), assigned(rd)
        assert describe(c, group).type == ConsumerGroupType.CONSUMER
        java.tell("stop")
        java.tell("close")  # a static member's leave: its place and partitions kept for it
        java.proc.wait(timeout=60)
        moved.clear()
        again = JavaGroupMember(c.bootstrap, group, topic, "cooperative-sticky", instance_id="j1")
        wait_until(lambda: (rd.poll(0.1), java_owns(again.lines) == theirs)[1], 60,
                   f"the classic restart owning what its instance held: {again.lines}")
        d = describe(c, group)
        assert d.type == ConsumerGroupType.CLASSIC and str(d.state).endswith("STABLE"), d
        end = time.monotonic() + 3  # a few heartbeats of both
        while time.monotonic() < end:
            rd.poll(0.1)
        assert assigned(rd) == mine and moved == [], moved
        assert [ln for ln in again.lines if ln.split(" ")[0] in ("assigned", "revoked", "lost")] == [
            "assigned " + ",".join(map(str, sorted(theirs)))], again.lines
    finally:
        rd.close()
        for j in (java, again):
            if j is not None:
                j.kill()


def test_a_java_consumer_protocol_member_upgrades_a_librdkafka_classic_group(cluster_factory) -> None:
    """The upgrade Kafka documents: a Java application restarted with
    group.protocol=consumer joins a running classic group (here a librdkafka
    cooperative-sticky member); both consume, each partition on one of them only, and
    the Java member's commits carry its member epoch."""
    c = cluster_factory(1, **FAST)
    topic, group = "jupgrade", "jupgrade-group"
    c.create_topic(topic, 4, 1)
    rd = confluent_consumer(c, group, **{"partition.assignment.strategy": "cooperative-sticky"})
    seen: list = []
    java = None
    try:
        rd.subscribe([topic])
        wait_until(lambda: (drain(rd, seen), assigned(rd) == {0, 1, 2, 3})[1], 40, "the classic member owning all 4")
        java = JavaGroupMember(c.bootstrap, group, topic, "consumer:uniform")
        lines = java.lines

        def split() -> bool:
            drain(rd, seen)
            mine = assigned(rd)
            return len(mine) == 2 and java_owns(lines) == {0, 1, 2, 3} - mine

        wait_until(split, 60, f"2 partitions each: {lines}")
        assert describe(c, group).type == ConsumerGroupType.CONSUMER
        java.tell("stop")
        wait_until(lambda: any(ln.startswith("records ") for ln in lines), 60, f"the Java member's commit: {lines}")
        assert "commit ok" in lines, lines
        # the classic member's commit, in its generation (its member epoch)
        done = rd.commit(offsets=[TopicPartition(topic, p, 0) for p in sorted(assigned(rd))], asynchronous=False)
        assert done and all(tp.error is None for tp in done), done
        java.tell("close")
        java.proc.wait(timeout=60)
    finally:
        rd.close()
        if java is not None:
            java.kill()
