"""Delegation tokens (KIP-48) with Kafka's own Java clients: the AdminClient creates,
describes, renews and expires tokens as kafka-delegation-tokens.sh does, and the Java
producer logs in with a token (SCRAM, tokenauth=true) on every broker, as its owner for
ACLs; a token cannot ask for tokens; expired tokens are refused and removed; tokens
survive a broker restart."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkarepl.client.connection import BrokerConnection
from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey
from tests import java_tools
from tests.integration.test_acls import acls
from tests.integration.test_sasl import wait_ready

pytestmark = pytest.mark.integration

USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
         'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret" '
         'user_carol="carol-secret";')


def start(cluster_factory, tmp_path: Path):
    """Two brokers, SASL_PLAINTEXT with PLAIN and SCRAM, ACLs on (admin a super user),
    tokens on; topic `t` (RF 2) writable by User:alice only."""
    c = cluster_factory(2, start=False)
    for b in c.brokers.values():
        text = b.config.read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
        text += ("sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
                 f"sasl.mechanism.inter.broker.protocol=PLAIN\nsasl.jaas.config={USERS}\n"
                 "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\nsuper.users=User:admin\n"
                 "delegation.token.secret.key=the-cluster-secret\n"
                 "delegation.token.expiry.check.interval.ms=1000\n")
        b.config.write_text(text)
        b.start()
    wait_ready(c, None, "t", 2)
    r = acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation",
             "Describe", "--topic", "t")
    assert r.returncode == 0, r.stderr
    return c


def props(tmp_path: Path, mechanism: str, jaas: str) -> str:
    path = tmp_path / f"client-{time.monotonic_ns()}.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\nsasl.jaas.config={jaas}\n")
    return str(path)


def user(tmp_path: Path, name: str) -> str:
    return props(tmp_path, "PLAIN", 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                    f'username="{name}" password="{name}-secret";')


def token_login(tmp_path: Path, token_id: str, hmac_b64: str, mechanism: str = "SCRAM-SHA-256") -> str:
    return props(tmp_path, mechanism, 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      f'username="{token_id}" password="{hmac_b64}" tokenauth="true";')


def token(c, client: str, *args: str) -> str:
    return java_tools.run("token", c.bootstrap, client, *args)


def produce_on(c, broker_id: int, client: str) -> str:
    """The Java producer, bootstrapping from one broker only (its first login is there)."""
    return java_tools.run("produce-with", f"127.0.0.1:{c.brokers[broker_id].port}", "t", client)


def test_tokens_with_kafkas_admin_client_and_producer(cluster_factory, tmp_path) -> None:
    c = start(cluster_factory, tmp_path)
    alice, bob, carol, admin = (user(tmp_path, n) for n in ("alice", "bob", "carol", "admin"))

    # alice creates a token bob may renew; the server's defaults: 1 day to expiry, 7 to max
    token_id, mac, owner, requester, issue, expiry, max_ts = token(c, alice, "create", "-1", "-",
                                                                   "User:bob").split()
    assert (owner, requester) == ("User:alice", "User:alice")
    assert int(expiry) - int(issue) == 24 * 3600 * 1000 and int(max_ts) - int(issue) == 7 * 24 * 3600 * 1000

    # its owner's rights, on both brokers (each derived the HMAC's credentials itself)
    with_token = token_login(tmp_path, token_id, mac)
    for b in (1, 2):
        assert produce_on(c, b, with_token).startswith("ok "), b
    assert produce_on(c, 1, token_login(tmp_path, token_id, mac, "SCRAM-SHA-512")).startswith("ok ")
    wrong = produce_on(c, 2, token_login(tmp_path, token_id, mac[:-4] + "AAA="))
    assert wrong.startswith("SaslAuthenticationException"), wrong

    # who sees it: its owner, its renewer's filter, a super user; not carol
    assert token(c, alice, "describe") == f"tokens {token_id}:User:alice:User:bob:{mac}"
    assert token(c, admin, "describe", "User:bob") == f"tokens {token_id}:User:alice:User:bob:{mac}"
    assert token(c, carol, "describe") == "tokens"
    assert token(c, admin, "describe", "User:carol") == "tokens"

    # bob renews it for a minute; carol may not
    before = int(time.time() * 1000)
    renewed = token(c, bob, "renew", mac, "60000")
    assert renewed.startswith("expiry="), renewed
    assert before + 60000 <= int(renewed.split("=")[1]) <= int(time.time() * 1000) + 60000
    assert token(c, carol, "renew", mac, "60000").startswith("DelegationTokenOwnerMismatchException")

    # a token may not ask for tokens (Kafka: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    out = token(c, with_token, "create", "-1")
    assert out.startswith("UnsupportedByAuthenticationException"), out

    # on behalf of another owner (KIP-373): CREATE_TOKENS on that user, which a super user has
    assert token(c, alice, "create", "-1", "User:carol").startswith("DelegationTokenAuthorizationException")
    r = acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "CreateTokens",
             "--user-principal", "User:dave")
    assert r.returncode == 0, r.stderr
    out = token(c, alice, "create", "-1", "User:dave").split()
    assert out[2:4] == ["User:dave", "User:alice"], out
    carol_id, carol_mac, carol_owner, carol_requester, *_ = token(c, admin, "create", "-1", "User:carol").split()
    assert (carol_owner, carol_requester) == ("User:carol", "User:admin")
    out = produce_on(c, 1, token_login(tmp_path, carol_id, carol_mac))  # logged in as carol: no WRITE on t
    assert out.startswith("TopicAuthorizationException"), out

    # tokens live in ZooKeeper: a restarted broker knows them
    c.stop(2)
    c.brokers[2].start()
    deadline = time.monotonic() + 60
    while not (out := produce_on(c, 2, with_token)).startswith("ok "):
        assert time.monotonic() < deadline, out
        time.sleep(0.5)

    # alice expires hers at once: every broker refuses it from then on
    assert token(c, alice, "expire", mac, "-1").startswith("expiry=")
    time.sleep(0.5)  # the other broker's token change notification
    for b in (1, 2):
        out = produce_on(c, b, with_token)
        assert out.startswith("SaslAuthenticationException"), (b, out)
    assert token(c, alice, "renew", mac, "60000").startswith("DelegationTokenNotFoundException")


def produce_native_with(c, client: Path) -> dict[str, int]:
    import pyarrow as pa

    from kafkarepl.spark.native import choose
    from kafkarepl.spark.sink import produce_native

    kafka = {"bootstrap.servers": c.bootstrap, **dict(
        line.split("=", 1) for line in client.read_text().splitlines() if line)}
    assert choose("auto", kafka, sink=True) == "native"  # sasl.jaas.config: librdkafka has no tokenauth
    values = pa.array([f"v{i}".encode() for i in range(100)], pa.binary())
    return produce_native(kafka, "t", [pa.record_batch({"value": values})], 30_000)


def cli(c, client: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkarepl", "delegation-tokens", "--bootstrap-server", c.bootstrap,
                           "--command-config", client, *args], capture_output=True, text=True, timeout=60)


def test_the_cli_and_an_expired_token(cluster_factory, tmp_path) -> None:
    c = start(cluster_factory, tmp_path)
    alice, bob, admin = user(tmp_path, "alice"), user(tmp_path, "bob"), user(tmp_path, "admin")

    # `kafkarepl delegation-tokens`, as kafka-delegation-tokens.sh
    r = cli(c, alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    assert r.returncode == 0, r.stderr
    token_id = r.stdout.split("Created delegation token with tokenId : ")[1].split()[0]
    row = r.stdout.strip().splitlines()[-1].split()
    assert row[0] == token_id and row[2:5] == ["User:alice", "User:alice", "[User:bob]"], r.stdout
    mac = row[1]
    with_token = token_login(tmp_path, token_id, mac)
    assert produce_on(c, 2, with_token).startswith("ok ")
    # kafkarepl's own client logs in with it too: the admin commands' --command-config ...
    r = subprocess.run([sys.executable, "-m", "kafkarepl", "topics", "--bootstrap-server", c.bootstrap,
                        "--command-config", with_token, "--list"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["t"], r.stdout + r.stderr
    # ... and the Spark sink's native plane, given the token as Spark's Kafka connector takes it
    assert produce_native_with(c, Path(with_token)) == {"t": 100}
    r = cli(c, admin, "--describe", "--owner-principal", "User:alice")
    assert "Total number of tokens : 1" in r.stdout and token_id in r.stdout, r.stdout + r.stderr
    r = cli(c, bob, "--renew", "--hmac", mac, "--renew-time-period", "60000")
    assert r.returncode == 0 and "Completed renew operation. New expiry date : " in r.stdout, r.stdout + r.stderr
    r = cli(c, admin, "--renew", "--hmac", mac, "--renew-time-period", "60000")  # neither owner nor renewer
    assert r.returncode == 1 and "DELEGATION_TOKEN_OWNER_MISMATCH" in r.stderr, r.stdout + r.stderr
    r = cli(c, alice, "--expire", "--hmac", mac, "--expiry-time-period", "-1")
    assert r.returncode == 0 and "Completed expire operation" in r.stdout, r.stdout + r.stderr
    assert "Total number of tokens : 0" in cli(c, admin, "--describe").stdout

    # a token whose max lifetime is shorter than the expiry time
    token_id, mac, _, _, issue, expiry, max_ts = token(c, alice, "create", "3000").split()
    assert int(expiry) == int(max_ts) == int(issue) + 3000  # a max lifetime under the expiry time
    with_token = token_login(tmp_path, token_id, mac)
    assert produce_on(c, 1, with_token).startswith("ok ")
    time.sleep(max(0.0, (int(expiry) - time.time() * 1000) / 1000) + 0.2)
    out = produce_on(c, 2, with_token)
    assert out.startswith("SaslAuthenticationException"), out
    deadline = time.monotonic() + 10  # each broker removes expired tokens every second here
    while token_id in token(c, admin, "describe"):
        assert time.monotonic() < deadline, "the expired token was not removed"
        time.sleep(0.5)


def test_token_requests_need_an_authenticated_connection(broker1) -> None:
    """Plaintext connections may not ask (Kafka's allowTokenRequests), whatever the API."""
    port = broker1.brokers[1].port

    async def ask() -> list[int]:
        conn = BrokerConnection("127.0.0.1", port)
        await conn.connect()
        try:
            return [
                (await conn.send(ApiKey.CREATE_DELEGATION_TOKEN, 3, {
                    "owner_principal_type": None, "owner_principal_name": None, "renewers": [],
                    "max_lifetime_ms": -1}))["error_code"],
                (await conn.send(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": b"x" * 64, "renew_period_ms": -1}))[
                    "error_code"],
                (await conn.send(ApiKey.EXPIRE_DELEGATION_TOKEN, 1, {"hmac": b"", "expiry_time_period_ms": -1}))[
                    "error_code"],
                (await conn.send(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}))["error_code"],
            ]
        finally:
            conn.close()

    assert asyncio.run(ask()) == [ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED] * 4
