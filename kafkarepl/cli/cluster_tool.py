"""`kafkarepl cluster cluster-id|unregister`: kafka-cluster.sh (ClusterTool).

`kafka-cluster.sh cluster-id -b H:P` becomes `kafkarepl cluster cluster-id -b H:P`: the
two ClusterTool sub-commands sit beside the local-cluster actions of `kafkarepl cluster`
(up, status, down, ...), whose names they do not share.

    kafkarepl cluster cluster-id --bootstrap-server H:P [--config FILE]
        prints `Cluster ID: <id>` (DescribeCluster)
    kafkarepl cluster unregister --bootstrap-server H:P --id N [--config FILE]
        KRaft only. A ZooKeeper-mode cluster (kafkarepl is one) does not offer the
        UnregisterBroker API, so this prints Kafka's answer for such a cluster, `The
        target cluster does not support the broker unregistration API.`, and exits 0 as
        kafka-cluster.sh does. A stopped kafkarepl broker leaves /brokers/ids by itself.

`--config` (Kafka's name; `--command-config` as the other kafkarepl tools) is a client
properties file: security.protocol, ssl.*, sasl.*, and bootstrap.servers when
--bootstrap-server is not given.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.client.client_config import load_client_security, read_properties
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode, KafkaError

UNREGISTER_BROKER = 64  # UnregisterBroker's API key (KRaft controllers and brokers only)
NO_UNREGISTER = "The target cluster does not support the broker unregistration API."
UNREGISTER_HELP = ("Unregister a broker. KRaft only: a ZooKeeper-mode cluster such as kafkarepl has no "
                   "UnregisterBroker API and answers: " + NO_UNREGISTER)


def add_actions(sub: argparse._SubParsersAction) -> None:
    """Adds ClusterTool's sub-commands to `kafkarepl cluster`."""
    cid = sub.add_parser("cluster-id", help="Get information about the ID of a cluster. (kafka-cluster.sh)",
                         description="Get information about the ID of a cluster.")
    unreg = sub.add_parser("unregister", help=UNREGISTER_HELP + " (kafka-cluster.sh)", description=UNREGISTER_HELP)
    for p, func in ((cid, run_cluster_id), (unreg, run_unregister)):
        p.add_argument("--bootstrap-server", "-b",
                       help="A list of host/port pairs to use for establishing the connection to the kafka cluster.")
        p.add_argument("--config", "-c", "--command-config", dest="config",
                       help="A property file containing configs to passed to AdminClient.")
        p.set_defaults(func=_terse(func))
    unreg.add_argument("--id", "-i", type=int, required=True, help="The ID of the broker to unregister.")


def _terse(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def check(args: argparse.Namespace) -> int:
        if args.bootstrap_server is None and args.config:
            args.bootstrap_server = read_properties(args.config).get("bootstrap.servers")
        if not args.bootstrap_server:
            print("Please specify --bootstrap-server.", file=sys.stderr)  # a TerseException
            return 1
        return run(args)

    return check


def cluster_id_text(cluster_id: str | None) -> str:
    if cluster_id is None:
        return "No cluster ID found. The Kafka version is probably too old."
    return f"Cluster ID: {cluster_id}"


async def _cluster_id(args: argparse.Namespace) -> int:
    async with ClusterClient(args.bootstrap_server, client_id="adminclient-1",
                             security=load_client_security(args.config)) as client:
        resp = await client.describe_cluster()
    if resp["error_code"]:
        raise KafkaError(resp.get("error_message") or "", ErrorCode(resp["error_code"]))
    print(cluster_id_text(resp.get("cluster_id")))
    return 0


async def _unregister(args: argparse.Namespace) -> int:
    async with ClusterClient(args.bootstrap_server, client_id="adminclient-1",
                             security=load_client_security(args.config)) as client:
        conn = await client.connection()
        if UNREGISTER_BROKER not in conn.api_versions:  # the Admin client's UnsupportedVersionException
            print(NO_UNREGISTER)
            return 0
    raise ValueError(f"{args.bootstrap_server} offers UnregisterBroker (a KRaft cluster): kafkarepl does not "
                     f"implement that API; use Kafka's kafka-cluster.sh unregister --id {args.id}")


run_cluster_id = admin_command(_cluster_id)
run_unregister = admin_command(_unregister)
