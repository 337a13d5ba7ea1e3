"""SASL/OAUTHBEARER with real clients: librdkafka and Kafka's Java producer log in with
unsecured tokens (Kafka's default validator) and with tokens signed by an identity
provider's key, checked against its JWKS (KIP-768); the token's subject is the principal
ACLs see; bad tokens are refused."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from tests import java_tools
from tests.integration.test_acls import JAAS, acls
from tests.integration.test_sasl import conf

pytestmark = pytest.mark.integration
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
SECURED = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def start(cluster_factory, tmp_path: Path, oauth: str):
    """One broker, a SASL_PLAINTEXT listener with OAUTHBEARER and PLAIN (the admin and the
    broker's own connections), ACLs on; topic `t` writable by User:alice only."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    c = cluster_factory(1, start=False)
    b = c.brokers[1]
    text = b.config.read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
    text += ("sasl.enabled.mechanisms=OAUTHBEARER,PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\n"
             f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n"
             "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\nsuper.users=User:admin\n" + oauth)
    b.config.write_text(text)
    b.start()
    admin = AdminClient(conf(c, "admin", "admin-secret"))
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)
            break
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:  # an earlier try's, answered late
                break
            assert time.monotonic() < deadline, f"the SASL broker is not serving: {exc!r}"
            time.sleep(0.3)
        except Exception as exc:  # noqa: BLE001 - starting
            assert time.monotonic() < deadline, f"the SASL broker is not serving: {exc!r}"
            time.sleep(0.3)
    r = acls(c, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation",
             "Describe", "--topic", "t")
    assert r.returncode == 0, r.stderr
    return c


def produce(c, **client) -> tuple[object, list]:
    """One record to `t` with librdkafka over OAUTHBEARER: (delivery error, client errors)."""
    from confluent_kafka import Producer

    results: list = []
    errors: list = []
    p = Producer({"bootstrap.servers": c.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "OAUTHBEARER", "message.timeout.ms": 5000,
                  "error_cb": errors.append, **client})
    p.produce("t", value=b"v", on_delivery=lambda err, _m: results.append(err))
    p.flush(15)
    assert len(results) == 1
    return results[0], errors


def java_produce(c, tmp_path: Path, **props: str) -> str:
    path = tmp_path / f"client-{time.monotonic_ns()}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", **props}.items()))
    return java_tools.run("produce-with", c.bootstrap, "t", str(path))


def auth_failed(errors: list) -> bool:
    from confluent_kafka import KafkaError

    return any(e.code() == KafkaError._AUTHENTICATION for e in errors)


def test_unsecured_tokens_as_kafkas_default_validator(cluster_factory, tmp_path) -> None:
    from confluent_kafka import KafkaError

    c = start(cluster_factory, tmp_path, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="
              f'{OAUTH_MODULE} unsecuredValidatorRequiredScope="kafka";\n')
    unsecure = {"enable.sasl.oauthbearer.unsecure.jwt": True}
    err, errors = produce(c, **unsecure, **{"sasl.oauthbearer.config": "principal=alice scope=kafka"})
    assert err is None, (err, errors)
    # the token's subject is the principal: bob authenticates but may not write
    err, _ = produce(c, **unsecure, **{"sasl.oauthbearer.config": "principal=bob scope=kafka"})
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # without the required scope the login fails (insufficient_scope)
    err, errors = produce(c, **unsecure, **{"sasl.oauthbearer.config": "principal=alice scope=other"})
    assert err is not None and auth_failed(errors), (err, errors)
    # Kafka's Java producer with its unsecured login
    out = java_produce(c, tmp_path, **{"sasl.jaas.config": f'{OAUTH_MODULE} unsecuredLoginStringClaim_sub="alice" '
                                       'unsecuredLoginListClaim_scope=",kafka";'})
    assert out.startswith("ok "), out


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(key, claims: dict, kid: str = "idp-1") -> str:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    head = f"{b64(json.dumps({'alg': 'RS256', 'typ': 'JWT', 'kid': kid}).encode())}.{b64(json.dumps(claims).encode())}"
    return f"{head}.{b64(key.sign(head.encode(), padding.PKCS1v15(), hashes.SHA256()))}"


def test_signed_tokens_checked_against_the_jwks(cluster_factory, tmp_path) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    idp = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rogue = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pub = idp.public_key().public_numbers()
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{"kty": "RSA", "kid": "idp-1", "use": "sig", "alg": "RS256",
                                          "n": b64(pub.n.to_bytes(256, "big")), "e": b64(pub.e.to_bytes(3, "big"))}]}))
    c = start(cluster_factory, tmp_path, (
        f"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class={SECURED}\n"
        f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={OAUTH_MODULE} ;\n"
        f"sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}\n"
        "sasl.oauthbearer.expected.audience=kafka\nsasl.oauthbearer.expected.issuer=https://idp.test\n"))
    now = time.time()
    claims = {"sub": "alice", "iss": "https://idp.test", "aud": "kafka", "iat": int(now), "exp": int(now) + 600,
              "scope": "kafka"}

    def token_cb(token: str):
        return lambda _config: (token, now + 600)

    err, errors = produce(c, oauth_cb=token_cb(sign(idp, claims)))
    assert err is None, (err, errors)
    for bad in (sign(rogue, claims), sign(idp, {**claims, "aud": "billing"}),
                sign(idp, {**claims, "iss": "https://evil"}), sign(idp, {**claims, "exp": int(now) - 120})):
        err, errors = produce(c, oauth_cb=token_cb(bad))
        assert err is not None and auth_failed(errors), (err, errors)
    # Kafka's Java client with KIP-768's login handler, the token from a file
    token_file = tmp_path / "token.jwt"
    token_file.write_text(sign(idp, claims))
    out = java_produce(c, tmp_path, **{
        "sasl.jaas.config": f"{OAUTH_MODULE} ;",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": token_file.as_uri(),
        "sys.org.apache.kafka.sasl.oauthbearer.allowed.urls": token_file.as_uri()})
    assert out.startswith("ok "), out
