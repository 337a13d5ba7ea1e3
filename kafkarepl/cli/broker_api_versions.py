"""`kafkarepl broker-api-versions`: every broker's API versions, as
kafka-broker-api-versions.sh (BrokerApiVersionsCommand) prints them.

    kafkarepl broker-api-versions --bootstrap-server H:P [--command-config FILE] [--version]

For each broker of the cluster's metadata it connects, takes the broker's ApiVersions
answer and prints Kafka's NodeApiVersions.toString(true) after the broker's Node:

    127.0.0.1:9092 (id: 1 rack: null isFenced: false) -> (
    <TAB>Produce(0): 3 to 9 [usable: 9],
    ...
    <TAB>UpdateFeatures(57): UNSUPPORTED
    )

"The client" is kafkarepl's: `usable` is the lower of the broker's highest version and
kafkarepl's declared one, and UNSUPPORTED lists the APIs kafkarepl knows (its ApiKey
enum, in key order) that the broker does not advertise. A broker that cannot be reached
prints `<node> -> ERROR: <exception>` as Kafka's does. The Node text is Kafka 4.x's
(KIP-1073's `isFenced`, false for a broker the metadata lists; 3.x printed none). Brokers
come in the order Kafka's tool prints them: the iteration order of a Java HashMap keyed by
Node.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import kafkarepl
from kafkarepl.cli.admin_command import admin_command
from kafkarepl.cli.java_errors import java_exception_class, java_exception_message
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.client.connection import BrokerConnectionError, RequestTimeoutError
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol.api import API
from kafkarepl.protocol.schema import ApiKey

REQUEST_TIMEOUT = 5.0  # the tool's DEFAULT_REQUEST_TIMEOUT_MS
# What the Java tool prints for a broker it could not reach or that closed the connection
# (ConsumerNetworkClient raises DisconnectException, which has no message).
DISCONNECTED = "org.apache.kafka.common.errors.DisconnectException"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("broker-api-versions",
                              help="every broker's supported API versions (kafka-broker-api-versions.sh)",
                              description="This tool helps to retrieve broker version information.")
    p.add_argument("--bootstrap-server", required=True, metavar="server(s) to use for bootstrapping",
                   help="REQUIRED: The server to connect to.")
    p.add_argument("--command-config", metavar="command config property file",
                   help="A property file containing configs to be passed to Admin Client "
                        "(security.protocol, ssl.*, sasl.*).")
    p.add_argument("--version", action="version", version=kafkarepl.__version__, help="Display Kafka version.")
    p.set_defaults(func=run)


# --------------------------------------------------------------- formatting (pure) ---
def api_name(key: int) -> str | None:
    """Kafka's ApiKeys name of a key kafkarepl knows (None for an unknown key)."""
    spec = API.get(key)
    if spec is not None:
        return spec.name
    try:
        return "".join(w.capitalize() for w in ApiKey(key).name.split("_"))
    except ValueError:
        return None


def _range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo} to {hi}"


def _api_text(key: int, lo: int, hi: int) -> str:
    name = api_name(key)
    if name is None:
        return f"UNKNOWN({key}): {_range_text(lo, hi)}"
    text = f"{name}({key}): {_range_text(lo, hi)}"
    ours = API.get(key)
    if ours is None:  # known by name only (no declared versions): nothing is usable to say
        return text
    if ours.max_version < lo:
        return text + " [unusable: node too new]"
    if hi < ours.min_version:
        return text + " [unusable: node too old]"
    return text + f" [usable: {min(ours.max_version, hi)}]"


def node_api_versions_text(broker: Mapping[int, tuple[int, int]], line_breaks: bool = True) -> str:
    """NodeApiVersions.toString(lineBreaks) for the broker's (min, max) per API key: every
    advertised API and every API kafkarepl knows but the broker lacks, by key."""
    texts = {key: _api_text(key, lo, hi) for key, (lo, hi) in broker.items()}
    for key in ApiKey:
        texts.setdefault(int(key), f"{api_name(key)}({int(key)}): UNSUPPORTED")
    body = (",\n\t" if line_breaks else ", ").join(texts[k] for k in sorted(texts))
    return f"(\n\t{body}\n)" if line_breaks else f"({body})"


def node_text(host: str, port: int, node_id: int, rack: str | None) -> str:
    """Kafka 4.x's Node.toString() (a listed broker is not fenced)."""
    return f"{host}:{port} (id: {node_id} rack: {'null' if rack is None else rack} isFenced: false)"


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def java_string_hash(s: str) -> int:
    """String.hashCode(): over UTF-16 code units, in 32-bit arithmetic."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = _int32(31 * h + (data[i] << 8 | data[i + 1]))
    return h


def node_hash(host: str, port: int, node_id: int, rack: str | None) -> int:
    """Kafka 4.x's Node.hashCode() (isFenced false: Boolean.hashCode 1237)."""
    h = _int32(31 + java_string_hash(host))
    h = _int32(31 * h + node_id)
    h = _int32(31 * h + port)
    h = _int32(31 * h + (0 if rack is None else java_string_hash(rack)))
    return _int32(31 * h + 1237)


def java_hashmap_order(hashes: Sequence[int]) -> list[int]:
    """The iteration order (indexes into `hashes`) of a java.util.HashMap whose distinct
    keys with these hashCodes were put in this order: buckets by spread hash, and a bucket
    in insertion order; the table doubles past 3/4 full, or when a bucket passes 8 entries
    while it is below 64 (a bucket that big in a larger table turns into a tree: not
    modelled, it takes more than 48 brokers)."""
    size, count = 16, 0
    buckets: list[list[int]] = [[] for _ in range(size)]

    def spread(h: int) -> int:
        u = h & 0xFFFFFFFF
        return u ^ (u >> 16)

    def resize() -> None:
        nonlocal size, buckets
        size *= 2
        grown: list[list[int]] = [[] for _ in range(size)]
        for bucket in buckets:  # a split keeps each bucket's order
            for i in bucket:
                grown[spread(hashes[i]) & (size - 1)].append(i)
        buckets = grown

    for i, h in enumerate(hashes):
        bucket = buckets[spread(h) & (size - 1)]
        bucket.append(i)
        if len(bucket) >= 9 and size < 64:
            resize()
        count += 1
        if count > size * 3 // 4:
            resize()
    return [i for bucket in buckets for i in bucket]


def brokers_in_kafka_order(brokers: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Metadata brokers in the order BrokerApiVersionsCommand prints them."""
    listed = list(brokers)
    hashes = [node_hash(b["host"], b["port"], b["node_id"], b.get("rack")) for b in listed]
    return [listed[i] for i in java_hashmap_order(hashes)]


def error_text(exc: BaseException) -> str:
    """ExecutionException.getMessage() of the failed ApiVersions: the cause's toString()."""
    if isinstance(exc, (BrokerConnectionError, RequestTimeoutError)) or not isinstance(exc, KafkaError):
        return DISCONNECTED  # refused, reset, timed out: NetworkClient reports a disconnect
    if exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED:  # the broker's own message
        return f"{java_exception_class(exc.code)}: {exc}"
    return java_exception_message(exc.code)


# ----------------------------------------------------------------------- command ---
async def _probe(client: ClusterClient, node_id: int) -> str:
    try:
        conn = await client.connection(node_id)  # connecting sends ApiVersions
        if not conn.api_versions:
            raise KafkaError("no ApiVersions answer")
        return node_api_versions_text(conn.api_versions)
    except (KafkaError, OSError, asyncio.TimeoutError) as exc:
        return "ERROR: " + error_text(exc)


async def _run(args: argparse.Namespace) -> int:
    security = load_client_security(args.command_config)
    async with ClusterClient(args.bootstrap_server, client_id="admin-1", security=security,
                             request_timeout=REQUEST_TIMEOUT, connect_timeout=REQUEST_TIMEOUT) as client:
        md = await client.metadata()
        while not md["brokers"]:  # awaitBrokers()
            await asyncio.sleep(0.05)
            md = await client.metadata()
        brokers = brokers_in_kafka_order(md["brokers"])
        answers = await asyncio.gather(*(_probe(client, b["node_id"]) for b in brokers))
    for b, answer in zip(brokers, answers, strict=True):
        print(f"{node_text(b['host'], b['port'], b['node_id'], b.get('rack'))} -> {answer}")
    return 0


run = admin_command(_run)
