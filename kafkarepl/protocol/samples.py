"""Random but valid bodies for any declared API version, generated from the declarations.

Used by round-trip tests, fuzzers and benchmarks: a body holds exactly the fields present
at the version (tagged ones included, at random sometimes left at their default).
"""

from __future__ import annotations

import random
import string
import uuid
from typing import Any

from .schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Field,
    Struct,
    in_range,
)

_INT_BITS = {INT8: 8, INT16: 16, INT32: 32, INT64: 64}
_UINT_BITS = {UINT16: 16, UINT32: 32}


def sample_body(fields: tuple[Field, ...], version: int, flexible: bool,
                rng: random.Random, depth: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for f in fields:
        if not in_range(version, f.versions):
            continue
        if flexible and in_range(version, f.tagged) and rng.random() < 0.3:
            continue  # tagged and left out: decodes to the default
        body[f.key] = _sample_value(f, version, flexible, rng, depth)
    return body


def _sample_value(f: Field, version: int, flexible: bool, rng: random.Random, depth: int) -> Any:
    if in_range(version, f.nullable) and rng.random() < 0.2:
        return None
    t = f.type
    if isinstance(t, Struct):
        return sample_body(t.fields, version, flexible, rng, depth + 1)
    if isinstance(t, Array):
        n = rng.randint(0, 3 if depth < 2 else 1)
        item = t.item
        if isinstance(item, Struct):
            return [sample_body(item.fields, version, flexible, rng, depth + 1) for _ in range(n)]
        return [sample_scalar(item, rng) for _ in range(n)]
    return sample_scalar(t, rng)


def sample_scalar(t: str, rng: random.Random) -> Any:
    if t in _INT_BITS:
        bits = _INT_BITS[t]
        return rng.choice([0, -1, 1, -(1 << (bits - 1)), (1 << (bits - 1)) - 1,
                           rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)])
    if t in _UINT_BITS:
        return rng.randint(0, (1 << _UINT_BITS[t]) - 1)
    if t == BOOL:
        return rng.random() < 0.5
    if t == FLOAT64:
        return rng.choice([0.0, 1.5, -2.25, 1e300])
    if t == UUID:
        return uuid.UUID(int=rng.getrandbits(128))
    if t == STRING:
        n = rng.choice([0, 1, 5, 20, 200])
        return "".join(rng.choice(string.ascii_letters + "é-_.☃") for _ in range(n))
    if t == BYTES:
        return rng.randbytes(rng.choice([0, 1, 7, 300]))
    if t == RECORDS:
        return rng.randbytes(rng.choice([0, 61, 500]))
    raise ValueError(t)


def body_mismatch(fields: tuple[Field, ...], sent: dict, got: dict, path: str = "") -> str | None:
    """Where ``got`` (a decoded body) differs from ``sent`` (None when it matches): keys
    of ``sent`` must decode equal (memoryview compared as bytes), others to defaults."""
    from .codec import default_value

    if set(got) != {f.key for f in fields}:
        return f"{path}: keys {sorted(got)}"
    for f in fields:
        where = f"{path}.{f.key}"
        want, have = sent.get(f.key, default_value(f)), got[f.key]
        if want is None or have is None:
            if want is not have:
                return f"{where}: {have!r} != {want!r}"
        elif isinstance(f.type, Struct):
            if (m := body_mismatch(f.type.fields, want, have, where)) is not None:
                return m
        elif isinstance(f.type, Array) and isinstance(f.type.item, Struct):
            if len(have) != len(want):
                return f"{where}: {len(have)} elements != {len(want)}"
            for i, (w, h) in enumerate(zip(want, have, strict=True)):
                if (m := body_mismatch(f.type.item.fields, w, h, f"{where}[{i}]")) is not None:
                    return m
        elif (bytes(have) if isinstance(have, memoryview) else have) != want:
            return f"{where}: {have!r} != {want!r}"
    return None
