"""`reassign-partitions --verify` against a fake cluster: as Kafka's verifyAssignment it is
a report whose exit code is 0 whether a partition is complete, still moving, not where
the plan wanted it, or unknown; the throttles are cleared once no reassignment runs in
the cluster and no log dir move of the plan is active or unaccounted for."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

from kafkarepl.cli import reassign
from kafkarepl.errors import ErrorCode


class FakeClient:
    def __init__(self, topics: dict[str, list[list[int]]], moving: dict[tuple[str, int], list[int]],
                 log_dirs: dict[tuple[str, int, int], tuple[str | None, str | None]] | None = None) -> None:
        self.topics = topics
        self.moving = moving
        self.log_dirs = log_dirs or {}  # (topic, partition, broker) -> (current dir, future dir)
        self.brokers = {1: None, 2: None, 3: None}
        self.altered: list[dict] = []

    async def metadata(self, topics: list[str]) -> dict:
        out = []
        for t in topics:
            if t not in self.topics:
                out.append({"name": t, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "partitions": []})
            else:
                out.append({"name": t, "error_code": 0, "partitions": [
                    {"partition_index": i, "replica_nodes": r} for i, r in enumerate(self.topics[t])]})
        return {"topics": out}

    async def list_partition_reassignments(self, partitions: Any = None) -> dict:
        by_topic: dict[str, list] = {}
        for (t, p), replicas in self.moving.items():
            if partitions is None or p in partitions.get(t, []):
                by_topic.setdefault(t, []).append({"partition_index": p, "replicas": replicas,
                                                   "adding_replicas": [], "removing_replicas": []})
        return {"error_code": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    async def describe_log_dirs(self, broker: int, topics: dict[str, list[int]]) -> dict:
        dirs: dict[str, list] = {}
        for (t, p, b), (cur, fut) in self.log_dirs.items():
            if b != broker:
                continue
            for d, future in ((cur, False), (fut, True)):
                if d is not None:
                    dirs.setdefault(d, []).append({"name": t, "partitions": [
                        {"partition_index": p, "is_future_key": future}]})
        return {"error_code": 0, "results": [{"error_code": 0, "log_dir": d, "topics": ts} for d, ts in dirs.items()]}

    async def incremental_alter_configs(self, ops: dict) -> dict:
        self.altered.append(ops)
        return {"responses": []}


def verify(client: FakeClient, plan: dict, log_dirs: dict | None = None) -> int:
    args = argparse.Namespace(preserve_throttles=False)
    return asyncio.run(reassign._verify(client, args, plan=plan, log_dirs=log_dirs or {}))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_settle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reassign, "VERIFY_SETTLE_S", 0)


def test_in_progress_exits_0_and_keeps_the_throttles(capsys: pytest.CaptureFixture[str]) -> None:
    c = FakeClient({"t": [[1, 2, 3]]}, moving={("t", 0): [1, 2, 3]})
    assert verify(c, {("t", 0): [2, 3]}) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["Status of partition reassignment:", "Reassignment of partition t-0 is still in progress."]
    assert c.altered == []


def test_completed_exits_0_and_clears_the_throttles(capsys: pytest.CaptureFixture[str]) -> None:
    c = FakeClient({"t": [[2, 3]]}, moving={})
    assert verify(c, {("t", 0): [2, 3]}) == 0
    out = capsys.readouterr().out
    assert "Reassignment of partition t-0 is completed." in out
    assert "Clearing broker-level throttles on brokers 1,2,3" in out and c.altered


def test_another_reassignment_in_the_cluster_keeps_the_throttles(capsys: pytest.CaptureFixture[str]) -> None:
    # Kafka's partsOngoing is "any reassignment at all", not only the plan's.
    c = FakeClient({"t": [[2, 3]], "u": [[1, 2, 3]]}, moving={("u", 0): [1, 2, 3]})
    assert verify(c, {("t", 0): [2, 3]}) == 0
    assert "Reassignment of partition t-0 is completed." in capsys.readouterr().out
    assert c.altered == []


def test_not_where_planned_and_unknown_partitions_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    c = FakeClient({"t": [[1, 2]]}, moving={})
    plan = {("t", 0): [2, 3], ("t", 5): [1], ("nosuch", 0): [1, 2]}
    assert verify(c, plan) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "Status of partition reassignment:",
        # Kafka's line for an unknown topic or partition: an empty replica set
        "There is no active reassignment of partition nosuch-0, but replica set is  rather than 1,2.",
        "There is no active reassignment of partition t-0, but replica set is 1,2 rather than 2,3.",
        "There is no active reassignment of partition t-5, but replica set is  rather than 1.",
    ]
    # nothing runs: Kafka's tool clears the throttles (done means "not ongoing")
    assert c.altered


@pytest.mark.parametrize(("current", "future", "cleared"), [
    ("/d/b", None, True),   # completed
    ("/d/a", None, True),   # cancelled: no move runs (Kafka's CancelledMoveState.done)
    ("/d/a", "/d/b", False),  # active
    (None, None, False),    # not found in a live log dir (Kafka: not done)
])
def test_log_dir_moves_exit_0_and_clear_the_throttles_only_when_done(
        current: str | None, future: str | None, cleared: bool, capsys: pytest.CaptureFixture[str]) -> None:
    c = FakeClient({"t": [[1]]}, moving={}, log_dirs={("t", 0, 1): (current, future)})
    assert verify(c, {("t", 0): [1]}, {("t", 0, 1): "/d/b"}) == 0
    assert ("Clearing broker-level throttles" in capsys.readouterr().out) == cleared
    assert bool(c.altered) == cleared


def test_list_lines_as_kafkas_tool() -> None:
    from kafkarepl.cli.reassign import format_list_line as format_reassignment

    assert format_reassignment(("bar", 0), {"replicas": [2, 3, 0], "adding_replicas": [],
                                            "removing_replicas": [0]}) == "bar-0: replicas: 2,3,0. removing: 0."
    assert format_reassignment(("foo", 1), {"replicas": [1, 2, 3], "adding_replicas": [4, 5],
                                            "removing_replicas": [1, 2]}) == \
        "foo-1: replicas: 1,2,3. adding: 4,5. removing: 1,2."
    assert format_reassignment(("foo", 0), {"replicas": [0, 1, 2], "adding_replicas": [4],
                                            "removing_replicas": []}) == "foo-0: replicas: 0,1,2. adding: 4."
