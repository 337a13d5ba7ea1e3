"""Client properties of the admin commands (`--command-config FILE`, as Kafka's tools):
security.protocol, the ssl.truststore.* / ssl.keystore.* settings (PEM, PKCS12 or JKS
stores, kafkarepl/tls_stores.py) or librdkafka's ssl.ca.location,
sasl.mechanism and sasl.jaas.config (or sasl.username / sasl.password; a delegation
token's login with tokenauth="true")."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

from kafkarepl.client.security import ClientSecurity
from kafkarepl.tls_stores import SslSettings, load_keystore, load_truststore


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file's `key=value` lines (comments: `#`, `!`)."""
    props: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props


def load_client_security(path: str | None) -> ClientSecurity | None:
    if not path:
        return None
    props = read_properties(path)
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    ctx = None
    if protocol in ("SSL", "SASL_SSL"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        settings = SslSettings.from_props(props)
        if not settings.truststore_location and props.get("ssl.ca.location"):
            ctx.load_verify_locations(cafile=props["ssl.ca.location"])  # librdkafka's name
        elif not load_truststore(ctx, settings):
            ctx.load_default_certs()
        ctx.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https") != ""
        load_keystore(ctx, settings)
    if not protocol.startswith("SASL"):
        return ClientSecurity(ctx)
    return sasl_security(ctx, props.get("sasl.mechanism", "PLAIN"), props.get("sasl.jaas.config", ""),
                         props.get("sasl.username"), props.get("sasl.password"))


def sasl_security(ctx: ssl.SSLContext | None, mechanism: str, jaas: str, username: str | None = None,
                  password: str | None = None) -> ClientSecurity:
    """A SASL login from a Java client's settings: the login module's username, password
    and tokenauth (a delegation token) options, unless sasl.username/password are given."""
    return ClientSecurity(ctx, mechanism.upper(), username or jaas_option(jaas, "username"),
                          password or jaas_option(jaas, "password"),
                          jaas_option(jaas, "tokenauth").lower() == "true")


def jaas_option(jaas: str, key: str) -> str:
    """A login module option's value, quoted ("...") or a bare word."""
    m = re.search(rf'\b{key}\s*=\s*(?:"([^"]*)"|([^\s;"]+))', jaas)
    return "" if m is None else m.group(1) if m.group(1) is not None else m.group(2)
