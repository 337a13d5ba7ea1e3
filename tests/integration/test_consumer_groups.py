"""Consumer groups against real broker processes: the classic group protocol on the wire
at every advertised version, confluent-kafka / kafka-python / aiokafka / kcat consumers
with subscribe(), committed offsets surviving a restart of the consumer and a kill -9 of
the coordinator broker."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafkarepl.cli import wire
from kafkarepl.coordinator import OFFSETS_TOPIC, partition_for
from kafkarepl.errors import ErrorCode as E
from kafkarepl.protocol import API, ApiKey
from tests.fixtures.cluster import TestCluster

pytestmark = pytest.mark.integration

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
FAST = {"group_initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 5}
SESSION_MS = 6000


def wait_until(cond, timeout: float, what: str, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "") -> set[bytes]:
    """per_partition records to each partition; returns the values sent."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for part in range(partitions):
        for i in range(per_partition):
            v = f"{tag}p{part}-{i}".encode()
            values.add(v)
            p.produce(topic, value=v, partition=part)
    assert p.flush(20) == 0
    return values


def find_coordinator(c: TestCluster, group: str, timeout: float = 20) -> int:
    def ask():
        for b in c.brokers.values():
            if b.alive:
                try:
                    r = wire.call("127.0.0.1", b.port, ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
                except (OSError, ConnectionError):
                    continue
                if r["error_code"] == 0 and c.brokers[r["node_id"]].alive:
                    return r["node_id"]
        return None

    return wait_until(ask, timeout, f"a coordinator for {group}")


def group_call(c: TestCluster, group: str, api: ApiKey, version: int, body: dict, timeout: float = 20) -> dict:
    """Call a group API at the group's coordinator, retrying while it moves or loads."""
    retriable = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS}
    last: dict = {}

    def attempt():
        nonlocal last
        node = find_coordinator(c, group, timeout)
        last = wire.call("127.0.0.1", c.brokers[node].port, api, version, body, timeout=timeout)
        return None if last.get("error_code", 0) in retriable else last

    return wait_until(attempt, timeout, f"{api.name} of {group} (last answer {last})", 0.2)


def confluent_consumer(c: TestCluster, group: str, **conf) -> Consumer:
    return Consumer({
        "bootstrap.servers": c.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000, **conf,
    })


def assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def found(resp: dict) -> dict | None:
    """A FindCoordinator answer without errors (v0-3 top-level, v4 per key), else None."""
    ok = resp.get("error_code", 0) == 0 and all(x["error_code"] == 0 for x in resp.get("coordinators") or [])
    return resp if ok else None


# ------------------------------------------------------------------- the wire ----
def test_every_advertised_version_of_the_group_apis(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    c.create_topic("wire", 2, 1)
    port = c.brokers[1].port
    versions = {k["api_key"]: (k["min_version"], k["max_version"])
                for k in wire.call("127.0.0.1", port, ApiKey.API_VERSIONS, 3, {})["api_keys"]}
    group_apis = [ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
                  ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS,
                  ApiKey.LIST_GROUPS]
    for api in group_apis:
        assert versions[api] == (API[api].min_version, API[api].max_version), api
    # FindCoordinator creates __consumer_offsets and names the leader of the group's partition.
    for v in range(versions[ApiKey.FIND_COORDINATOR][1] + 1):
        body = {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]}
        r = wait_until(lambda v=v, body=body: found(wire.call("127.0.0.1", port, ApiKey.FIND_COORDINATOR, v, body)),
                       20, f"FindCoordinator v{v}")
        if v >= 4:
            assert [(x["key"], x["node_id"], x["port"]) for x in r["coordinators"]] == [("g", 1, port), ("h", 1, port)]
        else:
            assert (r["node_id"], r["port"]) == (1, port)
    md = c.metadata([OFFSETS_TOPIC])["topics"][0]
    assert md["is_internal"] and len(md["partitions"]) == 5
    # A whole membership cycle at each version of JoinGroup (others at min(v, their max)).
    for v in range(versions[ApiKey.JOIN_GROUP][1] + 1):
        group = f"wire-{v}"

        def ver(api: ApiKey, v: int = v) -> int:
            return min(v, versions[api][1])

        join = {"group_id": group, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 10000,
                "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"meta"}]}
        r = group_call(c, group, ApiKey.JOIN_GROUP, v, join)
        if v >= 4:
            assert r["error_code"] == E.MEMBER_ID_REQUIRED and r["member_id"].startswith("kafkarepl-cli-"), r
            r = group_call(c, group, ApiKey.JOIN_GROUP, v, dict(join, member_id=r["member_id"]))
        assert r["error_code"] == 0, r
        member, gen = r["member_id"], r["generation_id"]
        assert (r["leader"], r["protocol_name"], gen) == (member, "range", 1)
        assert [(m["member_id"], bytes(m["metadata"])) for m in r["members"]] == [(member, b"meta")]
        sync = {"group_id": group, "generation_id": gen, "member_id": member, "protocol_type": "consumer",
                "protocol_name": "range", "assignments": [{"member_id": member, "assignment": b"mine"}]}
        r = group_call(c, group, ApiKey.SYNC_GROUP, ver(ApiKey.SYNC_GROUP), sync)
        assert (r["error_code"], bytes(r["assignment"])) == (0, b"mine")
        hb = {"group_id": group, "generation_id": gen, "member_id": member}
        assert group_call(c, group, ApiKey.HEARTBEAT, ver(ApiKey.HEARTBEAT), hb)["error_code"] == 0
        assert group_call(c, group, ApiKey.HEARTBEAT, ver(ApiKey.HEARTBEAT),
                          dict(hb, generation_id=gen + 1))["error_code"] == E.ILLEGAL_GENERATION
        commit = {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": member,
                  "topics": [{"name": "wire", "partitions": [
                      {"partition_index": 0, "committed_offset": 10 + v, "committed_leader_epoch": 0,
                       "committed_metadata": f"m{v}"},
                      {"partition_index": 7, "committed_offset": 1, "committed_metadata": None}]}]}
        if ver(ApiKey.OFFSET_COMMIT) == 0:  # v0 commits carry no member: only Empty groups take them
            commit = dict(commit, generation_id_or_member_epoch=-1, member_id="")
        else:
            r = group_call(c, group, ApiKey.OFFSET_COMMIT, ver(ApiKey.OFFSET_COMMIT), commit)
            codes = {p["partition_index"]: p["error_code"] for p in r["topics"][0]["partitions"]}
            assert codes == {0: 0, 7: E.UNKNOWN_TOPIC_OR_PARTITION}, r
        d = group_call(c, group, ApiKey.DESCRIBE_GROUPS, ver(ApiKey.DESCRIBE_GROUPS), {"groups": [group]})
        [g] = d["groups"]
        assert (g["error_code"], g["group_state"], g["protocol_data"]) == (0, "Stable", "range")
        assert [(m["member_id"], m["client_host"], bytes(m["member_assignment"])) for m in g["members"]] == [
            (member, "/127.0.0.1", b"mine")]
        leave = {"group_id": group, "member_id": member, "members": [{"member_id": member}]}
        r = group_call(c, group, ApiKey.LEAVE_GROUP, ver(ApiKey.LEAVE_GROUP), leave)
        assert r["error_code"] == 0 and all(m["error_code"] == 0 for m in r.get("members") or []), r
        if ver(ApiKey.OFFSET_COMMIT) == 0:
            r = group_call(c, group, ApiKey.OFFSET_COMMIT, 0, commit)
            codes = {p["partition_index"]: p["error_code"] for p in r["topics"][0]["partitions"]}
            assert codes == {0: 0, 7: E.UNKNOWN_TOPIC_OR_PARTITION}, r
        fv = ver(ApiKey.OFFSET_FETCH)
        wanted = [{"name": "wire", "partition_indexes": [0, 1]}]
        if fv >= 8:  # many groups in one request (one broker: this one coordinates them all)
            r = group_call(c, group, ApiKey.OFFSET_FETCH, fv, {"groups": [
                {"group_id": group, "topics": wanted}, {"group_id": "never-committed", "topics": wanted},
                {"group_id": group, "topics": None}]})
            mine, none, every = r["groups"]
            assert (mine["group_id"], none["group_id"], mine["error_code"], none["error_code"]) == (
                group, "never-committed", 0, 0), r
            assert [p["committed_offset"] for p in none["topics"][0]["partitions"]] == [-1, -1], r
            assert [p["partition_index"] for t in every["topics"] for p in t["partitions"]] == [0], r
        else:
            r = group_call(c, group, ApiKey.OFFSET_FETCH, fv, {"group_id": group, "topics": wanted})
            mine = r
        got = {p["partition_index"]: (p["committed_offset"], p["metadata"]) for p in mine["topics"][0]["partitions"]}
        assert got == {0: (10 + v, f"m{v}"), 1: (-1, "")}, (fv, r)
    lg = wire.call("127.0.0.1", port, ApiKey.LIST_GROUPS, versions[ApiKey.LIST_GROUPS][1], {"states_filter": []})
    listed = {g["group_id"]: g["group_state"] for g in lg["groups"]}
    assert lg["error_code"] == 0 and {f"wire-{v}" for v in range(8)} <= set(listed)
    assert set(listed.values()) == {"Empty"}


def test_coordinator_is_the_leader_of_the_groups_partition(cluster_factory) -> None:
    c = cluster_factory(3, group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=6)
    for group in ("alpha", "beta", "gamma", "delta", "a-much-longer-consumer-group-name-ü"):
        node = find_coordinator(c, group)
        md = c.metadata([OFFSETS_TOPIC])["topics"][0]
        assert len(md["partitions"]) == 6
        assert all(len(p["replica_nodes"]) == 3 for p in md["partitions"])  # capped at live brokers
        leader = next(p["leader_id"] for p in md["partitions"] if p["partition_index"] == partition_for(group, 6))
        assert node == leader, group


def test_silent_member_expires_after_its_session_timeout(cluster_factory) -> None:
    """The broker's timer, not a request, removes a member that stops heartbeating."""
    c = cluster_factory(1, **FAST)
    group = "silent"

    def join(member_id: str = "") -> dict:
        return group_call(c, group, ApiKey.JOIN_GROUP, 5, {
            "group_id": group, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 8000,
            "member_id": member_id, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})

    def describe() -> dict:
        return group_call(c, group, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group]})["groups"][0]

    r = join(join()["member_id"])
    member, gen = r["member_id"], r["generation_id"]
    r = group_call(c, group, ApiKey.SYNC_GROUP, 3, {"group_id": group, "generation_id": gen, "member_id": member,
                                                    "assignments": [{"member_id": member, "assignment": b"a"}]})
    assert r["error_code"] == 0
    assert [m["member_id"] for m in describe()["members"]] == [member]
    wait_until(lambda: describe()["members"] == [], SESSION_MS / 1000 + 10, "the silent member to expire", 0.5)
    # No member and no committed offset left: the group is forgotten (Kafka's Dead).
    assert describe()["group_state"] == "Dead"
    hb = group_call(c, group, ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": gen, "member_id": member})
    assert hb["error_code"] == E.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------- confluent-kafka ----
def test_two_consumers_split_partitions_then_one_takes_all(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    topic, group = "split", "split-group"
    c.create_topic(topic, 6, 1)
    c1, c2 = confluent_consumer(c, group), confluent_consumer(c, group)
    try:
        c1.subscribe([topic])
        c2.subscribe([topic])
        seen: dict[int, list[tuple[int, int, bytes]]] = {1: [], 2: []}

        def poll_both(rounds: int = 1) -> None:
            for _ in range(rounds):
                drain(c1, seen[1])
                drain(c2, seen[2])

        def split() -> bool:
            poll_both()
            a, b = assigned(c1), assigned(c2)
            return bool(a) and bool(b) and not (a & b) and (a | b) == set(range(6))

        wait_until(split, 25, "the two consumers to split the 6 partitions")
        sent = produce(c.bootstrap, topic, 6, 20)
        wait_until(lambda: (poll_both(), len(seen[1]) + len(seen[2]) >= len(sent))[1], 20, "all records")
        poll_both(3)
        all_seen = seen[1] + seen[2]
        assert sorted(v for _, _, v in all_seen) == sorted(sent)  # each exactly once
        for i, cons in ((1, c1), (2, c2)):  # each consumer read only its own partitions
            assert {p for p, _, _ in seen[i]} == assigned(cons)
        c2.close()
        wait_until(lambda: (drain(c1, seen[1]), assigned(c1) == set(range(6)))[1], 20,
                   "the remaining consumer to get every partition")
        more = produce(c.bootstrap, topic, 6, 5, tag="more-")
        wait_until(lambda: (drain(c1, seen[1]), more <= {v for _, _, v in seen[1]})[1], 20,
                   "the new records on the remaining consumer")
    finally:
        c1.close()


class JavaGroupMember:
    """Kafka's own consumer (tests/java KafkaTools `group-member`) in a process of its own:
    its rebalance callbacks and answers collected as lines, driven by commands on stdin."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str | None = None,
                 instance_id: str | None = None) -> None:
        import threading

        from tests import java_tools

        cp, main = java_tools.compiled()
        self.proc = subprocess.Popen(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, main,
                                      "group-member", bootstrap, group, topic, "120", *([assignor] if assignor else []),
                                      *([instance_id] if instance_id else [])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def tell(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


def test_cooperative_rebalances_move_only_what_changes(cluster_factory) -> None:
    # KIP-429 (librdkafka's cooperative-sticky): the broker only relays the members'
    # owned partitions (subscription metadata) and the leader's plan, but a join must
    # not take every partition from everyone: a member keeps what it is not asked to
    # give, and a member that leaves hands over only its own partitions.
    c = cluster_factory(1, **FAST)
    topic, group = "coop", "coop-group"
    c.create_topic(topic, 6, 1)
    events: dict[str, list[tuple[str, list[int]]]] = {}
    members: dict[str, Consumer] = {}
    seen: list = []

    def join(name: str) -> None:
        events[name] = []
        cons = confluent_consumer(c, group, **{"partition.assignment.strategy": "cooperative-sticky"})

        def note(what: str):
            return lambda _c, ps: events[name].append((what, sorted(p.partition for p in ps)))

        cons.subscribe([topic], on_assign=note("assign"), on_revoke=note("revoke"), on_lost=note("lost"))
        members[name] = cons

    def balanced(names: list[str]) -> bool:
        for n in names:
            drain(members[n], seen)
        owned = [assigned(members[n]) for n in names]
        return all(len(o) == 6 // len(names) for o in owned) and set().union(*owned) == set(range(6))

    def gained(name: str) -> set[int]:
        return {p for what, ps in events[name] if what == "assign" for p in ps}

    try:
        join("a")
        wait_until(lambda: balanced(["a"]), 25, "a owning all 6")
        join("b")
        wait_until(lambda: balanced(["a", "b"]), 30, f"a and b 3 each: {events}")
        join("c")
        wait_until(lambda: balanced(["a", "b", "c"]), 30, f"2 each: {events}")
        # a gave up 4 partitions over the two joins, never its whole assignment at once,
        # and was given nothing back: incremental revocations only.
        revoked_a = [ps for what, ps in events["a"] if what == "revoke"]
        assert sum(len(ps) for ps in revoked_a) == 4 and all(len(ps) < 6 for ps in revoked_a), events
        assert gained("a") == set(range(6)) and not any(what == "lost" for n in events for what, _ in events[n])
        kept_a, kept_c = assigned(members["a"]), assigned(members["c"])
        sent = produce(c.bootstrap, topic, 6, 20)
        wait_until(lambda: (balanced(["a", "b", "c"]), {v for _, _, v in seen} >= sent)[1], 20, "every record")
        members.pop("b").close()
        wait_until(lambda: balanced(["a", "c"]), 30, f"a and c 3 each after b left: {events}")
        # the ones who stayed kept what they had and took b's share; nothing was revoked
        # from them on b's leave
        assert kept_a < assigned(members["a"]) and kept_c < assigned(members["c"]), events
        assert sum(len(ps) for what, ps in events["c"] if what == "revoke") == 0, events
    finally:
        for cons in members.values():
            cons.close()


def java_owns(lines: list[str]) -> set[int]:
    """What a Java member owns, from its rebalance callbacks (increments with a cooperative
    assignor or KIP-848's protocol)."""
    owned: set[int] = set()
    for ln in list(lines):
        what, _, parts = ln.partition(" ")
        ps = {int(x) for x in parts.split(",") if x} if what in ("assigned", "revoked", "lost") else set()
        owned = owned | ps if what == "assigned" else owned - ps
    return owned


def consumer_protocol_member(c: TestCluster, group: str, **conf) -> Consumer:
    """A librdkafka member of a KIP-848 group (the broker sets its timing and assignor)."""
    return Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 1000, **conf})


@pytest.mark.parametrize("protocol", ["cooperative-sticky", "consumer", "migration"])
def test_java_and_librdkafka_share_a_group(cluster_factory, protocol: str) -> None:
    # cooperative-sticky: Kafka's CooperativeStickyAssignor and librdkafka's in one
    # classic group: the broker picks the protocol both name and relays each one's owned
    # partitions. consumer: KIP-848's protocol, the broker assigns (uniform) and tells the
    # Java member (AsyncKafkaConsumer) to revoke what moves, its commits carrying its
    # member epoch. migration: the Java member classic (cooperative-sticky), the librdkafka
    # one of KIP-848's protocol: it converts the group online, and leaving turns it classic
    # again (the Java member then commits in a classic group). Either way, the Java member
    # gives up only what moves and takes the other's share when it leaves, with no full
    # revocation.
    c = cluster_factory(1, **FAST)
    topic, group = "jcoop", "jcoop-group"
    c.create_topic(topic, 4, 1)
    java = JavaGroupMember(c.bootstrap, group, topic, "consumer:uniform" if protocol == "consumer"
                           else "cooperative-sticky")
    lines = java.lines
    seen: list = []
    rd = None
    try:
        wait_until(lambda: java_owns(lines) == {0, 1, 2, 3}, 60, f"the Java member owning all 4: {lines}")
        rd = (consumer_protocol_member(c, group) if protocol in ("consumer", "migration")
              else confluent_consumer(c, group, **{"partition.assignment.strategy": "cooperative-sticky"}))
        rd.subscribe([topic])
        wait_until(lambda: (drain(rd, seen), len(assigned(rd)) == 2 and java_owns(lines) == {0, 1, 2, 3} - assigned(rd))[1],
                   60, f"2 partitions each: {lines}")
        revoked = [ln for ln in lines if ln.startswith("revoked ")]
        assert len(revoked) == 1 and len(revoked[0].split(" ")[1].split(",")) == 2, lines
        assert not any(ln.startswith("lost") for ln in lines), lines
        if protocol == "migration":  # converted: a KIP-848 group of a classic and a new member
            d = group_call(c, group, ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                           {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
            assert d["error_code"] == 0 and len(d["members"]) == 2, d
        before = len(lines)
        rd.close()
        rd = None
        wait_until(lambda: java_owns(lines) == {0, 1, 2, 3}, 60, f"the Java member taking the 2 back: {lines}")
        assert not any(ln.split(" ")[0] in ("revoked", "lost") for ln in lines[before:]), lines
        if protocol == "migration":  # converted back: a classic group again
            d = group_call(c, group, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group]})["groups"][0]
            assert d["error_code"] == 0 and d["protocol_type"] == "consumer" and len(d["members"]) == 1, d
        java.tell("stop")
        wait_until(lambda: any(ln.startswith("records ") for ln in lines), 60, f"the Java member's commit: {lines}")
        assert "commit ok" in lines, lines
        java.tell("close")
        java.proc.wait(timeout=60)
    finally:
        if rd is not None:
            rd.close()
        java.kill()


def drain(cons: Consumer, into: list) -> None:
    """Poll until a poll comes back empty; (partition, offset, value) go to `into`."""
    while (m := cons.poll(0.1)) is not None:
        if not m.error():
            into.append((m.partition(), m.offset(), m.value()))


def test_committed_offsets_resume_after_restart(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    topic, group = "resume", "resume-group"
    c.create_topic(topic, 3, 1)
    first = produce(c.bootstrap, topic, 3, 10, tag="a-")
    cons = confluent_consumer(c, group)
    got: list = []
    try:
        cons.subscribe([topic])
        wait_until(lambda: (drain(cons, got), len(got) >= len(first))[1], 25, "the first records")
        cons.commit(asynchronous=False)
        committed = cons.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 10), (1, 10), (2, 10)]
    finally:
        cons.close()
    assert {v for _, _, v in got} == first
    second = produce(c.bootstrap, topic, 3, 4, tag="b-")
    cons = confluent_consumer(c, group)
    got2: list = []
    try:
        cons.subscribe([topic])
        wait_until(lambda: (drain(cons, got2), len(got2) >= len(second))[1], 25, "the new records")
        drain(cons, got2)
    finally:
        cons.close()
    assert {v for _, _, v in got2} == second  # nothing committed was read again
    assert min(off for _, off, _ in got2) == 10


# ------------------------------------------------------ kafka-python / aiokafka ----
def test_kafka_python_group_round_trip(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    topic, group = "kp", "kp-group"
    c.create_topic(topic, 2, 1)
    sent = produce(c.bootstrap, topic, 2, 15)
    kc = KafkaConsumer(topic, bootstrap_servers=c.bootstrap, group_id=group, auto_offset_reset="earliest",
                       enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                       consumer_timeout_ms=500)
    got: set[bytes] = set()
    try:
        wait_until(lambda: (got.update(m.value for m in kc), len(got) >= len(sent))[1], 25, "kafka-python records")
        kc.commit()
        assert {kc.committed(KpTopicPartition(topic, p)) for p in range(2)} == {15}
        assert kc.assignment() == {KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)}
    finally:
        kc.close()
    assert got == sent
    r = group_call(c, group, ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None})
    assert sorted((p["partition_index"], p["committed_offset"]) for p in r["topics"][0]["partitions"]) == [
        (0, 15), (1, 15)]


def test_aiokafka_group_round_trip(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    topic, group = "aio", "aio-group"
    c.create_topic(topic, 2, 1)
    sent = produce(c.bootstrap, topic, 2, 12)

    async def run() -> tuple[set[bytes], dict[int, int]]:
        cons = AIOKafkaConsumer(topic, bootstrap_servers=c.bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
        await cons.start()
        got: set[bytes] = set()
        try:
            deadline = time.monotonic() + 25
            while len(got) < len(sent) and time.monotonic() < deadline:
                batch = await cons.getmany(timeout_ms=500)
                for msgs in batch.values():
                    got.update(m.value for m in msgs)
            await cons.commit()
            committed = {p.partition: await cons.committed(p) for p in cons.assignment()}
        finally:
            await cons.stop()
        return got, committed

    got, committed = asyncio.run(run())
    assert got == sent
    assert committed == {0: 12, 1: 12}


# ------------------------------------------------------------------------ kcat ----
def test_kcat_balanced_consumer(cluster_factory) -> None:
    c = cluster_factory(1, **FAST)
    topic = "kcat-g"
    c.create_topic(topic, 3, 1)
    sent = produce(c.bootstrap, topic, 3, 7)
    r = subprocess.run([KCAT, "-b", c.bootstrap, "-G", f"kcat-{uuid.uuid4().hex[:6]}", topic, "-c", str(len(sent)),
                        "-X", "auto.offset.reset=earliest", "-f", "%p %o %s\n", "-q"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    lines = r.stdout.decode().split("\n")
    got = {ln.split(" ", 2)[2].encode() for ln in lines if ln.strip()}
    assert got == sent


# ------------------------------------------------------------------- failover ----
def test_committed_offsets_survive_coordinator_kill(cluster_factory) -> None:
    c = cluster_factory(3, group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=3)
    topic, group = "durable", "durable-group"
    c.create_topic(topic, 3, 3)
    cons = confluent_consumer(c, group)
    try:
        cons.subscribe([topic])
        wait_until(lambda: (cons.poll(0.1), len(assigned(cons)) == 3)[1], 25, "an assignment")
        offsets = [TopicPartition(topic, p, 100 + p) for p in range(3)]
        assert all(tp.error is None for tp in cons.commit(offsets=offsets, asynchronous=False))
    finally:
        cons.close()
    coordinator = find_coordinator(c, group)
    c.kill(coordinator)
    r = group_call(c, group, ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0, 1, 2]}]}, timeout=25)
    assert find_coordinator(c, group) != coordinator
    assert sorted((p["partition_index"], p["committed_offset"], p["error_code"])
                  for p in r["topics"][0]["partitions"]) == [(0, 100, 0), (1, 101, 0), (2, 102, 0)]
    # The new coordinator takes new members and commits, too.
    cons = confluent_consumer(c, group, **{"bootstrap.servers": c.alive_bootstrap()})
    try:
        cons.subscribe([topic])
        wait_until(lambda: (cons.poll(0.1), len(assigned(cons)) == 3)[1], 25, "an assignment after failover")
        positions = cons.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert sorted((tp.partition, tp.offset) for tp in positions) == [(0, 100), (1, 101), (2, 102)]
    finally:
        cons.close()


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_members_carry_on_without_a_rebalance_when_the_coordinator_fails(cluster_factory, how: str) -> None:
    # Kafka persists membership (GroupMetadataValue) with the assignment before the group
    # turns Stable, so the coordinator that takes over resumes the group: the members'
    # heartbeats and commits go on in their generation; no revoke, no new assignment.
    # Before, the new coordinator knew only the offsets: every member rejoined (a rolling
    # restart rebalanced every group of the cluster).
    c = cluster_factory(3, group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=3,
                        offsets_topic_replication_factor=3)
    topic, group = "resumed", "resumed-group"
    c.create_topic(topic, 4, 3)
    events: dict[str, list[tuple[str, list[int]]]] = {"a": [], "b": []}

    def consumer(name: str) -> Consumer:
        cons = confluent_consumer(c, group, **{"session.timeout.ms": 20000, "client.id": name,
                                               "partition.assignment.strategy": "range"})
        cons.subscribe([topic],
                       on_assign=lambda _c, ps: events[name].append(("assign", sorted(p.partition for p in ps))),
                       on_revoke=lambda _c, ps: events[name].append(("revoke", sorted(p.partition for p in ps))))
        return cons

    a, b = consumer("a"), consumer("b")
    got: list[bytes] = []

    def poll_both(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for x in (a, b):
                m = x.poll(0.05)
                if m is not None and m.error() is None:
                    got.append(m.value())

    try:
        deadline = time.monotonic() + 40
        while not (len(assigned(a)) + len(assigned(b)) == 4 and assigned(a) and assigned(b)):
            assert time.monotonic() < deadline, events
            poll_both(0.2)
        poll_both(2)  # settled: nothing else comes
        before = {n: list(e) for n, e in events.items()}
        coordinator = find_coordinator(c, group)
        if how == "kill":
            c.kill(coordinator)
        else:
            assert c.stop(coordinator) == 0
        new = find_coordinator(c, group, timeout=30)
        assert new != coordinator
        sent = produce(c.alive_bootstrap(), topic, 4, 5, tag="after-")
        deadline = time.monotonic() + 40
        while not sent <= set(got):
            assert time.monotonic() < deadline, f"missing {sorted(sent - set(got))[:5]}; events {events}"
            poll_both(0.2)
        poll_both(4)  # a few heartbeat intervals at the new coordinator
        # Commits in the generation the members had still count.
        for x in (a, b):
            parts = [TopicPartition(topic, p, 3) for p in sorted(assigned(x))]
            assert all(tp.error is None for tp in x.commit(offsets=parts, asynchronous=False))
        assert events == before, events
        d = group_call(c, group, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group]})["groups"][0]
        assert d["group_state"] == "Stable" and sorted(m["client_id"] for m in d["members"]) == ["a", "b"]
    finally:
        a.close()
        b.close()


def test_java_consumers_carry_on_when_the_coordinator_is_killed(cluster_factory) -> None:
    # The same with Kafka's own consumer (classic protocol), the reference client: after
    # the coordinator's kill -9 its heartbeats and commitSync go on in its generation,
    # no rebalance callback runs (onPartitionsLost/Revoked would, on UNKNOWN_MEMBER_ID).
    c = cluster_factory(3, group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=3,
                        offsets_topic_replication_factor=3)
    topic, group = "jresumed", "jresumed-group"
    c.create_topic(topic, 4, 3)
    members = [JavaGroupMember(c.bootstrap, group, topic) for _ in range(2)]
    lines = [m.lines for m in members]

    def tell(command: str) -> None:
        for m in members:
            m.tell(command)

    def current() -> list[set[int]]:
        last = [next((ln for ln in reversed(ls) if ln.split(" ")[0] in ("assigned", "revoked", "lost")), "")
                for ls in lines]
        return [set(map(int, ln.split(" ")[1].split(","))) if ln.startswith("assigned ") and ln != "assigned "
                else set() for ln in last]

    try:
        wait_until(lambda: (lambda a: a[0] and a[1] and a[0] | a[1] == {0, 1, 2, 3})(current()), 60,
                   f"both Java members assigned: {lines}")
        time.sleep(2)
        before = [list(ls) for ls in lines]
        assert current()[0] | current()[1] == {0, 1, 2, 3}, lines
        coordinator = find_coordinator(c, group)
        c.kill(coordinator)
        assert find_coordinator(c, group, timeout=30) != coordinator
        produce(c.alive_bootstrap(), topic, 4, 5, tag="after-")
        time.sleep(6)  # a dozen heartbeats at the new coordinator
        tell("stop")  # both stop polling and commit; only then does either leave
        wait_until(lambda: all(any(ln.startswith("records ") for ln in ls) for ls in lines), 60,
                   f"both members' commits: {lines}")
        tell("close")
        for m in members:
            m.proc.wait(timeout=60)
            m.reader.join(10)
        for i in range(2):
            assert lines[i][:len(before[i])] == before[i]
            after = lines[i][len(before[i]):]
            after = after[:after.index("closing")] if "closing" in after else after  # close() revokes
            assert after[:1] == ["commit ok"] and after[-1].startswith("records "), lines
            assert not any(ln.split(" ")[0] in ("assigned", "revoked", "lost") for ln in after), lines[i]
        assert sum(int(next(ln for ln in ls if ln.startswith("records ")).split(" ")[1]) for ls in lines) >= 20
    finally:
        for m in members:
            m.kill()


def test_restarted_static_member_rejoins_without_a_rebalance(cluster_factory) -> None:
    # KIP-345 (librdkafka's 0102_static_group_rebalance): a static member that restarts
    # within session.timeout.ms gets its partitions back; the other member sees no
    # revoke and no new assignment.
    from confluent_kafka import Consumer

    c = cluster_factory(1, **FAST)
    c.create_topic("static", 4, 1)
    events: dict[str, list[tuple[str, list[int]]]] = {"a": [], "b": []}

    def consumer(name: str) -> Consumer:
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "static-g", "group.instance.id": name,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                         "partition.assignment.strategy": "range"})
        cons.subscribe(["static"],
                       on_assign=lambda _c, ps: events[name].append(("assign", sorted(p.partition for p in ps))),
                       on_revoke=lambda _c, ps: events[name].append(("revoke", sorted(p.partition for p in ps))))
        return cons

    def poll_until(cond, consumers, timeout=30.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, events
            for x in consumers:
                x.poll(0.1)

    a, b = consumer("a"), consumer("b")
    poll_until(lambda: events["a"] and events["b"] and
               len(events["a"][-1][1]) + len(events["b"][-1][1]) == 4 and events["a"][-1][0] == "assign"
               and events["b"][-1][0] == "assign", [a, b])
    before_a, b_parts = list(events["a"]), events["b"][-1][1]
    b.close()  # a static member leaves no LeaveGroup behind: the group keeps its place
    b2 = consumer("b")
    events["b"].clear()
    poll_until(lambda: events["b"] and events["b"][-1][0] == "assign", [a, b2])
    assert events["b"][-1][1] == b_parts
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # and nothing happens to "a" afterwards either
        a.poll(0.1)
        b2.poll(0.1)
    assert events["a"] == before_a, events
    a.close()
    b2.close()


def test_committed_offsets_of_an_empty_group_expire_with_tombstones(cluster_factory) -> None:
    # offsets.retention.minutes (here kafkarepl's test knob in ms): the offsets of a
    # group without members expire, tombstones go to __consumer_offsets (so compaction
    # removes them and no coordinator failover brings them back).
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    from kafkarepl.coordinator.offsets import encode_key

    c = cluster_factory(3, group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=1,
                        offsets_topic_replication_factor=3, kafkarepl_offsets_retention_ms=1500,
                        offsets_retention_check_interval_ms=200)
    c.create_topic("exp", 1, 3)
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "expiring", "enable.auto.commit": False})
    cons.commit(offsets=[TP("exp", 0, 42)], asynchronous=False)
    assert cons.committed([TP("exp", 0)], timeout=10)[0].offset == 42
    deadline = time.monotonic() + 20
    while cons.committed([TP("exp", 0)], timeout=10)[0].offset == 42:
        assert time.monotonic() < deadline, "the committed offset never expired"
        time.sleep(0.3)
    cons.close()
    reader = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "reader", "enable.auto.commit": False,
                       "enable.partition.eof": True})
    reader.assign([TP("__consumer_offsets", 0, 0)])
    key = encode_key("expiring", "exp", 0)
    values = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        m = reader.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == -191:
                break
            continue
        if m.key() == key:
            values.append(m.value())
    reader.close()
    assert len(values) == 2 and values[0] is not None and values[1] is None, values  # commit, then tombstone


def test_group_max_size_refuses_the_consumer_past_it(cluster_factory) -> None:
    """group.max.size=1: a second librdkafka consumer of the group is refused with
    GROUP_MAX_SIZE_REACHED (it sees the error; the first keeps every partition); once the
    first leaves, the second gets in."""
    from confluent_kafka import KafkaError

    c = cluster_factory(1, group_max_size=1, **FAST)
    topic, group = "capped", "capped-group"
    c.create_topic(topic, 2, 1)
    errors: list[int] = []
    c1 = confluent_consumer(c, group)
    c2 = confluent_consumer(c, group, error_cb=lambda e: errors.append(e.code()))
    try:
        c1.subscribe([topic])
        wait_until(lambda: (c1.poll(0.2), assigned(c1) == {0, 1})[1], 25, "the first consumer's assignment")

        def refused() -> bool:
            m = c2.poll(0.2)
            if m is not None and m.error():
                errors.append(m.error().code())
            c1.poll(0)
            return KafkaError.GROUP_MAX_SIZE_REACHED in errors

        c2.subscribe([topic])
        wait_until(refused, 25, "GROUP_MAX_SIZE_REACHED for the second consumer")
        assert assigned(c1) == {0, 1} and not assigned(c2)
        c1.close()
        wait_until(lambda: (c2.poll(0.2), assigned(c2) == {0, 1})[1], 30, "the second consumer in, alone")
    finally:
        for cons in (c1, c2):
            try:
                cons.close()
            except RuntimeError:  # closed above
                pass
