"""SASL authentication of a connection (SaslHandshake v1 + SaslAuthenticate), with the
PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (server/oauthbearer.py) mechanisms, as Kafka's
SaslServerAuthenticator.

Until a connection has authenticated, it may only send ApiVersions, SaslHandshake and
SaslAuthenticate; anything else closes it (network.py). A failed login is answered with
SASL_AUTHENTICATION_FAILED and the connection is closed after
connection.failed.authentication.delay.ms (Kafka's default 100 ms), which slows guessing.

PLAIN users come from the JAAS-style `sasl.jaas.config` (PlainLoginModule options
user_<name>="<password>"), as Kafka's default PLAIN callback handler reads them. SCRAM
credentials are kept salted in ZooKeeper (/config/users/<name>, Kafka's format), managed
with AlterUserScramCredentials and cached on every broker (ScramCredentials).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kafkarepl.errors import ErrorCode
from kafkarepl.server.config import jaas_options
from kafkarepl.server.oauthbearer import OAuthBearerExchange

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # AlterUserScramCredentials' int8
MIN_ITERATIONS = 4096  # Kafka's minimum
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
        h = MECHANISMS[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", h).digest()
        return cls(salt, hashlib.new(h, client_key).digest(), hmac.new(salted_password, b"Server Key", h).digest(),
                   iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = salt or os.urandom(16)
        salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def encode(self) -> str:
        """Kafka's ZooKeeper form: salt=..,stored_key=..,server_key=..,iterations=N."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        f = dict(kv.split("=", 1) for kv in text.split(","))
        return cls(base64.b64decode(f["salt"]), base64.b64decode(f["stored_key"]),
                   base64.b64decode(f["server_key"]), int(f["iterations"]))


def parse_jaas_users(jaas: str) -> dict[str, str]:
    """user_<name>="<password>" options of a PlainLoginModule JAAS entry."""
    return {k[len("user_"):]: v for k, v in jaas_options(jaas).items() if k.startswith("user_")}


CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (mechanism, user)


class TokenCredential(Protocol):
    """A delegation token's SCRAM login (server/delegation_tokens.py)."""

    @property
    def credential(self) -> ScramCredential: ...

    @property
    def owner(self) -> str: ...  # the principal the login is

    @property
    def expiry_ms(self) -> int: ...  # wall clock


TokenLookup = Callable[[str, str], "TokenCredential | None"]  # (mechanism, token id); None: unknown or expired


class SaslAuthenticator:
    """The SASL state of one connection."""

    def __init__(self, enabled: list[str], plain_users: dict[str, str], scram: CredentialLookup,
                 session_lifetime_ms: int = 0, oauthbearer: OAuthBearerExchange | None = None,
                 tokens: TokenLookup | None = None, clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)
                 ) -> None:
        self.enabled = enabled
        self.tokens = tokens  # delegation tokens' SCRAM logins (tokenauth=true), when tokens are on
        self.clock_ms = clock_ms
        self.token_authenticated = False  # logged in with a delegation token: may not ask for tokens
        self.session_lifetime_ms = session_lifetime_ms  # connections.max.reauth.ms (KIP-368); 0: none
        self.plain_users = plain_users
        self.scram = scram
        self.oauthbearer = oauthbearer  # the listener's OAUTHBEARER validation, when enabled
        self.mechanism: str | None = None
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.failed = False
        self._scram_state: tuple[str, str, str, str, ScramCredential] | None = None
        # (principal, client nonce, nonce, client-first-bare + server-first, credential)
        self._token_expiry_ms: int | None = None  # a delegation token's login

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> dict:
        if self.complete or self.mechanism is not None:
            return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": self.enabled}
        if mechanism not in self.enabled:
            return {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": self.enabled}
        self.mechanism = mechanism
        return {"error_code": 0, "mechanisms": self.enabled}

    def authenticate(self, token: bytes) -> dict:
        if self.mechanism is None or self.complete:
            return self._fail("SaslAuthenticate before SaslHandshake", ErrorCode.ILLEGAL_SASL_STATE)
        try:
            if self.mechanism == "PLAIN":
                return self._plain(token)
            if self.mechanism == "OAUTHBEARER":
                return self._oauthbearer(token)
            return self._scram(token)
        except (ValueError, KeyError, UnicodeDecodeError, IndexError):
            return self._fail("Authentication failed: malformed SASL message")

    def _ok(self, data: bytes = b"") -> dict:
        return {"error_code": 0, "error_message": None, "auth_bytes": data,
                "session_lifetime_ms": self.session_lifetime_ms if self.complete else 0}

    def _fail(self, message: str, code: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED) -> dict:
        self.failed = True
        return {"error_code": int(code), "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}

    def _plain(self, token: bytes) -> dict:
        _authzid, user, password = token.decode().split("\x00")
        expected = self.plain_users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return self._fail("Authentication failed: Invalid username or password")
        self.principal = f"User:{user}"
        return self._ok()

    def _oauthbearer(self, data: bytes) -> dict:
        if self.oauthbearer is None:
            return self._fail("Authentication failed: OAUTHBEARER is not configured")
        challenge, token, error = self.oauthbearer.step(data)
        if error is not None:
            return self._fail(error)
        if token is None:  # RFC 7628: the error status first; the client answers \x01
            return self._ok(challenge)
        self.principal = f"User:{token.principal}"
        self._end_session_by(token.expires_ms, int(self.oauthbearer.clock() * 1000))
        return self._ok()

    def _scram(self, token: bytes) -> dict:
        h = MECHANISMS[self.mechanism or ""]
        text = token.decode()
        if self._scram_state is None:  # client-first: gs2 header, then n=user,r=nonce
            parts = text.split(",", 2)
            gs2, bare = parts[0], parts[2]
            if gs2 not in ("n", "y"):
                return self._fail("Authentication failed: channel binding is not supported")
            attrs = dict(a.split("=", 1) for a in bare.split(","))  # n=, r=, then extensions
            user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            if attrs.get("tokenauth", "").lower() == "true":  # a delegation token: user is its id
                login = self.tokens(self.mechanism or "", user) if self.tokens is not None else None
                cred, principal = (login.credential, login.owner) if login is not None else (None, "")
                self._token_expiry_ms = login.expiry_ms if login is not None else None
            else:
                cred, principal = self.scram(self.mechanism or "", user), f"User:{user}"
            if cred is None:
                return self._fail("Authentication failed during authentication due to invalid credentials with "
                                  f"SASL mechanism {self.mechanism}")
            nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
            server_first = f"r={nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
            self._scram_state = (principal, attrs["r"], nonce, bare + "," + server_first, cred)
            return self._ok(server_first.encode())
        principal, client_nonce, nonce, head, cred = self._scram_state
        without_proof, _, proof_attr = text.rpartition(",p=")
        attrs = dict(a.split("=", 1) for a in without_proof.split(","))
        # librdkafka before 2.6.1 sends its own nonce again in front of the server's
        # (librdkafka#4895); Kafka 3.8.1-3.9 accept that exact form, so do we: the whole
        # server nonce is still checked.
        if attrs.get("r") not in (nonce, client_nonce + nonce):
            return self._fail("Authentication failed: invalid nonce")
        auth_message = (head + "," + without_proof).encode()
        client_signature = hmac.new(cred.stored_key, auth_message, h).digest()
        proof = base64.b64decode(proof_attr)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(h, client_key).digest(), cred.stored_key):
            return self._fail("Authentication failed during authentication due to invalid credentials with "
                              f"SASL mechanism {self.mechanism}")
        server_signature = hmac.new(cred.server_key, auth_message, h).digest()
        self.principal = principal
        if self._token_expiry_ms is not None:
            self.token_authenticated = True
            self._end_session_by(self._token_expiry_ms, self.clock_ms())
        return self._ok(b"v=" + base64.b64encode(server_signature))

    def _end_session_by(self, expiry_ms: int, now_ms: int) -> None:
        """KIP-368: under connections.max.reauth.ms a session ends when its credential
        (an OAUTHBEARER token, a delegation token) expires, at the latest."""
        if self.session_lifetime_ms > 0:
            self.session_lifetime_ms = max(1, min(self.session_lifetime_ms, expiry_ms - now_ms))
