"""`kafkarepl transactions`: list and describe transactions, with kafka-transactions.sh's
options (`--list`, `--describe --transactional-id ID`, `describe-producers` is covered by
Kafka's own tool) and table formats."""

from __future__ import annotations

import argparse
import asyncio
import time

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.cli.consumer_groups import _table
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("transactions", help="list and describe transactions")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--list", action="store_true")
    act.add_argument("--describe", action="store_true")
    p.add_argument("--transactional-id", help="with --describe")
    p.set_defaults(func=run)




async def _run(args: argparse.Namespace) -> int:
    async with ClusterClient(args.bootstrap_server, client_id="kafkarepl-transactions") as client:
        if args.list:
            rows = [("TransactionalId", "Coordinator", "ProducerId", "TransactionState")]
            md = await client.metadata()
            for b in sorted(md["brokers"], key=lambda x: x["node_id"]):  # each coordinator lists its own
                resp = await client.send(ApiKey.LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": []},
                                         b["node_id"], 0)
                for t in resp["transaction_states"]:
                    rows.append((t["transactional_id"], str(b["node_id"]), str(t["producer_id"]),
                                 t["transaction_state"]))
            _table(rows)
            return 0
        if not args.transactional_id:
            raise ValueError("--transactional-id is required with --describe")
        tid = args.transactional_id
        coordinator = await _coordinator(client, tid)
        resp = await client.send(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]}, coordinator, 0)
        [t] = resp["transaction_states"]
        if t["error_code"]:
            raise KafkaError(f"transactional id {tid}: {ErrorCode(t['error_code']).name}", ErrorCode(t["error_code"]))
        start = t["transaction_start_time_ms"]
        duration = str(int(time.time() * 1000) - start) if start >= 0 else "None"
        parts = ",".join(f"{x['topic']}-{p}" for x in t["topics"] for p in x["partitions"])
        _table([("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"),
                (str(coordinator), tid, str(t["producer_id"]), str(t["producer_epoch"]), t["transaction_state"],
                 str(t["transaction_timeout_ms"]), str(start) if start >= 0 else "None", duration, parts)])
        return 0


async def _coordinator(client: ClusterClient, tid: str) -> int:
    for _ in range(50):
        resp = await client.send(ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": [tid]}, None, 4)
        [c] = resp["coordinators"]
        if c["error_code"] == 0:
            return int(c["node_id"])
        if c["error_code"] not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            raise KafkaError(f"transactional id {tid}: {ErrorCode(c['error_code']).name}", ErrorCode(c["error_code"]))
        await asyncio.sleep(0.2)
    raise KafkaError(f"transactional id {tid}: no coordinator available", ErrorCode.COORDINATOR_NOT_AVAILABLE)


run = admin_command(_run)
