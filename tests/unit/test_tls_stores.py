"""Keystores and truststores as Kafka operators make them: JKS and PKCS12 stores made by
the JDK's own `keytool` load into Python's ssl and serve a real TLS handshake; wrong
passwords, wrong types and corrupt stores are refused with a StoreError, never anything
else."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkarepl.tls_stores import (
    SslSettings,
    StoreError,
    load_keystore,
    load_truststore,
    read_jks_keystore,
    read_jks_truststore,
)


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    """keytool-made stores: a JKS keystore with an EC key under its own key password, a
    PKCS12 keystore with an RSA key, and truststores of both kinds holding each one's
    certificate."""
    keytool = shutil.which("keytool")
    if keytool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("keytool (the JDK's) is not installed")
        pytest.skip("keytool (the JDK's) is not installed")
    d = tmp_path_factory.mktemp("stores")

    def kt(*args: str) -> None:
        subprocess.run([keytool, *args], cwd=d, check=True, capture_output=True, timeout=120)

    kt("-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=jks-broker",
       "-ext", "SAN=ip:127.0.0.1", "-validity", "2", "-storetype", "JKS", "-keystore", "ks.jks",
       "-storepass", "store-pw", "-keypass", "key-pw")
    kt("-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=p12-broker",
       "-ext", "SAN=ip:127.0.0.1", "-validity", "2", "-storetype", "PKCS12", "-keystore", "ks.p12",
       "-storepass", "p12-pw")
    kt("-exportcert", "-alias", "broker", "-keystore", "ks.jks", "-storepass", "store-pw", "-file", "jks.der")
    kt("-exportcert", "-alias", "broker", "-keystore", "ks.p12", "-storepass", "p12-pw", "-file", "p12.der")
    for kind, name in (("JKS", "ts.jks"), ("PKCS12", "ts.p12")):
        for alias, cert in (("a", "jks.der"), ("b", "p12.der")):
            kt("-importcert", "-noprompt", "-alias", alias, "-file", cert, "-storetype", kind, "-keystore", name,
               "-storepass", "trust-pw")
    return d


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> dict:
    """A TLS handshake between the two over a socket pair; the server's certificate as
    the client verified it."""
    a, b = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with server.wrap_socket(a, server_side=True) as s:
                s.sendall(b"ok")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=serve)
    t.start()
    with client.wrap_socket(b, server_hostname="127.0.0.1") as c:
        assert c.recv(2) == b"ok"
        peer = c.getpeercert()
    t.join(10)
    assert not errors, errors
    return peer


def subject_cn(peer: dict) -> str:
    return next(v for rdn in peer["subject"] for k, v in rdn if k == "commonName")


def contexts(d: Path, keystore: SslSettings, truststore: SslSettings) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    assert load_keystore(server, keystore)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    assert load_truststore(client, truststore)
    return server, client


@pytest.mark.parametrize("truststore", ["ts.jks", "ts.p12"])
def test_a_jks_keystore_with_its_own_key_password_serves_tls(stores: Path, truststore: str) -> None:
    server, client = contexts(
        stores, SslSettings(keystore_location=str(stores / "ks.jks"), keystore_password="store-pw",
                            key_password="key-pw"),
        SslSettings(truststore_location=str(stores / truststore), truststore_password="trust-pw"))
    assert subject_cn(handshake(server, client)) == "jks-broker"


@pytest.mark.parametrize("truststore", ["ts.jks", "ts.p12"])
def test_a_pkcs12_keystore_serves_tls(stores: Path, truststore: str) -> None:
    server, client = contexts(
        stores, SslSettings(keystore_type="PKCS12", keystore_location=str(stores / "ks.p12"),
                            keystore_password="p12-pw"),
        SslSettings(truststore_location=str(stores / truststore), truststore_password="trust-pw"))
    assert subject_cn(handshake(server, client)) == "p12-broker"


def test_a_truststore_without_the_certificate_fails_the_handshake(stores: Path, tmp_path: Path) -> None:
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "x", "-file", str(stores / "p12.der"),
                    "-storetype", "JKS", "-keystore", str(tmp_path / "only-p12.jks"), "-storepass", "pw1234"],
                   check=True, capture_output=True, timeout=120)
    server, client = contexts(
        stores, SslSettings(keystore_location=str(stores / "ks.jks"), keystore_password="store-pw",
                            key_password="key-pw"),
        SslSettings(truststore_location=str(tmp_path / "only-p12.jks")))  # no password: digest unchecked, as Java
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client)


def test_the_key_password_defaults_to_the_store_password(stores: Path) -> None:
    with pytest.raises(StoreError, match="private key's password is wrong"):
        load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER),
                      SslSettings(keystore_location=str(stores / "ks.jks"), keystore_password="store-pw"))


@pytest.mark.parametrize("settings_, message", [
    (dict(keystore_location="ks.jks", keystore_password="wrong", key_password="key-pw"), "password is wrong"),
    (dict(keystore_location="ks.p12", keystore_password="wrong"), "wrong password"),
    (dict(keystore_type="PEM", keystore_location="ks.jks"), "is not a PEM store"),
    (dict(keystore_type="PKCS12", keystore_location="ks.jks"), "is not a PKCS12 store"),
    (dict(keystore_type="JCEKS", keystore_location="ks.jks"), "not supported"),
    (dict(keystore_location="missing.jks"), "No such file"),
    (dict(keystore_location="/dev/zero"), "not a regular file"),
    (dict(keystore_location="ts.jks", keystore_password="trust-pw"), "holds no private key"),
])
def test_bad_keystores_are_refused_with_a_reason(stores: Path, settings_: dict, message: str) -> None:
    s = SslSettings(**{k: str(stores / v) if k.endswith("location") else v for k, v in settings_.items()})
    with pytest.raises(StoreError, match=message):
        load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), s)


def test_a_pem_store_takes_no_store_password(tmp_path: Path) -> None:
    from kafkarepl.tls_certs import make_ca, make_cert

    ca, key, cert = make_ca(tmp_path)
    pem = make_cert(tmp_path, "pem-broker", key, cert)
    with pytest.raises(StoreError, match="ssl.keystore.password cannot be set"):
        load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER),
                      SslSettings(keystore_location=str(pem), keystore_password="x"))
    server, client = contexts(tmp_path, SslSettings(keystore_location=str(pem)),  # read as PEM: no type set
                              SslSettings(truststore_location=str(ca)))
    assert subject_cn(handshake(server, client)) == "pem-broker"


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_damaged_jks_store_is_refused_or_read_never_crashes(stores: Path, data) -> None:
    """Any truncation or byte change: with the password, refused (the digest); without
    it, read or refused; never an exception other than StoreError."""
    for name, read in (("ks.jks", lambda b, pw: read_jks_keystore(b, pw, "key-pw")),
                       ("ts.jks", read_jks_truststore)):
        good = (stores / name).read_bytes()
        pw = "store-pw" if name == "ks.jks" else "trust-pw"
        cut = data.draw(st.integers(0, len(good) - 1))
        with pytest.raises(StoreError):
            read(good[:cut], pw)
        at = data.draw(st.integers(0, len(good) - 1))
        flip = data.draw(st.integers(1, 255))
        bad = good[:at] + bytes([good[at] ^ flip]) + good[at + 1:]
        with pytest.raises(StoreError):
            read(bad, pw)
        try:
            read(bad, "")
        except StoreError:
            pass


def test_a_command_config_with_keytool_stores(stores: Path, tmp_path: Path) -> None:
    """Kafka tools' client.properties (`--command-config`): a JKS truststore and a PKCS12
    keystore, as keytool makes them."""
    from kafkarepl.client.client_config import load_client_security

    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={stores / 'ts.jks'}\n"
                     "ssl.truststore.password=trust-pw\nssl.keystore.type=PKCS12\n"
                     f"ssl.keystore.location={stores / 'ks.p12'}\nssl.keystore.password=p12-pw\n")
    security = load_client_security(str(props))
    assert security is not None and security.ssl_context is not None
    assert security.ssl_context.cert_store_stats()["x509"] == 2
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_keystore(server, SslSettings(keystore_location=str(stores / "ks.jks"), keystore_password="store-pw",
                                      key_password="key-pw"))
    assert subject_cn(handshake(server, security.ssl_context)) == "jks-broker"
    props.write_text(props.read_text().replace("trust-pw", "wrong"))
    with pytest.raises(StoreError, match="password is wrong"):
        load_client_security(str(props))


def test_a_pem_keystore_with_bag_attributes_is_pem(tmp_path: Path) -> None:
    """`openssl pkcs12 -nodes` writes "Bag Attributes" lines before each PEM block, which
    OpenSSL skips: such a file is a PEM store, whether the type is set or read."""
    from kafkarepl.tls_certs import make_ca, make_cert

    ca, key, cert = make_ca(tmp_path)
    pem = make_cert(tmp_path, "bagged", key, cert)
    bagged = tmp_path / "bagged-attrs.pem"
    bagged.write_bytes(b"Bag Attributes\n    friendlyName: broker\n" + pem.read_bytes())
    for kind in ("", "PEM"):
        server, client = contexts(tmp_path, SslSettings(keystore_type=kind, keystore_location=str(bagged)),
                                  SslSettings(truststore_location=str(ca)))
        assert subject_cn(handshake(server, client)) == "bagged"
