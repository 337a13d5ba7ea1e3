"""`*_authorized_operations` fields (KIP-430) of Metadata, DescribeCluster and
DescribeGroups: a 32-bit set of ACL operation codes.

Asked for without an authorizer, Kafka answers every operation the resource type
supports (its AuthHelper.authorizedOperations); not asked for, INT32_MIN. An authorizer,
when there is one, narrows the set.
"""

from __future__ import annotations

from enum import IntEnum

OMITTED = -2147483648  # the client did not ask


class AclOperation(IntEnum):
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


Op = AclOperation
SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                                   Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE}),
    ResourceType.CLUSTER: frozenset({Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                                     Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Op.DESCRIBE, Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Op.DESCRIBE}),
    ResourceType.USER: frozenset({Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS}),
}


def authorized_operations(resource: ResourceType, requested: bool) -> int:
    """The field's value with no authorizer configured."""
    if not requested:
        return OMITTED
    bits = 0
    for op in SUPPORTED[resource]:
        bits |= 1 << int(op)
    return bits
