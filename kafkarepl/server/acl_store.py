"""ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them, and their cache on every broker.

/kafka-acl/<ResourceType>/<name> (LITERAL) and /kafka-acl-extended/prefixed/<ResourceType>/<name>
(PREFIXED) hold {"version": 1, "acls": [{"principal", "permissionType", "operation",
"host"}]}; every change adds a sequential /kafka-acl-extended-changes/acl_changes_<seq>
naming the resource, and each broker watching that directory reloads it into its
Authorizer within moments. Writes are conditional on the znode version (two admins never
lose each other's change).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from functools import partial

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafkarepl.server.authorizer import AclBinding, Authorizer, PatternType
from kafkarepl.zk.client import AsyncZk, WatchHandle

log = logging.getLogger(__name__)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
CHANGES = "/kafka-acl-extended-changes"
PREFIX = "acl_changes_"
RESOURCE_NAMES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken", 7: "User"}
RESOURCE_IDS = {v: k for k, v in RESOURCE_NAMES.items()}
OPERATION_NAMES = {2: "All", 3: "Read", 4: "Write", 5: "Create", 6: "Delete", 7: "Alter", 8: "Describe",
                   9: "ClusterAction", 10: "DescribeConfigs", 11: "AlterConfigs", 12: "IdempotentWrite",
                   13: "CreateTokens", 14: "DescribeTokens"}
OPERATION_IDS = {v: k for k, v in OPERATION_NAMES.items()}
PERMISSION_NAMES = {2: "Deny", 3: "Allow"}
PERMISSION_IDS = {v: k for k, v in PERMISSION_NAMES.items()}


def _path(resource_type: int, pattern_type: int, name: str) -> str:
    root = LITERAL_ROOT if pattern_type == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{RESOURCE_NAMES[resource_type]}/{name}"


def _decode(resource_type: int, pattern_type: int, name: str, data: bytes) -> list[AclBinding]:
    out = []
    for a in json.loads(data or b"{}").get("acls", []):
        out.append(AclBinding(resource_type, name, pattern_type, a["principal"], a["host"],
                              OPERATION_IDS[a["operation"]], PERMISSION_IDS[a["permissionType"]]))
    return out


def _encode(bindings: Iterable[AclBinding]) -> bytes:
    return json.dumps({"version": 1, "acls": [
        {"principal": b.principal, "permissionType": PERMISSION_NAMES[b.permission],
         "operation": OPERATION_NAMES[b.operation], "host": b.host}
        for b in sorted(bindings, key=lambda x: (x.principal, x.host, x.operation, x.permission))]}).encode()


class AclStore:
    def __init__(self, zk: AsyncZk, authorizer: Authorizer) -> None:
        self.zk = zk
        self.authorizer = authorizer
        self._last_seq = -1
        self._watch: WatchHandle | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Load every ACL, then follow the change notifications. The notifications seen
        are noted before the load: one written during it is then newer and applied."""
        await self.zk.ensure_path(CHANGES)
        children = await self.zk.get_children(CHANGES)
        seqs = [int(c[len(PREFIX):]) for c in children if c.startswith(PREFIX)]
        for pattern, root in ((PatternType.LITERAL, LITERAL_ROOT), (PatternType.PREFIXED, PREFIXED_ROOT)):
            for rname, rid in RESOURCE_IDS.items():
                try:
                    names = await self.zk.get_children(f"{root}/{rname}")
                except NoNodeError:
                    continue
                for name in names:
                    await self._reload(rid, pattern, name)
        self._last_seq = max(seqs, default=-1)
        self._watch = await self.zk.children_watch(CHANGES, self._on_changes)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    def _on_changes(self, children: list[str]) -> None:
        new = sorted(int(c[len(PREFIX):]) for c in children if c.startswith(PREFIX) and int(c[len(PREFIX):]) > self._last_seq)
        if new:
            self._last_seq = new[-1]
            asyncio.ensure_future(self._apply(new))

    async def _apply(self, seqs: list[int]) -> None:
        async with self._lock:
            for seq in seqs:
                try:
                    # Cut off by a ZooKeeper blip: read again once connected. A dropped
                    # revoke would leave the access granted on this broker.
                    await self.zk.until_done(partial(self._apply_one, seq), "ACL change")
                except NoNodeError:
                    continue  # purged
                except Exception as exc:  # noqa: BLE001 - a bad notification must not stop the others
                    log.warning("ACL change %d not applied: %r", seq, exc)

    async def _apply_one(self, seq: int) -> None:
        data, _ = await self.zk.get(f"{CHANGES}/{PREFIX}{seq:010d}")
        change = json.loads(data)
        await self._reload(RESOURCE_IDS[change["resourceType"]],
                           PatternType.PREFIXED if change["patternType"] == "Prefixed" else PatternType.LITERAL,
                           change["name"])

    async def _reload(self, resource_type: int, pattern_type: int, name: str) -> None:
        try:
            data, _ = await self.zk.get(_path(resource_type, pattern_type, name))
            bindings = _decode(resource_type, pattern_type, name, data)
        except NoNodeError:
            bindings = []
        self.authorizer.replace_resource(resource_type, pattern_type, name, bindings)

    async def change(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None:
        """Add and remove bindings (grouped per resource), then notify every broker."""
        by_resource: dict[tuple[int, int, str], tuple[set[AclBinding], set[AclBinding]]] = {}
        for b in add:
            by_resource.setdefault((b.resource_type, b.pattern_type, b.resource_name), (set(), set()))[0].add(b)
        for b in remove:
            by_resource.setdefault((b.resource_type, b.pattern_type, b.resource_name), (set(), set()))[1].add(b)
        for (rtype, pattern, name), (plus, minus) in by_resource.items():
            path = _path(rtype, pattern, name)
            while True:  # optimistic: conditional on the znode version
                try:
                    data, stat = await self.zk.get(path)
                    current = set(_decode(rtype, pattern, name, data))
                    version: int | None = stat.version
                except NoNodeError:
                    current, version = set(), None
                new = (current | plus) - minus
                try:
                    if version is None:
                        if not new:
                            break
                        await self.zk.create(path, _encode(new), makepath=True)
                    elif new:
                        await self.zk.set(path, _encode(new), version)
                    else:
                        await self.zk.delete(path, version)
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
            await self.zk.create(f"{CHANGES}/{PREFIX}", json.dumps({
                "version": 1, "resourceType": RESOURCE_NAMES[rtype], "name": name,
                "patternType": "Prefixed" if pattern == PatternType.PREFIXED else "Literal"}).encode(),
                sequence=True, makepath=True)
            await self._reload(rtype, pattern, name)  # this broker at once
