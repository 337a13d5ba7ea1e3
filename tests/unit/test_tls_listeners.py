"""Each listener's TLS context from its own settings: `listener.name.<listener>.ssl.*`
over the broker's ssl.* (KIP-103), and ssl.client.auth on SASL_SSL listeners only when
listener-prefixed (KIP-684)."""

from __future__ import annotations

import os
import ssl
from types import SimpleNamespace

import pytest

from kafkarepl.server.config import BrokerConfig, ConfigError
from kafkarepl.server.tls import client_context, listener_props, server_context
from kafkarepl.tls_certs import make_ca, make_cert


@pytest.fixture
def pems(tmp_path):
    ca, key, cert = make_ca(tmp_path)
    (tmp_path / "again").mkdir()
    return {"ca": str(ca), "public": str(make_cert(tmp_path, "public", key, cert)),
            "public2": str(make_cert(tmp_path / "again", "public", key, cert)),  # same name, another key
            "internal": str(make_cert(tmp_path, "internal", key, cert))}


def config(pems, **extra: str) -> BrokerConfig:
    return BrokerConfig.from_props({
        "broker.id": "1",
        "listeners": "EXTERNAL://127.0.0.1:9094,INTERNAL://127.0.0.1:9093,SASL://127.0.0.1:9095",
        "listener.security.protocol.map": "EXTERNAL:SSL,INTERNAL:SSL,SASL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": pems["public"], "ssl.truststore.location": pems["ca"],
        **extra})


def test_a_listener_prefixed_setting_wins_for_that_listener_only(pems) -> None:
    cfg = config(pems, **{"listener.name.internal.ssl.keystore.location": pems["internal"],
                          "listener.name.internal.ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/,DEFAULT"})
    assert listener_props(cfg, "INTERNAL")["ssl.keystore.location"] == pems["internal"]
    assert listener_props(cfg, "EXTERNAL")["ssl.keystore.location"] == pems["public"]
    assert listener_props(cfg)["ssl.principal.mapping.rules"].startswith("RULE:")  # the inter-broker one
    assert listener_props(cfg, "SASL")["ssl.principal.mapping.rules"] == "DEFAULT"
    # unset store types are left for the files' bytes to tell; set ones are kept
    assert listener_props(cfg, "EXTERNAL")["ssl.keystore.type"] == ""
    assert listener_props(config(pems, **{"ssl.truststore.type": "PEM"}), "EXTERNAL")["ssl.truststore.type"] == "PEM"


def test_client_auth_per_listener_and_kip_684(pems) -> None:
    cfg = config(pems, **{"ssl.client.auth": "required", "listener.name.external.ssl.client.auth": "none"})
    assert server_context(cfg, "INTERNAL", "SSL").verify_mode == ssl.CERT_REQUIRED
    assert server_context(cfg, "EXTERNAL", "SSL").verify_mode == ssl.CERT_NONE
    assert server_context(cfg, "SASL", "SASL_SSL").verify_mode == ssl.CERT_NONE  # broker-wide: not for SASL_SSL
    cfg = config(pems, **{"listener.name.sasl.ssl.client.auth": "requested"})
    assert server_context(cfg, "SASL", "SASL_SSL").verify_mode == ssl.CERT_OPTIONAL
    assert server_context(cfg, "INTERNAL", "SSL").verify_mode == ssl.CERT_NONE


def test_the_brokers_own_connections_use_the_inter_broker_listeners_settings(pems, tmp_path) -> None:
    (tmp_path / "other").mkdir()
    other_ca, _key, other = make_ca(tmp_path / "other")
    cfg = config(pems, **{"listener.name.internal.ssl.truststore.location": str(other_ca),
                          "listener.name.internal.ssl.endpoint.identification.algorithm": ""})
    ctx = client_context(cfg)
    assert not ctx.check_hostname
    assert [int(c["serialNumber"], 16) for c in ctx.get_ca_certs()] == [other.serial_number]
    assert client_context(config(pems)).check_hostname


def test_a_bad_store_names_its_listener(pems, tmp_path) -> None:
    cfg = config(pems, **{"listener.name.internal.ssl.keystore.location": str(tmp_path / "missing.jks")})
    with pytest.raises(ConfigError, match="listener INTERNAL: .*missing.jks"):
        server_context(cfg, "INTERNAL", "SSL")
    server_context(cfg, "EXTERNAL", "SSL")  # the others are fine


def test_sasl_mechanisms_and_reauthentication_per_listener(pems) -> None:
    from kafkarepl.server.tls import sasl_factory

    cfg = config(pems, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512",
                          "listener.name.sasl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                          "listener.name.sasl.connections.max.reauth.ms": "60000",
                          "listener.name.sasl.plain.sasl.jaas.config":
                              'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'})
    no_scram = SimpleNamespace(lookup=lambda *_a: None)  # no SCRAM login is made here
    sasl = sasl_factory(cfg, no_scram, "SASL")()  # type: ignore[arg-type]
    assert sasl.enabled == ["PLAIN", "SCRAM-SHA-256"] and sasl.session_lifetime_ms == 60000
    assert sasl.plain_users == {"a": "b"}
    other = sasl_factory(cfg, no_scram, "INTERNAL")()  # type: ignore[arg-type]
    assert other.enabled == ["SCRAM-SHA-512"] and other.session_lifetime_ms == 0


@pytest.mark.parametrize("allow", [False, True])
def test_a_rotated_certificate_keeps_its_name_unless_allowed(pems, allow: bool) -> None:
    from kafkarepl.server.listener_keystores import check_update

    extra = {"ssl.allow.dn.changes": "true"} if allow else {}
    old = config(pems, **extra)
    new = config(pems, **extra, **{"listener.name.external.ssl.keystore.location": pems["internal"]})
    if allow:
        assert check_update(old, new, "EXTERNAL", "SSL", inter_broker=False)[0].verify_mode == ssl.CERT_NONE
    else:
        with pytest.raises(ConfigError, match="another subject"):
            check_update(old, new, "EXTERNAL", "SSL", inter_broker=False)
    # the same name, a new key: always fine
    same = config(pems, **{"listener.name.external.ssl.keystore.location": pems["public2"]})
    check_update(old, same, "EXTERNAL", "SSL", inter_broker=True)


def test_a_keystore_replaced_in_place_is_held_to_the_certificate_served(pems, tmp_path) -> None:
    """The file of the keystore in use rewritten with another name's certificate: the
    update is refused (its file no longer holds the old certificate to compare with), the
    listener keeps serving its old context; one with the same name is taken."""
    import shutil

    from kafkarepl.client.security import ClientSecurity
    from kafkarepl.server.listener_keystores import ListenerKeystores, ServedIdentities

    live = tmp_path / "live.pem"
    shutil.copy(pems["public"], live)
    cfg = config(pems, **{"listener.name.external.ssl.keystore.location": str(live)})
    listener = SimpleNamespace(name="EXTERNAL", ssl_context=server_context(cfg, "EXTERNAL", "SSL"))
    served = ServedIdentities(cfg)
    assert served.get("EXTERNAL") is not None
    keystores = ListenerKeystores(cfg, cfg, [listener], {"EXTERNAL": "SSL"}, "INTERNAL",  # type: ignore[list-item]
                                  ClientSecurity(), None, served)
    before = listener.ssl_context
    shutil.copy(pems["internal"], live)  # another subject, same location
    os.utime(live, ns=(1, 1))  # the change time differs from the copy's for sure
    keystores.apply({})
    assert listener.ssl_context is before
    shutil.copy(pems["public2"], live)  # the same subject, another key: rotated
    keystores.apply({})
    assert listener.ssl_context is not before
