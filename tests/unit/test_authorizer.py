"""Kafka's ACL semantics in server/authorizer.py."""

from __future__ import annotations

from kafkarepl.server.authorized_ops import AclOperation as Op
from kafkarepl.server.authorized_ops import ResourceType as R
from kafkarepl.server.authorizer import AclBinding, AclFilter, Authorizer

ALLOW, DENY, LITERAL, PREFIXED = 3, 2, 3, 4


def acl(name: str, principal: str, op: int, perm: int = ALLOW, pattern: int = LITERAL, rtype: int = 2,
        host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*bindings: AclBinding, super_users=(), allow_if_none=False) -> Authorizer:
    a = Authorizer(super_users, allow_if_none)
    for b in bindings:
        a.replace_resource(b.resource_type, b.pattern_type, b.resource_name,
                           [x for x in bindings if (x.resource_type, x.pattern_type, x.resource_name)
                            == (b.resource_type, b.pattern_type, b.resource_name)])
    return a


def test_no_acl_found_denies_unless_configured_and_super_users_pass() -> None:
    assert not authz().authorize("User:a", "1.2.3.4", Op.READ, R.TOPIC, "t")
    assert authz(allow_if_none=True).authorize("User:a", "h", Op.READ, R.TOPIC, "t")
    assert authz(super_users=["User:root"]).authorize("User:root", "h", Op.ALTER, R.CLUSTER, "kafka-cluster")
    # Once a resource has ACLs, allow_if_none no longer applies to it.
    assert not authz(acl("t", "User:b", Op.READ), allow_if_none=True).authorize("User:a", "h", Op.READ, R.TOPIC, "t")


def test_patterns_wildcards_hosts_and_deny_wins() -> None:
    a = authz(acl("*", "User:a", Op.READ), acl("pay", "User:a", Op.WRITE, pattern=PREFIXED),
              acl("payroll", "User:*", Op.WRITE, DENY), acl("x", "User:a", Op.READ, host="10.0.0.1"))
    assert a.authorize("User:a", "h", Op.READ, R.TOPIC, "anything")
    assert a.authorize("User:a", "h", Op.WRITE, R.TOPIC, "payments")
    assert not a.authorize("User:a", "h", Op.WRITE, R.TOPIC, "payroll")  # DENY for User:* wins
    assert not a.authorize("User:a", "h", Op.WRITE, R.TOPIC, "other")
    assert not a.authorize("User:a", "10.0.0.2", Op.READ, R.GROUP, "x")  # other resource type


def test_implied_describe_and_all() -> None:
    a = authz(acl("t", "User:a", Op.WRITE), acl("u", "User:a", 2), acl("t", "User:a", Op.ALTER_CONFIGS))
    assert a.authorize("User:a", "h", Op.DESCRIBE, R.TOPIC, "t")  # implied by WRITE
    assert a.authorize("User:a", "h", Op.DESCRIBE_CONFIGS, R.TOPIC, "t")  # implied by ALTER_CONFIGS
    assert not a.authorize("User:a", "h", Op.READ, R.TOPIC, "t")
    assert a.authorize("User:a", "h", Op.DELETE, R.TOPIC, "u")  # ALL
    d = authz(acl("t", "User:a", Op.READ), acl("t", "User:a", Op.DESCRIBE, DENY))
    assert not d.authorize("User:a", "h", Op.DESCRIBE, R.TOPIC, "t")  # an explicit DENY is not overridden


def test_filters_and_validation() -> None:
    b1, b2 = acl("t", "User:a", Op.READ), acl("te", "User:b", Op.WRITE, pattern=PREFIXED)
    a = authz(b1, b2)
    assert a.matching(AclFilter(1, None, 1, None, None, 1, 1)) == [b1, b2]
    assert a.matching(AclFilter(2, "test", 2, None, None, 1, 1)) == [b2]  # MATCH: what applies to "test"
    assert a.matching(AclFilter(2, None, 3, "User:a", None, 1, 1)) == [b1]
    assert acl("c", "User:a", Op.READ, rtype=4).problem()  # the cluster is named kafka-cluster
    assert acl("t", "alice", Op.READ).problem()  # principal without type
    assert acl("t", "User:a", Op.CLUSTER_ACTION).problem()  # not a topic operation
    assert acl("t", "User:a", Op.READ).problem() is None
