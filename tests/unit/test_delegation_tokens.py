"""Delegation tokens' rules (lifetimes, who may renew, Kafka's znode format) and the SCRAM
login with tokenauth=true; the APIs' answers before any token is touched."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac

import pytest

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey, Request
from kafkarepl.server.delegation_tokens import (
    CachedToken,
    DelegationTokenApis,
    DelegationTokenCache,
    Requester,
    TokenInfo,
    TokenPolicy,
    check_token,
    scram_credentials,
    token_hmac,
)
from kafkarepl.server.sasl import SaslAuthenticator

DAY, WEEK = 24 * 3600 * 1000, 7 * 24 * 3600 * 1000
POLICY = TokenPolicy(WEEK, DAY)


def test_lifetimes_as_kafka() -> None:
    t = POLICY.new_token("User:a", "User:a", (), -1, 1000)
    assert (t.issue_ms, t.expiry_ms, t.max_ms) == (1000, 1000 + DAY, 1000 + WEEK)
    assert POLICY.new_token("User:a", "User:a", (), 5000, 0).max_ms == 5000  # under the max: as asked
    assert POLICY.new_token("User:a", "User:a", (), 10 * WEEK, 0).max_ms == WEEK  # capped
    short = POLICY.new_token("User:a", "User:a", (), 5000, 0)
    assert short.expiry_ms == 5000  # never past its max
    assert POLICY.renewed_expiry(t, -1, 2000) == 2000 + DAY  # -1: the server's expiry time
    assert POLICY.renewed_expiry(t, 60_000, 2000) == 62_000
    assert POLICY.renewed_expiry(t, 100 * WEEK, 2000) == t.max_ms
    assert len({POLICY.new_token("User:a", "User:a", (), -1, 0).token_id for _ in range(100)}) == 100


def test_who_may_renew_or_expire() -> None:
    t = TokenInfo("id", "User:carol", "User:admin", ("User:bob",), 0, 10_000, 5_000)
    for p in ("User:carol", "User:admin", "User:bob"):
        assert check_token(t, p, 1_000) is ErrorCode.NONE
    assert check_token(t, "User:eve", 1_000) is ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert check_token(t, "User:bob", 5_001) is ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_znode_as_kafkas() -> None:
    t = TokenInfo("tok", "User:alice@EXAMPLE.COM", "User:ad min", ("User:b/c",), 1, 3, 2)
    z = t.to_znode()
    assert z == {"version": 3, "owner": "User%3Aalice%40EXAMPLE.COM", "tokenRequester": "User%3Aad%20min",
                 "renewers": ["User%3Ab%2Fc"], "issueTimestamp": 1, "maxTimestamp": 3, "expiryTimestamp": 2,
                 "tokenId": "tok"}
    assert TokenInfo.from_znode("tok", z) == t
    # Kafka before KIP-373 wrote no token requester: the owner created it
    old = {k: v for k, v in z.items() if k != "tokenRequester"}
    assert TokenInfo.from_znode("tok", old).requester == "User:alice@EXAMPLE.COM"


def test_hmac_is_hmac_sha512_of_the_id_under_the_secret() -> None:
    assert token_hmac("s3cret", "abc") == hmac.new(b"s3cret", b"abc", hashlib.sha512).digest()
    assert token_hmac("s3cret", "abc") != token_hmac("other", "abc")


def _scram_login(a: SaslAuthenticator, mech: str, user: str, password: str, extensions: str) -> dict:
    h = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mech]
    assert a.handshake(mech)["error_code"] == 0
    first_bare = f"n={user},r=cnonce{extensions}"
    r = a.authenticate(f"n,,{first_bare}".encode())
    if r["error_code"]:
        return r
    server_first = r["auth_bytes"].decode()
    attrs = dict(x.split("=", 1) for x in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    sig = hmac.new(hashlib.new(h, client_key).digest(), f"{first_bare},{server_first},{without_proof}".encode(),
                   h).digest()
    proof = base64.b64encode(bytes(x ^ y for x, y in zip(client_key, sig, strict=True))).decode()
    return a.authenticate(f"{without_proof},p={proof}".encode())


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_logs_in_as_its_owner_until_it_expires(mech: str) -> None:
    mac = token_hmac("secret", "tok1")
    password = base64.b64encode(mac).decode()
    cache = DelegationTokenCache()
    cache.put(CachedToken(TokenInfo("tok1", "User:alice", "User:alice", (), 0, 20_000, 10_000), mac,
                          scram_credentials(password)))
    now = [5_000]

    def authenticator(reauth_ms: int = 0) -> SaslAuthenticator:
        return SaslAuthenticator([mech], {}, lambda m, u: None, reauth_ms,
                                 tokens=lambda m, t: cache.login(m, t, now[0]), clock_ms=lambda: now[0])

    a = authenticator(reauth_ms=60_000)
    assert _scram_login(a, mech, "tok1", password, ",tokenauth=true")["error_code"] == 0
    assert (a.principal, a.token_authenticated) == ("User:alice", True)
    assert a.session_lifetime_ms == 5_000  # KIP-368: the session ends with the token
    # a wrong password; the token id as a user name without the extension; an unknown token
    for user, pw, ext in (("tok1", "nope", ",tokenauth=true"), ("tok1", password, ""),
                          ("tok2", password, ",tokenauth=true")):
        b = authenticator()
        assert _scram_login(b, mech, user, pw, ext)["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert not b.complete
    now[0] = 10_001  # past its expiry
    assert _scram_login(authenticator(), mech, "tok1", password, ",tokenauth=true")["error_code"] == \
        ErrorCode.SASL_AUTHENTICATION_FAILED
    # a user logging in normally is not token-authenticated
    users = SaslAuthenticator([mech], {}, lambda m, u: scram_credentials("pw")[m] if u == "bob" else None)
    assert _scram_login(users, mech, "bob", "pw", "")["error_code"] == 0
    assert (users.principal, users.token_authenticated) == ("User:bob", False)


def _ask(apis: DelegationTokenApis, key: ApiKey, body: dict, who: Requester) -> dict:
    fn = {ApiKey.CREATE_DELEGATION_TOKEN: apis.create, ApiKey.RENEW_DELEGATION_TOKEN: apis.renew,
          ApiKey.EXPIRE_DELEGATION_TOKEN: apis.expire, ApiKey.DESCRIBE_DELEGATION_TOKEN: apis.describe}[key]
    return asyncio.run(fn(Request(key, 3, 1, "c", body, 0), who))


CREATE = {"owner_principal_type": None, "owner_principal_name": None, "max_lifetime_ms": -1,
          "renewers": [{"principal_type": "User", "principal_name": "bob"}]}


@pytest.mark.parametrize("secret", ["", "s"])
def test_refusals_in_kafkas_order(secret: str) -> None:
    """Answered before any store is touched: not allowed on this connection, then the
    owner's authorization, renewers' principal type, then tokens being off."""
    denied_users: set[str] = {"User:carol"}
    apis = DelegationTokenApis(None, None, DelegationTokenCache(), secret, POLICY,  # type: ignore[arg-type]
                               lambda op, rtype, name: name not in denied_users)
    alice, by_token = Requester("User:alice", True), Requester("User:alice", False)
    for key, body in ((ApiKey.CREATE_DELEGATION_TOKEN, CREATE),
                      (ApiKey.RENEW_DELEGATION_TOKEN, {"hmac": b"x", "renew_period_ms": -1}),
                      (ApiKey.EXPIRE_DELEGATION_TOKEN, {"hmac": b"x", "expiry_time_period_ms": -1}),
                      (ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": None})):
        assert _ask(apis, key, body, by_token)["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        if key != ApiKey.CREATE_DELEGATION_TOKEN:  # (a create would store a token)
            r = _ask(apis, key, body, alice)
            assert r["error_code"] == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED if not secret
                                       else ErrorCode.DELEGATION_TOKEN_NOT_FOUND if key != ApiKey.DESCRIBE_DELEGATION_TOKEN
                                       else ErrorCode.NONE)
    for_carol = {**CREATE, "owner_principal_type": "User", "owner_principal_name": "carol"}
    r = _ask(apis, ApiKey.CREATE_DELEGATION_TOKEN, for_carol, alice)
    assert r["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert (r["principal_name"], r["token_requester_principal_name"]) == ("carol", "alice")
    group_renewer = {**CREATE, "renewers": [{"principal_type": "Group", "principal_name": "ops"}]}
    assert _ask(apis, ApiKey.CREATE_DELEGATION_TOKEN, group_renewer, alice)["error_code"] == \
        ErrorCode.INVALID_PRINCIPAL_TYPE
    if not secret:
        assert _ask(apis, ApiKey.CREATE_DELEGATION_TOKEN, CREATE, alice)["error_code"] == \
            ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_hostile_sizes_are_answered_without_touching_the_store() -> None:
    """A token whose znode would pass ZooKeeper's request limit (jute.maxbuffer) is refused
    (INVALID_REQUEST) before it is written; a describe of a million owners is one set."""
    apis = DelegationTokenApis(None, None, DelegationTokenCache(), "s", POLICY,  # type: ignore[arg-type]
                               lambda op, rtype, name: True)
    alice = Requester("User:alice", True)
    many = {**CREATE, "renewers": [{"principal_type": "User", "principal_name": f"u{i:07d}"} for i in range(40_000)]}
    assert _ask(apis, ApiKey.CREATE_DELEGATION_TOKEN, many, alice)["error_code"] == ErrorCode.INVALID_REQUEST
    apis.cache.put(CachedToken(TokenInfo("t", "User:bob", "User:bob", ("User:alice",), 0, 9, 9), b"h", {}))
    owners = [{"principal_type": "User", "principal_name": f"x{i}"} for i in range(1_000_000)]
    r = _ask(apis, ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": owners}, alice)
    assert (r["error_code"], r["tokens"]) == (0, [])
    owners.append({"principal_type": "User", "principal_name": "alice"})  # a renewer's filter
    assert [t["token_id"] for t in _ask(apis, ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": owners}, alice)["tokens"]] \
        == ["t"]


def test_kafkarepls_client_logs_in_with_a_token() -> None:
    """The client side (admin commands, the Spark sink's native plane) against the server's
    authenticator: tokenauth="true" in a Java-style JAAS config sends the extension."""
    from kafkarepl.client.client_config import sasl_security
    from kafkarepl.client.security import sasl_login
    from kafkarepl.spark.native import NativeConfig

    mac = token_hmac("secret", "tok1")
    password = base64.b64encode(mac).decode()
    cache = DelegationTokenCache()
    cache.put(CachedToken(TokenInfo("tok1", "User:alice", "User:alice", (), 0, 2**62, 2**62), mac,
                          scram_credentials(password)))
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="tok1" password="{password}" tokenauth="true";')
    from_props = sasl_security(None, "scram-sha-512", jaas)
    from_spark = NativeConfig.of({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}, "c").security()
    assert from_props == from_spark and from_props.token_auth and from_props.sasl_username == "tok1"

    for sec, principal in ((from_props, "User:alice"), (None, None)):
        server = SaslAuthenticator(["SCRAM-SHA-512"], {}, lambda m, u: None,
                                   tokens=lambda m, t: cache.login(m, t, 0))

        async def send(key: ApiKey, version: int, body: dict, server: SaslAuthenticator = server) -> dict:
            if key == ApiKey.SASL_HANDSHAKE:
                return server.handshake(body["mechanism"])
            return server.authenticate(body["auth_bytes"])

        login = sec or sasl_security(None, "SCRAM-SHA-512", jaas.replace(' tokenauth="true"', ""))
        if principal is None:  # without the extension the token id is no user
            with pytest.raises(Exception, match="invalid credentials"):
                asyncio.run(sasl_login(send, login))
        else:
            asyncio.run(sasl_login(send, login))
            assert (server.principal, server.token_authenticated) == (principal, True)
