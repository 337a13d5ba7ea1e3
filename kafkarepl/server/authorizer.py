"""ACLs with Kafka's semantics (AclAuthorizer), sans-I/O: bindings, filters, and the
authorize decision over an in-memory set of bindings (acl_store.py keeps it in sync with
ZooKeeper on every broker).

A request by `principal` from `host` for `operation` on a resource (type, name) is
allowed when the principal is a super user (super.users), or when an ALLOW binding
matches and no DENY binding does; a binding matches by resource (LITERAL name, the
LITERAL "*" wildcard, or a PREFIXED name the resource name starts with), principal (or
"User:*"), host (or "*") and operation (ALL covers every operation; READ, WRITE, DELETE
and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS). A resource no binding
matches at all is allowed only with allow.everyone.if.no.acl.found=true.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from kafkarepl.server.authorized_ops import SUPPORTED, AclOperation, ResourceType


class PatternType(IntEnum):
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Permission(IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


OP_ANY, OP_ALL = 1, 2
RESOURCE_ANY = 1
WILDCARD = "*"
# Kafka's implications: holding one of these also allows DESCRIBE (or DESCRIBE_CONFIGS).
_IMPLIED_BY = {
    AclOperation.DESCRIBE: {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER},
    AclOperation.DESCRIBE_CONFIGS: {AclOperation.ALTER_CONFIGS},
}


@dataclass(frozen=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int  # LITERAL or PREFIXED
    principal: str
    host: str
    operation: int
    permission: int  # DENY or ALLOW

    def problem(self) -> str | None:
        """Why Kafka would refuse to create it, or None."""
        if self.resource_type not in {int(t) for t in ResourceType}:
            return f"unknown resource type {self.resource_type}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "pattern type must be LITERAL or PREFIXED"
        if not self.resource_name:
            return "empty resource name"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != "kafka-cluster":
            return "the cluster resource is named kafka-cluster"
        if ":" not in self.principal:
            return f"principal {self.principal!r} is not TYPE:NAME"
        if self.permission not in (Permission.DENY, Permission.ALLOW):
            return "permission must be DENY or ALLOW"
        if self.operation != OP_ALL and self.operation not in {
                int(o) for o in SUPPORTED.get(ResourceType(self.resource_type), frozenset())}:
            return f"operation {self.operation} does not apply to resource type {self.resource_type}"
        return None


@dataclass(frozen=True)
class AclFilter:
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != RESOURCE_ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not _resource_matches(b, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and self.pattern_type != b.pattern_type:
                return False
            if self.resource_name is not None and self.resource_name != b.resource_name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != OP_ANY and self.operation != b.operation:
            return False
        return self.permission == Permission.ANY or self.permission == b.permission


def _resource_matches(b: AclBinding, name: str) -> bool:
    if b.pattern_type == PatternType.LITERAL:
        return b.resource_name == name or b.resource_name == WILDCARD
    return name.startswith(b.resource_name)


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = set(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.bindings: set[AclBinding] = set()
        self.version = 0  # changes with the bindings (what was resolved under them is stale)

    def replace_resource(self, resource_type: int, pattern_type: int, name: str, bindings: Iterable[AclBinding]) -> None:
        """The bindings of one stored resource, as ZooKeeper now holds them."""
        self.bindings = {b for b in self.bindings if (b.resource_type, b.pattern_type, b.resource_name)
                         != (resource_type, pattern_type, name)} | set(bindings)
        self.version += 1

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        relevant = [b for b in self.bindings if b.resource_type == resource_type and _resource_matches(b, name)]
        if not relevant:
            return self.allow_if_no_acl
        mine = [b for b in relevant if b.principal in (principal, "User:*") and b.host in (host, WILDCARD)]

        def covers(b: AclBinding) -> bool:
            return b.operation in (OP_ALL, int(operation)) or (
                b.permission == Permission.ALLOW and int(b.operation) in {int(o) for o in _IMPLIED_BY.get(operation, ())})

        if any(b.permission == Permission.DENY and b.operation in (OP_ALL, int(operation)) for b in mine):
            return False
        return any(b.permission == Permission.ALLOW and covers(b) for b in mine)

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether `principal` may do `operation` on some resource of the type (KIP-679,
        Kafka's Authorizer.authorizeByResourceType): super users and what
        allow.everyone.if.no.acl.found lets through; otherwise some ALLOW of it, literal or
        prefixed, not dominated by a DENY (a literal DENY of the same name, a prefixed one
        of a prefix of it; a wildcard DENY refuses all)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[tuple[int, str]] = []
        for b in self.bindings:
            if (b.resource_type != resource_type or b.host not in (host, WILDCARD)
                    or b.principal not in (principal, "User:*") or b.operation not in (OP_ALL, int(operation))):
                continue
            if b.permission == Permission.DENY:
                if b.pattern_type == PatternType.LITERAL:
                    if b.resource_name == WILDCARD:
                        return False
                    deny_literal.add(b.resource_name)
                else:
                    deny_prefixed.add(b.resource_name)
            elif b.permission == Permission.ALLOW:
                if b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD:
                    return True
                allows.append((b.pattern_type, b.resource_name))
        for pattern, name in allows:
            if pattern == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False

    def matching(self, f: AclFilter) -> list[AclBinding]:
        return sorted((b for b in self.bindings if f.matches(b)),
                      key=lambda b: (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
                                     b.operation, b.permission))
