"""The declaration vocabulary: fields, structs, arrays and API specs as plain data.

Every API is declared once in ``messages.py`` with these classes; ``codec.py`` compiles a
declaration into an encoder/decoder per (API, version, direction). Field names follow
Kafka's JSON schemas (CamelCase); decoded dicts use their snake_case ``key``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

# Primitive type names (Kafka's JSON spelling).
INT8 = "int8"
INT16 = "int16"
INT32 = "int32"
INT64 = "int64"
UINT16 = "uint16"
UINT32 = "uint32"
FLOAT64 = "float64"
BOOL = "bool"
UUID = "uuid"  # decoded as uuid.UUID; encode accepts uuid.UUID or 16 bytes
STRING = "string"
BYTES = "bytes"
RECORDS = "records"  # like nullable bytes, but decoded as a zero-copy memoryview

PRIMITIVES = frozenset({INT8, INT16, INT32, INT64, UINT16, UINT32, FLOAT64, BOOL, UUID, STRING,
                        BYTES, RECORDS})

MAX_VERSION = 0x7FFF


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


# Marks a field declared without an explicit default: it then takes its type's default
# (0, False, "", b"", [], a struct of defaults; null for records).
NO_DEFAULT = _NoDefault()
VersionRange = tuple[int, int]


def parse_versions(spec: str | None) -> VersionRange | None:
    """'3+' -> (3, MAX), '1-4' -> (1, 4), '2' -> (2, 2), None/'none' -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def in_range(version: int, rng: VersionRange | None) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """Kafka field name -> dict key: 'ProducerId' -> 'producer_id', 'IsrNodes' -> 'isr_nodes'."""
    return _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name)).lower()


class Struct:
    """An ordered group of fields (a nested object, or an array element)."""

    __slots__ = ("fields",)

    def __init__(self, *fields: Field) -> None:
        self.fields = fields

    def __repr__(self) -> str:
        return f"Struct({', '.join(f.name for f in self.fields)})"


class Array:
    """An array of a primitive type or of a Struct."""

    __slots__ = ("item",)

    def __init__(self, item: str | Struct) -> None:
        self.item = item

    def __repr__(self) -> str:
        return f"Array({self.item!r})"


FieldType = str | Struct | Array


class Field:
    """One field: present in ``versions``; null allowed in ``nullable`` versions; sent in
    the tagged-field section (with ``tag``) in ``tagged`` versions."""

    __slots__ = ("name", "key", "type", "versions", "nullable", "tagged", "tag", "default")

    def __init__(
        self,
        name: str,
        type: FieldType,
        versions: str = "0+",
        *,
        nullable: str | None = None,
        tagged: str | None = None,
        tag: int | None = None,
        default: object = NO_DEFAULT,
    ) -> None:
        if isinstance(type, str) and type not in PRIMITIVES:
            raise ValueError(f"{name}: unknown type {type!r}")
        if (tagged is None) != (tag is None):
            raise ValueError(f"{name}: tagged fields need both tagged= and tag=")
        self.name = name
        self.key = snake_case(name)
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.tagged = parse_versions(tagged)
        self.tag = tag
        self.default = default

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r})"


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


@dataclass(frozen=True)
class ApiSpec:
    """One API: its version range and the request/response field trees."""

    key: ApiKey
    name: str
    min_version: int
    max_version: int
    flexible_min_version: int | None  # first version using compact types + tagged fields
    request: tuple[Field, ...]
    response: tuple[Field, ...]

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min_version is not None and version >= self.flexible_min_version

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def api(key: ApiKey, name: str, versions: str, flexible: str | None,
        request: list[Field], response: list[Field]) -> ApiSpec:
    rng = parse_versions(versions)
    if rng is None:
        raise ValueError(f"{name}: an API needs a version range, not {versions!r}")
    lo, hi = rng
    flex = parse_versions(flexible)
    return ApiSpec(key, name, lo, hi, flex[0] if flex else None, tuple(request), tuple(response))
