"""The error codes a response carries, counted (Kafka's AbstractResponse.errorCounts, which
feeds the broker's RequestMetrics ErrorsPerSec).

Every `error_code` field of the response's declaration counts, at every depth (a Produce
or Fetch answer's per-partition errors as well as a top-level one), NONE included, as in
Kafka. The walk follows a plan compiled once per (API, version) from the declaration:
only the arrays and structs that hold an `error_code` somewhere are entered, so the
answer's other fields (record sets, offsets, names) cost nothing.
"""

from __future__ import annotations

from typing import Any

from .api import API
from .schema import Array, Field, Struct, in_range

# A plan: whether this level has an error_code, and the sub-fields to enter (key, plan,
# whether the field is an array of structs).
_Plan = tuple[bool, tuple[tuple[str, "_Plan", bool], ...]]
_PLANS: dict[tuple[int, int], _Plan | None] = {}


def _compile(fields: tuple[Field, ...], version: int) -> _Plan | None:
    here = False
    subs: list[tuple[str, _Plan, bool]] = []
    for f in fields:
        if not in_range(version, f.versions):
            continue
        if f.key == "error_code":
            here = True
            continue
        t = f.type
        if isinstance(t, Array) and isinstance(t.item, Struct):
            sub = _compile(t.item.fields, version)
            if sub is not None:
                subs.append((f.key, sub, True))
        elif isinstance(t, Struct):
            sub = _compile(t.fields, version)
            if sub is not None:
                subs.append((f.key, sub, False))
    return (here, tuple(subs)) if here or subs else None


def _plan(key: int, version: int) -> _Plan | None:
    k = (key, version)
    try:
        return _PLANS[k]
    except KeyError:
        spec = API.get(key)
        plan = _PLANS[k] = _compile(spec.response, version) if spec is not None else None
        return plan


def _walk(plan: _Plan, body: Any, out: dict[int, int]) -> None:
    if not isinstance(body, dict):
        return
    here, subs = plan
    if here:
        code = int(body.get("error_code") or 0)
        out[code] = out.get(code, 0) + 1
    for key, sub, many in subs:
        value = body.get(key)
        if value is None:
            continue
        if many:
            for item in value:
                _walk(sub, item, out)
        else:
            _walk(sub, value, out)


def error_counts(key: int, version: int, body: Any) -> dict[int, int]:
    """{error code: how many times the response body carries it}."""
    out: dict[int, int] = {}
    plan = _plan(key, version)
    if plan is not None:
        _walk(plan, body, out)
    return out
