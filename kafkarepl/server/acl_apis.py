"""DescribeAcls, CreateAcls, DeleteAcls (kafka-acls.sh). Without an authorizer
(authorizer.class.name empty, Kafka's default) they answer SECURITY_DISABLED, as Kafka
does; with one they read and change the ACLs in ZooKeeper (acl_store.py), which every
broker applies within moments."""

from __future__ import annotations

from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import Request
from kafkarepl.server.acl_store import AclStore
from kafkarepl.server.authorizer import AclBinding, AclFilter, Authorizer

NO_AUTHORIZER = "No Authorizer is configured on the broker"
Body = dict[str, Any]


def _filter(f: Body) -> AclFilter:
    return AclFilter(f["resource_type_filter"], f.get("resource_name_filter"), f.get("pattern_type_filter", 3),
                     f.get("principal_filter"), f.get("host_filter"), f["operation"], f["permission_type"])


def _binding_body(b: AclBinding) -> Body:
    return {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission}


class AclApis:
    def __init__(self, authorizer: Authorizer | None = None, store: AclStore | None = None) -> None:
        self.authorizer = authorizer
        self.store = store

    async def describe_acls(self, req: Request) -> Body:
        if self.authorizer is None:
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.SECURITY_DISABLED),
                    "error_message": NO_AUTHORIZER, "resources": []}
        found = self.authorizer.matching(_filter(req.body))
        by_resource: dict[tuple[int, str, int], list[Body]] = {}
        for b in found:
            by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(_binding_body(b))
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in by_resource.items()]}

    async def create_acls(self, req: Request) -> Body:
        creations = req.body.get("creations") or []
        if self.authorizer is None or self.store is None:
            return {"throttle_time_ms": 0, "results": [
                {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": NO_AUTHORIZER} for _ in creations]}
        results: list[Body] = []
        valid: list[AclBinding] = []
        for c in creations:
            b = AclBinding(c["resource_type"], c["resource_name"], c.get("resource_pattern_type", 3), c["principal"],
                           c["host"], c["operation"], c["permission_type"])
            problem = b.problem()
            if problem:
                results.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": problem})
            else:
                valid.append(b)
                results.append({"error_code": 0, "error_message": None})
        if valid:
            await self.store.change(add=valid)
        return {"throttle_time_ms": 0, "results": results}

    async def delete_acls(self, req: Request) -> Body:
        filters = req.body.get("filters") or []
        if self.authorizer is None or self.store is None:
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": NO_AUTHORIZER, "matching_acls": []}
                for _ in filters]}
        out = []
        doomed: list[AclBinding] = []
        for f in filters:
            matched = self.authorizer.matching(_filter(f))
            doomed += matched
            out.append({"error_code": 0, "error_message": None, "matching_acls": [
                {"error_code": 0, "error_message": None, "resource_type": b.resource_type,
                 "resource_name": b.resource_name, "pattern_type": b.pattern_type, **_binding_body(b)}
                for b in matched]})
        if doomed:
            await self.store.change(remove=doomed)
        return {"throttle_time_ms": 0, "filter_results": out}
