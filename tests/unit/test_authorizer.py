"""Kafka's ACL semantics in server/authorizer.py."""

from __future__ import annotations

from kafkarepl.server.authorized_ops import AclOperation as Op
from kafkarepl.server.authorized_ops import ResourceType as R
from kafkarepl.server.authorizer import OP_ALL, AclBinding, AclFilter, Authorizer

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


def test_authorize_by_resource_type_as_kip_679() -> None:
    """Kafka's authorizeByResourceType: what an idempotent producer's InitProducerId needs
    (WRITE on some topic) when it has no IDEMPOTENT_WRITE on the cluster."""
    def some(a: Authorizer, principal: str = "User:a", host: str = "h") -> bool:
        return a.authorize_by_resource_type(principal, host, Op.WRITE, R.TOPIC)

    assert not some(authz())
    assert some(authz(allow_if_none=True))
    assert some(authz(acl("*", "User:a", Op.WRITE, DENY), super_users=["User:a"]))  # super users pass
    assert some(authz(acl("orders", "User:a", Op.WRITE)))
    assert some(authz(acl("orders", "User:*", OP_ALL)))
    assert not some(authz(acl("orders", "User:a", Op.READ)))  # another operation
    assert not some(authz(acl("orders", "User:b", Op.WRITE)))  # another principal
    assert not some(authz(acl("orders", "User:a", Op.WRITE, host="10.0.0.9")))  # another host
    assert not some(authz(acl("orders", "User:a", Op.WRITE), acl("orders", "User:a", Op.WRITE, DENY)))
    assert not some(authz(acl("orders", "User:a", Op.WRITE), acl("ord", "User:a", Op.WRITE, DENY, PREFIXED)))
    assert not some(authz(acl("or", "User:a", Op.WRITE, pattern=PREFIXED),
                          acl("o", "User:*", Op.WRITE, DENY, PREFIXED)))
    assert not some(authz(acl("orders", "User:a", Op.WRITE), acl("*", "User:a", Op.WRITE, DENY)))
    # a DENY of another name does not dominate; a wildcard ALLOW wins over literal DENYs
    assert some(authz(acl("orders", "User:a", Op.WRITE), acl("payments", "User:a", Op.WRITE, DENY)))
    assert some(authz(acl("*", "User:a", Op.WRITE), acl("payments", "User:a", Op.WRITE, DENY)))
    assert some(authz(acl("orders", "User:a", Op.WRITE), acl("orders-x", "User:a", Op.WRITE, DENY, PREFIXED)))
