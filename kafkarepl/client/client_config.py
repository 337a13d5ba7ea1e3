"""Client properties of the admin commands (`--command-config FILE`, as Kafka's tools):
security.protocol, ssl.truststore.location / ssl.ca.location, ssl.keystore.location,
sasl.mechanism and sasl.jaas.config (or sasl.username / sasl.password)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

from kafkarepl.client.security import ClientSecurity


def load_client_security(path: str | None) -> ClientSecurity | None:
    if not path:
        return None
    props: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    ctx = None
    if protocol in ("SSL", "SASL_SSL"):
        ctx = ssl.create_default_context(cafile=props.get("ssl.truststore.location") or props.get("ssl.ca.location"))
        ctx.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https") != ""
        if props.get("ssl.keystore.location"):
            ctx.load_cert_chain(props["ssl.keystore.location"], password=props.get("ssl.key.password") or None)
    if not protocol.startswith("SASL"):
        return ClientSecurity(ctx)
    jaas = props.get("sasl.jaas.config", "")
    user = props.get("sasl.username") or _jaas(jaas, "username")
    password = props.get("sasl.password") or _jaas(jaas, "password")
    return ClientSecurity(ctx, props.get("sasl.mechanism", "PLAIN").upper(), user, password)


def _jaas(jaas: str, key: str) -> str:
    m = re.search(rf'\b{key}\s*=\s*"([^"]*)"', jaas)
    return m.group(1) if m else ""
