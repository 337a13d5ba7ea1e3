"""The "log_dirs" of a reassignment plan (kafka-reassign-partitions.sh): parsed into the
replicas placed in a named dir, Kafka's size-mismatch message, relative paths passed on,
and the --verify line for each state of a replica's move."""

from __future__ import annotations

import pytest

from kafkarepl.cli.reassign import (
    MOVE_ACTIVE,
    MOVE_CANCELLED,
    MOVE_COMPLETED,
    MOVE_MISSING_LOG_DIR,
    MOVE_MISSING_REPLICA,
    CliError,
    move_state,
    move_state_line,
    parse_reassignment,
    parse_reassignment_and_log_dirs,
    replica_order,
    replica_str,
)


def parse(*entries: dict) -> tuple[dict, dict]:
    return parse_reassignment_and_log_dirs({"version": 1, "partitions": list(entries)}, "plan.json")


def test_any_and_absent_log_dirs_name_no_dir() -> None:
    parts, dirs = parse({"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
                        {"topic": "t", "partition": 1, "replicas": [2, 3]})
    assert parts == {("t", 0): [1, 2], ("t", 1): [2, 3]}
    assert dirs == {}


def test_absolute_dirs_are_kept_per_replica() -> None:
    parts, dirs = parse({"topic": "t", "partition": 0, "replicas": [3, 1, 2], "log_dirs": ["/d/b", "any", "/d/a"]},
                        {"topic": "u", "partition": 2, "replicas": [1], "log_dirs": ["/d/a/"]})
    assert parts == {("t", 0): [3, 1, 2], ("u", 2): [1]}
    assert dirs == {("t", 0, 3): "/d/b", ("t", 0, 2): "/d/a", ("u", 2, 1): "/d/a/"}
    # parse_reassignment, as before, is the partitions only
    assert parse_reassignment({"partitions": [{"topic": "t", "partition": 0, "replicas": [1],
                                               "log_dirs": ["/d/a"]}]}, "p") == {("t", 0): [1]}


@pytest.mark.parametrize(("replicas", "log_dirs", "message"), [
    ([1, 2], ["any"], "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition t-0"),
    ([1], ["/a", "/b"], "Size of replicas list [1] is different from size of log dirs list [/a, /b] for partition t-0"),
    ([1], [], "Size of replicas list [1] is different from size of log dirs list [] for partition t-0"),
    ([1], "any", 'plan.json: t-0: "log_dirs" must be a list of "any" or log dir paths'),
    ([1], [None], '"log_dirs" must be a list of "any" or log dir paths'),
    ([1], [["/a"]], '"log_dirs" must be a list of "any" or log dir paths'),
])
def test_bad_log_dirs_are_refused(replicas: list, log_dirs: object, message: str) -> None:
    with pytest.raises(CliError) as e:
        parse({"topic": "t", "partition": 0, "replicas": replicas, "log_dirs": log_dirs})
    assert message in str(e.value)


def test_relative_and_other_dirs_are_sent_as_given() -> None:
    # As Kafka's tool: no check of the path; the broker answers LOG_DIR_NOT_FOUND for one
    # that is not the absolute path of one of its log dirs.
    parts, dirs = parse({"topic": "t", "partition": 0, "replicas": [1, 2, 3, 4],
                         "log_dirs": ["data/d1", "./d", "ANY", ""]})
    assert parts == {("t", 0): [1, 2, 3, 4]}
    assert dirs == {("t", 0, 1): "data/d1", ("t", 0, 2): "./d", ("t", 0, 3): "ANY", ("t", 0, 4): ""}


def test_null_log_dirs_mean_any() -> None:
    assert parse({"topic": "t", "partition": 0, "replicas": [1], "log_dirs": None}) == ({("t", 0): [1]}, {})


def test_replicas_print_and_sort_as_kafkas_topic_partition_replica() -> None:
    rs = [("b", 0, 2), ("a", 1, 2), ("a", 0, 2), ("z", 9, 1)]
    assert [replica_str(r) for r in sorted(rs, key=replica_order)] == ["z-9-1", "a-0-2", "a-1-2", "b-0-2"]


@pytest.mark.parametrize(("current", "future", "answered", "state", "line"), [
    ("/d/a", None, True, MOVE_COMPLETED, "Reassignment of replica t-0-1 completed successfully."),
    # As Kafka's tool, the paths are compared as strings: another spelling is another dir.
    ("/d/a/", None, True, MOVE_CANCELLED, "Partition t-0 on broker 1 is not being moved from log dir /d/a/ to /d/a."),
    ("/d/b", "/d/./a", True, MOVE_ACTIVE,
     "Partition t-0 on broker 1 is being moved to log dir /d/./a instead of /d/a."),
    ("/d/b", "/d/a", True, MOVE_ACTIVE, "Reassignment of replica t-0-1 is still in progress."),
    ("/d/b", "/d/c", True, MOVE_ACTIVE, "Partition t-0 on broker 1 is being moved to log dir /d/c instead of /d/a."),
    ("/d/b", None, True, MOVE_CANCELLED, "Partition t-0 on broker 1 is not being moved from log dir /d/b to /d/a."),
    (None, None, True, MOVE_MISSING_LOG_DIR,
     "Partition t-0 is not found in any live log dir on broker 1. There is likely an offline log directory on "
     "the broker."),
    (None, None, False, MOVE_MISSING_REPLICA, "Partition t-0 cannot be found in any live log directory on broker 1."),
])
def test_verify_lines_per_move_state(current: str | None, future: str | None, answered: bool, state: str,
                                     line: str) -> None:
    st = move_state("/d/a", current, future, answered=answered)
    assert st[0] == state
    assert move_state_line(("t", 0, 1), st) == line
