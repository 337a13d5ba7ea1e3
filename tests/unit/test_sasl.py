"""SASL server logic (server/sasl.py) against the client side (client/security.py)."""

from __future__ import annotations

import asyncio

import pytest

from kafkarepl.client.security import ClientSecurity, sasl_login
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey
from kafkarepl.server.sasl import SaslAuthenticator, ScramCredential, parse_jaas_users

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a-pw" user_bob="b pw";'


def login(auth: SaslAuthenticator, mech: str, user: str, password: str) -> None:
    async def send(key, _version, body):
        if key == ApiKey.SASL_HANDSHAKE:
            return auth.handshake(body["mechanism"])
        return auth.authenticate(body["auth_bytes"])

    asyncio.run(sasl_login(send, ClientSecurity(None, mech, user, password)))


def test_plain_users_from_jaas() -> None:
    users = parse_jaas_users(JAAS)
    assert users == {"alice": "a-pw", "bob": "b pw"}
    a = SaslAuthenticator(["PLAIN"], users, lambda m, u: None)
    login(a, "PLAIN", "bob", "b pw")
    assert a.principal == "User:bob"
    bad = SaslAuthenticator(["PLAIN"], users, lambda m, u: None)
    with pytest.raises(KafkaError) as e:
        login(bad, "PLAIN", "alice", "nope")
    assert e.value.code is ErrorCode.SASL_AUTHENTICATION_FAILED and bad.failed and not bad.complete


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_and_a_wrong_password(mech: str) -> None:
    creds = {"carol": ScramCredential.from_password(mech, "c-pw", 4096)}
    stored = {"carol": ScramCredential.decode(creds["carol"].encode())}  # ZooKeeper round trip

    def lookup(m: str, u: str) -> ScramCredential | None:
        return stored.get(u) if m == mech else None

    a = SaslAuthenticator(["PLAIN", mech], {}, lookup)
    login(a, mech, "carol", "c-pw")  # the client also checks the server's signature
    assert a.principal == "User:carol"
    for user, pw in (("carol", "wrong"), ("nobody", "c-pw")):
        b = SaslAuthenticator([mech], {}, lookup)
        with pytest.raises(KafkaError):
            login(b, mech, user, pw)
        assert b.failed and not b.complete


def test_unsupported_mechanism_and_out_of_order_steps() -> None:
    a = SaslAuthenticator(["PLAIN"], {}, lambda m, u: None)
    assert a.handshake("GSSAPI")["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert a.authenticate(b"x")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
    b = SaslAuthenticator(["SCRAM-SHA-256"], {}, lambda m, u: None)
    b.handshake("SCRAM-SHA-256")
    assert b.authenticate(b"garbage")["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED


def _client_final(mech: str, password: str, cred_salt: str, iterations: int, first_bare: str, server_first: str,
                  nonce_sent: str) -> bytes:
    import base64
    import hashlib
    import hmac

    h = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mech]
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(cred_salt), iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored_key = hashlib.new(h, client_key).digest()
    without_proof = f"c=biws,r={nonce_sent}"
    signature = hmac.new(stored_key, f"{first_bare},{server_first},{without_proof}".encode(), h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    return f"{without_proof},p={proof}".encode()


@pytest.mark.parametrize("form, ok", [("rfc", True), ("librdkafka<2.6.1", True), ("other", False)])
def test_scram_nonce_forms(form: str, ok: bool) -> None:
    """RFC 5802's client-final echoes the server nonce; librdkafka before 2.6.1 puts its
    own nonce in front once more (accepted, as Kafka 3.8.1-3.9); anything else is refused."""
    mech = "SCRAM-SHA-256"
    cred = ScramCredential.from_password(mech, "pw", 4096)
    a = SaslAuthenticator([mech], {}, lambda m, u: cred)
    assert a.handshake(mech)["error_code"] == 0
    first_bare = "n=dave,r=clientnonce"
    server_first = a.authenticate(f"n,,{first_bare}".encode())["auth_bytes"].decode()
    attrs = dict(x.split("=", 1) for x in server_first.split(","))
    sent = {"rfc": attrs["r"], "librdkafka<2.6.1": "clientnonce" + attrs["r"], "other": attrs["r"] + "x"}[form]
    resp = a.authenticate(_client_final(mech, "pw", attrs["s"], int(attrs["i"]), first_bare, server_first, sent))
    assert (resp["error_code"] == 0) is ok and a.complete is ok
