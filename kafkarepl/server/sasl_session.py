"""One connection's SASL state on a SASL listener: the login, then re-authentications
(KIP-368), under the rules of Kafka's SaslServerAuthenticator and KafkaChannel.

Sans-I/O: the connection hands over each SaslHandshake / SaslAuthenticate request with
the loop's time and sends the answer it gets back; `failed` says the connection must
close once that answer is out (after connection.failed.authentication.delay.ms).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey

# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: re-authentications of one
# connection start at least this far apart (each costs a SCRAM or token check).
MIN_REAUTH_INTERVAL_S = 1.0
SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


@dataclass
class Step:
    body: dict[str, Any]
    failed: bool = False  # close the connection after this answer
    reauthenticated: bool = False  # a re-authentication just completed


class SaslSession:
    def __init__(self, new_authenticator: Callable[[], Any]) -> None:
        self._new = new_authenticator
        self.auth = new_authenticator()  # the login in force (or under way)
        self.expires: float | None = None  # loop time; None: the session never ends
        self._reauth: Any = None  # a re-authentication under way
        self._reauth_started = float("-inf")

    @property
    def complete(self) -> bool:
        return bool(self.auth.complete)

    @property
    def token_authenticated(self) -> bool:
        return bool(self.auth.token_authenticated)

    @property
    def principal(self) -> str:
        return str(self.auth.principal)

    @property
    def enabled(self) -> list[str]:
        return list(self.auth.enabled)

    def expired(self, now: float) -> bool:
        """KIP-368: a session past connections.max.reauth.ms without a new login."""
        return self.expires is not None and now >= self.expires

    def readable_before_login(self, api_key: int) -> bool:
        """Kafka's SaslServerAuthenticator reads a SaslHandshake first, then its
        SaslAuthenticates; anything else before the login (a SaslAuthenticate with no
        handshake included) is an invalid request: the connection closes unanswered."""
        return api_key == ApiKey.SASL_HANDSHAKE or (api_key == ApiKey.SASL_AUTHENTICATE
                                                    and self.auth.mechanism is not None)

    def login(self, api_key: int, version: int, body: dict[str, Any], now: float) -> Step:
        """A SaslHandshake or SaslAuthenticate before the login is done."""
        auth = self.auth
        if api_key == ApiKey.SASL_HANDSHAKE and version == 0:
            # v0 would be followed by raw SASL tokens, outside Kafka's framing: not served.
            auth.failed = True
            return Step({"error_code": int(ErrorCode.UNSUPPORTED_VERSION), "mechanisms": auth.enabled}, True)
        if api_key == ApiKey.SASL_HANDSHAKE:
            answer = auth.handshake(body["mechanism"] or "")
        else:
            answer = auth.authenticate(bytes(body["auth_bytes"] or b""))
        if auth.complete:
            self._start(auth, now)
        return Step(answer, bool(auth.failed))

    def relogin(self, api_key: int, body: dict[str, Any], now: float) -> Step:
        """A SaslHandshake or SaslAuthenticate after the login: a re-authentication with
        the same mechanism, which must end with the same principal, else the connection
        closes. As Kafka's KafkaChannel, only a session that expires can re-authenticate,
        at most once a second; otherwise the request is answered as by Kafka's request
        handlers (ILLEGAL_SASL_STATE) and the connection goes on."""
        if api_key == ApiKey.SASL_HANDSHAKE:
            if self.expires is None or now - self._reauth_started < MIN_REAUTH_INTERVAL_S:
                return Step({"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []})
            self._reauth_started = now
            mechanism = body["mechanism"] or ""
            reauth = self._reauth = self._new()
            answer = reauth.handshake(mechanism)
            if mechanism != self.auth.mechanism:
                answer = {**answer, "error_code": int(ErrorCode.ILLEGAL_SASL_STATE)}
                reauth.failed = True
            return Step(answer, bool(reauth.failed))
        reauth = self._reauth
        if reauth is None:
            return Step({"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "session_lifetime_ms": 0,
                         "error_message": "SaslAuthenticate request received after successful authentication",
                         "auth_bytes": b""})
        answer = reauth.authenticate(bytes(body["auth_bytes"] or b""))
        if reauth.complete and reauth.principal != self.auth.principal:
            answer = {**answer, "error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED), "session_lifetime_ms": 0,
                      "error_message": "re-authentication must keep the connection's principal"}
            reauth.failed = True
        elif reauth.complete:
            self.auth, self._reauth = reauth, None
            self._start(reauth, now)
            return Step(answer, reauthenticated=True)
        return Step(answer, bool(reauth.failed))

    def _start(self, auth: Any, now: float) -> None:
        lifetime = auth.session_lifetime_ms
        self.expires = now + lifetime / 1000 if lifetime > 0 else None
