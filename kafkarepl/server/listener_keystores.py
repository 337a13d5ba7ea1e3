"""A listener's keystore or truststore changed at run time (KIP-226, as Kafka's
"Updating SSL Keystore of an Existing Listener"): certificates are rotated without a
restart by setting `listener.name.<listener>.ssl.keystore.*` / `.ssl.truststore.*` (and
`.ssl.key.password`) for one broker (`kafka-configs --entity-type brokers --entity-name
<id> --alter`). Stored in the broker's dynamic config in ZooKeeper, passwords encoded with
`password.encoder.secret`. New connections use the new stores; open ones keep theirs.
As Kafka unless `ssl.allow.dn.changes` / `ssl.allow.san.changes` (static settings) say
otherwise, a new certificate must have the old one's subject and subject alternative names; on the
inter-broker listener, the new keystore and truststore must complete a TLS handshake with
each other (Kafka's SslEngineValidator), or the brokers could no longer reach each other.
Setting the same location again re-reads a store that changed on disk."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import ssl
from collections.abc import Mapping

from kafkarepl.client.security import ClientSecurity
from kafkarepl.server.config import BrokerConfig, ConfigError, config_is_sensitive
from kafkarepl.server.listeners import Listener
from kafkarepl.server.password_encoder import PasswordEncoder
from kafkarepl.server.tls import client_context, listener_props, server_context
from kafkarepl.tls_stores import SslSettings, keystore_certificate

log = logging.getLogger(__name__)

KEYSTORE_CONFIGS = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
                              "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key"})
TRUSTSTORE_CONFIGS = frozenset({"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
                                "ssl.truststore.certificates"})
STORE_CONFIGS = KEYSTORE_CONFIGS | TRUSTSTORE_CONFIGS
_NAME = re.compile(r"listener\.name\.([a-z0-9_.-]+?)\.(ssl\..+)")


def store_config(name: str) -> tuple[str, str] | None:
    """(listener, config) of a dynamic listener store setting, else None."""
    m = _NAME.fullmatch(name)
    return (m[1], m[2]) if m and m[2] in STORE_CONFIGS else None


def encode(new: Mapping[str, str], encoder: PasswordEncoder | None) -> dict[str, str]:
    """`new` as stored: the passwords among the store settings encoded."""
    out = dict(new)
    for k, v in new.items():
        if store_config(k) and config_is_sensitive(k) and v:
            if encoder is None:
                raise ConfigError(f"{k}: password.encoder.secret is not set on this broker, so passwords "
                                  "cannot be stored dynamically")
            out[k] = encoder.encode(v)
    return out


def effective(config: BrokerConfig, dynamic: Mapping[str, str], encoder: PasswordEncoder | None) -> BrokerConfig:
    """`config` with the dynamic store settings of `dynamic` (as stored) over its own."""
    extra = dict(config.extra)
    for k, v in dynamic.items():
        if store_config(k):
            if config_is_sensitive(k) and v:
                if encoder is None:
                    raise ConfigError(f"{k} is encoded in ZooKeeper but password.encoder.secret is not set")
                v = encoder.decode(v)
            extra[k] = v
    return dataclasses.replace(config, extra=extra)


Identity = tuple[bytes, bytes]  # a certificate's (subject, subject alternative names), DER


def _identity(config: BrokerConfig, listener: str) -> Identity:
    """The identity of the certificate in the keystore `config` gives a listener."""
    try:
        from cryptography import x509
    except ImportError:
        raise ConfigError("a dynamic keystore update needs the cryptography package (pip install cryptography)"
                          ) from None
    try:
        cert = x509.load_der_x509_certificate(keystore_certificate(SslSettings.from_props(listener_props(config,
                                                                                                        listener))))
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.public_bytes()
        except x509.ExtensionNotFound:
            san = b""
        return cert.subject.public_bytes(), san
    except ValueError as exc:  # a certificate cryptography cannot parse (StoreError is one too)
        raise ConfigError(f"listener {listener}: its keystore's certificate: {exc}") from None


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    """A TLS handshake between the two contexts in memory; SSLError if they disagree (the
    server's side ends only once it has checked the client's certificate, TLS 1.3 too)."""
    client.check_hostname = False  # a throwaway context: the host names are the listener's business
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    sides = [(client.wrap_bio(c_in, c_out), c_out, s_in), (server.wrap_bio(s_in, s_out, server_side=True), s_out, c_in)]
    done = [False, False]
    for _ in range(20):
        for i, (obj, out, peer) in enumerate(sides):
            if not done[i]:
                try:
                    obj.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
            if out.pending:
                peer.write(out.read())
        if all(done):
            return
    raise ssl.SSLError("the handshake did not complete")


class ServedIdentities:
    """The identity of the certificate each TLS listener serves, read when its stores were
    loaded: a keystore replaced in place must be held to the certificate in use, which its
    file no longer holds."""

    def __init__(self, config: BrokerConfig) -> None:
        self._served: dict[str, Identity] = {}
        for spec in config.listener_specs():
            if spec.protocol in ("SSL", "SASL_SSL"):
                try:
                    self._served[spec.name] = _identity(config, spec.name)
                except ConfigError:  # no keystore or no cryptography: an update checks the configured file
                    pass

    def get(self, listener: str) -> Identity | None:
        return self._served.get(listener)

    def set(self, listener: str, identity: Identity) -> None:
        self._served[listener] = identity


def check_update(old: BrokerConfig, new: BrokerConfig, listener: str, protocol: str, inter_broker: bool,
                 served: Identity | None = None) -> tuple[ssl.SSLContext, Identity]:
    """The listener's new server context and its certificate's identity, if its stores
    load, its certificate keeps the identity of the one served (`served`, else the one in
    `old`'s keystore) and, on the inter-broker listener, its keystore and truststore agree."""
    # server_context, client_context and _identity report a bad store as a ConfigError
    ctx = server_context(new, listener, protocol)
    before, after = served or _identity(old, listener), _identity(new, listener)
    try:
        if inter_broker:
            _handshake(ctx, client_context(new))  # the listener's own new context, loaded once
    except ssl.SSLError as exc:
        raise ConfigError(f"listener {listener}: the new keystore and truststore do not complete a TLS "
                          f"handshake with each other, so the brokers could not reach each other ({exc})") from None
    allowed = listener_props(new, listener)
    if before[0] != after[0] and allowed.get("ssl.allow.dn.changes", "false").strip().lower() != "true":
        raise ConfigError(f"listener {listener}: the new keystore's certificate has another subject "
                          "(distinguished name) than the one in use")
    if before[1] != after[1] and allowed.get("ssl.allow.san.changes", "false").strip().lower() != "true":
        raise ConfigError(f"listener {listener}: the new keystore's certificate has other subject "
                          "alternative names than the one in use")
    return ctx, after


class ListenerKeystores:
    """Applies this broker's dynamic store settings to its listeners: each new server
    context swapped in for new connections, and for the inter-broker listener a new client
    context for the broker's own connections to the others."""

    def __init__(self, config: BrokerConfig, applied: BrokerConfig, listeners: list[Listener],
                 protocols: Mapping[str, str], inter_broker: str, security: ClientSecurity,
                 encoder: PasswordEncoder | None, served: ServedIdentities) -> None:
        self.static = config
        self.applied = {listener.name: applied for listener in listeners}  # what each one serves with
        self.listeners = {listener.name: listener for listener in listeners}
        self.protocols, self.inter_broker = protocols, inter_broker
        self.security, self.encoder, self.served = security, encoder, served
        self._seen = {name: self._signature(applied, name) for name in self.listeners}

    @staticmethod
    def _signature(config: BrokerConfig, listener: str) -> tuple:
        """What a listener's contexts depend on: its store settings and their files' change times."""
        props = listener_props(config, listener)
        times = []
        for key in ("ssl.keystore.location", "ssl.truststore.location"):
            try:
                times.append(os.stat(props[key]).st_mtime_ns if props.get(key) else 0)
            except OSError:
                times.append(-1)
        return tuple(props.get(k, "") for k in sorted(STORE_CONFIGS)) + tuple(times)

    def apply(self, dynamic: Mapping[str, str]) -> None:
        """`dynamic`: this broker's own dynamic configs, as stored."""
        try:
            new = effective(self.static, dynamic, self.encoder)
        except ConfigError as exc:
            log.error("dynamic listener stores not applied: %s", exc)
            return
        for name, listener in self.listeners.items():
            protocol = self.protocols.get(name, "")
            if protocol not in ("SSL", "SASL_SSL"):
                continue
            signature = self._signature(new, name)
            if signature == self._seen[name]:
                continue
            self._seen[name] = signature  # a failure is not retried until the settings change again
            inter_broker = name == self.inter_broker
            try:
                ctx, identity = check_update(self.applied[name], new, name, protocol, inter_broker,
                                             self.served.get(name))
                if inter_broker:
                    self.security.ssl_context = client_context(new)
            except ConfigError as exc:
                log.error("listener %s keeps its stores: %s", name, exc)
                continue
            listener.ssl_context = ctx
            self.served.set(name, identity)
            self.applied[name] = new
            props = listener_props(new, name)
            log.info("listener %s: new stores in use for new connections (keystore %s, truststore %s)", name,
                     props.get("ssl.keystore.location") or "inline", props.get("ssl.truststore.location") or "inline")
