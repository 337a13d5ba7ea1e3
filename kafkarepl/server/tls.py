"""Listener security from Kafka's settings: TLS contexts from each listener's ssl.*
settings (`listener.name.<listener>.ssl.*` over the broker's; PEM, PKCS12 or JKS stores,
kafkarepl/tls_stores.py): the listener's server context and the client context the
broker's own connections to other brokers use (replica fetchers, controller requests,
transaction markers) when the inter-broker listener is SSL."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

from kafkarepl.client.security import ClientSecurity
from kafkarepl.server.config import BrokerConfig, ConfigError, jaas_options
from kafkarepl.server.oauthbearer import (
    SECURED_HANDLERS,
    UNSECURED_HANDLER,
    Jwks,
    JwksValidator,
    OAuthBearerExchange,
    UnsecuredValidator,
    Validator,
)
from kafkarepl.server.sasl import MECHANISMS, SaslAuthenticator, TokenLookup, parse_jaas_users
from kafkarepl.server.scram_credentials import ScramCredentials
from kafkarepl.tls_stores import SslSettings, StoreError, load_keystore, load_truststore

log = logging.getLogger(__name__)

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_STORE_TYPES = ("ssl.keystore.type", "ssl.truststore.type")


def listener_props(config: BrokerConfig, listener: str | None = None) -> dict[str, str]:
    """The broker's settings as a listener sees them (Kafka's valuesWithPrefixOverride):
    `listener.name.<listener>.<key>` over `<key>` (listener: default the inter-broker
    one). A store type is left empty unless set, so the store's own bytes tell it."""
    name = (listener or config.listener_name()).lower()
    props = config.as_props()
    for key in _STORE_TYPES:
        if key not in config.explicit:
            props[key] = ""
    prefix = f"listener.name.{name}."
    props.update({k[len(prefix):]: v for k, v in config.extra.items() if k.startswith(prefix)})
    return props


def _protocols(ctx: ssl.SSLContext, props: dict[str, str]) -> None:
    enabled = props["ssl.enabled.protocols"]
    versions = [_PROTOCOLS[p.strip()] for p in enabled.split(",") if p.strip() in _PROTOCOLS]
    if not versions:
        raise ConfigError(f"ssl.enabled.protocols {enabled!r}: none of TLSv1.2, TLSv1.3")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    if props["ssl.cipher.suites"]:
        ctx.set_ciphers(":".join(c.strip() for c in props["ssl.cipher.suites"].split(",")))


def server_context(config: BrokerConfig, listener: str, protocol: str) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener from its ssl.* settings. As Kafka
    (KIP-684), a SASL_SSL listener asks for client certificates only when its own
    `listener.name.<listener>.ssl.client.auth` says so; the broker-wide one is for SSL
    listeners."""
    props = listener_props(config, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        _protocols(ctx, props)
        settings = SslSettings.from_props(props)
        if not load_keystore(ctx, settings):
            raise ConfigError("an SSL listener needs ssl.keystore.location or "
                              "ssl.keystore.certificate.chain and ssl.keystore.key")
        auth = props["ssl.client.auth"].strip().lower()
        if protocol == "SASL_SSL" and f"listener.name.{listener.lower()}.ssl.client.auth" not in config.extra:
            auth = "none"
        if auth in ("required", "requested"):
            if not load_truststore(ctx, settings):
                raise ConfigError(f"ssl.client.auth={auth} needs a truststore")
            ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
        elif auth != "none":
            raise ConfigError(f"ssl.client.auth must be none, requested or required, not {auth!r}")
    except (ConfigError, StoreError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {listener}: {exc}") from None
    return ctx


def client_context(config: BrokerConfig) -> ssl.SSLContext:
    """For this broker's connections to the others, from the inter-broker listener's
    ssl.* settings (as Kafka's): verifies them against the truststore (and their host
    name unless ssl.endpoint.identification.algorithm is empty) and presents the
    keystore (for ssl.client.auth)."""
    props = listener_props(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        _protocols(ctx, props)
        settings = SslSettings.from_props(props)
        if not load_truststore(ctx, settings):
            ctx.load_default_certs()
        ctx.check_hostname = bool(props["ssl.endpoint.identification.algorithm"])
        load_keystore(ctx, settings)
    except (StoreError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {config.listener_name()}: {exc}") from None
    return ctx


def client_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to the others on its (inter-broker) listener: TLS for
    SSL/SASL_SSL, and for SASL_* the inter-broker mechanism with the username and password
    of the listener's JAAS config (Kafka's username="..." password="..." options)."""
    protocol = config.security_protocol()
    ctx = client_context(config) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL"):
        return ClientSecurity(ctx)
    mech = config.sasl_mechanism_inter_broker_protocol
    if mech.upper() == "OAUTHBEARER":
        raise ConfigError("sasl.mechanism.inter.broker.protocol=OAUTHBEARER is not supported: the brokers' own "
                          "connections log in with PLAIN or SCRAM (clients may use OAUTHBEARER)")
    opts = jaas_options(config.jaas_config(mech))
    user, password = opts.get("username"), opts.get("password")
    if user is None or password is None:
        raise ConfigError(f"a {protocol} listener needs username and password in its {mech} JAAS config "
                          "for the broker's own connections")
    return ClientSecurity(ctx, mech, user, password)


def sasl_factory(config: BrokerConfig, scram: ScramCredentials, listener: str | None = None,
                 tokens: TokenLookup | None = None) -> Callable[[], SaslAuthenticator]:
    """A new SaslAuthenticator per connection of a SASL listener (PLAIN users from the
    listener's JAAS config; delegation tokens' SCRAM logins from `tokens`)."""
    # listener.name.<listener>.sasl.enabled.mechanisms / .connections.max.reauth.ms over the broker's
    mechanisms = config.listener_setting("sasl.enabled.mechanisms", listener, default=config.sasl_enabled_mechanisms)
    enabled = [m.strip().upper() for m in (mechanisms or "").split(",") if m.strip()]
    unknown = [m for m in enabled if m not in ("PLAIN", "OAUTHBEARER") and m not in MECHANISMS]
    if unknown:
        raise ConfigError(f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported")
    plain_users = parse_jaas_users(config.jaas_config("PLAIN", listener)) if "PLAIN" in enabled else {}
    try:
        lifetime = int(config.listener_setting("connections.max.reauth.ms", listener,
                                               default=str(config.connections_max_reauth_ms)) or 0)
    except ValueError:
        raise ConfigError(f"connections.max.reauth.ms of listener {listener}: not a number") from None
    validator = oauthbearer_validator(config, listener) if "OAUTHBEARER" in enabled else None
    return lambda: SaslAuthenticator(enabled, plain_users, scram.lookup, lifetime,
                                     None if validator is None else OAuthBearerExchange(validator), tokens)


def oauthbearer_validator(config: BrokerConfig, listener: str | None = None) -> Validator:
    """The listener's OAUTHBEARER validator, as Kafka picks it: its
    sasl.server.callback.handler.class (unset: the unsecured one, options from its JAAS
    config), the sasl.oauthbearer.* settings looked up listener-and-mechanism-prefixed,
    listener-prefixed, then plain."""
    name = (listener or config.listener_name()).lower()

    def setting(key: str, default: str | None = None) -> str | None:
        return config.listener_setting(key, listener, "OAUTHBEARER", default)

    handler = setting("sasl.server.callback.handler.class")
    try:
        if handler in (None, "", UNSECURED_HANDLER):
            return UnsecuredValidator.from_options(jaas_options(config.jaas_config("OAUTHBEARER", listener)))
        if handler not in SECURED_HANDLERS:
            raise ConfigError(f"sasl.server.callback.handler.class {handler} is not supported for OAUTHBEARER")
        url = setting("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise ConfigError("OAUTHBEARER with OAuthBearerValidatorCallbackHandler needs "
                              "sasl.oauthbearer.jwks.endpoint.url")
        jwks = Jwks(url, int(setting("sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000") or 3600000))
        try:
            jwks.load()  # at start-up, as Kafka; later reloads run on their own thread
        except Exception as exc:  # noqa: BLE001 - the refresh retries; tokens fail meanwhile
            log.warning("OAUTHBEARER: the JWKS at %s could not be loaded yet: %s", url, exc)
        audience = setting("sasl.oauthbearer.expected.audience") or ""
        return JwksValidator(
            jwks, setting("sasl.oauthbearer.sub.claim.name", "sub") or "sub",
            setting("sasl.oauthbearer.scope.claim.name", "scope") or "scope",
            int(setting("sasl.oauthbearer.clock.skew.seconds", "30") or 30) * 1000,
            setting("sasl.oauthbearer.expected.issuer") or None,
            frozenset(a.strip() for a in audience.split(",") if a.strip()))
    except ValueError as exc:
        raise ConfigError(f"OAUTHBEARER settings of listener {name}: {exc}") from None
