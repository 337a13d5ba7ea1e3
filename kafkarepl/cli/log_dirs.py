"""`kafkarepl log-dirs`: each broker's log dirs with the size and offset lag of their
replicas (future logs of JBOD moves included), with kafka-log-dirs.sh's options and output.

    kafkarepl log-dirs --bootstrap-server H:P --describe [--broker-list 1,2] [--topic-list a,b]

prints "Querying brokers for log directories information", "Received log directory
information from brokers 1,2" and one line of JSON:
{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d","error":null,
"partitions":[{"partition":"t-0","size":N,"offsetLag":0,"isFuture":false}]}]}]}
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.cli.java_errors import java_exception_class
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode, KafkaError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("log-dirs", help="describe the brokers' log dirs (kafka-log-dirs.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", help="client properties (security.protocol, ssl.*, sasl.*)")
    p.add_argument("--describe", action="store_true", required=True,
                   help="describe the log dirs of the brokers")
    p.add_argument("--broker-list", default="", metavar="1,2,3",
                   help="the brokers to query (default: all brokers of the cluster)")
    p.add_argument("--topic-list", default="", metavar="t1,t2",
                   help="the topics to list the replicas of (default: all)")
    p.set_defaults(func=run)


def parse_brokers(text: str) -> set[int]:
    out = set()
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        try:
            out.add(int(part))
        except ValueError:
            raise ValueError(f"--broker-list: {part!r} is not a broker id") from None
    return out


def _ids(ids: set[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def format_log_dirs(by_broker: dict[int, list[dict[str, Any]]], topics: set[str]) -> str:
    """The JSON document of kafka-log-dirs.sh from each broker's DescribeLogDirs results,
    keeping only replicas of `topics` (all when empty)."""
    brokers = []
    for broker in sorted(by_broker):
        dirs = []
        for r in by_broker[broker]:
            partitions = [
                {"partition": f"{t['name']}-{p['partition_index']}", "size": p["partition_size"],
                 "offsetLag": p["offset_lag"], "isFuture": p["is_future_key"]}
                for t in r["topics"] if not topics or t["name"] in topics for p in t["partitions"]
            ]
            dirs.append({"logDir": r["log_dir"], "error": java_exception_class(r["error_code"]), "partitions": partitions})
        brokers.append({"broker": broker, "logDirs": dirs})
    return json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"))


async def _run(args: argparse.Namespace) -> int:
    topics = {t.strip() for t in args.topic_list.split(",") if t.strip()}
    wanted = parse_brokers(args.broker_list)
    security = load_client_security(args.command_config)
    async with ClusterClient(args.bootstrap_server, client_id="kafkarepl-log-dirs", security=security) as client:
        cluster = set(client.brokers)
        missing = wanted - cluster
        if missing:
            raise ValueError(f"ERROR: The given brokers do not exist from --broker-list: {_ids(missing)}. "
                             f"Current existent brokers: {_ids(cluster)}")
        brokers = wanted or cluster
        print("Querying brokers for log directories information")
        by_broker = {}
        for b in sorted(brokers):
            resp = await client.describe_log_dirs(b)
            if resp.get("error_code"):
                code = ErrorCode(resp["error_code"])
                raise KafkaError(f"broker {b}: DescribeLogDirs failed: {code.name}", code)
            by_broker[b] = resp["results"]
        print(f"Received log directory information from brokers {_ids(brokers)}")
        print(format_log_dirs(by_broker, topics))
    return 0


run = admin_command(_run)
