"""`kafkarepl delegation-tokens`: create, renew, expire and describe delegation tokens,
with kafka-delegation-tokens.sh's options and output.

    kafkarepl delegation-tokens --bootstrap-server H:P --command-config alice.properties \\
        --create --max-life-time-period -1 [--renewer-principal User:bob] [--owner-principal User:carol]
    kafkarepl delegation-tokens ... --renew --hmac HMAC --renew-time-period -1
    kafkarepl delegation-tokens ... --expire --hmac HMAC --expiry-time-period -1
    kafkarepl delegation-tokens ... --describe [--owner-principal User:alice]
"""

from __future__ import annotations

import argparse
import base64
import binascii
import time

from kafkarepl.cli.admin_command import admin_command
from kafkarepl.client.client_config import load_client_security
from kafkarepl.client.cluster import ClusterClient
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("delegation-tokens", help="create, renew, expire and describe delegation tokens "
                                                        "(kafka-delegation-tokens.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", required=True,
                   help="client properties: a SASL login (security.protocol, sasl.*), as Kafka's tool needs")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--create", action="store_true")
    act.add_argument("--renew", action="store_true")
    act.add_argument("--expire", action="store_true")
    act.add_argument("--describe", action="store_true")
    p.add_argument("--max-life-time-period", type=int, help="with --create, ms; -1: the server's maximum")
    p.add_argument("--renewer-principal", action="append", default=[], help="with --create: User:<name>")
    p.add_argument("--owner-principal", action="append", default=[],
                   help="with --create: the owner (KIP-373); with --describe: owners to list")
    p.add_argument("--hmac", help="with --renew / --expire: the token's HMAC (base64)")
    p.add_argument("--renew-time-period", type=int, help="with --renew, ms; -1: the server's expiry time")
    p.add_argument("--expiry-time-period", type=int, help="with --expire, ms; -1: at once")
    p.set_defaults(func=run)


def _principal(text: str) -> dict[str, str]:
    ptype, sep, name = text.partition(":")
    if not sep or not ptype or not name:
        raise ValueError(f"{text!r} is not a principal (Type:name, e.g. User:alice)")
    return {"principal_type": ptype, "principal_name": name}


def _date(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def _check(resp: dict, what: str) -> None:
    if resp["error_code"]:
        code = ErrorCode(resp["error_code"])
        raise KafkaError(f"{what} failed: {code.name}", code)


def _print_tokens(tokens: list[dict]) -> None:
    print(f"\n{'TOKENID':<15} {'HMAC':<30} {'OWNER':<15} {'REQUESTER':<15} {'RENEWERS':<25} {'ISSUEDATE':<15} "
          f"{'EXPIRYDATE':<15} {'MAXDATE':<15}")
    for t in tokens:
        renewers = "[" + ", ".join(f"{r['principal_type']}:{r['principal_name']}" for r in t["renewers"]) + "]"
        print(f"{t['token_id']:<15} {base64.b64encode(t['hmac']).decode():<30} "
              f"{t['principal_type']}:{t['principal_name']:<15} "
              f"{t['token_requester_principal_type']}:{t['token_requester_principal_name']:<15} {renewers:<25} "
              f"{_date(t['issue_timestamp']):<15} {_date(t['expiry_timestamp']):<15} {_date(t['max_timestamp']):<15}")


async def _run(args: argparse.Namespace) -> int:
    security = load_client_security(args.command_config)
    async with ClusterClient(args.bootstrap_server, client_id="kafkarepl-delegation-tokens",
                             security=security) as client:
        if args.create:
            if args.max_life_time_period is None:
                raise ValueError("--max-life-time-period is required with --create")
            if len(args.owner_principal) > 1:
                raise ValueError("--create takes one --owner-principal at most")
            renewers = [_principal(r) for r in args.renewer_principal]
            owner = _principal(args.owner_principal[0]) if args.owner_principal else None
            print(f"Calling create token operation with renewers :{args.renewer_principal} , "
                  f"max-life-time-period :{args.max_life_time_period}")
            resp = await client.send(ApiKey.CREATE_DELEGATION_TOKEN, {
                "owner_principal_type": owner and owner["principal_type"],
                "owner_principal_name": owner and owner["principal_name"],
                "renewers": renewers, "max_lifetime_ms": args.max_life_time_period}, None, 3)
            _check(resp, "Create token")
            print(f"Created delegation token with tokenId : {resp['token_id']}")
            _print_tokens([{**resp, "issue_timestamp": resp["issue_timestamp_ms"],
                            "expiry_timestamp": resp["expiry_timestamp_ms"],
                            "max_timestamp": resp["max_timestamp_ms"], "renewers": renewers}])
            return 0
        if args.renew or args.expire:
            period = args.renew_time_period if args.renew else args.expiry_time_period
            option = "renew-time-period" if args.renew else "expiry-time-period"
            if not args.hmac or period is None:
                raise ValueError(f"--hmac and --{option} are required")
            try:
                mac = base64.b64decode(args.hmac, validate=True)
            except binascii.Error:
                raise ValueError("--hmac is not base64") from None
            op = "renew" if args.renew else "expire"
            print(f"Calling {op} token operation with hmac :{args.hmac} , {option} :{period}")
            if args.renew:
                resp = await client.send(ApiKey.RENEW_DELEGATION_TOKEN, {"hmac": mac, "renew_period_ms": period},
                                         None, 2)
            else:
                resp = await client.send(ApiKey.EXPIRE_DELEGATION_TOKEN, {"hmac": mac, "expiry_time_period_ms": period},
                                         None, 2)
            _check(resp, f"{op.capitalize()} token")
            print(f"Completed {op} operation. New expiry date : {_date(resp['expiry_timestamp_ms'])}")
            return 0
        owners = [_principal(o) for o in args.owner_principal] or None
        print(f"Calling describe token operation for owners :{args.owner_principal}")
        resp = await client.send(ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": owners}, None, 3)
        _check(resp, "Describe token")
        print(f"Total number of tokens : {len(resp['tokens'])}")
        _print_tokens(resp["tokens"])
        return 0


run = admin_command(_run)
