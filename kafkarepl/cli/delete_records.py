"""`kafkarepl delete-records`: delete the records of partitions below an offset, with
kafka-delete-records.sh's options, JSON file and output.

    kafkarepl delete-records --bootstrap-server H:P --offset-json-file F [--command-config F]

F: {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}; offset
-1 is the high watermark (everything readable). Prints "Executing records delete
operation", "Records delete operation completed:" and per partition
"partition: foo-1<TAB>low_watermark: 1" or "partition: foo-1<TAB>error: <exception>".
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.cli.java_errors import java_exception_message
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("delete-records", help="delete partitions' records below an offset "
                                                     "(kafka-delete-records.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", help="client properties (security.protocol, ssl.*, sasl.*)")
    p.add_argument("--offset-json-file", required=True,
                   help='{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}')
    p.set_defaults(func=run)


def parse_offsets(text: str) -> dict[tuple[str, int], int]:
    """The offset per partition of the JSON document, as DeleteRecordsCommand reads it
    (a partition named twice is an error; version 1 is the only one)."""
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError("The input string is not a valid JSON") from None
    if not isinstance(doc, dict):
        raise ValueError("The input string is not a valid JSON object")
    version = doc.get("version", 1)
    if version != 1:
        raise ValueError(f"Not supported version field value {version}")
    if "partitions" not in doc:
        raise ValueError("Missing partitions field")
    out: dict[tuple[str, int], int] = {}
    duplicates: list[str] = []
    for entry in doc["partitions"] or []:
        try:
            topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        except (KeyError, TypeError):
            raise ValueError(f"Each partition needs topic, partition and offset: {entry}") from None
        if not (isinstance(topic, str) and type(partition) is int and type(offset) is int):
            raise ValueError(f"Each partition needs a string topic and integer partition and offset: {entry}")
        if (topic, partition) in out:
            duplicates.append(f"{topic}-{partition}")
        out[(topic, partition)] = offset
    if duplicates:
        raise ValueError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return out


async def _run(args: argparse.Namespace) -> int:
    with open(args.offset_json_file, encoding="utf-8") as f:
        offsets = parse_offsets(f.read())
    security = load_client_security(args.command_config)
    print("Executing records delete operation")
    async with ClusterClient(args.bootstrap_server, client_id="kafkarepl-delete-records",
                             security=security) as client:
        results = await client.delete_records(offsets)
    print("Records delete operation completed:")
    for (topic, partition), (code, low_watermark) in results.items():
        if code is ErrorCode.NONE:
            print(f"partition: {topic}-{partition}\tlow_watermark: {low_watermark}")
        else:
            print(f"partition: {topic}-{partition}\terror: {java_exception_message(code)}")
    return 0


run = admin_command(_run)
