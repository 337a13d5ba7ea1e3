"""SASL/OAUTHBEARER validation (server/oauthbearer.py): Kafka's unsecured validator and
KIP-768's JWKS validator, over tokens signed here with real keys, and RFC 7628's error
exchange through the connection's SaslAuthenticator."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

from kafkarepl.errors import ErrorCode
from kafkarepl.server.config import jaas_options
from kafkarepl.server.oauthbearer import (
    Jwks,
    JwksValidator,
    OAuthBearerExchange,
    TokenError,
    UnsecuredValidator,
    parse_client_response,
)
from kafkarepl.server.sasl import SaslAuthenticator

NOW = 1_700_000_000


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured(claims: dict) -> str:
    return f"{b64(json.dumps({'alg': 'none'}).encode())}.{b64(json.dumps(claims).encode())}."


def signed(claims: dict, key, alg: str = "RS256", kid: str | None = "k1") -> str:
    header = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {})}
    head = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}".encode()
    if alg.startswith("RS"):
        sig = key.sign(head, padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = utils.decode_dss_signature(key.sign(head, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{head.decode()}.{b64(sig)}"


def jwk(key, kid: str) -> dict:
    pub = key.public_key().public_numbers()
    if isinstance(key, rsa.RSAPrivateKey):
        return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                "n": b64(pub.n.to_bytes((pub.n.bit_length() + 7) // 8, "big")), "e": b64(pub.e.to_bytes(3, "big"))}
    return {"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(pub.x.to_bytes(32, "big")),
            "y": b64(pub.y.to_bytes(32, "big"))}


def message(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_file(tmp_path: Path) -> Path:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk(RSA_KEY, "k1"), jwk(EC_KEY, "e1"), {"kty": "oct", "k": "x"}]}))
    return path


def test_client_response_parsing() -> None:
    assert parse_client_response(b"n,,\x01auth=Bearer abc\x01ext=1\x01\x01") == ("abc", {"ext": "1"})
    assert parse_client_response(b"n,a=alice,\x01auth=bearer  t.x.y \x01\x01")[0] == "t.x.y"
    for bad in (b"", b"n,,auth=Bearer x", b"y,,\x01auth=Bearer x\x01\x01", b"n,,\x01auth=Basic x\x01\x01",
                b"n,,\x01auth=Bearer \x01\x01", b"n,,\x01novalue\x01\x01", b"n,,\x01auth=Bearer x\x01auth=B y\x01\x01"):
        with pytest.raises(TokenError):
            parse_client_response(bad)


def test_unsecured_validator_claims() -> None:
    v = UnsecuredValidator.from_options(jaas_options('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                                     'unsecuredValidatorRequiredScope="write read" '
                                     'unsecuredValidatorAllowableClockSkewMs="1000";'))
    assert v.required_scope == {"write", "read"} and v.skew_ms == 1000
    ok = {"sub": "alice", "exp": NOW + 60, "iat": NOW, "scope": "read write admin"}
    assert v.validate(unsecured(ok), NOW * 1000).principal == "alice"
    assert v.validate(unsecured({**ok, "scope": ["read", "write"]}), NOW * 1000).expires_ms == (NOW + 60) * 1000
    cases = {
        "expired": {**ok, "exp": NOW - 2},
        "issued in the future": {**ok, "iat": NOW + 5},
        "no subject": {k: v for k, v in ok.items() if k != "sub"},
        "empty subject": {**ok, "sub": " "},
        "no exp": {k: v for k, v in ok.items() if k != "exp"},
        "exp not a number": {**ok, "exp": "soon"},
        "missing scope": {**ok, "scope": "read"},
    }
    for name, claims in cases.items():
        with pytest.raises(TokenError):
            v.validate(unsecured(claims), NOW * 1000)
            pytest.fail(name)
    with pytest.raises(TokenError) as e:
        v.validate(unsecured({**ok, "scope": "read"}), NOW * 1000)
    assert json.loads(e.value.challenge()) == {"status": "insufficient_scope", "scope": "read write"}
    assert v.validate(unsecured({**ok, "exp": NOW - 0.5}), NOW * 1000).principal == "alice"  # within the skew
    with pytest.raises(TokenError):  # a signed token is not unsecured
        v.validate(signed(ok, RSA_KEY), NOW * 1000)
    with pytest.raises(TokenError):
        v.validate("a.b", NOW * 1000)
    with pytest.raises(TokenError):
        v.validate(f"{b64(b'{not json')}.{b64(b'{}')}.", NOW * 1000)


def test_jwks_validator(jwks_file: Path) -> None:
    jwks = Jwks(jwks_file.as_uri())
    jwks.load()
    v = JwksValidator(jwks, issuer="https://idp", audience=frozenset({"kafka"}))
    ok = {"sub": "svc", "exp": NOW + 60, "iss": "https://idp", "aud": ["other", "kafka"]}
    now = NOW * 1000
    assert v.validate(signed(ok, RSA_KEY), now).principal == "svc"
    assert v.validate(signed(ok, EC_KEY, "ES256", "e1"), now).principal == "svc"
    for token in (signed(ok, OTHER_KEY),  # not a key of the set
                  signed(ok, RSA_KEY, kid="unknown"),
                  signed({**ok, "iss": "https://evil"}, RSA_KEY),
                  signed({**ok, "aud": "billing"}, RSA_KEY),
                  signed({**ok, "exp": NOW - 31}, RSA_KEY),  # past the 30 s skew
                  unsecured(ok),  # alg none
                  signed(ok, RSA_KEY)[:-4] + "AAAA"):  # a changed signature
        with pytest.raises(TokenError):
            v.validate(token, now)
    assert v.validate(signed({**ok, "exp": NOW - 29}, RSA_KEY), now).principal == "svc"


def test_jwks_unknown_key_triggers_a_reload_off_the_caller() -> None:
    loads: list[str] = []
    sets = [{"keys": []}, {"keys": [jwk(RSA_KEY, "k1")]}]

    def fetch(url: str) -> bytes:
        loads.append(url)
        return json.dumps(sets[min(len(loads) - 1, 1)]).encode()

    jwks = Jwks("https://idp/keys", fetch=fetch)
    jwks.load()
    assert jwks.keys_for("k1") == []  # not there yet: a reload starts on its own thread
    deadline = time.monotonic() + 5
    while not jwks.keys_for("k1"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(loads) == 2
    assert jwks.keys_for("nope") == [] and len(loads) == 2  # asked again within 10 s: no reload


def test_sasl_exchange_ok_then_error_status_then_failure() -> None:
    v = UnsecuredValidator()
    clock = lambda: NOW  # noqa: E731
    auth = SaslAuthenticator(["OAUTHBEARER"], {}, lambda m, u: None, 3_600_000,
                             OAuthBearerExchange(v, clock))
    assert auth.handshake("OAUTHBEARER")["error_code"] == 0
    body = auth.authenticate(message(unsecured({"sub": "alice", "exp": NOW + 60})))
    assert body["error_code"] == 0 and auth.principal == "User:alice"
    assert body["session_lifetime_ms"] == 60_000  # the token expires before connections.max.reauth.ms

    bad = SaslAuthenticator(["OAUTHBEARER"], {}, lambda m, u: None, 0, OAuthBearerExchange(v, clock))
    bad.handshake("OAUTHBEARER")
    first = bad.authenticate(message(unsecured({"sub": "alice", "exp": NOW - 60})))
    assert first["error_code"] == 0 and json.loads(first["auth_bytes"]) == {"status": "invalid_token"}
    assert not bad.complete and not bad.failed
    second = bad.authenticate(b"\x01")
    assert second["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and bad.failed
    assert "expired" in second["error_message"]

    garbage = SaslAuthenticator(["OAUTHBEARER"], {}, lambda m, u: None, 0, OAuthBearerExchange(v, clock))
    garbage.handshake("OAUTHBEARER")
    assert garbage.authenticate(b"\xff" * 10)["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    huge = SaslAuthenticator(["OAUTHBEARER"], {}, lambda m, u: None, 0, OAuthBearerExchange(v, clock))
    huge.handshake("OAUTHBEARER")
    assert huge.authenticate(message("x" * 100_000))["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_hostile_tokens_are_refused_not_raised() -> None:
    """Whatever a client sends is an answer: nesting bombs, huge or non-finite numbers,
    wrong types, bad base64."""
    v = UnsecuredValidator()
    ok = {"sub": "alice", "exp": NOW + 60}
    head = b64(json.dumps({"alg": "none"}).encode())
    tokens = [
        f"{head}.{b64(b'[' * 40_000)}.",
        f"{b64(b'{' * 20_000)}.{b64(json.dumps(ok).encode())}.",
        unsecured({**ok, "exp": 1e400}),
        head + "." + b64(b'{"sub": "a", "exp": NaN}') + ".",
        unsecured({**ok, "exp": 10**30}),
        unsecured({**ok, "sub": 7}),
        unsecured({**ok, "scope": {"a": 1}}),
        unsecured({**ok, "iat": "yesterday"}),
        f"{head}.@@@.",
        f"{head}.{b64(b'[1, 2]')}.",
    ]
    for token in tokens:
        auth = SaslAuthenticator(["OAUTHBEARER"], {}, lambda m, u: None, 0,
                                 OAuthBearerExchange(v, lambda: NOW))
        auth.handshake("OAUTHBEARER")
        first = auth.authenticate(message(token))
        assert not auth.complete, token[:80]
        if first["error_code"] == 0:  # the RFC 7628 error status, then the failure
            assert json.loads(first["auth_bytes"])["status"] == "invalid_token"
            assert auth.authenticate(b"\x01")["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
