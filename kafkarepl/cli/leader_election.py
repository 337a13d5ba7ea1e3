"""`kafkarepl leader-election`: elect preferred or unclean leaders, as Kafka's
kafka-leader-election.sh does.

PREFERRED moves leadership back to each partition's first replica when it is alive and
in sync (after a broker restart left it elsewhere); UNCLEAN elects any live replica for
partitions without a leader, which can lose committed records.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from kafkarepl.cli.reassign import (
    CliError,
    by_topic,
    code_name,
    fail,
    read_json,
    run_admin,
    tp_str,
)
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "leader-election",
        help="elect preferred or unclean partition leaders",
        description="Run a preferred or unclean leader election on some or all partitions.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--election-type", required=True, type=str.upper, choices=sorted(ELECTION_TYPES))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="with --partition: one partition")
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='{"partitions":[{"topic":"t","partition":0}]}')
    p.add_argument("--partition", type=int, help="with --topic")
    p.add_argument("--timeout-ms", type=int, default=30000)
    p.set_defaults(func=cmd_leader_election)


def cmd_leader_election(args: argparse.Namespace) -> int:
    try:  # options and the file are checked before connecting
        requested = _requested(args)
    except CliError as exc:
        return fail("leader-election", str(exc))
    return run_admin("leader-election", args, functools.partial(_elect, requested=requested))


def parse_election_json(data: Any, path: str) -> list[tuple[str, int]]:
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise CliError(f'{path}: expected {{"partitions":[{{"topic":"t","partition":0}}]}}')
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(data["partitions"]):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise CliError(f'{path}: partitions[{i}] needs a "topic" name')
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise CliError(f'{path}: partitions[{i}] ({topic}) needs a "partition" number >= 0')
        if (topic, partition) in out:
            raise CliError(f"{path}: partition {topic}-{partition} is listed twice")
        out.append((topic, partition))
    if not out:
        raise CliError(f"{path}: the partition list is empty")
    return out


def _requested(args: argparse.Namespace) -> dict[str, list[int]] | None:
    """The partitions to elect for (None: all of them)."""
    if args.all_topic_partitions:
        if args.partition is not None:
            raise CliError("--partition goes with --topic only")
        return None
    if args.topic:
        if args.partition is None or args.partition < 0:
            raise CliError("--topic needs --partition N (N >= 0)")
        return {args.topic: [args.partition]}
    if args.partition is not None:
        raise CliError("--partition goes with --topic only")
    return by_topic(parse_election_json(read_json(args.path_to_json_file, "--path-to-json-file"),
                                        args.path_to_json_file))


async def _elect(client: ClusterClient, args: argparse.Namespace, *,
                 requested: dict[str, list[int]] | None) -> int:
    kind = args.election_type
    resp = await client.elect_leaders(requested, ELECTION_TYPES[kind], args.timeout_ms)
    if resp.get("error_code"):
        raise CliError(f"election failed: {code_name(resp['error_code'])}")
    done, already, failed = [], [], {}
    for t in resp["replica_election_results"]:
        for p in t["partition_result"]:
            tp = (t["topic"], p["partition_id"])
            code = p["error_code"]
            if code == ErrorCode.NONE:
                done.append(tp)
            elif code == ErrorCode.ELECTION_NOT_NEEDED:
                already.append(tp)
            else:
                failed[tp] = f"{code_name(code)}: {p.get('error_message') or ''}".rstrip(": ")
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions "
              f"{', '.join(tp_str(tp) for tp in sorted(done))}")
    if already:
        print(f"Valid replica already elected for partitions {', '.join(tp_str(tp) for tp in sorted(already))}")
    for tp, msg in sorted(failed.items()):
        print(f"Error completing leader election ({kind}) for partition: {tp_str(tp)}: {msg}")
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0
