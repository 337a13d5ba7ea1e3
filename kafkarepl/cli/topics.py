"""`kafkarepl topics`: create, list, describe, delete topics and add partitions."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkarepl.cli import wire
from kafkarepl.client.client_config import load_client_security
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey

CREATE_TOPICS_VERSION = 5
DELETE_TOPICS_VERSION = 4
CREATE_PARTITIONS_VERSION = 2
DESCRIBE_CONFIGS_VERSION = 4
RESOURCE_TOPIC = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", help="client properties (security.protocol, ssl.*, sasl.*)")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--create", action="store_true")
    act.add_argument("--list", action="store_true")
    act.add_argument("--describe", action="store_true")
    act.add_argument("--delete", action="store_true")
    act.add_argument("--alter", action="store_true", help="with --partitions: add partitions")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", help="0:1:2,1:2:0 (brokers per partition)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--timeout-ms", type=int, default=30000)
    # --describe filters (kafka-topics.sh's): only the matching partitions are printed
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="with --describe: partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="with --describe: partitions without a live leader")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="with --describe: partitions whose ISR is below min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="with --describe: partitions whose ISR is exactly min.insync.replicas")
    p.set_defaults(func=cmd_topics)


def _fail(msg: str) -> int:
    print(f"kafkarepl topics: {msg}", file=sys.stderr)
    return 1


def _call(args: argparse.Namespace, key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    last: Exception | None = None
    security = load_client_security(args.command_config)
    for host, port in wire.parse_bootstrap(args.bootstrap_server):
        try:
            return wire.call(host, port, key, version, body, timeout=args.timeout_ms / 1000 + 5, security=security)
        except (OSError, ConnectionError) as exc:
            last = exc
    raise ConnectionError(f"no broker of {args.bootstrap_server} answered: {last}")


def cmd_topics(args: argparse.Namespace) -> int:
    try:
        if args.create:
            return _create(args)
        if args.list:
            md = _call(args, ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
            for t in sorted(md["topics"], key=lambda t: t["name"]):
                print(t["name"])
            return 0
        if args.describe:
            return _describe(args)
        if args.delete:
            if not args.topic:
                return _fail("--delete needs --topic")
            resp = _call(args, ApiKey.DELETE_TOPICS, DELETE_TOPICS_VERSION,
                         {"topic_names": [args.topic], "timeout_ms": args.timeout_ms})
            r = resp["responses"][0]
            if r["error_code"]:
                return _fail(f"{args.topic}: {ErrorCode(r['error_code']).name} {r.get('error_message') or ''}")
            print(f"Deleted topic {args.topic}.")
            return 0
        if args.alter:
            if not args.topic or not args.partitions:
                return _fail("--alter needs --topic and --partitions")
            resp = _call(args, ApiKey.CREATE_PARTITIONS, CREATE_PARTITIONS_VERSION,
                         {"topics": [{"name": args.topic, "count": args.partitions, "assignments": None}],
                          "timeout_ms": args.timeout_ms, "validate_only": False})
            r = resp["results"][0]
            if r["error_code"]:
                return _fail(f"{args.topic}: {ErrorCode(r['error_code']).name} {r.get('error_message') or ''}")
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
            return 0
    except (OSError, ConnectionError, ValueError) as exc:
        return _fail(str(exc))
    return 2


def _create(args: argparse.Namespace) -> int:
    if not args.topic:
        return _fail("--create needs --topic")
    configs = []
    for item in args.config:
        if "=" not in item:
            return _fail(f"--config must be KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        configs.append({"name": k, "value": v})
    assignments = []
    if args.replica_assignment:
        for i, part in enumerate(args.replica_assignment.split(",")):
            assignments.append({"partition_index": i, "broker_ids": [int(b) for b in part.split(":")]})
    body = {
        "topics": [{
            "name": args.topic,
            "num_partitions": -1 if assignments else (args.partitions or -1),
            "replication_factor": -1 if assignments else (args.replication_factor or -1),
            "assignments": assignments, "configs": configs,
        }],
        "timeout_ms": args.timeout_ms, "validate_only": False,
    }
    resp = _call(args, ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, body)
    r = resp["topics"][0]
    if r["error_code"]:
        return _fail(f"{args.topic}: {ErrorCode(r['error_code']).name}: {r.get('error_message') or ''}")
    print(f"Created topic {args.topic}.")
    return 0


def _describe(args: argparse.Namespace) -> int:
    topics = [{"name": args.topic}] if args.topic else None
    md = _call(args, ApiKey.METADATA, 12, {"topics": topics, "allow_auto_topic_creation": False})
    live = {b["node_id"] for b in md["brokers"]}
    filtered = (args.under_replicated_partitions or args.unavailable_partitions
                or args.under_min_isr_partitions or args.at_min_isr_partitions)
    rc = 0
    for t in sorted(md["topics"], key=lambda t: t["name"]):
        if t["error_code"]:
            print(f"Topic: {t['name']}\tError: {ErrorCode(t['error_code']).name}", file=sys.stderr)
            rc = 1
            continue
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        rf = len(parts[0]["replica_nodes"]) if parts else 0
        if filtered:
            min_isr = _min_isr(args, t["name"]) if (args.under_min_isr_partitions or args.at_min_isr_partitions) else 1
            parts = [p for p in parts if _matches(args, p, live, min_isr)]
        else:
            cfg = _topic_configs(args, t["name"])
            print(f"Topic: {t['name']}\tTopicId: {_tid(t.get('topic_id'))}\tPartitionCount: {len(parts)}\t"
                  f"ReplicationFactor: {rf}\tConfigs: {cfg}")
        for p in parts:
            offline = p.get("offline_replicas") or []
            print(f"\tTopic: {t['name']}\tPartition: {p['partition_index']}\tLeader: "
                  f"{p['leader_id'] if p['leader_id'] >= 0 else 'none'}\t"
                  f"Replicas: {','.join(map(str, p['replica_nodes']))}\tIsr: {','.join(map(str, p['isr_nodes']))}"
                  + (f"\tOffline: {','.join(map(str, offline))}" if offline else ""))
    return rc


def _matches(args: argparse.Namespace, p: dict[str, Any], live: set[int], min_isr: int) -> bool:
    """Kafka's TopicCommand partition filters (any of the given ones)."""
    leader_ok = p["leader_id"] >= 0 and p["leader_id"] in live
    isr, replicas = len(p["isr_nodes"]), len(p["replica_nodes"])
    return bool(
        (args.under_replicated_partitions and isr < replicas)
        or (args.unavailable_partitions and not leader_ok)
        or (args.under_min_isr_partitions and (not leader_ok or isr < min_isr))
        or (args.at_min_isr_partitions and isr == min_isr)
    )


def _min_isr(args: argparse.Namespace, topic: str) -> int:
    resp = _call(args, ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, {
        "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": topic,
                       "configuration_keys": ["min.insync.replicas"]}],
        "include_synonyms": False, "include_documentation": False})
    for c in resp["results"][0]["configs"]:
        if c["name"] == "min.insync.replicas" and c["value"] is not None:
            return int(c["value"])
    return 1


def _topic_configs(args: argparse.Namespace, topic: str) -> str:
    try:
        resp = _call(args, ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, {
            "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    except (OSError, ConnectionError):
        return ""
    res = resp["results"][0]
    return ",".join(f"{c['name']}={c['value']}" for c in res["configs"] if c.get("config_source") == 1)


def _tid(tid: Any) -> str:
    if tid is None:
        return "-"
    import base64
    import uuid

    raw = tid.bytes if isinstance(tid, uuid.UUID) else bytes(tid)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
