"""SASL/OAUTHBEARER on the broker (KIP-255, RFC 7628): the client's bearer token (a JWT)
is validated and its subject becomes the principal.

Two validators, as Kafka's (chosen by
`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`):
- unset: Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, for development: unsigned
  tokens (`alg` "none"), options from the listener's OAUTHBEARER JAAS config
  (unsecuredValidatorPrincipalClaimName, ...ScopeClaimName, ...RequiredScope,
  ...AllowableClockSkewMs);
- `...OAuthBearerValidatorCallbackHandler` (KIP-768, OIDC): signed tokens (RS*, PS*,
  ES*) checked against the keys of `sasl.oauthbearer.jwks.endpoint.url` (https or file),
  with `sasl.oauthbearer.expected.audience/issuer`, `sasl.oauthbearer.sub.claim.name`,
  `sasl.oauthbearer.scope.claim.name` and `sasl.oauthbearer.clock.skew.seconds`.

A bad token is answered as RFC 7628 and Kafka's OAuthBearerSaslServer do: a JSON error
status as the server's challenge, then, after the client's \\x01, the failure."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

UNSECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerUnsecuredValidatorCallbackHandler"
SECURED_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
})
_MAX_TOKEN = 64 * 1024  # a bearer token is a few KiB; this bounds the JSON parsed


class TokenError(Exception):
    """An invalid token: `status` is RFC 7628's (invalid_token, insufficient_scope)."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.scope = scope

    def challenge(self) -> bytes:
        body: dict[str, str] = {"status": self.status}
        if self.scope:
            body["scope"] = self.scope
        return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Token:
    principal: str
    expires_ms: int
    scope: frozenset[str]


def parse_client_response(data: bytes) -> tuple[str, dict[str, str]]:
    """The token and SASL extensions of a client's initial response:
    `n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01]*\\x01`."""
    text = data.decode("utf-8")
    gs2, sep, rest = text.partition("\x01")
    if not sep or not gs2.startswith("n,") or not rest.endswith("\x01\x01"):
        raise TokenError("malformed OAUTHBEARER client response")
    pairs: dict[str, str] = {}
    for kv in rest[:-2].split("\x01"):
        key, eq, value = kv.partition("=")
        if not eq or key in pairs:
            raise TokenError("malformed OAUTHBEARER client response")
        pairs[key] = value
    auth = pairs.pop("auth", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise TokenError("no bearer token in the OAUTHBEARER client response")
    return token.strip(), pairs


def _b64url(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("token is not base64url") from None


def _json(part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64url(part))
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting bombs
        raise TokenError("token part is not JSON") from None
    if not isinstance(value, dict):
        raise TokenError("token part is not a JSON object")
    return value


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return frozenset(value)
    raise TokenError(f"claim {name!r} is not a scope")


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenError(f"required claim {name!r} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1e15 < value < 1e15:
        raise TokenError(f"claim {name!r} is not a number of seconds")  # NaN and infinities too
    return float(value)


def check_claims(claims: Mapping[str, Any], now_ms: int, *, sub_claim: str, scope_claim: str,
                 skew_ms: int, required_scope: frozenset[str] = frozenset(),
                 issuer: str | None = None, audience: frozenset[str] = frozenset()) -> Token:
    """Kafka's claim checks (OAuthBearerValidationUtils, and KIP-768's for signed tokens)."""
    sub = claims.get(sub_claim)
    if not isinstance(sub, str) or not sub.strip():
        raise TokenError(f"required claim {sub_claim!r} is missing or empty")
    exp = _number(claims, "exp", True)
    assert exp is not None
    if now_ms > exp * 1000 + skew_ms:
        raise TokenError("the token has expired")
    iat = _number(claims, "iat", False)
    if iat is not None and iat * 1000 > now_ms + skew_ms:
        raise TokenError("the token was issued in the future")
    if issuer is not None and claims.get("iss") != issuer:
        raise TokenError("unexpected issuer")
    if audience:
        aud = claims.get("aud")
        auds = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
        if not auds & audience:
            raise TokenError("unexpected audience")
    scope = _scope(claims, scope_claim)
    missing = required_scope - scope
    if missing:
        raise TokenError("the token lacks a required scope", "insufficient_scope", " ".join(sorted(required_scope)))
    return Token(sub, int(exp * 1000), scope)


@dataclass
class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler."""

    sub_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: frozenset[str] = frozenset()
    skew_ms: int = 0

    @classmethod
    def from_options(cls, opts: Mapping[str, str]) -> UnsecuredValidator:
        """From the unsecuredValidator* options of the listener's OAUTHBEARER JAAS entry."""
        return cls(opts.get("unsecuredValidatorPrincipalClaimName", "sub"),
                   opts.get("unsecuredValidatorScopeClaimName", "scope"),
                   frozenset(s for s in opts.get("unsecuredValidatorRequiredScope", "").replace(",", " ").split()),
                   int(opts.get("unsecuredValidatorAllowableClockSkewMs", "0")))

    def validate(self, token: str, now_ms: int) -> Token:
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise TokenError("an unsecured token has three parts and no signature")
        if _json(parts[0]).get("alg") != "none":
            raise TokenError("an unsecured token's alg must be none")
        return check_claims(_json(parts[1]), now_ms, sub_claim=self.sub_claim, scope_claim=self.scope_claim,
                            skew_ms=self.skew_ms, required_scope=self.required_scope)


class Jwks:
    """The verification keys of a JWKS URL (https: or file:), reloaded every `refresh_ms`
    and, at most every 10 s, when a token names a key not in it. Loading runs on a thread
    of its own: validation never waits for it (a token whose key has not arrived fails)."""

    def __init__(self, url: str, refresh_ms: int = 3_600_000,
                 fetch: Callable[[str], bytes] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.refresh_s = max(refresh_ms, 1000) / 1000
        self._fetch = fetch or _fetch_url
        self._clock = clock
        self._keys: dict[str | None, list[Any]] = {}
        self._loaded_at = float("-inf")
        self._asked_at = float("-inf")
        self._lock = threading.Lock()
        self._loading = False

    def load(self) -> None:
        """Fetch and parse the set now (start-up; the refresh thread)."""
        raw = self._fetch(self.url)
        keys: dict[str | None, list[Any]] = {}
        for jwk in json.loads(raw).get("keys", []):
            try:
                key = _public_key(jwk)
            except (KeyError, ValueError, TypeError, TokenError) as exc:
                log.warning("JWKS %s: key %r skipped: %s", self.url, jwk.get("kid"), exc)
                continue
            if key is not None and jwk.get("use", "sig") == "sig":
                keys.setdefault(jwk.get("kid"), []).append((jwk.get("alg"), key))
        with self._lock:
            self._keys, self._loaded_at = keys, self._clock()
        log.info("JWKS %s: %d key(s) loaded", self.url, sum(len(v) for v in keys.values()))

    def _load_in_background(self) -> None:
        with self._lock:
            if self._loading:
                return
            self._loading = True

        def run() -> None:
            try:
                self.load()
            except Exception as exc:  # noqa: BLE001 - logged; the old keys stay
                log.warning("JWKS %s: reload failed: %s", self.url, exc)
            finally:
                with self._lock:
                    self._loading = False

        threading.Thread(target=run, name="jwks-refresh", daemon=True).start()

    def keys_for(self, kid: str | None) -> list[Any]:
        now = self._clock()
        with self._lock:
            keys = self._keys.get(kid) or (self._keys.get(None) if kid is None else None) or []
            stale = now - self._loaded_at > self.refresh_s
            ask = not keys and now - self._asked_at > 10
            if ask:
                self._asked_at = now
        if stale or ask:
            self._load_in_background()
        return keys


def _fetch_url(url: str) -> bytes:
    if not url.startswith(("https://", "http://", "file:")):
        raise ValueError(f"unsupported JWKS URL {url!r}")
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - the operator's configured URL
        data: bytes = r.read(4 << 20)
        return data


def _int(value: str) -> int:
    return int.from_bytes(_b64url(value), "big")


def _public_key(jwk: Mapping[str, Any]) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if jwk.get("kty") == "RSA":
        return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
    if jwk.get("kty") == "EC":
        curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
        return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), curves[jwk["crv"]]).public_key()
    return None  # symmetric keys are not for OIDC access tokens


def verify_signature(alg: str, key: Any, signed: bytes, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

    hashes_by_bits = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}
    family, bits = alg[:2], alg[2:]
    h = hashes_by_bits.get(bits)
    if h is None:
        return False
    try:
        if family == "RS" and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PKCS1v15(), h)
        elif family == "PS" and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PSS(padding.MGF1(h), h.digest_size), h)
        elif family == "ES" and isinstance(key, ec.EllipticCurvePublicKey):
            n = (key.curve.key_size + 7) // 8
            if len(signature) != 2 * n:
                return False
            der = utils.encode_dss_signature(int.from_bytes(signature[:n], "big"), int.from_bytes(signature[n:], "big"))
            key.verify(der, signed, ec.ECDSA(h))
        else:
            return False
    except InvalidSignature:
        return False
    return True


@dataclass
class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler (KIP-768)."""

    jwks: Jwks
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    skew_ms: int = 30_000
    issuer: str | None = None
    audience: frozenset[str] = field(default_factory=frozenset)

    def validate(self, token: str, now_ms: int) -> Token:
        parts = token.split(".")
        if len(parts) != 3 or not parts[2]:
            raise TokenError("a token has three parts and a signature")
        header = _json(parts[0])
        alg = header.get("alg")
        if not isinstance(alg, str) or alg[:2] not in ("RS", "PS", "ES"):
            raise TokenError(f"algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        signed, signature = f"{parts[0]}.{parts[1]}".encode(), _b64url(parts[2])
        keys = self.jwks.keys_for(kid if isinstance(kid, str) else None)
        if not any(verify_signature(alg, key, signed, signature) for key_alg, key in keys
                   if key_alg in (None, alg)):
            raise TokenError("the token's signature does not verify against the JWKS")
        return check_claims(_json(parts[1]), now_ms, sub_claim=self.sub_claim, scope_claim=self.scope_claim,
                            skew_ms=self.skew_ms, issuer=self.issuer, audience=self.audience)


Validator = UnsecuredValidator | JwksValidator


class OAuthBearerExchange:
    """One connection's OAUTHBEARER exchange: step() takes the client's message and
    returns (challenge, principal or None, error or None)."""

    def __init__(self, validator: Validator, clock: Callable[[], float] = time.time) -> None:
        self.validator = validator
        self.clock = clock
        self.token: Token | None = None
        self._error: TokenError | None = None

    def step(self, data: bytes) -> tuple[bytes, Token | None, str | None]:
        if self._error is not None:  # the client's \x01 after our error status: fail now
            if data != b"\x01":
                return b"", None, "Authentication failed: malformed OAUTHBEARER message"
            return b"", None, f"Authentication failed: {self._error}"
        if len(data) > _MAX_TOKEN:
            return b"", None, "Authentication failed: OAUTHBEARER message too large"
        try:
            token, _extensions = parse_client_response(data)
            self.token = self.validator.validate(token, int(self.clock() * 1000))
        except TokenError as exc:
            self._error = exc
            return exc.challenge(), None, None
        except UnicodeDecodeError:
            return b"", None, "Authentication failed: malformed OAUTHBEARER message"
        return b"", self.token, None
