"""Response audit: fields a handler left out of a response body.

The encoder writes a field's default when the body lacks it, which is right for fields
whose schema has a default (Kafka's JSON "default") and for tagged fields, and hides a
bug for the others: a response that decodes but says less than Kafka's would (a null
`configs`, an empty `synonyms`). `missing_fields` lists the fields present at the
response's version that have no schema default, are not tagged, and are absent from the
body, recursing into structs and arrays of structs. The broker runs it on every response
when KAFKAREPL_AUDIT_RESPONSES is set (tests); it is not on the normal path.
"""

from __future__ import annotations

from typing import Any

from .schema import NO_DEFAULT, Array, Field, Struct, in_range


def missing_fields(fields: tuple[Field, ...], version: int, body: Any, path: str = "") -> list[str]:
    if not isinstance(body, dict):
        return []
    out: list[str] = []
    for f in fields:
        if not in_range(version, f.versions) or in_range(version, f.tagged):
            continue
        where = f"{path}{f.key}"
        if f.key not in body:
            if f.default is NO_DEFAULT:
                out.append(where)
            continue
        value = body[f.key]
        if isinstance(f.type, Struct):
            out += missing_fields(f.type.fields, version, value, where + ".")
        elif isinstance(f.type, Array) and isinstance(f.type.item, Struct) and isinstance(value, list):
            for item in value[:1]:  # one element shows how the handler builds them all
                out += missing_fields(f.type.item.fields, version, item, where + "[].")
    return out
