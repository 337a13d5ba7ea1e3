"""`kafkarepl acls`: add, remove and list ACLs, with kafka-acls.sh's options and output.

    kafkarepl acls --bootstrap-server H:P [--command-config client.properties] \\
        --add --allow-principal User:alice --operation Read --topic orders [--group g]
    kafkarepl acls ... --list [--topic orders]
    kafkarepl acls ... --remove --allow-principal User:alice --operation Read --topic orders
    kafkarepl acls ... --add --allow-principal User:alice --producer --topic orders [--idempotent]
    kafkarepl acls ... --add --allow-principal User:bob --consumer --topic orders --group g
    kafkarepl acls ... --list --principal User:alice
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey
from kafkarepl.server.acl_store import OPERATION_IDS, OPERATION_NAMES, RESOURCE_NAMES

PATTERNS = {"LITERAL": 3, "PREFIXED": 4, "ANY": 1, "MATCH": 2}
PATTERN_NAMES = {v: k for k, v in PATTERNS.items()}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", help="client properties (security.protocol, ssl.*, sasl.*)")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--add", action="store_true")
    act.add_argument("--remove", action="store_true")
    act.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--operation", action="append", default=[])
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--delegation-token", action="append", default=[], help="a token id (DESCRIBE)")
    p.add_argument("--user-principal", action="append", default=[],
                   help="a user as the resource (CreateTokens, DescribeTokens): User:<name>")
    p.add_argument("--resource-pattern-type", default=None, choices=sorted(PATTERNS, key=str.lower) +
                   [k.lower() for k in PATTERNS])
    p.add_argument("--force", action="store_true", help="accepted (no prompt is ever shown)")
    p.add_argument("--producer", action="store_true",
                   help="the producer role: WRITE, DESCRIBE, CREATE on --topic (WRITE, DESCRIBE on "
                        "--transactional-id)")
    p.add_argument("--consumer", action="store_true", help="the consumer role: READ, DESCRIBE on --topic, READ "
                                                           "on --group")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--principal", action="append", default=[], help="with --list: only this principal's ACLs")
    p.set_defaults(func=run)


def _resources(args: argparse.Namespace) -> list[tuple[int, str]]:
    out = [(2, t) for t in args.topic] + [(3, g) for g in args.group] + [(5, t) for t in args.transactional_id]
    out += [(6, t) for t in args.delegation_token] + [(7, u) for u in args.user_principal]
    if args.cluster:
        out.append((4, "kafka-cluster"))
    return out


def _operation(name: str) -> int:
    key = {n.lower(): n for n in OPERATION_IDS}.get(name.replace("-", "").replace("_", "").lower())
    if key is None:
        raise ValueError(f"unknown operation {name!r}")
    return OPERATION_IDS[key]




def _role_acls(args: argparse.Namespace) -> list[tuple[int, str, int]]:
    """kafka-acls.sh's --producer / --consumer: (resource type, name, operation) each."""
    ops = OPERATION_IDS
    out: list[tuple[int, str, int]] = []
    if args.idempotent and not args.producer:
        raise ValueError("--idempotent goes with --producer")
    if args.producer:
        if not args.topic:
            raise ValueError("With --producer you must specify a --topic")
        out += [(2, t, ops[o]) for t in args.topic for o in ("Write", "Describe", "Create")]
        out += [(5, x, ops[o]) for x in args.transactional_id for o in ("Write", "Describe")]
        if args.idempotent:
            out.append((4, "kafka-cluster", ops["IdempotentWrite"]))
    if args.consumer:
        if not args.topic or not args.group:
            raise ValueError("With --consumer you must specify a --topic and a --group")
        out += [(2, t, ops[o]) for t in args.topic for o in ("Read", "Describe")]
        out += [(3, g, ops["Read"]) for g in args.group]
    return out


def _enum(name: str) -> str:
    """Java's enum name, as Kafka's tool prints it: TransactionalId -> TRANSACTIONAL_ID."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper()


def _print_resource(rtype: int, name: str, pattern: int, acls: list[dict]) -> None:
    print(f"Current ACLs for resource `ResourcePattern(resourceType={_enum(RESOURCE_NAMES[rtype])}, name={name}, "
          f"patternType={PATTERN_NAMES.get(pattern, pattern)})`: ")
    for a in acls:
        print(f" \t(principal={a['principal']}, host={a['host']}, operation={_enum(OPERATION_NAMES[a['operation']])}, "
              f"permissionType={'ALLOW' if a['permission_type'] == 3 else 'DENY'})")
    print()


async def _run(args: argparse.Namespace) -> int:
    security = load_client_security(args.command_config)
    async with ClusterClient(args.bootstrap_server, client_id="kafkarepl-acls", security=security) as client:
        await client.metadata([])
        resources = _resources(args)
        pattern = PATTERNS[(args.resource_pattern_type or ("ANY" if args.list else "LITERAL")).upper()]
        if args.list:
            filters: Sequence[tuple[int, str | None]] = resources or [(1, None)]
            for rtype, name in filters:
                for principal in args.principal or [None]:
                    resp = await client.send(ApiKey.DESCRIBE_ACLS, {
                        "resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
                        "principal_filter": principal, "host_filter": None, "operation": 1, "permission_type": 1},
                        None, 2)
                    if resp["error_code"]:
                        raise KafkaError(resp.get("error_message") or ErrorCode(resp["error_code"]).name,
                                         ErrorCode(resp["error_code"]))
                    for r in resp["resources"]:
                        _print_resource(r["resource_type"], r["resource_name"], r["pattern_type"], r["acls"])
            return 0
        if not resources:
            raise ValueError("name a resource: --topic, --group, --transactional-id or --cluster")
        entries = ([(p, h, 3) for p in args.allow_principal for h in (args.allow_host or ["*"])]
                   + [(p, h, 2) for p in args.deny_principal for h in (args.deny_host or ["*"])])
        if not entries:
            raise ValueError("--allow-principal or --deny-principal is required")
        if (args.producer or args.consumer) and args.operation:
            raise ValueError("--operation cannot be used with --producer or --consumer")
        role = _role_acls(args)
        if role:
            targets = [(rt, rn, op) for rt, rn, op in role]
            resources = list(dict.fromkeys((rt, rn) for rt, rn, _ in role))
        else:
            ops = [_operation(o) for o in (args.operation or ["All"])]
            targets = [(rt, rn, op) for rt, rn in resources for op in ops]
        acls = [(rt, rn, pr, h, op, perm) for rt, rn, op in targets for pr, h, perm in entries]
        if args.add:
            for rt, rn in resources:
                print(f"Adding ACLs for resource `ResourcePattern(resourceType={_enum(RESOURCE_NAMES[rt])}, "
                      f"name={rn}, patternType={PATTERN_NAMES[pattern]})`: ")
            resp = await client.send(ApiKey.CREATE_ACLS, {"creations": [
                {"resource_type": rt, "resource_name": rn, "resource_pattern_type": pattern, "principal": pr,
                 "host": h, "operation": op, "permission_type": perm} for rt, rn, pr, h, op, perm in acls]}, None, 2)
            errors = [r.get("error_message") or ErrorCode(r["error_code"]).name
                      for r in resp["results"] if r["error_code"]]
        else:
            resp = await client.send(ApiKey.DELETE_ACLS, {"filters": [
                {"resource_type_filter": rt, "resource_name_filter": rn, "pattern_type_filter": pattern,
                 "principal_filter": pr, "host_filter": h, "operation": op, "permission_type": perm}
                for rt, rn, pr, h, op, perm in acls]}, None, 2)
            errors = [r.get("error_message") or ErrorCode(r["error_code"]).name
                      for r in resp["filter_results"] if r["error_code"]]
        if errors:
            raise KafkaError("; ".join(errors), ErrorCode.INVALID_REQUEST)
        return 0


run = admin_command(_run)
