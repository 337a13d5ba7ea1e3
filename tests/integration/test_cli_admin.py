"""The operator commands `kafkarepl reassign-partitions` and `kafkarepl leader-election`,
run as the real entry point (a subprocess) against real broker processes: removing a
broker and adding one with generate/execute/verify (no record lost, read back with
confluent-kafka), cancel and list, preferred leader election after a restart, and bad
input (exit code 1, one-line message, no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.chaos import consume_all, partition_info, wait_until

pytestmark = pytest.mark.integration


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "kafkarepl.cli.main", *args],
                       capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def reassign(c, *args: str) -> subprocess.CompletedProcess:
    return cli("reassign-partitions", "--bootstrap-server", c.alive_bootstrap(), *args)


def write_json(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def generate(c, tmp_path: Path, topic: str, brokers: str) -> tuple[dict, dict, str]:
    """Run --generate; (current, proposed) as {(topic, partition): replicas}, and the
    path of a file holding the proposal (what an operator saves for --execute)."""
    topics = write_json(tmp_path, f"move-{topic}.json", {"topics": [{"topic": topic}], "version": 1})
    r = reassign(c, "--generate", "--topics-to-move-json-file", topics, "--broker-list", brokers)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    current = json.loads(lines[lines.index("Current partition replica assignment") + 1])
    proposed_line = lines[lines.index("Proposed partition reassignment configuration") + 1]
    proposed = json.loads(proposed_line)
    for doc in (current, proposed):
        assert doc["version"] == 1
        for e in doc["partitions"]:
            assert e["log_dirs"] == ["any"] * len(e["replicas"])
    path = write_json(tmp_path, f"plan-{topic}.json", proposed_line)
    return as_map(current), as_map(proposed), path


def as_map(doc: dict) -> dict[tuple[str, int], list[int]]:
    return {(e["topic"], e["partition"]): e["replicas"] for e in doc["partitions"]}


def assignment(c, topic: str) -> dict[tuple[str, int], list[int]]:
    return {(topic, p): i["replica_nodes"] for p, i in partition_info(c, topic).items()}


def execute_and_verify(c, plan: str, partitions: int) -> None:
    r = reassign(c, "--execute", "--reassignment-json-file", plan)
    assert r.returncode == 0, r.stderr
    assert "Save this to use as the --reassignment-json-file option during rollback" in r.stdout
    assert "Successfully started partition reassignment" in r.stdout

    def verified():
        v = reassign(c, "--verify", "--reassignment-json-file", plan)
        assert "Status of partition reassignment:" in v.stdout, v.stderr
        assert v.returncode == 0, v.stderr  # a report, 0 while in progress too (as Kafka's tool)
        return v if v.stdout.count("is completed.") == partitions else None

    v = wait_until(verified, 40, "reassignment verified complete", interval=0.5)
    assert v.stdout.count("is completed.") == partitions, v.stdout


def produce(bootstrap: str, topic: str, partitions: int, n: int) -> set[bytes]:
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    values = [f"{topic}-{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions,
                  on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(30) == 0, "records left undelivered"
    assert not errors, errors
    return set(values)


def consumed_values(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    return [v for recs in consume_all(bootstrap, topic, partitions, timeout=30).values() for _, v in recs]


def test_remove_broker_moves_replicas_off_it_without_losing_records(cluster_factory, tmp_path):
    c = cluster_factory(3, min_insync_replicas=1)
    c.create_topic("mv", partitions=4, rf=2)
    sent = produce(c.bootstrap, "mv", 4, 400)
    before = assignment(c, "mv")
    assert any(3 in r for r in before.values())

    current, proposed, plan = generate(c, tmp_path, "mv", "1,2")
    assert current == before
    assert all(sorted(r) == [1, 2] for r in proposed.values()), proposed
    # Only replicas that were on broker 3 move; partitions on 1 and 2 keep their order.
    for tp, r in before.items():
        if 3 not in r:
            assert proposed[tp] == r

    execute_and_verify(c, plan, 4)
    after = partition_info(c, "mv")
    assert {p: i["replica_nodes"] for p, i in after.items()} == {p: r for (_, p), r in proposed.items()}
    assert all(3 not in i["isr_nodes"] and i["leader_id"] in (1, 2) for i in after.values()), after
    # Broker 3 dropped its copies, and without it every record is still there.
    logs = c.root / "broker-3" / "logs"
    wait_until(lambda: not list(logs.glob("mv-*")), 20, "broker 3 deletes its mv replicas")
    c.kill(3)
    got = consumed_values(c.alive_bootstrap(), "mv", 4)
    assert len(got) == len(sent) and set(got) == sent


def test_add_broker_spreads_replicas_onto_it(cluster_factory, tmp_path):
    c = cluster_factory(4, start=False, min_insync_replicas=1)
    for b in (1, 2, 3):
        c.brokers[b].start()
    for b in (1, 2, 3):
        c.wait_serving(b, expect_brokers=3)
    c.create_topic("grow", partitions=6, rf=2)
    sent = produce(c.alive_bootstrap(), "grow", 6, 300)
    c.restart(4)  # the new broker joins the cluster
    c.wait_serving(1, expect_brokers=4)

    # Before the topic is spread, the new broker holds nothing of it.
    current, proposed, plan = generate(c, tmp_path, "grow", "1,2,3,4")
    assert all(4 not in r for r in current.values())
    counts = {b: sum(b in r for r in proposed.values()) for b in (1, 2, 3, 4)}
    assert counts == {1: 3, 2: 3, 3: 3, 4: 3}, proposed
    moved = sum(len(set(proposed[tp]) - set(current[tp])) for tp in current)
    assert moved == 3  # only the new broker's share moves
    # Broker 4 gets preferred (leader) replicas too.
    assert any(r[0] == 4 for r in proposed.values()), proposed

    execute_and_verify(c, plan, 6)
    info = partition_info(c, "grow")
    on_4 = [p for p, i in info.items() if 4 in i["replica_nodes"]]
    assert len(on_4) == 3
    assert all(4 in info[p]["isr_nodes"] for p in on_4), info  # caught up, in sync
    # Leadership follows the new preferred replicas after a preferred election.
    r = cli("leader-election", "--bootstrap-server", c.bootstrap, "--election-type", "PREFERRED",
            "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until(lambda: any(i["leader_id"] == 4 for i in partition_info(c, "grow").values()), 15,
               "broker 4 leads a partition")
    # Read back through the new broker only.
    got = consumed_values(f"127.0.0.1:{c.brokers[4].port}", "grow", 6)
    assert len(got) == len(sent) and set(got) == sent


def test_preferred_leader_election_brings_leadership_back(cluster_factory, tmp_path):
    c = cluster_factory(3, min_insync_replicas=1)
    c.create_topic("pref", partitions=3, rf=3)
    info = partition_info(c, "pref")
    assert all(i["leader_id"] == i["replica_nodes"][0] for i in info.values()), info
    mine = next(p for p, i in info.items() if i["replica_nodes"][0] == 2)
    c.stop(2)  # controlled shutdown moves its leadership away
    c.restart(2)
    c.wait_for_leaders("pref", 3, isr=3)
    assert partition_info(c, "pref")[mine]["leader_id"] != 2, "leadership came back by itself"

    base = ("leader-election", "--bootstrap-server", c.bootstrap)
    r = cli(*base, "--election-type", "preferred", "--topic", "pref", "--partition", str(mine))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"Successfully completed leader election (PREFERRED) for partitions pref-{mine}"
    wait_until(lambda: partition_info(c, "pref")[mine]["leader_id"] == 2, 15, "broker 2 leads again")

    # Nothing left to do: every partition reports its valid leader, exit code 0.
    r = cli(*base, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Valid replica already elected for partitions pref-0, pref-1, pref-2" in r.stdout
    # UNCLEAN is not needed where a leader is alive.
    elect = write_json(tmp_path, "elect.json", {"partitions": [{"topic": "pref", "partition": 0}]})
    r = cli(*base, "--election-type", "UNCLEAN", "--path-to-json-file", elect)
    assert r.returncode == 0 and "Valid replica already elected for partitions pref-0" in r.stdout, r
    # A partition that does not exist is a real failure.
    r = cli(*base, "--election-type", "PREFERRED", "--topic", "nosuch", "--partition", "0")
    assert r.returncode == 1
    assert "Error completing leader election (PREFERRED) for partition: nosuch-0: UNKNOWN_TOPIC_OR_PARTITION" in r.stdout
    bad = write_json(tmp_path, "bad-elect.json", {"partitions": [{"topic": "pref"}]})
    r = cli(*base, "--election-type", "PREFERRED", "--path-to-json-file", bad)
    assert r.returncode == 1 and "needs a \"partition\" number" in r.stderr, r.stderr


def test_bad_plans_fail_with_a_message(cluster_factory, tmp_path):
    c = cluster_factory(3)
    c.create_topic("ok", partitions=2, rf=2)

    def rejected(doc: object, message: str, mode: str = "--execute") -> None:
        path = write_json(tmp_path, "bad.json", doc)
        r = reassign(c, mode, "--reassignment-json-file", path)
        assert r.returncode == 1, (doc, r.stdout, r.stderr)
        assert message in r.stderr, (doc, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr

    def entry(topic: str = "ok", partition: object = 0, replicas: object = (1, 2)) -> dict:
        return {"version": 1, "partitions": [{"topic": topic, "partition": partition,
                                              "replicas": list(replicas) if isinstance(replicas, tuple) else replicas}]}

    rejected("{not json", "is not valid JSON")
    rejected({"partitions": "x"}, "expected")
    rejected({"version": 2, "partitions": []}, "unsupported version")
    rejected(entry(replicas=()), "replica list is empty")
    rejected(entry(replicas=(1, 1)), "duplicate broker(s) 1")
    rejected(entry(replicas="1,2"), "must be a list of broker ids")
    rejected(entry(partition="0"), 'needs a "partition" number')
    rejected(entry(topic="nosuch"), "unknown topic(s): nosuch")
    rejected(entry(partition=7), "unknown partition(s): ok-7")
    rejected(entry(replicas=(1, 9)), "unknown broker(s) 9")
    twice = {"partitions": entry()["partitions"] * 2}
    rejected(twice, "listed twice")
    # Nothing was started by any of these.
    r = reassign(c, "--list")
    assert r.returncode == 0 and r.stdout.strip() == "No partition reassignments found."
    # --verify reports an unknown partition as Kafka's tool does (an empty replica set), exit 0.
    path = write_json(tmp_path, "unknown.json", {"version": 1, "partitions": [
        {"topic": "nosuch", "partition": 0, "replicas": [1, 2]}, {"topic": "ok", "partition": 7, "replicas": [1]}]})
    r = reassign(c, "--verify", "--reassignment-json-file", path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == [
        "Status of partition reassignment:",
        "There is no active reassignment of partition nosuch-0, but replica set is  rather than 1,2.",
        "There is no active reassignment of partition ok-7, but replica set is  rather than 1.",
    ], r.stdout

    topics = write_json(tmp_path, "topics.json", {"topics": [{"topic": "ok"}]})
    for brokers, message in (("1,9", "unknown broker(s) 9"), ("1,1", "listed twice"),
                             ("1", "only 1 brokers are given"), ("x", "not a broker id")):
        r = reassign(c, "--generate", "--topics-to-move-json-file", topics, "--broker-list", brokers)
        assert r.returncode == 1 and message in r.stderr, (brokers, r.stderr)
    nosuch = write_json(tmp_path, "nosuch.json", {"topics": [{"topic": "nosuch"}]})
    r = reassign(c, "--generate", "--topics-to-move-json-file", nosuch, "--broker-list", "1,2")
    assert r.returncode == 1 and "unknown topic(s): nosuch" in r.stderr, r.stderr
    r = reassign(c, "--execute")
    assert r.returncode == 1 and "needs --reassignment-json-file" in r.stderr


def test_cancel_and_list_a_reassignment_in_progress(cluster_factory, tmp_path):
    # A long session timeout keeps a paused broker "alive" while its replica cannot catch up.
    c = cluster_factory(3, zookeeper_session_timeout_ms=20000, min_insync_replicas=1)
    controller = c.metadata([])["controller_id"]
    x, y = sorted(b for b in (1, 2, 3) if b != controller)
    r = cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", "slow",
            "--replica-assignment", f"{controller}:{x}")
    assert r.returncode == 0, r.stderr
    c.wait_for_leaders("slow", 1, isr=2)
    sent = produce(c.bootstrap, "slow", 1, 50)
    plan = write_json(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": "slow", "partition": 0, "replicas": [controller, x, y]}]})

    c.pause(y)
    try:
        r = reassign(c, "--execute", "--reassignment-json-file", plan)
        assert r.returncode == 0, r.stderr
        rollback = json.loads(r.stdout.splitlines()[2])
        assert as_map(rollback) == {("slow", 0): [controller, x]}
        r = reassign(c, "--list")
        assert r.stdout.splitlines() == [
            "Current partition reassignments:",
            f"slow-0: replicas: {controller},{x},{y}. adding: {y}.",
        ], r.stdout
        r = reassign(c, "--verify", "--reassignment-json-file", plan)
        assert r.returncode == 0 and "Reassignment of partition slow-0 is still in progress." in r.stdout
        # A second plan must not start silently while one is in progress.
        r = reassign(c, "--execute", "--reassignment-json-file", plan)
        assert r.returncode == 1 and "--additional" in r.stderr, r.stderr

        # (clearing throttles would wait for the paused broker, as Kafka's tool would)
        r = reassign(c, "--cancel", "--preserve-throttles", "--reassignment-json-file", plan)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == ["Successfully cancelled partition reassignment for: slow-0",
                                         "None of the specified partition moves are active."], r.stdout
        assert reassign(c, "--list").stdout.strip() == "No partition reassignments found."
        r = reassign(c, "--cancel", "--preserve-throttles", "--reassignment-json-file", plan)
        assert r.returncode == 0 and r.stdout.splitlines() == [
            "None of the specified partition reassignments are active.",
            "None of the specified partition moves are active."], r.stdout
    finally:
        c.resume(y)
    wait_until(lambda: partition_info(c, "slow")[0]["replica_nodes"] == [controller, x], 15, "back to the origin")
    r = reassign(c, "--verify", "--reassignment-json-file", plan)
    assert r.returncode == 0, r.stderr  # reported, not an error (as Kafka's tool)
    assert (f"There is no active reassignment of partition slow-0, but replica set is {controller},{x} "
            f"rather than {controller},{x},{y}.") in r.stdout
    got = consumed_values(c.bootstrap, "slow", 1)
    assert sorted(got) == sorted(sent)
