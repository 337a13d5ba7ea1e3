"""A listener's keystore changed at run time (KIP-226, as Kafka's "Updating SSL Keystore
of an Existing Listener"): certificates are rotated without a restart by setting
`listener.name.<listener>.ssl.keystore.*` (and `.ssl.key.password`) for one broker
(`kafka-configs --entity-type brokers --entity-name <id> --alter`). Stored in the broker's
dynamic config in ZooKeeper, passwords encoded with `password.encoder.secret`. New
connections get the new certificate; open ones keep theirs. As Kafka by default
(`ssl.allow.dn.changes` / `ssl.allow.san.changes` false), the new certificate must have
the old one's subject and subject alternative names. Setting the same location again
re-reads a store that changed on disk."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import ssl
from collections.abc import Mapping

from kafkarepl.server.config import BrokerConfig, ConfigError, config_is_sensitive
from kafkarepl.server.listeners import Listener
from kafkarepl.server.password_encoder import PasswordEncoder
from kafkarepl.server.tls import listener_props, server_context
from kafkarepl.tls_stores import SslSettings, StoreError, keystore_certificate, load_keystore

log = logging.getLogger(__name__)

KEYSTORE_CONFIGS = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
                              "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key"})
_NAME = re.compile(r"listener\.name\.([a-z0-9_.-]+?)\.(ssl\..+)")


def keystore_config(name: str) -> tuple[str, str] | None:
    """(listener, config) of a dynamic listener keystore setting, else None."""
    m = _NAME.fullmatch(name)
    return (m[1], m[2]) if m and m[2] in KEYSTORE_CONFIGS else None


def encode(new: Mapping[str, str], encoder: PasswordEncoder | None) -> dict[str, str]:
    """`new` as stored: the passwords among the keystore settings encoded."""
    out = dict(new)
    for k, v in new.items():
        if keystore_config(k) and config_is_sensitive(k) and v:
            if encoder is None:
                raise ConfigError(f"{k}: password.encoder.secret is not set on this broker, so passwords "
                                  "cannot be stored dynamically")
            out[k] = encoder.encode(v)
    return out


def effective(config: BrokerConfig, dynamic: Mapping[str, str], encoder: PasswordEncoder | None) -> BrokerConfig:
    """`config` with the dynamic keystore settings of `dynamic` (as stored) over its own."""
    extra = dict(config.extra)
    for k, v in dynamic.items():
        if keystore_config(k):
            if config_is_sensitive(k) and v:
                if encoder is None:
                    raise ConfigError(f"{k} is encoded in ZooKeeper but password.encoder.secret is not set")
                v = encoder.decode(v)
            extra[k] = v
    return dataclasses.replace(config, extra=extra)


def _identity(config: BrokerConfig, listener: str) -> tuple[bytes, bytes]:
    """(subject, subject alternative names) of the certificate a listener presents, DER."""
    try:
        from cryptography import x509
    except ImportError:
        raise ConfigError("a dynamic keystore update needs the cryptography package (pip install cryptography)"
                          ) from None
    cert = x509.load_der_x509_certificate(keystore_certificate(SslSettings.from_props(listener_props(config, listener))))
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.public_bytes()
    except x509.ExtensionNotFound:
        san = b""
    return cert.subject.public_bytes(), san


def check_update(old: BrokerConfig, new: BrokerConfig, listener: str, protocol: str) -> ssl.SSLContext:
    """The listener's new server context, if its keystore loads and keeps the identity."""
    try:
        ctx = server_context(new, listener, protocol)
        before, after = _identity(old, listener), _identity(new, listener)
    except StoreError as exc:
        raise ConfigError(f"listener {listener}: {exc}") from None
    if before[0] != after[0]:
        raise ConfigError(f"listener {listener}: the new keystore's certificate has another subject "
                          "(distinguished name) than the one in use")
    if before[1] != after[1]:
        raise ConfigError(f"listener {listener}: the new keystore's certificate has other subject "
                          "alternative names than the one in use")
    return ctx


class ListenerKeystores:
    """Applies this broker's dynamic keystore settings to its listeners: each new server
    context swapped in for new connections, and the inter-broker listener's key loaded
    into the context of the broker's own connections to the others."""

    def __init__(self, config: BrokerConfig, applied: BrokerConfig, listeners: list[Listener],
                 protocols: Mapping[str, str], inter_broker: str, client_context: ssl.SSLContext | None,
                 encoder: PasswordEncoder | None) -> None:
        self.static = config
        self.applied = {listener.name: applied for listener in listeners}  # what each one serves with
        self.listeners = {listener.name: listener for listener in listeners}
        self.protocols, self.inter_broker = protocols, inter_broker
        self.client_context, self.encoder = client_context, encoder
        self._seen = {name: self._signature(applied, name) for name in self.listeners}

    def _signature(self, config: BrokerConfig, listener: str) -> tuple:
        """What a keystore's context depends on: its settings and its file's change time."""
        props = listener_props(config, listener)
        location = props.get("ssl.keystore.location", "")
        try:
            mtime = os.stat(location).st_mtime_ns if location else 0
        except OSError:
            mtime = -1
        return tuple(props.get(k, "") for k in sorted(KEYSTORE_CONFIGS)) + (mtime,)

    def apply(self, dynamic: Mapping[str, str]) -> None:
        """`dynamic`: this broker's own dynamic configs, as stored."""
        try:
            new = effective(self.static, dynamic, self.encoder)
        except ConfigError as exc:
            log.error("dynamic listener keystores not applied: %s", exc)
            return
        for name, listener in self.listeners.items():
            protocol = self.protocols.get(name, "")
            if protocol not in ("SSL", "SASL_SSL"):
                continue
            signature = self._signature(new, name)
            if signature == self._seen[name]:
                continue
            try:
                listener.ssl_context = check_update(self.applied[name], new, name, protocol)
                if name == self.inter_broker and self.client_context is not None:
                    load_keystore(self.client_context, SslSettings.from_props(listener_props(new, name)))
            except (ConfigError, StoreError, ssl.SSLError) as exc:
                log.error("listener %s keeps its keystore: %s", name, exc)
                self._seen[name] = signature  # not retried until it changes again
                continue
            self._seen[name], self.applied[name] = signature, new
            log.info("listener %s: new keystore in use for new connections (%s)", name,
                     listener_props(new, name).get("ssl.keystore.location") or "inline PEM")
