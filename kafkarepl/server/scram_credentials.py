"""SCRAM credentials: stored salted in ZooKeeper (/config/users/<name>, Kafka's format),
cached on every broker (a login never waits for ZooKeeper), reloaded when a users/<name>
change notification arrives; AlterUserScramCredentials and DescribeUserScramCredentials."""

from __future__ import annotations

import logging
from typing import Any

from kafkarepl.aio import paced
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import Request
from kafkarepl.server.sasl import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
)
from kafkarepl.server.zk_guard import GuardedStore
from kafkarepl.zk.store import KafkaZkStore

log = logging.getLogger(__name__)
_IDS = {v: k for k, v in MECHANISM_IDS.items()}


class ScramCredentials:
    def __init__(self, store: KafkaZkStore, guarded: GuardedStore) -> None:
        self.store = store  # start-up and notifications (their callers retry ZooKeeper trouble)
        self.guarded = guarded  # requests: REQUEST_TIMED_OUT per user
        self._cache: dict[str, dict[str, ScramCredential]] = {}  # user -> mechanism -> credential

    async def load(self) -> None:
        for user in await self.store.get_user_names():
            await self.reload(user)

    async def reload(self, user: str) -> None:
        self._cache_config(user, await self.store.get_user_config(user))

    def _cache_config(self, user: str, config: dict[str, str]) -> None:
        creds: dict[str, ScramCredential] = {}
        for mech, text in config.items():
            if mech in MECHANISMS:
                try:
                    creds[mech] = ScramCredential.decode(text)
                except (ValueError, KeyError):
                    log.warning("user %s: unreadable %s credential ignored", user, mech)
        if creds:
            self._cache[user] = creds
        else:
            self._cache.pop(user, None)

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._cache.get(user, {}).get(mechanism)

    # ------------------------------------------------------------------ APIs -----
    async def describe(self, req: Request) -> dict[str, Any]:
        users = req.body.get("users")
        names = sorted(self._cache) if users is None else [u["name"] for u in users]
        results: list[dict[str, Any]] = []
        async for name in paced(names):  # the client names the users
            creds = self._cache.get(name)
            if not creds:
                results.append({"user": name, "error_code": int(ErrorCode.RESOURCE_NOT_FOUND),
                                "error_message": f"Attempt to describe a user credential that does not exist: {name}",
                                "credential_infos": []})
                continue
            results.append({"user": name, "error_code": 0, "error_message": None, "credential_infos": [
                {"mechanism": _IDS[m], "iterations": c.iterations} for m, c in sorted(creds.items())]})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}

    async def alter(self, req: Request) -> dict[str, Any]:
        b = req.body
        changes: dict[str, dict[str, str | None]] = {}
        errors: dict[str, tuple[ErrorCode, str]] = {}
        async for d in paced(b.get("deletions") or []):  # the client sets how many
            mech = MECHANISM_IDS.get(d["mechanism"])
            if not d["name"] or "/" in d["name"] or d["name"] in (".", ".."):
                errors[d["name"]] = (ErrorCode.RESOURCE_NOT_FOUND, "No such user")
            elif mech is None:
                errors[d["name"]] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            else:
                changes.setdefault(d["name"], {})[mech] = None
        async for u in paced(b.get("upsertions") or [], 100):  # ~10 us of HMACs each
            mech = MECHANISM_IDS.get(u["mechanism"])
            if mech is None:
                errors[u["name"]] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif not MIN_ITERATIONS <= u["iterations"] <= MAX_ITERATIONS:
                errors[u["name"]] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                                     f"Iterations {u['iterations']} outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
            elif not u["name"] or "/" in u["name"] or u["name"] in (".", "..") or len(u["name"]) > 255:
                errors[u["name"]] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username is empty or not a valid name")
            else:
                cred = ScramCredential.from_salted_password(mech, bytes(u["salt"]), bytes(u["salted_password"]),
                                                            u["iterations"])
                changes.setdefault(u["name"], {})[mech] = cred.encode()
        results: list[dict[str, Any]] = []
        for name, change in changes.items():
            if name in errors:
                continue
            try:
                config = await self.guarded.get_user_config(name)
                missing = [m for m, v in change.items() if v is None and m not in config]
                if missing:
                    errors[name] = (ErrorCode.RESOURCE_NOT_FOUND,
                                    f"Attempt to delete a user credential that does not exist: {missing[0]}")
                    continue
                for m, v in change.items():
                    if v is None:
                        config.pop(m, None)
                    else:
                        config[m] = v
                await self.guarded.set_user_config(name, config)
            except KafkaError as exc:  # ZooKeeper unavailable: this user's change only
                errors[name] = (exc.code, str(exc))
                continue
            self._cache_config(name, config)
            results.append({"user": name, "error_code": 0, "error_message": None})
        results += [{"user": n, "error_code": int(c), "error_message": m} for n, (c, m) in errors.items()]
        return {"throttle_time_ms": 0, "results": results}
