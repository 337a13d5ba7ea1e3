"""`kafkarepl reassign-partitions` with "log_dirs" in the plan (kafka-reassign-partitions.sh
moving replicas between the log dirs of a broker), run as the real entry point against real
brokers with two log dirs: a replica moved to the other dir (--execute, --verify until
complete, on disk and by DescribeLogDirs), a replica added on another broker straight into
a named dir, the replica-alter-log-dirs throttle set by --execute and cleared by --verify
only once the move is complete, bad log_dirs refused before anything starts, the retry
while a replica is not on its broker yet, and Kafka's Java Admin moving a replica."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafkarepl.cli import wire
from kafkarepl.cli.reassign import CliError, execute_moves
from kafkarepl.client.cluster import ClusterClient, NewTopic
from kafkarepl.protocol import ApiKey
from tests import java_tools
from tests.integration.chaos import wait_until
from tests.integration.test_cli_admin import reassign

pytestmark = pytest.mark.integration

LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def two_dirs(c, broker: int) -> tuple[Path, Path]:
    """Give `broker` (not started yet) two log dirs."""
    b = c.brokers[broker]
    d1, d2 = b.config.parent / "d1", b.config.parent / "d2"
    b.set_log_dirs(d1, d2)
    return d1, d2


def create(c, topic: str, replicas: list[int], configs: dict | None = None) -> None:
    async def go() -> None:
        async with ClusterClient(c.alive_bootstrap()) as client:
            resp = await client.create_topics([NewTopic(topic, assignments={0: replicas}, configs=configs or {})])
            assert resp["topics"][0]["error_code"] == 0, resp

    asyncio.run(go())
    c.wait_for_leaders(topic, 1)


def produce(c, topic: str, n: int, size: int = 1000) -> None:
    p = Producer({"bootstrap.servers": c.alive_bootstrap(), "linger.ms": 5, "batch.size": 65536})
    for i in range(n):
        p.produce(topic, value=b"%08d" % i + b"x" * size, partition=0)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0




def plan_file(tmp_path: Path, name: str, partitions: list[dict]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


def where(c, broker: int, topic: str) -> dict[tuple[str, bool], int]:
    """DescribeLogDirs of `broker`: {(log dir, is_future): size} of `topic`-0."""
    resp = wire.call("127.0.0.1", c.brokers[broker].port, ApiKey.DESCRIBE_LOG_DIRS, 4,
                     {"topics": [{"topic": topic, "partitions": [0]}]}, timeout=10)
    return {(r["log_dir"], p["is_future_key"]): p["partition_size"]
            for r in resp["results"] for t in r["topics"] for p in t["partitions"]}


def broker_config(c, broker: int, key: str) -> str | None:
    resp = wire.call("127.0.0.1", c.brokers[broker].port, ApiKey.DESCRIBE_CONFIGS, 1, {
        "resources": [{"resource_type": 4, "resource_name": str(broker), "configuration_keys": [key]}],
        "include_synonyms": False}, timeout=10)
    for e in resp["results"][0]["configs"]:
        if e["name"] == key and e["config_source"] == 2:  # DYNAMIC_BROKER_CONFIG
            return e["value"]
    return None


def set_rate(c, broker: int, rate: int) -> None:
    resp = wire.call("127.0.0.1", c.brokers[broker].port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 4, "resource_name": str(broker),
         "configs": [{"name": LOG_DIR_RATE, "config_operation": 0, "value": str(rate)}]}], "validate_only": False},
        timeout=10)
    assert resp["responses"][0]["error_code"] == 0, resp


def test_execute_moves_a_replica_to_the_named_dir_and_verify_clears_the_throttle(cluster_factory, tmp_path) -> None:
    c = cluster_factory(1, start=False)
    d1, d2 = two_dirs(c, 1)
    c.start()
    create(c, "mv", [1], {"segment.bytes": "200000"})
    produce(c, "mv", 3000)  # ~3 MB
    src = d1 if (d1 / "mv-0").is_dir() else d2
    dst = d2 if src == d1 else d1
    plan = plan_file(tmp_path, "plan.json", [{"topic": "mv", "partition": 0, "replicas": [1], "log_dirs": [str(dst)]}])

    # 100 KB/s: the move takes half a minute unless the rate is raised
    r = reassign(c, "--execute", "--reassignment-json-file", plan, "--replica-alter-log-dirs-throttle", "100000")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[out.index("Save this to use as the --reassignment-json-file option during rollback") + 1:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
        "is removed.",
        "The replica-alter-dir throttle limit was set to 100000 B/s",
        "Successfully started partition reassignment for mv-0",
        f"Successfully started moving log directory to {dst} for replica mv-0 with broker 1 ",
    ], r.stdout
    # the rollback plan names no log dir, as Kafka's
    assert '{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[1],"log_dirs":["any"]}]}' in out
    assert broker_config(c, 1, LOG_DIR_RATE) == "100000"

    wait_until(lambda: (str(dst), True) in where(c, 1, "mv"), 10, "the future log")
    v = reassign(c, "--verify", "--reassignment-json-file", plan)
    assert v.returncode == 0, v.stdout + v.stderr  # a report: 0 while the move runs too, as Kafka's
    assert v.stdout.splitlines() == ["Status of partition reassignment:",
                                     "Reassignment of partition mv-0 is completed.",
                                     "Reassignment of replica mv-0-1 is still in progress."], v.stdout
    assert broker_config(c, 1, LOG_DIR_RATE) == "100000"  # not cleared while the move runs

    set_rate(c, 1, 100_000_000)  # let it finish; --verify then clears it

    def verified() -> subprocess.CompletedProcess | None:
        v = reassign(c, "--verify", "--reassignment-json-file", plan)
        assert v.returncode == 0, v.stdout + v.stderr
        return v if "Reassignment of replica mv-0-1 completed successfully." in v.stdout.splitlines() else None

    v = wait_until(verified, 60, "--verify to report the move complete", interval=0.5)
    assert v.stdout.splitlines() == ["Status of partition reassignment:",
                                     "Reassignment of partition mv-0 is completed.",
                                     "Reassignment of replica mv-0-1 completed successfully.",
                                     "Clearing broker-level throttles on broker 1",
                                     "Clearing topic-level throttles on topic mv"], v.stdout
    assert broker_config(c, 1, LOG_DIR_RATE) is None
    assert set(where(c, 1, "mv")) == {(str(dst), False)}
    assert (dst / "mv-0").is_dir() and not (src / "mv-0").exists()
    assert sum(p.suffix == ".log" for p in (dst / "mv-0").iterdir()) > 5

    # The replica already there: the move "starts" at once (nothing to do), verify is complete.
    r = reassign(c, "--execute", "--reassignment-json-file", plan)
    assert r.returncode == 0 and f"Successfully started moving log directory to {dst} for replica mv-0 with " \
        "broker 1 " in r.stdout.splitlines(), r.stdout + r.stderr


def test_cancel_stops_a_log_dir_move_in_progress(cluster_factory, tmp_path) -> None:
    c = cluster_factory(1, start=False)
    d1, d2 = two_dirs(c, 1)
    c.start()
    create(c, "cx", [1], {"segment.bytes": "200000"})
    produce(c, "cx", 3000)
    src = d1 if (d1 / "cx-0").is_dir() else d2
    dst = d2 if src == d1 else d1
    plan = plan_file(tmp_path, "plan.json", [{"topic": "cx", "partition": 0, "replicas": [1], "log_dirs": [str(dst)]}])
    r = reassign(c, "--execute", "--reassignment-json-file", plan, "--replica-alter-log-dirs-throttle", "50000")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: (str(dst), True) in where(c, 1, "cx"), 10, "the future log")
    r = reassign(c, "--cancel", "--reassignment-json-file", plan)
    assert r.returncode == 0, r.stderr
    # As Kafka's tool: the replica is "moved" to the dir it is in, which drops the future log.
    assert r.stdout.splitlines()[-3:] == [
        f"Successfully started moving log directory to {src} for replica cx-0 with broker 1 ",
        "Clearing broker-level throttles on broker 1",
        "Clearing topic-level throttles on topic cx"], r.stdout
    wait_until(lambda: set(where(c, 1, "cx")) == {(str(src), False)}, 20, "the future log dropped")
    # The dropped future log is renamed to `-delete` at once and removed by the janitor
    # thread soon after: nothing of it stays in the destination dir.
    wait_until(lambda: not [p for p in dst.iterdir() if p.name.startswith("cx-0")], 10,
               "the dropped future log removed from the destination dir")
    assert broker_config(c, 1, LOG_DIR_RATE) is None
    v = reassign(c, "--verify", "--reassignment-json-file", plan)
    assert v.returncode == 0
    # No move runs (Kafka's CancelledMoveState, "done"): the throttles are cleared again.
    assert v.stdout.splitlines()[-3:] == [
        f"Partition cx-0 on broker 1 is not being moved from log dir {src} to {dst}.",
        "Clearing broker-level throttles on broker 1",
        "Clearing topic-level throttles on topic cx"], v.stdout
    r = reassign(c, "--cancel", "--reassignment-json-file", plan)
    assert "None of the specified partition moves are active." in r.stdout.splitlines(), r.stdout


def test_execute_places_a_replica_added_on_another_broker_in_the_named_dir(cluster_factory, tmp_path) -> None:
    c = cluster_factory(2, start=False)
    d1, d2 = two_dirs(c, 2)
    c.start()
    create(c, "nb", [1])
    produce(c, "nb", 500)
    # d2 is not where broker 2 would put it (fewest partitions, the first dir on a tie): the
    # replica must end up there because the plan says so.
    plan = plan_file(tmp_path, "plan.json",
                     [{"topic": "nb", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", str(d2)]}])
    r = reassign(c, "--execute", "--reassignment-json-file", plan, "--timeout", "30000")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-2:] == [
        "Successfully started partition reassignment for nb-0",
        f"Successfully started moving log directory to {d2} for replica nb-0 with broker 2 "], r.stdout

    def verified() -> subprocess.CompletedProcess | None:
        v = reassign(c, "--verify", "--reassignment-json-file", plan)
        assert v.returncode == 0, v.stdout + v.stderr
        return v if "Clearing broker-level throttles on brokers 1,2" in v.stdout.splitlines() else None

    v = wait_until(verified, 60, "--verify to report everything complete", interval=0.5)
    assert "Reassignment of partition nb-0 is completed." in v.stdout.splitlines()
    assert "Reassignment of replica nb-0-2 completed successfully." in v.stdout.splitlines()
    assert set(where(c, 2, "nb")) == {(str(d2), False)}
    assert (d2 / "nb-0").is_dir() and not (d1 / "nb-0").exists()


def test_execute_retries_until_the_replica_is_on_its_broker_then_times_out(cluster_factory) -> None:
    """REPLICA_NOT_AVAILABLE (the replica is not on the broker yet) is asked again every
    100 ms until --timeout: a partition created meanwhile is created in the named dir; one
    that never comes ends in Kafka's timeout message."""
    c = cluster_factory(1, start=False)
    d1, d2 = two_dirs(c, 1)
    c.start()

    async def go() -> tuple[str, str]:
        async with ClusterClient(c.bootstrap) as client:
            moving = asyncio.ensure_future(execute_moves(client, {("later", 0, 1): str(d2)}, 30000))
            await asyncio.sleep(1.0)
            assert not moving.done()  # still asking
            await asyncio.to_thread(create, c, "later", [1])
            await asyncio.wait_for(moving, 30)
            with pytest.raises(CliError) as timed_out:
                await execute_moves(client, {("never", 0, 1): str(d1), ("never", 1, 1): str(d2)}, 500)
            with pytest.raises(CliError) as bad:
                await execute_moves(client, {("later", 0, 1): str(d2) + "-not-a-log-dir"}, 500)
            return str(timed_out.value), str(bad.value)

    timed_out, bad = asyncio.run(go())
    # created straight in the named dir (not d1, where it would have gone), no move
    assert set(where(c, 1, "later")) == {(str(d2), False)}
    assert not (d1 / "later-0").exists()
    assert "later-0: moving from" not in c.brokers[1].log.read_text()
    assert timed_out == "Timed out before log directory moves could be started for: never-0-1,never-1-1"
    assert bad == "Failed to alter dir for later-0-1: LOG_DIR_NOT_FOUND"


def test_bad_log_dirs_are_refused_before_anything_starts(cluster_factory, tmp_path) -> None:
    c = cluster_factory(1, start=False)
    d1, _d2 = two_dirs(c, 1)
    c.start()
    create(c, "bad", [1])
    cases = {
        "count": ([1], ["any", str(d1)],
                  f"Size of replicas list [1] is different from size of log dirs list [any, {d1}] for partition "
                  "bad-0"),
        "type": ([1], [7], '"log_dirs" must be a list of "any" or log dir paths'),
    }
    for name, (replicas, log_dirs, msg) in cases.items():
        plan = plan_file(tmp_path, f"{name}.json",
                         [{"topic": "bad", "partition": 0, "replicas": replicas, "log_dirs": log_dirs}])
        for mode in ("--execute", "--verify", "--cancel"):
            r = reassign(c, mode, "--reassignment-json-file", plan)
            assert r.returncode == 1 and r.stdout == "", (name, mode, r.stdout, r.stderr)
            want = msg.replace("partitions[0]...", f"{plan}: bad-0:")
            assert r.stderr.startswith("kafkarepl reassign-partitions: ") and want in r.stderr, (name, r.stderr)
    # A path that is no log dir of the broker, a relative one included (even one naming a
    # log dir from the broker's working directory) and one with a trailing slash (Kafka's
    # LogManager compares the path as sent): sent as is, as Kafka's tool does, and
    # the broker refuses it with LOG_DIR_NOT_FOUND, after the partition reassignment has
    # started. --verify then reports the replica as not being moved (exit code 0).
    relative = os.path.relpath(d1)  # from the broker's working directory, which is this one
    for name, target in (("nodir", str(d1) + "-nope"), ("relative", relative), ("slash", str(d1) + "/")):
        plan = plan_file(tmp_path, f"{name}.json",
                         [{"topic": "bad", "partition": 0, "replicas": [1], "log_dirs": [target]}])
        r = reassign(c, "--execute", "--reassignment-json-file", plan)
        assert r.returncode == 1 and "Successfully started partition reassignment for bad-0" in r.stdout, r
        assert r.stderr.strip() == ("kafkarepl reassign-partitions: Failed to alter dir for bad-0-1: "
                                    "LOG_DIR_NOT_FOUND"), r.stderr
        assert wait_until(lambda: reassign(c, "--list").stdout.strip() == "No partition reassignments found.", 20,
                          "the no-op reassignment to finish")
        v = reassign(c, "--verify", "--reassignment-json-file", plan)
        assert v.returncode == 0, v
        [line] = [x for x in v.stdout.splitlines() if x.startswith("Partition bad-0 on broker 1 ")]
        assert line.startswith("Partition bad-0 on broker 1 is not being moved from log dir /"), line
        assert line.endswith(f" to {target}."), line


def test_java_admin_moves_a_replica_between_log_dirs(cluster_factory) -> None:
    c = cluster_factory(1, start=False)
    d1, d2 = two_dirs(c, 1)
    c.start()
    create(c, "jv", [1], {"segment.bytes": "100000"})
    produce(c, "jv", 1000)
    src = d1 if (d1 / "jv-0").is_dir() else d2
    dst = d2 if src == d1 else d1
    out = java_tools.run("move-log-dir", c.bootstrap, "jv", "0", "1", str(dst))
    assert out == (f"bad=LogDirNotFoundException slash=LogDirNotFoundException current={dst} future=null lag=0 "
                   f"logDirs=[{dst}:true]"), out
    assert (dst / "jv-0").is_dir() and not (src / "jv-0").exists()
    assert set(where(c, 1, "jv")) == {(str(dst), False)}
