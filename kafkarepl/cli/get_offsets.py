"""`kafkarepl get-offsets`: partition offsets by time, with kafka-get-offsets.sh's
(GetOffsetShell's) options and output.

    kafkarepl get-offsets --bootstrap-server H:P [--topic REGEX] [--partitions 0,1]
        [--topic-partitions 'REGEX:N,REGEX:N-M,:N-,REGEX:-M'] [--time latest|earliest|
        max-timestamp|-1|-2|-3|TIMESTAMP_MS] [--exclude-internal-topics]

prints `topic:partition:offset`, one line per partition, ordered by "topic-partition" as
text (Kafka's order); a partition with no offset at that time is left out, and one whose
lookup failed is reported on stderr and skipped. No tiered storage here: earliest-local
(-4) is the log start offset and latest-tiered (-5) / earliest-pending-upload (-6) have
no offset, as a Kafka broker without remote storage answers.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.cli.java_errors import java_exception_message
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.coordinator import OFFSETS_TOPIC
from kafkarepl.coordinator.txn_log import TXN_TOPIC
from kafkarepl.errors import ErrorCode

# GetOffsetShell's topic-partition rule: TOPIC_REGEX?(:(N|N?-M?))?
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4,
                "latest-tiered": -5, "earliest-pending-upload": -6}
_TIME_HELP = ("-1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / -5 or "
              "latest-tiered / -6 or earliest-pending-upload")
_NO_REMOTE_OFFSET = (-5, -6)  # tiered-storage lookups: no offset without remote storage
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_TOPIC})  # Metadata v1+ says so itself (is_internal)

PartitionFilter = Callable[[str, int], bool]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("get-offsets", help="partition offsets by time (kafka-get-offsets.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", help="client properties (security.protocol, ssl.*, sasl.*)")
    p.add_argument("--topic", help="the topic (a regular expression); default: every topic")
    p.add_argument("--partitions", help="comma separated partition ids; default: every partition")
    p.add_argument("--topic-partitions", metavar="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3",
                   help="topic regex and partition (N, N-M: M exclusive, N-, -M) rules; "
                        "not with --topic or --partitions")
    p.add_argument("--time", default="latest", help=f"a timestamp in ms, or {_TIME_HELP}")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    p.set_defaults(func=run)


def parse_time(text: str) -> int:
    if text in _NAMED_TIMES:
        return _NAMED_TIMES[text]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"Malformed time argument {text}. Please use {_TIME_HELP}, "
                         "or a specified long format timestamp") from None


def _topic_matcher(regex: str) -> Callable[[str], bool]:
    # Kafka's IncludeList: commas separate alternatives, quotes and spaces are dropped
    pattern = re.compile(regex.strip().replace(",", "|").replace(" ", "").strip("\"'"))
    return lambda topic: pattern.fullmatch(topic) is not None


def topic_partition_filter(topic: str | None, partitions: str | None,
                           topic_partitions: str | None) -> PartitionFilter:
    """The partitions the options select, as GetOffsetShell's filters."""
    if topic_partitions is not None:
        if topic is not None or partitions is not None:
            raise ValueError("--topic-partitions cannot be used with --topic or --partitions")
        rules = [_rule(spec) for spec in topic_partitions.split(",")]
        return lambda t, p: any(r(t, p) for r in rules)
    ids: set[int] = set()
    if partitions:
        try:
            ids = {int(x) for x in partitions.split(",")}
        except ValueError:
            raise ValueError("--partitions expects a comma separated list of numeric partition ids, "
                             f"but received: {partitions}") from None
    topic_ok = _topic_matcher(topic if topic is not None else ".*")
    return lambda t, p: topic_ok(t) and (not ids or p in ids)


def _rule(spec: str) -> PartitionFilter:
    m = _RULE.fullmatch(spec)
    if m is None:
        raise ValueError(f"Invalid rule specification: {spec}")
    topic_re, single, lo, hi = (g or None for g in m.groups())
    topic_ok = _topic_matcher(topic_re or ".*")
    if single is not None:
        n = int(single)
        return lambda t, p: topic_ok(t) and p == n
    low, high = int(lo or 0), int(hi) if hi else 2**31 - 1
    return lambda t, p: topic_ok(t) and low <= p < high


async def _run(args: argparse.Namespace) -> int:
    timestamp = parse_time(args.time)
    selected = topic_partition_filter(args.topic, args.partitions, args.topic_partitions)
    security = load_client_security(args.command_config)
    async with ClusterClient(args.bootstrap_server, client_id="GetOffsetShell", security=security) as client:
        md = await client.metadata()
        tps = [(t["name"], p["partition_index"]) for t in md["topics"] if t["error_code"] == 0
               and not (args.exclude_internal_topics and (t.get("is_internal") or t["name"] in INTERNAL_TOPICS))
               for p in t["partitions"] if selected(t["name"], p["partition_index"])]
        if not tps:
            raise ValueError("Could not match any topic-partitions with the specified filters")
        if timestamp in _NO_REMOTE_OFFSET:
            return 0
        asked = -2 if timestamp == -4 else timestamp  # earliest-local: no remote log, so the log start
        found = await client.list_offsets({tp: asked for tp in tps})
    for (topic, partition), (code, offset) in sorted(found.items(), key=lambda kv: f"{kv[0][0]}-{kv[0][1]}"):
        if code is not ErrorCode.NONE:
            print(f"Skip getting offsets for topic-partition {topic}-{partition} due to error: "
                  f"{java_exception_message(code)}", file=sys.stderr)
        elif offset != -1:
            print(f"{topic}:{partition}:{offset}")
    return 0


run = admin_command(_run)
