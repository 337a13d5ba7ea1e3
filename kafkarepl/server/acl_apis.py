"""DescribeAcls, CreateAcls, DeleteAcls with no authorizer configured: answered as Kafka
does then (SECURITY_DISABLED), so kafka-acls.sh and admin clients get a clear error
instead of an unsupported API. Issue 14 replaces this with an authorizer."""

from __future__ import annotations

from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import Request

NO_AUTHORIZER = "No Authorizer is configured on the broker"
Body = dict[str, Any]


class AclApis:
    async def describe_acls(self, req: Request) -> Body:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.SECURITY_DISABLED),
                "error_message": NO_AUTHORIZER, "resources": []}

    async def create_acls(self, req: Request) -> Body:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": NO_AUTHORIZER}
            for _ in req.body.get("creations") or []]}

    async def delete_acls(self, req: Request) -> Body:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": NO_AUTHORIZER, "matching_acls": []}
            for _ in req.body.get("filters") or []]}
