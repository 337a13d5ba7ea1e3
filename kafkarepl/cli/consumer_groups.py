"""`kafkarepl consumer-groups`: list, describe (with lag), reset offsets and delete consumer
groups, with kafka-consumer-groups.sh's options and output formats."""

from __future__ import annotations

import argparse
import asyncio
import struct
import sys
from collections.abc import Sequence
from typing import Any

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey

EARLIEST, LATEST = -2, -1


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("consumer-groups", help="list, describe, reset offsets of and delete consumer groups")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--list", action="store_true")
    act.add_argument("--describe", action="store_true")
    act.add_argument("--delete", action="store_true")
    act.add_argument("--reset-offsets", action="store_true")
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--topic", action="append", default=[], help="with --reset-offsets: TOPIC or TOPIC:P1,P2")
    p.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every topic the group committed")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int)
    p.add_argument("--execute", action="store_true", help="with --reset-offsets: commit (default: dry run)")
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(func=run)




async def _run(args: argparse.Namespace) -> int:
    if not args.list and not args.group:
        raise ValueError("--group is required")
    async with ClusterClient(args.bootstrap_server, client_id="kafkarepl-consumer-groups") as client:
        if args.list:
            for g in sorted(await _list(client)):
                print(g)
            return 0
        rc = 0
        for group in args.group:
            coordinator = await _coordinator(client, group)
            if args.describe:
                rc |= await _describe(client, coordinator, group)
            elif args.delete:
                rc |= await _delete(client, coordinator, group)
            else:
                rc |= await _reset(client, coordinator, group, args)
        return rc


async def _list(client: ClusterClient) -> set[str]:
    md = await client.metadata()
    groups: set[str] = set()
    for b in md["brokers"]:  # each coordinator knows its own groups
        resp = await client.send(ApiKey.LIST_GROUPS, {"states_filter": []}, b["node_id"], 4)
        groups.update(g["group_id"] for g in resp["groups"] if g["protocol_type"] in ("consumer", ""))
    return groups


async def _coordinator(client: ClusterClient, group: str) -> int:
    for _ in range(50):
        resp = await client.send(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group]}, None, 4)
        [c] = resp["coordinators"]
        if c["error_code"] == 0:
            return int(c["node_id"])
        if c["error_code"] not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            raise KafkaError(f"group {group}: {ErrorCode(c['error_code']).name}", ErrorCode(c["error_code"]))
        await asyncio.sleep(0.2)
    raise KafkaError(f"group {group}: no coordinator available", ErrorCode.COORDINATOR_NOT_AVAILABLE)


async def _committed(client: ClusterClient, coordinator: int, group: str) -> dict[tuple[str, int], int]:
    resp = await client.send(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None, "require_stable": False},
                             coordinator, 7)
    if resp.get("error_code"):
        raise KafkaError(f"group {group}: {ErrorCode(resp['error_code']).name}", ErrorCode(resp["error_code"]))
    return {(t["name"], p["partition_index"]): p["committed_offset"]
            for t in resp["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}


async def _offsets(client: ClusterClient, tps: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
    """ListOffsets (EARLIEST / LATEST) at each partition's leader."""
    found = await client.list_offsets({tp: timestamp for tp in tps})
    return {tp: offset for tp, (code, offset) in found.items() if code is ErrorCode.NONE}


def _assignment(data: bytes | None) -> list[tuple[str, int]]:
    """The partitions of a consumer-protocol member assignment (version, [topic, [p]])."""
    out: list[tuple[str, int]] = []
    if not data or len(data) < 6:
        return out
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(max(0, n)):
        (size,) = struct.unpack_from(">h", data, pos)
        topic = bytes(data[pos + 2:pos + 2 + size]).decode()
        pos += 2 + size
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(0, count)):
            out.append((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    return out


async def _members(client: ClusterClient, coordinator: int, group: str) -> tuple[str, list[dict[str, Any]],
                                                                                  dict[tuple[str, int], dict]]:
    """(state, members, partition -> its member): ConsumerGroupDescribe for a KIP-848
    group, else DescribeGroups (a classic group), as Kafka's admin client asks."""
    resp = await client.send(ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group],
                                                              "include_authorized_operations": False}, coordinator, 0)
    [g] = resp["groups"]
    owner: dict[tuple[str, int], dict[str, Any]] = {}
    if not g["error_code"]:
        for m in g["members"]:
            for t in m["assignment"]["topic_partitions"]:
                for p in t["partitions"]:
                    owner[(t["topic_name"], p)] = m
        return g["group_state"], g["members"], owner
    if g["error_code"] != ErrorCode.GROUP_ID_NOT_FOUND:
        raise KafkaError(f"group {group}: {ErrorCode(g['error_code']).name}", ErrorCode(g["error_code"]))
    resp = await client.send(ApiKey.DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False},
                             coordinator, 5)
    [g] = resp["groups"]
    if g["error_code"]:
        raise KafkaError(f"group {group}: {ErrorCode(g['error_code']).name}", ErrorCode(g["error_code"]))
    for m in g["members"]:
        for tp in _assignment(m["member_assignment"]):
            owner[tp] = m
    return g["group_state"], g["members"], owner


async def _describe(client: ClusterClient, coordinator: int, group: str) -> int:
    state, members, owner = await _members(client, coordinator, group)
    committed = await _committed(client, coordinator, group)
    if state == "Dead" and not committed:
        print(f"Consumer group '{group}' does not exist.")
        return 1
    if not members:
        print(f"\nConsumer group '{group}' has no active members.\n")
    tps = sorted(set(committed) | set(owner))
    ends = await _offsets(client, tps, LATEST) if tps else {}
    rows = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID")]
    for t, p in tps:
        cur, end = committed.get((t, p)), ends.get((t, p))
        lag = end - cur if cur is not None and end is not None else None
        m = owner.get((t, p))
        rows.append((group, t, str(p), _s(cur), _s(end), _s(lag), m["member_id"] if m else "-",
                     m["client_host"] if m else "-", m["client_id"] if m else "-"))
    _table(rows)
    return 0


async def _delete(client: ClusterClient, coordinator: int, group: str) -> int:
    resp = await client.send(ApiKey.DELETE_GROUPS, {"groups_names": [group]}, coordinator, 2)
    [r] = resp["results"]
    if r["error_code"]:
        print(f"Error: Deletion of some consumer groups failed:\n* Group '{group}' could not be deleted due to: "
              f"{ErrorCode(r['error_code']).name}", file=sys.stderr)
        return 1
    print(f"Deletion of requested consumer groups ('{group}') was successful.")
    return 0


async def _reset(client: ClusterClient, coordinator: int, group: str, args: argparse.Namespace) -> int:
    if not (args.to_earliest or args.to_latest or args.to_offset is not None):
        raise ValueError("--reset-offsets needs --to-earliest, --to-latest or --to-offset")
    committed = await _committed(client, coordinator, group)
    md = await client.metadata([t.split(":")[0] for t in args.topic] if args.topic else None)
    counts = {t["name"]: len(t["partitions"]) for t in md["topics"] if not t["error_code"]}
    tps: list[tuple[str, int]] = []
    if args.all_topics:
        tps = sorted(committed)
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if name not in counts:
            raise ValueError(f"topic {name} does not exist")
        tps += [(name, int(p)) for p in parts.split(",")] if parts else [(name, p) for p in range(counts[name])]
    if not tps:
        raise ValueError("--reset-offsets needs --topic or --all-topics")
    if args.to_offset is not None:
        new = dict.fromkeys(tps, args.to_offset)
    else:
        new = await _offsets(client, tps, EARLIEST if args.to_earliest else LATEST)
    if args.execute:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in sorted(new.items()):
            by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                               "committed_leader_epoch": -1, "committed_metadata": ""})
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        resp = await client.send(ApiKey.OFFSET_COMMIT, body, coordinator, 8)
        errors = {ErrorCode(p["error_code"]).name for t in resp["topics"] for p in t["partitions"] if p["error_code"]}
        if errors:
            print(f"Error: Assignments can only be reset if the group '{group}' is inactive, but the "
                  f"commit failed: {', '.join(sorted(errors))}", file=sys.stderr)
            return 1
    _table([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
           + [(group, t, str(p), str(off)) for (t, p), off in sorted(new.items())])
    return 0


def _s(v: int | None) -> str:
    return "-" if v is None else str(v)


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


run = admin_command(_run)
