"""`kafkarepl configs`: describe and alter topic, broker, user and client-id configs, with
kafka-configs.sh's options and output.

    kafkarepl configs --bootstrap-server H:P [--command-config client.properties] \\
        --entity-type topics --entity-name orders --alter --add-config retention.ms=60000
    kafkarepl configs ... --entity-type brokers --entity-default --describe [--all]
    kafkarepl configs ... --entity-type users --entity-name alice --entity-type clients --entity-name app \\
        --alter --add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152'
    kafkarepl configs ... --entity-type users --entity-name alice \\
        --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'

Topics and brokers go through DescribeConfigs / IncrementalAlterConfigs, client quotas
through DescribeClientQuotas / AlterClientQuotas, SCRAM credentials through
AlterUserScramCredentials / DescribeUserScramCredentials (the password is salted and
hashed here; only the salted form leaves this process).
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
from decimal import Decimal
from typing import Any

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey

TYPES = {"topics": "topic", "brokers": "broker", "users": "user", "clients": "client-id", "ips": "ip"}
RESOURCE_TYPES = {"topics": 2, "brokers": 4}
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
SCRAM = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
SCRAM_NAMES = {v[0]: k for k, v in SCRAM.items()}
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's
EVERY = "\x00every"  # an entity type given without a name: describe each (no real name has a NUL)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("configs", help="describe and alter topic, broker, user and client configs "
                                              "(kafka-configs.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", help="client properties (security.protocol, ssl.*, sasl.*)")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--describe", action="store_true")
    act.add_argument("--alter", action="store_true")
    p.add_argument("--entity-type", action="append", default=[], choices=sorted(TYPES))
    # names and defaults pair with the entity types in command-line order, as Kafka's tool
    p.add_argument("--entity-name", action="append", dest="entity_names", default=[])
    p.add_argument("--entity-default", action="append_const", const=None, dest="entity_names")
    for flag, etype in (("--topic", "topics"), ("--broker", "brokers"), ("--user", "users"), ("--client", "clients"),
                        ("--ip", "ips")):
        p.add_argument(flag, action="append", dest="shorthand", default=[], type=lambda v, t=etype: (t, v),
                       metavar="NAME", help=f"--entity-type {etype} --entity-name NAME")
    for flag, etype in (("--broker-defaults", "brokers"), ("--user-defaults", "users"),
                        ("--client-defaults", "clients"), ("--ip-defaults", "ips")):
        p.add_argument(flag, action="append_const", dest="shorthand", const=(etype, None),
                       help=f"--entity-type {etype} --entity-default")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only the dynamic ones")
    p.add_argument("--add-config", default="", help="k1=v1,k2=[v1,v2,v2],k3=v3")
    p.add_argument("--delete-config", default="", help="k1,k2")
    p.set_defaults(func=run)




def entities(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default), in command-line order."""
    names = list(args.entity_names or [])
    if len(names) > len(args.entity_type):
        raise ValueError("each --entity-name / --entity-default needs an --entity-type before it")
    if len(names) < len(args.entity_type) and (args.alter or args.entity_type[len(names):] != args.entity_type[-1:]):
        raise ValueError("--entity-name or --entity-default is required for each --entity-type"
                         " (only the last one may be left out, with --describe)")
    out: list[tuple[str, str | None]] = list(zip(args.entity_type, names, strict=False))
    if len(names) < len(args.entity_type):
        out.append((args.entity_type[-1], EVERY))  # describe every entity of the type
    out += list(args.shorthand or [])
    if not out:
        raise ValueError("name an entity: --entity-type with --entity-name/--entity-default, or --topic, --broker, "
                         "--user, --client, --ip")
    kinds = {t for t, _ in out}
    if len(out) > 1 and not (kinds <= {"users", "clients"} and len(kinds) == len(out)):
        raise ValueError("only a user and a client id may be combined, each at most once")
    return out


def parse_configs(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: k=v pairs split on commas outside [...]; a
    bracketed value keeps its commas (a list)."""
    out: dict[str, str] = {}
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    for part in parts:
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"invalid config {part!r}: expected key=value")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def java_double(v: float) -> str:
    """A double as Java prints it (Kafka's tool prints quotas so: 1024.0, 2.0E7)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(float(v))
    sign, digits, exp = Decimal(repr(float(v))).as_tuple()
    assert isinstance(exp, int)
    shortest = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{shortest[0]}.{shortest[1:] or '0'}E{len(digits) - 1 + exp}"


def _check(code: int, message: str | None) -> None:
    if code:
        raise KafkaError(message or ErrorCode(code).name, ErrorCode(code))


async def _run(args: argparse.Namespace) -> int:
    ents = entities(args)
    add = parse_configs(args.add_config) if args.alter else {}
    delete = [k.strip() for k in args.delete_config.split(",") if k.strip()] if args.alter else []
    if args.alter and not add and not delete:
        raise ValueError("--alter needs --add-config or --delete-config")
    security = load_client_security(args.command_config)
    async with ClusterClient(args.bootstrap_server, client_id="kafkarepl-configs", security=security) as client:
        await client.metadata([])
        etype = ents[0][0]
        if etype in RESOURCE_TYPES:
            name = ents[0][1]
            if args.alter:
                await _alter_resource(client, etype, name, add, delete)
            else:
                await _describe_resources(client, etype, name, args.all)
        elif args.alter:
            await _alter_client(client, ents, add, delete)
        else:
            await _describe_clients(client, ents)
    return 0


def _resource_name(etype: str, name: str | None) -> str:
    if etype == "brokers" and name is not None and not name.isdigit():
        raise ValueError(f"a broker entity name must be a broker id, not {name!r}")
    return name or ""


async def _alter_resource(client: ClusterClient, etype: str, name: str | None, add: dict[str, str],
                          delete: list[str]) -> None:
    if name is None and etype == "topics":
        raise ValueError("topics have no default entity: use --entity-type brokers --entity-default")
    rname = _resource_name(etype, name)
    ops = ([{"name": k, "config_operation": 0, "value": v} for k, v in add.items()]
           + [{"name": k, "config_operation": 1, "value": None} for k in delete])
    body = {"resources": [{"resource_type": RESOURCE_TYPES[etype], "resource_name": rname, "configs": ops}],
            "validate_only": False}
    # A broker's own configs go to that broker; the rest to any.
    node = int(rname) if etype == "brokers" and rname else None
    resp = await client.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, body, node)
    r = resp["responses"][0]
    _check(r["error_code"], r["error_message"])
    if etype == "brokers" and name is None:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {TYPES[etype]} {rname}.")


async def _describe_resources(client: ClusterClient, etype: str, name: str | None, describe_all: bool) -> None:
    if name == EVERY:  # every topic / every broker, then the brokers' default
        if etype == "topics":
            meta = await client.metadata(None)
            names: list[str | None] = sorted(t["name"] for t in meta["topics"] if not t["is_internal"])
        else:
            meta = await client.metadata([])
            names = [str(b["node_id"]) for b in sorted(meta["brokers"], key=lambda b: b["node_id"])] + [None]
    else:
        names = [name]
    for n in names:
        rname = _resource_name(etype, n)
        node = int(rname) if etype == "brokers" and rname else None
        resp = await client.send(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": RESOURCE_TYPES[etype], "resource_name": rname,
                           "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}, node)
        r = resp["results"][0]
        _check(r["error_code"], r["error_message"])
        if etype == "brokers" and not rname:
            wanted = None if describe_all else 3
            print("Default configs for brokers in the cluster are:")
        else:
            wanted = None if describe_all else (1 if etype == "topics" else 2)
            print(f"{'All' if describe_all else 'Dynamic'} configs for {TYPES[etype]} {rname} are:")
        for c in sorted(r["configs"], key=lambda c: c["name"]):
            if wanted is not None and c["config_source"] != wanted:
                continue
            synonyms = ", ".join(f"{SOURCES.get(s['source'], s['source'])}:{s['name']}={s['value']}"
                                 for s in c.get("synonyms") or [])
            value = "null" if c["value"] is None else c["value"]
            print(f"  {c['name']}={value} sensitive={str(c['is_sensitive']).lower()} synonyms={{{synonyms}}}")


def _scram_change(user: str, mechanism: str, value: str) -> dict[str, Any]:
    fields = parse_configs(value)
    unknown = set(fields) - {"iterations", "password"}
    if unknown or "password" not in fields:
        raise ValueError(f"{mechanism} takes [iterations=N,password=P] (password required)")
    iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    mech_id, digest = SCRAM[mechanism]
    salt = secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(digest, fields["password"].encode(), salt, iterations)
    return {"name": user, "mechanism": mech_id, "iterations": iterations, "salt": salt, "salted_password": salted}


async def _alter_client(client: ClusterClient, ents: list[tuple[str, str | None]], add: dict[str, str],
                        delete: list[str]) -> None:
    scram_add = {k: v for k, v in add.items() if k in SCRAM}
    scram_delete = [k for k in delete if k in SCRAM]
    quota_add = {k: v for k, v in add.items() if k not in SCRAM}
    quota_delete = [k for k in delete if k not in SCRAM]
    if scram_add or scram_delete:
        if len(ents) != 1 or ents[0][0] != "users" or ents[0][1] is None:
            raise ValueError("SCRAM credentials are set for one named user only (--entity-type users --entity-name U)")
        user = ents[0][1]
        resp = await client.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {
            "upsertions": [_scram_change(user, m, v) for m, v in scram_add.items()],
            "deletions": [{"name": user, "mechanism": SCRAM[m][0]} for m in scram_delete]})
        for r in resp["results"]:
            _check(r["error_code"], r["error_message"])
    if quota_add or quota_delete:
        ops = []
        for k, v in quota_add.items():
            try:
                ops.append({"key": k, "value": float(v), "remove": False})
            except ValueError:
                raise ValueError(f"{k}: {v!r} is not a number") from None
        ops += [{"key": k, "value": 0.0, "remove": True} for k in quota_delete]
        entity = [{"entity_type": TYPES[t], "entity_name": n} for t, n in ents]
        resp = await client.send(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{"entity": entity, "ops": ops}],
                                                              "validate_only": False})
        for r in resp["entries"]:
            _check(r["error_code"], r["error_message"])
    etype, name = ents[0]  # Kafka's tool names the first entity only
    if name is None:
        print(f"Completed updating default config for {etype} in the cluster.")
    else:
        print(f"Completed updating config for {etype[:-1]} {name}.")


def _describe_entity(entity: list[dict[str, Any]]) -> str:
    parts = []
    for e in sorted(entity, key=lambda e: e["entity_type"] != "user"):  # the user first, as Kafka's tool
        kind = "user-principal" if e["entity_type"] == "user" else e["entity_type"]
        parts.append(f"the default {kind}" if e["entity_name"] is None else f"{kind} '{e['entity_name']}'")
    return ", ".join(parts)


async def _describe_clients(client: ClusterClient, ents: list[tuple[str, str | None]]) -> None:
    components = [{"entity_type": TYPES[t], "match_type": 2 if n == EVERY else (1 if n is None else 0),
                   "match": None if n in (EVERY, None) else n} for t, n in ents]
    resp = await client.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": True})
    _check(resp["error_code"], resp["error_message"])
    entries = resp["entries"] or []
    exact = all(n != EVERY for _, n in ents)
    if exact and not entries:  # Kafka's tool names the entity even when it has no quotas
        entries = [{"entity": [{"entity_type": TYPES[t], "entity_name": n} for t, n in ents], "values": []}]
    for e in sorted(entries, key=lambda e: _describe_entity(e["entity"])):
        values = ", ".join(f"{v['key']}={java_double(v['value'])}" for v in e["values"])
        print(f"Quota configs for {_describe_entity(e['entity'])} are {values}".rstrip())
    if len(ents) == 1 and ents[0][0] == "users" and ents[0][1] is not None:
        users = None if ents[0][1] == EVERY else [{"name": ents[0][1]}]
        resp = await client.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": users})
        for r in resp["results"]:
            if r["error_code"] == 0 and r["credential_infos"]:
                creds = ", ".join(f"{SCRAM_NAMES[c['mechanism']]}=iterations={c['iterations']}"
                                  for c in r["credential_infos"])
                print(f"SCRAM credential configs for user-principal '{r['user']}' are {creds}")


run = admin_command(_run)
