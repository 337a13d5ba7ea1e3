"""Dynamic password configs as stored in ZooKeeper (KIP-226's PasswordEncoder): never the
password itself; decoded with the secret, or the old secret after a change of secret."""

from __future__ import annotations

import pytest

from kafkarepl.server.config import BrokerConfig, ConfigError
from kafkarepl.server.listener_keystores import effective, encode, store_config
from kafkarepl.server.password_encoder import PasswordEncoder


def test_encoded_passwords_round_trip_and_hide_the_password() -> None:
    enc = PasswordEncoder("s3cret")
    stored = enc.encode("keystore-pw")
    assert "keystore-pw" not in stored
    fields = dict(p.split(":", 1) for p in stored.split(","))
    assert fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512"
    assert fields["cipherAlgorithm"] == "AES/CBC/PKCS5Padding"
    assert fields["passwordLength"] == "11" and fields["keyLength"] == "128" and fields["iterations"] == "4096"
    assert enc.decode(stored) == "keystore-pw"
    assert enc.encode("keystore-pw") != stored  # a fresh salt and IV each time


def test_the_old_secret_decodes_and_a_wrong_secret_does_not() -> None:
    stored = PasswordEncoder("first").encode("pw")
    assert PasswordEncoder("second", old_secret="first").decode(stored) == "pw"
    with pytest.raises(ConfigError, match="does not decode"):
        PasswordEncoder("second").decode(stored)
    with pytest.raises(ConfigError, match="not an encoded password"):
        PasswordEncoder("first").decode("pw")


def test_only_listener_store_settings_are_dynamic() -> None:
    assert store_config("listener.name.internal.ssl.keystore.location") == ("internal", "ssl.keystore.location")
    assert store_config("listener.name.sasl_ssl.ssl.key.password") == ("sasl_ssl", "ssl.key.password")
    assert store_config("ssl.keystore.location") is None  # the broker-wide one needs a restart, as Kafka
    assert store_config("listener.name.internal.ssl.truststore.location") == ("internal", "ssl.truststore.location")
    assert store_config("listener.name.internal.ssl.client.auth") is None


def test_stored_passwords_are_encoded_and_decoded_into_the_listeners_config() -> None:
    cfg = BrokerConfig.from_props({"broker.id": "1", "password.encoder.secret": "s3cret"})
    enc = PasswordEncoder.of(cfg)
    new = {"listener.name.external.ssl.keystore.location": "/new.jks",
           "listener.name.external.ssl.keystore.password": "store-pw", "log.retention.ms": "1000"}
    stored = encode(new, enc)
    assert stored["listener.name.external.ssl.keystore.location"] == "/new.jks"
    assert stored["log.retention.ms"] == "1000"
    assert "store-pw" not in stored["listener.name.external.ssl.keystore.password"]
    applied = effective(cfg, stored, enc)
    assert applied.extra["listener.name.external.ssl.keystore.password"] == "store-pw"
    assert applied.extra["listener.name.external.ssl.keystore.location"] == "/new.jks"
    assert "log.retention.ms" not in applied.extra  # only the keystore settings
    with pytest.raises(ConfigError, match="password.encoder.secret is not set"):
        encode(new, PasswordEncoder.of(BrokerConfig.from_props({"broker.id": "1"})))


def test_the_jdk_decodes_ours_and_we_decode_the_jdks() -> None:
    """Kafka's brokers encode with the JDK's PBKDF2 and AES: a value either side writes in
    ZooKeeper, the other reads (tests/java/PasswordCodec.java)."""
    import subprocess

    from tests import java_tools

    cp, main = java_tools.compiled("PasswordCodec", prefixes=())

    def java(*args: str) -> str:
        r = subprocess.run(["java", "-Xshare:auto", "-cp", cp, main, *args], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    enc = PasswordEncoder("shared-secret")
    for password in ("keystore-pw", "p\u00e4ss:w,rd=1", "x" * 40, "\U0001f511 key"):  # a UTF-16 pair too
        assert java("decode", "shared-secret", enc.encode(password)) == password
        assert enc.decode(java("encode", "shared-secret", password)) == password
