"""DescribeClientQuotas and AlterClientQuotas (KIP-546), over the quota configs in
ZooKeeper; and keeping every broker's ClientQuotas current with them (loaded at start,
reloaded per config change notification of a users/... or clients/... entity)."""

from __future__ import annotations

import logging
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import Request
from kafkarepl.server.client_quotas import (
    ClientQuotas,
    Entity,
    QuotaError,
    check_op,
    entity_from_path,
    entity_of,
    entity_path,
    quota_values,
)
from kafkarepl.server.zk_guard import GuardedStore
from kafkarepl.zk.store import KafkaZkStore

log = logging.getLogger(__name__)


def _wire_entity(entity: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


class ClientQuotaApis:
    def __init__(self, store: KafkaZkStore, guarded: GuardedStore, quotas: ClientQuotas) -> None:
        self.store = store  # start-up and notifications (their callers retry ZooKeeper trouble)
        self.guarded = guarded  # requests: ZooKeeper trouble answered as REQUEST_TIMED_OUT
        self.quotas = quotas

    async def load(self) -> None:
        configs: dict[Entity, dict[str, float]] = {}
        for path in await self.store.quota_entity_paths():
            entity = entity_from_path(path)
            if entity is not None:
                configs[entity] = quota_values(await self.store.get_entity_config(path))
        self.quotas.replace_all(configs)

    async def reload(self, path: str) -> None:
        """A config change notification for `path` ("users/alice", "clients/app", ...)."""
        entity = entity_from_path(path)
        if entity is not None:
            self.quotas.set_config(entity, quota_values(await self.store.get_entity_config(path)))

    async def describe(self, req: Request) -> dict[str, Any]:
        b = req.body
        components = [(c["entity_type"], c["match_type"], c["match"]) for c in b["components"] or []]
        try:
            found = self.quotas.describe(components, b["strict"])
        except QuotaError as exc:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": str(exc), "entries": None}
        entries = [{"entity": _wire_entity(entity),
                    "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
                   for entity, values in found]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}

    async def alter(self, req: Request) -> dict[str, Any]:
        b = req.body
        out: list[dict[str, Any]] = []
        for e in b["entries"] or []:
            wire = e["entity"] or []
            try:
                entity = entity_of((c["entity_type"], c["entity_name"]) for c in wire)
                changes: dict[str, str | None] = {}
                for op in e["ops"] or []:
                    if op["key"] in changes:
                        raise QuotaError(f"Duplicate quota key {op['key']}")
                    changes[op["key"]] = None if op["remove"] else check_op(entity, op["key"], op["value"])
                if not b["validate_only"]:
                    await self._apply(entity, changes)
            except QuotaError as exc:
                out.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": str(exc), "entity": wire})
                continue
            except KafkaError as exc:  # e.g. ZooKeeper unavailable: this entry only
                out.append({"error_code": int(exc.code), "error_message": str(exc), "entity": wire})
                continue
            except Exception as exc:  # noqa: BLE001 - this entry only: no top-level error code to fail with
                log.exception("AlterClientQuotas of %s failed", wire)
                out.append({"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": str(exc)[:1000],
                            "entity": wire})
                continue
            out.append({"error_code": 0, "error_message": None, "entity": wire})
        return {"throttle_time_ms": 0, "entries": out}

    async def _apply(self, entity: Entity, changes: dict[str, str | None]) -> None:
        path = entity_path(entity)
        config = await self.guarded.get_entity_config(path)
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        await self.guarded.set_entity_config(path, config)
        self.quotas.set_config(entity, quota_values(config))
        log.info("client quotas of %s set to %s", path, quota_values(config))
