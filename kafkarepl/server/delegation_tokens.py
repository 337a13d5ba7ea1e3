"""Delegation tokens (KIP-48, KIP-373), as Kafka's ZooKeeper mode keeps them.

A principal that authenticated with SASL (or a TLS client certificate) creates a token for
itself, or with CREATE_TOKENS on the user for another owner, naming who else may renew it.
The token's information is stored in /delegation_token/tokens/<id> (no secret in it) and
announced by a /delegation_token/token_changes notification; every broker keeps every
token in memory with its HMAC (HMAC-SHA512 of the token id under
delegation.token.secret.key, the same on every broker) and SCRAM credentials derived from
it. A client then logs in with SCRAM as username=<token id>, password=<the HMAC, base64>
and the SCRAM extension tokenauth=true: it is the token's owner for ACLs, and may not ask
for tokens itself. A token expires at its expiry time, which renewals move up to its max
time; logins with an expired token are refused at once, and every broker removes expired
tokens every delegation.token.expiry.check.interval.ms.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import Request
from kafkarepl.server.authorized_ops import AclOperation as Op
from kafkarepl.server.authorized_ops import ResourceType as R
from kafkarepl.server.config_changes import NotificationListener
from kafkarepl.server.sasl import MECHANISMS, MIN_ITERATIONS, ScramCredential
from kafkarepl.zk.client import AsyncZk
from kafkarepl.zk.store import KafkaZkStore
from kafkarepl.zk.znodes import TOKEN_CHANGES

log = logging.getLogger(__name__)

USER_TYPE = "User"
# Largest token znode written: a ZooKeeper request over jute.maxbuffer (1 MB) would cost the
# broker its session's connection, and a client chooses how many renewers a token has.
MAX_ZNODE_BYTES = 512 * 1024
CHANGE_PREFIX = "token_change_"
ZNODE_VERSION = 3  # Kafka's: with the token requester (KIP-373)


def token_hmac(secret: str, token_id: str) -> bytes:
    return hmac.new(secret.encode(), token_id.encode(), "sha512").digest()


def new_token_id() -> str:
    """A random UUID in URL-safe base64 without padding, as Kafka's token ids."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def scram_credentials(hmac_b64: str) -> dict[str, ScramCredential]:
    """The token's SCRAM credentials, its password being its HMAC in base64 (PBKDF2:
    run off the event loop)."""
    return {m: ScramCredential.from_password(m, hmac_b64, MIN_ITERATIONS) for m in MECHANISMS}


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    owner: str  # "User:alice"
    requester: str  # who created it (the owner unless created on its behalf, KIP-373)
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal in (self.owner, self.requester) or principal in self.renewers

    def to_znode(self) -> dict[str, Any]:
        """Kafka's JSON (principals URL-encoded, as its Sanitizer)."""
        return {"version": ZNODE_VERSION, "owner": quote(self.owner, safe=""),
                "tokenRequester": quote(self.requester, safe=""),
                "renewers": [quote(r, safe="") for r in self.renewers], "issueTimestamp": self.issue_ms,
                "maxTimestamp": self.max_ms, "expiryTimestamp": self.expiry_ms, "tokenId": self.token_id}

    @classmethod
    def from_znode(cls, token_id: str, d: dict[str, Any]) -> TokenInfo:
        owner = unquote(str(d["owner"]))
        return cls(token_id, owner, unquote(str(d.get("tokenRequester") or d["owner"])),
                   tuple(unquote(str(r)) for r in d.get("renewers") or ()), int(d["issueTimestamp"]),
                   int(d["maxTimestamp"]), int(d["expiryTimestamp"]))


@dataclass(frozen=True)
class TokenPolicy:
    """delegation.token.max.lifetime.ms and delegation.token.expiry.time.ms."""

    max_lifetime_ms: int
    expiry_time_ms: int

    def new_token(self, owner: str, requester: str, renewers: tuple[str, ...], max_lifetime_ms: int,
                  now_ms: int) -> TokenInfo:
        life = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        max_ms = now_ms + life
        return TokenInfo(new_token_id(), owner, requester, renewers, now_ms, max_ms,
                         min(max_ms, now_ms + self.expiry_time_ms))

    def renewed_expiry(self, info: TokenInfo, period_ms: int, now_ms: int) -> int:
        """A renewal's new expiry: `period_ms` from now (-1: the server's expiry time),
        never past the token's max time."""
        return min(info.max_ms, now_ms + (self.expiry_time_ms if period_ms < 0 else period_ms))


def check_token(info: TokenInfo, principal: str, now_ms: int) -> ErrorCode:
    """May `principal` renew or expire the token now (Kafka's getValidTokenInfo)?"""
    if not info.owner_or_renewer(principal):
        return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    if info.max_ms < now_ms or info.expiry_ms < now_ms:
        return ErrorCode.DELEGATION_TOKEN_EXPIRED
    return ErrorCode.NONE


class TokenLogin(NamedTuple):
    credential: ScramCredential
    owner: str
    expiry_ms: int


@dataclass(frozen=True)
class CachedToken:
    info: TokenInfo
    hmac: bytes
    credentials: dict[str, ScramCredential]  # SCRAM mechanism -> credential


class DelegationTokenCache:
    """Every token of the cluster, on this broker: logins never wait for ZooKeeper."""

    def __init__(self) -> None:
        self._tokens: dict[str, CachedToken] = {}
        self._by_hmac: dict[bytes, str] = {}

    def put(self, token: CachedToken) -> None:
        self._tokens[token.info.token_id] = token
        self._by_hmac[token.hmac] = token.info.token_id

    def remove(self, token_id: str) -> None:
        token = self._tokens.pop(token_id, None)
        if token is not None:
            self._by_hmac.pop(token.hmac, None)

    def get(self, token_id: str) -> CachedToken | None:
        return self._tokens.get(token_id)

    def find(self, token_hmac: bytes) -> CachedToken | None:
        token_id = self._by_hmac.get(bytes(token_hmac))
        return None if token_id is None else self._tokens.get(token_id)

    def tokens(self) -> list[CachedToken]:
        return sorted(self._tokens.values(), key=lambda t: t.info.issue_ms)

    def login(self, mechanism: str, token_id: str, now_ms: int) -> TokenLogin | None:
        """A SCRAM login with tokenauth=true: the token's credential and owner, unless it
        is unknown or expired."""
        token = self._tokens.get(token_id)
        if token is None or token.info.expiry_ms < now_ms or mechanism not in token.credentials:
            return None
        return TokenLogin(token.credentials[mechanism], token.info.owner, token.info.expiry_ms)


@dataclass(frozen=True)
class Requester:
    """Who asks, as the connection knows it. Kafka allows token requests only from a SASL
    login that did not use a token, or a TLS client certificate (allowTokenRequests)."""

    principal: str
    may_request_tokens: bool


def _principal(ptype: str, name: str) -> str:
    return f"{ptype}:{name}"


def _wire_principals(principals: tuple[str, ...]) -> list[dict[str, str]]:
    return [dict(zip(("principal_type", "principal_name"), p.split(":", 1), strict=True)) for p in principals]


class DelegationTokenApis:
    """CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
    DescribeDelegationToken, over the tokens in ZooKeeper and this broker's cache."""

    def __init__(self, store: KafkaZkStore, guarded: Any, cache: DelegationTokenCache, secret: str,
                 policy: TokenPolicy, authorize: Callable[[Op, R, str], bool],
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.store = store  # start-up and notifications (their callers retry ZooKeeper trouble)
        self.guarded = guarded  # requests: ZooKeeper trouble answered as REQUEST_TIMED_OUT
        self.cache = cache
        self.secret = secret  # empty: tokens are off (DELEGATION_TOKEN_AUTH_DISABLED)
        self.policy = policy
        self.authorize = authorize
        self.clock_ms = clock_ms

    @property
    def enabled(self) -> bool:
        return bool(self.secret)

    # -------------------------------------------------------------- the cache -----
    async def load(self) -> None:
        if self.enabled:
            for token_id in await self.store.get_delegation_token_ids():
                await self.reload(token_id)

    async def reload(self, token_id: str) -> None:
        """A token change notification: the token as ZooKeeper has it now, or gone."""
        if not self.enabled:
            return
        data = await self.store.get_delegation_token(token_id)
        if data is None:
            self.cache.remove(token_id)
            return
        try:
            info = TokenInfo.from_znode(token_id, data)
        except (KeyError, ValueError, TypeError) as exc:  # written badly by hand
            log.warning("delegation token %s unreadable, ignored: %r", token_id, exc)
            self.cache.remove(token_id)
            return
        await self._cache(info)

    async def _cache(self, info: TokenInfo) -> CachedToken:
        cached = self.cache.get(info.token_id)
        if cached is not None:  # renewed or expired: same HMAC, same credentials
            token = replace(cached, info=info)
        else:
            mac = token_hmac(self.secret, info.token_id)
            creds = await asyncio.to_thread(scram_credentials, base64.b64encode(mac).decode())
            token = CachedToken(info, mac, creds)
        self.cache.put(token)
        return token

    async def expire_tokens(self) -> None:
        """Remove tokens past their expiry from ZooKeeper (every broker does; the first
        one wins), as Kafka's delete-expired-tokens task."""
        now = self.clock_ms()
        for token in self.cache.tokens():
            if token.info.expiry_ms < now:
                log.info("delegation token %s of %s expired", token.info.token_id, token.info.owner)
                await self.store.delete_delegation_token(token.info.token_id)
                self.cache.remove(token.info.token_id)

    # ------------------------------------------------------------------ APIs -----
    async def create(self, req: Request, who: Requester) -> dict[str, Any]:
        b = req.body
        owner = who.principal
        if b.get("owner_principal_name"):  # KIP-373: on behalf of another owner
            owner = _principal(b.get("owner_principal_type") or USER_TYPE, b["owner_principal_name"])
        out: dict[str, Any] = {
            "error_code": 0, "principal_type": owner.split(":", 1)[0], "principal_name": owner.split(":", 1)[1],
            "token_requester_principal_type": who.principal.split(":", 1)[0],
            "token_requester_principal_name": who.principal.split(":", 1)[1], "issue_timestamp_ms": -1,
            "expiry_timestamp_ms": -1, "max_timestamp_ms": -1, "token_id": "", "hmac": b"", "throttle_time_ms": 0}
        renewers = tuple(_principal(r["principal_type"], r["principal_name"]) for r in b.get("renewers") or [])
        if not who.may_request_tokens:
            out["error_code"] = int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        elif owner != who.principal and not self.authorize(Op.CREATE_TOKENS, R.USER, owner):
            out["error_code"] = int(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
        elif any(r["principal_type"] != USER_TYPE for r in b.get("renewers") or []):
            out["error_code"] = int(ErrorCode.INVALID_PRINCIPAL_TYPE)
        elif not self.enabled:
            out["error_code"] = int(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        else:
            info = self.policy.new_token(owner, who.principal, renewers, b["max_lifetime_ms"], self.clock_ms())
            if len(json.dumps(info.to_znode())) > MAX_ZNODE_BYTES:
                out["error_code"] = int(ErrorCode.INVALID_REQUEST)  # (no error message in this response)
                return out
            try:
                await self.guarded.set_delegation_token(info.token_id, info.to_znode())
            except KafkaError as exc:
                out["error_code"] = int(exc.code)
                return out
            token = await self._cache(info)
            out.update(issue_timestamp_ms=info.issue_ms, expiry_timestamp_ms=info.expiry_ms,
                       max_timestamp_ms=info.max_ms, token_id=info.token_id, hmac=token.hmac)
        return out

    async def renew(self, req: Request, who: Requester) -> dict[str, Any]:
        return await self._change_expiry(req.body["hmac"], who, req.body["renew_period_ms"], renewal=True)

    async def expire(self, req: Request, who: Requester) -> dict[str, Any]:
        return await self._change_expiry(req.body["hmac"], who, req.body["expiry_time_period_ms"], renewal=False)

    async def _change_expiry(self, mac: bytes, who: Requester, period_ms: int, renewal: bool) -> dict[str, Any]:
        def answer(code: ErrorCode, expiry_ms: int = -1) -> dict[str, Any]:
            return {"error_code": int(code), "expiry_timestamp_ms": expiry_ms, "throttle_time_ms": 0}

        if not who.may_request_tokens:
            return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        if not self.enabled:
            return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        token = self.cache.find(bytes(mac or b""))
        if token is None:
            return answer(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
        now = self.clock_ms()
        code = check_token(token.info, who.principal, now)
        if code != ErrorCode.NONE:
            return answer(code)
        try:
            if not renewal and period_ms < 0:  # expire at once
                await self.guarded.delete_delegation_token(token.info.token_id)
                self.cache.remove(token.info.token_id)
                return answer(ErrorCode.NONE, now)
            expiry = (self.policy.renewed_expiry(token.info, period_ms, now) if renewal
                      else min(token.info.max_ms, now + period_ms))
            info = replace(token.info, expiry_ms=expiry)
            await self.guarded.set_delegation_token(info.token_id, info.to_znode())
        except KafkaError as exc:
            return answer(exc.code)
        await self._cache(info)
        return answer(ErrorCode.NONE, expiry)

    async def describe(self, req: Request, who: Requester) -> dict[str, Any]:
        def answer(code: ErrorCode, tokens: list[dict[str, Any]]) -> dict[str, Any]:
            return {"error_code": int(code), "tokens": tokens, "throttle_time_ms": 0}

        if not who.may_request_tokens:
            return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
        if not self.enabled:
            return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
        wanted = req.body.get("owners")
        owners = None if wanted is None else {_principal(o["principal_type"], o["principal_name"]) for o in wanted}
        out: list[dict[str, Any]] = []
        for token in self.cache.tokens():
            info = token.info
            if owners is not None and not owners.intersection((info.owner, info.requester, *info.renewers)):
                continue
            if not (info.owner_or_renewer(who.principal) or self.authorize(Op.DESCRIBE, R.DELEGATION_TOKEN,
                                                                           info.token_id)
                    or self.authorize(Op.DESCRIBE_TOKENS, R.USER, info.owner)):
                continue
            otype, oname = info.owner.split(":", 1)
            rtype, rname = info.requester.split(":", 1)
            out.append({"principal_type": otype, "principal_name": oname, "token_requester_principal_type": rtype,
                        "token_requester_principal_name": rname, "issue_timestamp": info.issue_ms,
                        "expiry_timestamp": info.expiry_ms, "max_timestamp": info.max_ms,
                        "token_id": info.token_id, "hmac": token.hmac, "renewers": _wire_principals(info.renewers)})
        return answer(ErrorCode.NONE, out)


class TokenChangeListener(NotificationListener):
    """Every broker re-reads a token named by a /delegation_token/token_changes
    notification (created, renewed, expired)."""

    path = TOKEN_CHANGES
    prefix = CHANGE_PREFIX

    def __init__(self, zk: AsyncZk, store: KafkaZkStore, tokens: DelegationTokenApis) -> None:
        super().__init__(zk, store)
        self.tokens = tokens

    async def start(self) -> None:
        if self.tokens.enabled:
            await super().start()

    async def _apply(self, seqs: list[int]) -> None:
        until_done = self.zk.until_done
        for seq in seqs:
            try:
                token_id = await until_done(partial(self.store.token_change_id, f"{CHANGE_PREFIX}{seq:010d}"),
                                            "token change")
                if token_id:
                    await until_done(partial(self.tokens.reload, token_id), "delegation token")
            except Exception as exc:  # noqa: BLE001 - e.g. a znode written badly by hand
                log.warning("token change %d not applied: %r", seq, exc)
