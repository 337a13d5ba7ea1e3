"""`kafkarepl reassign-partitions`: move partition replicas between brokers, as Kafka's
kafka-reassign-partitions.sh does (--generate, --execute, --verify, --cancel, --list).

The plan file is Kafka's reassignment JSON:
{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}
--generate proposes one that spreads the given topics evenly over --broker-list while
moving as few replicas as possible (kafkarepl.controller.reassign_plan); the controller
then copies to the new replicas first and drops the old ones once they are in sync.

A "log_dirs" entry other than "any" (the absolute path of a log dir of the replica's
broker) places that replica in that log dir of its broker: after the partition reassignment is started, --execute sends
AlterReplicaLogDirs to the broker, retrying while it answers REPLICA_NOT_AVAILABLE (a
replica the reassignment has not created there yet) until --timeout; --verify reports
each such replica's move from the broker's DescribeLogDirs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

from kafkarepl.client.cluster import ClusterClient
from kafkarepl.controller.reassign_plan import (
    PlanError,
    broker_racks,
    is_rack_aware,
    propose_reassignment,
)
from kafkarepl.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]
Assignment = dict[TopicPartition, list[int]]
Replica = tuple[str, int, int]  # topic, partition, broker (Kafka's TopicPartitionReplica)
LogDirs = dict[Replica, str]  # the replicas the plan puts in a named log dir
ANY_LOG_DIR = "any"
MOVE_RETRY_S = 0.1  # AlterReplicaLogDirs again while the replica is not on its broker yet
Action = Callable[[ClusterClient, argparse.Namespace], Awaitable[int]]
# Metadata can trail a just-finished reassignment on the broker that answers it.
VERIFY_SETTLE_TRIES = 6
VERIFY_SETTLE_S = 0.5


class CliError(Exception):
    """A one-line error for the operator (exit code 1)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "reassign-partitions",
        help="move partition replicas between brokers (add or remove brokers)",
        description="Generate, execute, verify, cancel or list partition reassignments.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generate", action="store_true",
                      help="propose a plan moving --topics-to-move-json-file onto --broker-list")
    mode.add_argument("--execute", action="store_true",
                      help="start the reassignment of --reassignment-json-file")
    mode.add_argument("--verify", action="store_true",
                      help="report whether the reassignment of --reassignment-json-file is done")
    mode.add_argument("--cancel", action="store_true",
                      help="cancel the reassignments of --reassignment-json-file in progress")
    mode.add_argument("--list", action="store_true", help="list the reassignments in progress")
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='{"topics":[{"topic":"t"}],"version":1}')
    p.add_argument("--broker-list", metavar="1,2,3", help="brokers to place the topics on")
    p.add_argument("--reassignment-json-file", metavar="FILE")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="ignore broker racks when generating a plan")
    p.add_argument("--additional", action="store_true",
                   help="execute even though other reassignments are in progress")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="with --execute: limit the moving replicas' replication to this rate "
                        "(cleared by --verify once the reassignment is complete)")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="with --execute: limit the moves between log dirs of a broker to this rate "
                        "(replica.alter.log.dirs.io.max.bytes.per.second of the brokers with a "
                        "log_dirs entry; cleared by --verify once everything is complete)")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="--verify and --cancel leave the replication throttles in place")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS",
                   help="--execute and --cancel: how long to wait for the log dir moves of the plan's "
                        "log_dirs to start (a replica new to a broker must be created there first)")
    p.add_argument("--timeout-ms", type=int, default=30000,
                   help="the timeout of each request (and of the reassignment request's controller work)")
    p.set_defaults(func=cmd_reassign)


def cmd_reassign(args: argparse.Namespace) -> int:
    # Files and options are checked before connecting: a bad one fails fast, offline.
    try:
        if args.generate:
            path = args.topics_to_move_json_file
            topics = parse_topics_to_move(read_json(path, "--topics-to-move-json-file"), path)
            brokers = parse_broker_list(args.broker_list)
            action: Action = functools.partial(_generate, topics=topics, broker_ids=brokers)
        elif args.list:
            action = _list
        else:
            path = args.reassignment_json_file
            plan, log_dirs = parse_reassignment_and_log_dirs(read_json(path, "--reassignment-json-file"), path)
            mode = _execute if args.execute else _verify if args.verify else _cancel
            action = functools.partial(mode, plan=plan, log_dirs=log_dirs)
    except CliError as exc:
        return fail("reassign-partitions", str(exc))
    return run_admin("reassign-partitions", args, action)


def run_admin(name: str, args: argparse.Namespace, action: Action) -> int:
    """Run ``action`` with a connected ClusterClient; every expected failure becomes a
    one-line message on stderr and exit code 1."""

    async def main() -> int:
        client = ClusterClient(args.bootstrap_server, f"kafkarepl-{name}",
                               request_timeout=args.timeout_ms / 1000 + 5)
        try:
            await client.start()
            return await action(client, args)
        finally:
            client.close()

    try:
        return asyncio.run(main())
    except (CliError, PlanError, ValueError) as exc:
        return fail(name, str(exc))
    except KafkaError as exc:
        return fail(name, f"{exc.code.name}: {exc}" if str(exc) != exc.code.name else str(exc))
    except (OSError, asyncio.TimeoutError) as exc:
        return fail(name, f"{type(exc).__name__}: {exc or 'timed out'}")


def fail(name: str, msg: str) -> int:
    print(f"kafkarepl {name}: {msg}", file=sys.stderr)
    return 1


def code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


# --- JSON files ---------------------------------------------------------------------------


def read_json(path: str | None, option: str) -> Any:
    if not path:
        raise CliError(f"this mode needs {option}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None


def _check_version(data: dict, path: str) -> None:
    if "version" in data and data["version"] != 1:
        raise CliError(f"{path}: unsupported version {data['version']!r} (only 1)")


def parse_reassignment(data: Any, path: str) -> Assignment:
    """Kafka's reassignment JSON -> {(topic, partition): replicas}, checked strictly."""
    return parse_reassignment_and_log_dirs(data, path)[0]


def parse_reassignment_and_log_dirs(data: Any, path: str) -> tuple[Assignment, LogDirs]:
    """Kafka's reassignment JSON -> ({(topic, partition): replicas}, {(topic, partition,
    broker): log dir} of the replicas whose "log_dirs" entry is not "any"), checked
    strictly."""
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise CliError(f'{path}: expected {{"version":1,"partitions":[...]}}')
    _check_version(data, path)
    if not data["partitions"]:
        raise CliError(f"{path}: the partition list is empty")
    out: Assignment = {}
    dirs: LogDirs = {}
    for i, entry in enumerate(data["partitions"]):
        where = f"{path}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise CliError(f"{where} is not an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise CliError(f'{where} needs a "topic" name')
        if not _is_int(partition) or partition < 0:
            raise CliError(f'{where} ({topic}) needs a "partition" number >= 0')
        tp = (topic, partition)
        where = f"{path}: {tp_str(tp)}"
        if not isinstance(replicas, list) or not all(_is_int(b) and b >= 0 for b in replicas):
            raise CliError(f'{where}: "replicas" must be a list of broker ids')
        if not replicas:
            raise CliError(f"{where}: the replica list is empty")
        dups = sorted({b for b in replicas if replicas.count(b) > 1})
        if dups:
            raise CliError(f"{where}: duplicate broker(s) {_ids(dups)} in replicas {replicas}")
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
                raise CliError(f'{where}: "log_dirs" must be a list of "{ANY_LOG_DIR}" or log dir paths')
            if len(log_dirs) != len(replicas):  # Kafka's words
                raise CliError(f"Size of replicas list {_java_list(replicas)} is different from size of log "
                               f"dirs list {_java_list(log_dirs)} for partition {tp_str(tp)}")
            # Any other string is sent as is, as Kafka's tool does: the broker answers
            # LOG_DIR_NOT_FOUND for one that is not the absolute path of one of its dirs.
            for b, d in zip(replicas, log_dirs, strict=True):
                if d != ANY_LOG_DIR:
                    dirs[(topic, partition, b)] = d
        if tp in out:
            raise CliError(f"{path}: partition {tp_str(tp)} is listed twice")
        out[tp] = list(replicas)
    return out, dirs


def parse_topics_to_move(data: Any, path: str) -> list[str]:
    if not isinstance(data, dict) or not isinstance(data.get("topics"), list):
        raise CliError(f'{path}: expected {{"topics":[{{"topic":"name"}}],"version":1}}')
    _check_version(data, path)
    topics: list[str] = []
    for i, entry in enumerate(data["topics"]):
        name = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise CliError(f'{path}: topics[{i}] needs a "topic" name')
        if name in topics:
            raise CliError(f"{path}: topic {name} is listed twice")
        topics.append(name)
    if not topics:
        raise CliError(f"{path}: the topic list is empty")
    return topics


def parse_broker_list(text: str | None) -> list[int]:
    if not text:
        raise CliError("--generate needs --broker-list (e.g. 1,2,3)")
    ids: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item.lstrip("-").isdigit() or int(item) < 0:
            raise CliError(f"--broker-list: {item!r} is not a broker id")
        if int(item) in ids:
            raise CliError(f"--broker-list: broker {item} is listed twice")
        ids.append(int(item))
    return ids


def format_reassignment(assignment: Assignment) -> str:
    """Kafka's reassignment JSON, one line, partitions sorted."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _java_list(items: list) -> str:
    """A list as Java prints one: [1, 2], [any, /data/a]."""
    return "[" + ", ".join(map(str, items)) + "]"


def replica_str(r: Replica) -> str:
    """Kafka's TopicPartitionReplica: topic-partition-broker."""
    return f"{r[0]}-{r[1]}-{r[2]}"


def replica_order(r: Replica) -> tuple[int, str, int]:
    """Kafka's order of replicas in its output: by broker, then topic and partition."""
    return r[2], r[0], r[1]


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


# --- cluster state --------------------------------------------------------------------------


async def current_assignment(client: ClusterClient, topics: list[str]) -> Assignment:
    """Replicas of every partition of ``topics``; CliError naming the unknown ones."""
    md = await client.metadata(topics)
    missing = [t["name"] for t in md["topics"] if t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    if missing:
        raise CliError(f"unknown topic(s): {', '.join(sorted(missing))}")
    for t in md["topics"]:
        if t["error_code"]:
            raise CliError(f"topic {t['name']}: {code_name(t['error_code'])}")
    return {(t["name"], p["partition_index"]): list(p["replica_nodes"])
            for t in md["topics"] for p in t["partitions"]}


async def ongoing(client: ClusterClient, partitions: dict[str, list[int]] | None = None
                  ) -> dict[TopicPartition, dict]:
    """{tp: {replicas, adding_replicas, removing_replicas}} of reassignments in progress."""
    resp = await client.list_partition_reassignments(partitions)
    if resp.get("error_code"):
        raise CliError(f"listing reassignments failed: {code_name(resp['error_code'])} "
                       f"{resp.get('error_message') or ''}".rstrip())
    return {(t["name"], p["partition_index"]): p for t in resp["topics"] for p in t["partitions"]}


def by_topic(tps: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        out.setdefault(t, []).append(p)
    return out


async def check_partitions_exist(client: ClusterClient, plan: Assignment) -> Assignment:
    """The current replicas of the plan's partitions; CliError if one does not exist."""
    current = await current_assignment(client, sorted({t for t, _ in plan}))
    unknown = [tp_str(tp) for tp in sorted(plan) if tp not in current]
    if unknown:
        raise CliError(f"unknown partition(s): {', '.join(unknown)}")
    return current


# --- modes ----------------------------------------------------------------------------------


async def _generate(client: ClusterClient, args: argparse.Namespace, *, topics: list[str],
                    broker_ids: list[int]) -> int:
    md = await client.metadata(topics)
    known = {b["node_id"]: b.get("rack") for b in md["brokers"]}
    unknown = [b for b in broker_ids if b not in known]
    if unknown:
        raise CliError(f"--broker-list: unknown broker(s) {_ids(unknown)} (live brokers: {_ids(sorted(known))})")
    current = await current_assignment(client, topics)
    moving = await ongoing(client, by_topic(current))
    if moving:
        raise CliError("cannot plan while partitions are being reassigned: "
                       f"{', '.join(tp_str(tp) for tp in sorted(moving))} (--verify or --cancel first)")
    racks = {b: known[b] for b in broker_ids}
    if args.disable_rack_aware:
        racks = broker_racks(broker_ids)
    elif any(r is not None for r in racks.values()) and not all(r is not None for r in racks.values()):
        raise CliError("not all brokers have rack information; add --disable-rack-aware "
                       "to make the plan without racks")
    # Brokers sharing a host (kafkarepl node) are one failure domain below the rack.
    hosts = {b["node_id"]: b["host"] for b in md["brokers"] if b["node_id"] in broker_ids}
    proposed = propose_reassignment(current, racks if is_rack_aware(racks) else broker_ids, hosts=hosts)
    print("Current partition replica assignment")
    print(format_reassignment(current))
    print()
    print("Proposed partition reassignment configuration")
    print(format_reassignment(proposed))
    return 0


async def _execute(client: ClusterClient, args: argparse.Namespace, *, plan: Assignment,
                   log_dirs: LogDirs) -> int:
    current = await check_partitions_exist(client, plan)
    live = set(client.brokers)
    for tp, replicas in sorted(plan.items()):
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise CliError(f"{tp_str(tp)}: unknown broker(s) {_ids(unknown)} in replicas {replicas} "
                           f"(live brokers: {_ids(sorted(live))})")
    moving = await ongoing(client)
    if moving and not args.additional:
        raise CliError("cannot execute while reassignments are in progress "
                       f"({', '.join(tp_str(tp) for tp in sorted(moving))}); "
                       "use --additional to start this one as well")
    # Roll back to where a reassignment in progress came from, not to its union.
    rollback = {}
    for tp in plan:
        m = moving.get(tp)
        adding = set(m["adding_replicas"]) if m else set()
        rollback[tp] = [b for b in current[tp] if b not in adding]
    print("Current partition replica assignment")
    print()
    print(format_reassignment(rollback))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0:
        print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
              "throttle is removed.")
        if args.throttle >= 0:
            await _set_throttles(client, plan, current, args.throttle)
        if args.replica_alter_log_dirs_throttle >= 0:
            await _set_log_dir_throttle(client, sorted({b for _t, _p, b in log_dirs}),
                                        args.replica_alter_log_dirs_throttle)
    resp = await client.alter_partition_reassignments(dict(plan), timeout_ms=args.timeout_ms)
    failed = _partition_errors(resp)
    started = [tp for tp in sorted(plan) if tp not in failed]
    if started:
        print(f"Successfully started partition reassignment{'s' if len(started) > 1 else ''} "
              f"for {','.join(tp_str(tp) for tp in started)}")
    if failed:
        print("Error reassigning partition(s):", file=sys.stderr)
        for tp, msg in sorted(failed.items()):
            print(f"{tp_str(tp)}: {msg}", file=sys.stderr)
        return 1
    if log_dirs:
        await execute_moves(client, log_dirs, args.timeout)
    return 0


async def execute_moves(client: ClusterClient, moves: LogDirs, timeout_ms: int) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs for each replica on its own broker; a
    replica not there yet (REPLICA_NOT_AVAILABLE: the reassignment adds it) is asked again
    every MOVE_RETRY_S until `timeout_ms` has passed."""
    deadline = time.monotonic() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        for r in sorted(await alter_replica_log_dirs(client, pending), key=replica_order):
            # Kafka's line, trailing space included
            print(f"Successfully started moving log directory to {pending.pop(r)} for replica "
                  f"{r[0]}-{r[1]} with broker {r[2]} ", flush=True)
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise CliError(f"Timed out before log directory move{'' if len(pending) == 1 else 's'} could be "
                           f"started for: {','.join(replica_str(r) for r in sorted(pending, key=replica_order))}")
        await asyncio.sleep(MOVE_RETRY_S)


async def alter_replica_log_dirs(client: ClusterClient, moves: LogDirs) -> set[Replica]:
    """The replicas whose move started (or that are already in their dir); those not on
    their broker yet are left out; any other failure is a CliError."""
    by_broker: dict[int, dict[TopicPartition, str]] = {}
    for (t, p, b), d in moves.items():
        by_broker.setdefault(b, {})[(t, p)] = d
    started: set[Replica] = set()
    for b, dirs in sorted(by_broker.items()):
        first = replica_str(min(((t, p, b) for t, p in dirs), key=replica_order))
        try:
            resp = await client.alter_replica_log_dirs(b, dirs)
        except (KafkaError, OSError, asyncio.TimeoutError) as exc:
            raise CliError(f"Failed to alter dir for {first}: {exc or type(exc).__name__}") from None
        codes = {(t["topic_name"], p["partition_index"]): p["error_code"]
                 for t in resp["results"] for p in t["partitions"]}
        for t, p in sorted(dirs):
            code = codes.get((t, p))
            if code == ErrorCode.NONE:
                started.add((t, p, b))
            elif code != ErrorCode.REPLICA_NOT_AVAILABLE:  # not there yet: asked again
                why = "no answer for it" if code is None else code_name(code)
                raise CliError(f"Failed to alter dir for {replica_str((t, p, b))}: {why}")
    return started


def _partition_errors(resp: dict) -> dict[TopicPartition, str]:
    """Per-partition failures of an AlterPartitionReassignments response."""
    if resp.get("error_code"):
        raise CliError(f"{code_name(resp['error_code'])} {resp.get('error_message') or ''}".rstrip())
    out = {}
    for t in resp["responses"]:
        for p in t["partitions"]:
            if p["error_code"]:
                out[(t["name"], p["partition_index"])] = (
                    f"{code_name(p['error_code'])}: {p.get('error_message') or ''}".rstrip(": "))
    return out


async def _verify(client: ClusterClient, args: argparse.Namespace, *, plan: Assignment,
                  log_dirs: LogDirs) -> int:
    """Kafka's verifyAssignment: a report, not a test. Exit code 0 whatever the partitions'
    state (completed, still in progress, or no reassignment but other replicas, a partition
    that does not exist included); 1 only when the tool itself fails."""
    pending = dict(plan)
    status: dict[TopicPartition, str] = {}
    current: Assignment = {}
    moving: dict[TopicPartition, dict] = {}
    for attempt in range(VERIFY_SETTLE_TRIES):
        current = await known_assignment(client, sorted({t for t, _ in pending}))
        moving = await ongoing(client)  # every reassignment: any of them keeps the throttles
        for tp, target in list(pending.items()):
            if tp in moving:
                status[tp] = "in progress"
            elif current.get(tp) == target:
                status[tp] = "completed"
            else:
                status[tp] = "failed"
                continue
            del pending[tp]
        if not pending:
            break
        if attempt + 1 < VERIFY_SETTLE_TRIES:
            await asyncio.sleep(VERIFY_SETTLE_S)  # a finished move may not show yet
    print("Status of partition reassignment:")
    for tp in sorted(plan):
        if status[tp] == "completed":
            print(f"Reassignment of partition {tp_str(tp)} is completed.")
        elif status[tp] == "in progress":
            print(f"Reassignment of partition {tp_str(tp)} is still in progress.")
        else:  # an unknown partition has the empty replica set, as in Kafka's tool
            print(f"There is no active reassignment of partition {tp_str(tp)}, but replica set is "
                  f"{_ids(current.get(tp, []))} rather than {_ids(plan[tp])}.")
    moves_ongoing = False
    if log_dirs:
        states = await log_dir_move_states(client, log_dirs)
        for r in sorted(states, key=replica_order):
            print(move_state_line(r, states[r]))
        moves_ongoing = not all(move_done(st) for st in states.values())
    # As Kafka's tool: the throttles go once no reassignment runs in the cluster and no
    # log dir move of the plan is active or unaccounted for.
    # (A partition reported in progress keeps them too, whichever look reported it.)
    in_progress = any(st == "in progress" for st in status.values())
    if not moving and not in_progress and not moves_ongoing and not args.preserve_throttles:
        await _clear_throttles(client, plan)
    return 0


async def known_assignment(client: ClusterClient, topics: list[str]) -> Assignment:
    """Replicas of every partition of the ``topics`` that exist (unknown ones left out)."""
    md = await client.metadata(topics)
    out: Assignment = {}
    for t in md["topics"]:
        if t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            continue
        if t["error_code"]:
            raise CliError(f"topic {t['name']}: {code_name(t['error_code'])}")
        out.update({(t["name"], p["partition_index"]): list(p["replica_nodes"]) for p in t["partitions"]})
    return out


# Kafka's LogDirMoveStates: (state, current log dir, future log dir, target log dir)
MOVE_MISSING_REPLICA = "missing replica"  # the broker did not answer
MOVE_MISSING_LOG_DIR = "missing log dir"  # the broker has no replica in a live log dir
MOVE_ACTIVE = "active"
MOVE_CANCELLED = "cancelled"  # no future log, and the replica is not in the target dir
MOVE_COMPLETED = "completed"
MoveState = tuple[str, str | None, str | None, str]


def move_done(st: MoveState) -> bool:
    """Kafka's LogDirMoveState.done: completed, or no move runs (cancelled); a move in
    progress or a replica not found is not done."""
    return st[0] in (MOVE_COMPLETED, MOVE_CANCELLED)


def _same_dir(a: str | None, b: str | None) -> bool:
    """As Kafka's tool, String.equals: the broker names a dir only by its exact absolute
    path (AlterReplicaLogDirs refuses `/data/d1/` for `/data/d1`), so a plan's path
    spelled otherwise is never the dir the replica is in."""
    return a is not None and b is not None and a == b


def move_state(target: str, current: str | None, future: str | None, *, answered: bool = True) -> MoveState:
    """Kafka's findLogDirMoveStates for one replica, from its broker's DescribeLogDirs."""
    if not answered:
        return MOVE_MISSING_REPLICA, None, None, target
    if current is None:
        return MOVE_MISSING_LOG_DIR, None, future, target
    if future is None:
        return (MOVE_COMPLETED if _same_dir(current, target) else MOVE_CANCELLED), current, None, target
    return MOVE_ACTIVE, current, future, target


def move_state_line(r: Replica, st: MoveState) -> str:
    """Kafka's replicaMoveStatesToString line for one replica."""
    state, current, future, target = st
    tp = f"{r[0]}-{r[1]}"
    if state == MOVE_MISSING_LOG_DIR:
        return (f"Partition {tp} is not found in any live log dir on broker {r[2]}. There is likely an "
                "offline log directory on the broker.")
    if state == MOVE_MISSING_REPLICA:
        return f"Partition {tp} cannot be found in any live log directory on broker {r[2]}."
    if state == MOVE_ACTIVE:
        if _same_dir(future, target):
            return f"Reassignment of replica {replica_str(r)} is still in progress."
        return f"Partition {tp} on broker {r[2]} is being moved to log dir {future} instead of {target}."
    if state == MOVE_CANCELLED:
        return f"Partition {tp} on broker {r[2]} is not being moved from log dir {current} to {target}."
    return f"Reassignment of replica {replica_str(r)} completed successfully."


async def log_dir_move_states(client: ClusterClient, moves: LogDirs) -> dict[Replica, MoveState]:
    """Where each replica of `moves` is (current and future log dir), from DescribeLogDirs
    to its broker; a broker that does not answer leaves its replicas "missing"."""
    by_broker: dict[int, list[TopicPartition]] = {}
    for t, p, b in moves:
        by_broker.setdefault(b, []).append((t, p))
    out: dict[Replica, MoveState] = {}
    for b, tps in sorted(by_broker.items()):
        try:
            resp = await client.describe_log_dirs(b, by_topic(tps))
        except (KafkaError, OSError, asyncio.TimeoutError):
            for t, p in tps:
                out[(t, p, b)] = move_state(moves[(t, p, b)], None, None, answered=False)
            continue
        if resp.get("error_code"):
            raise CliError(f"describing the log dirs of broker {b} failed: {code_name(resp['error_code'])}")
        current: dict[TopicPartition, str] = {}
        future: dict[TopicPartition, str] = {}
        for d in resp["results"]:
            if d["error_code"]:
                continue  # an offline log dir (Kafka skips it too)
            for t in d["topics"]:
                for p in t["partitions"]:
                    (future if p["is_future_key"] else current)[(t["name"], p["partition_index"])] = d["log_dir"]
        for t, p in tps:
            out[(t, p, b)] = move_state(moves[(t, p, b)], current.get((t, p)), future.get((t, p)))
    return out


RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def _alter_errors(resp: dict) -> list[str]:
    return [f"{r['resource_name']}: {code_name(r['error_code'])} {r.get('error_message') or ''}".rstrip()
            for r in resp.get("responses", []) if r["error_code"]]


async def _set_throttles(client: ClusterClient, plan: Assignment, current: Assignment, rate: int) -> None:
    """As kafka-reassign-partitions.sh: leader throttles on the moving partitions'
    current replicas, follower throttles on the replicas they gain, and the rate on every
    broker involved."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for (topic, p), target in plan.items():
        leader.setdefault(topic, set()).update(f"{p}:{b}" for b in current[(topic, p)])
        adding = [b for b in target if b not in current[(topic, p)]]
        if adding:
            follower.setdefault(topic, set()).update(f"{p}:{b}" for b in adding)
    errors: list[str] = []
    for topic in sorted(leader):
        ops: list[tuple[str, int, str | None]] = [(REPLICA_CONFIGS[0], OP_SET, ",".join(sorted(leader[topic])))]
        if follower.get(topic):
            ops.append((REPLICA_CONFIGS[1], OP_SET, ",".join(sorted(follower[topic]))))
        errors += _alter_errors(await client.incremental_alter_configs({(RESOURCE_TOPIC, topic): ops}))
    brokers = sorted({b for tp, target in plan.items() for b in (*current[tp], *target)})
    for b in brokers:
        errors += _alter_errors(await client.incremental_alter_configs(
            {(RESOURCE_BROKER, str(b)): [(k, OP_SET, str(rate)) for k in RATE_CONFIGS]}))
    if errors:
        raise CliError("setting the throttle failed: " + "; ".join(errors))
    print(f"The inter-broker throttle limit was set to {rate} B/s")


async def _set_log_dir_throttle(client: ClusterClient, brokers: list[int], rate: int) -> None:
    """As Kafka's tool: replica.alter.log.dirs.io.max.bytes.per.second on the brokers with a
    replica the plan puts in a named log dir."""
    errors: list[str] = []
    for b in brokers:
        errors += _alter_errors(await client.incremental_alter_configs(
            {(RESOURCE_BROKER, str(b)): [(LOG_DIR_RATE, OP_SET, str(rate))]}))
    if errors:
        raise CliError("setting the throttle failed: " + "; ".join(errors))
    print(f"The replica-alter-dir throttle limit was set to {rate} B/s")


async def _clear_throttles(client: ClusterClient, plan: Assignment) -> None:
    """As Kafka's clearAllThrottles: the rates (and the log dir move rate) on every live
    broker, the replica lists on the plan's topics."""
    brokers = sorted(client.brokers)
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          f"{','.join(str(b) for b in brokers)}")
    for b in brokers:
        await client.incremental_alter_configs(
            {(RESOURCE_BROKER, str(b)): [(k, OP_DELETE, None) for k in (*RATE_CONFIGS, LOG_DIR_RATE)]})
    topics = sorted({t for t, _p in plan})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    if topics:
        await client.incremental_alter_configs(
            {(RESOURCE_TOPIC, t): [(k, OP_DELETE, None) for k in REPLICA_CONFIGS] for t in topics})


async def _cancel(client: ClusterClient, args: argparse.Namespace, *, plan: Assignment,
                  log_dirs: LogDirs) -> int:
    """Kafka's cancelAssignment: the plan's partitions still being reassigned are
    cancelled (the others are left alone), then its log dir moves still running are
    stopped, then the throttles cleared (unless --preserve-throttles)."""
    await check_partitions_exist(client, plan)
    moving = await ongoing(client, by_topic(plan))
    active = sorted(tp for tp in plan if tp in moving
                    and (moving[tp]["adding_replicas"] or moving[tp]["removing_replicas"]))
    if active:
        resp = await client.alter_partition_reassignments(dict.fromkeys(active), timeout_ms=args.timeout_ms)
        errors = _partition_errors(resp)
        if errors:
            raise CliError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                           + "\n".join(f"{tp_str(tp)}: {msg}" for tp, msg in sorted(errors.items())))
        print(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: "
              f"{','.join(tp_str(tp) for tp in active)}")
    else:
        print("None of the specified partition reassignments are active.")
    # As Kafka's tool: a log dir move in progress is stopped by moving the replica to the
    # log dir it is in now (the broker drops the future log).
    states = await log_dir_move_states(client, log_dirs) if log_dirs else {}
    back = {r: st[1] for r, st in states.items() if st[0] == MOVE_ACTIVE and st[1] is not None}
    if back:
        await execute_moves(client, back, args.timeout)
    else:
        print("None of the specified partition moves are active.")
    if not args.preserve_throttles:  # as Kafka's tool, whether or not anything was active
        await _clear_throttles(client, plan)
    return 0


async def _list(client: ClusterClient, args: argparse.Namespace) -> int:
    moving = await ongoing(client)
    if not moving:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for tp, p in sorted(moving.items()):
        print(format_list_line(tp, p))
    return 0


def format_list_line(tp: tuple[str, int], p: dict) -> str:
    """A --list line as Kafka's tool prints it: the adding and removing parts only when
    there are such replicas."""
    adding = f" adding: {_ids(p['adding_replicas'])}." if p["adding_replicas"] else ""
    removing = f" removing: {_ids(p['removing_replicas'])}." if p["removing_replicas"] else ""
    return f"{tp_str(tp)}: replicas: {_ids(p['replicas'])}.{adding}{removing}"
