"""Generic encoder/decoder compiled from the declarations in messages.py.

Each (fields, version, flexible) struct is compiled ONCE into a list of small closures;
consecutive fixed-width fields collapse into one pre-compiled ``struct.Struct``. Decoders
read a memoryview with absolute positions and never slice past its end: a truncated or
lying frame raises ``DecodeError`` (the public functions turn it into a KafkaError).
Records fields decode to memoryview slices of the frame (zero copy); on encode they are
appended by reference (bytes, memoryview or ``FileRange``) and joined once at the end.

Decoded dicts hold every field the API declares in any supported version: fields absent
at the decoded version, and tagged fields not sent, hold their default.
"""

from __future__ import annotations

import struct
import threading
import uuid
from collections.abc import Callable
from typing import Any

from .schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    NO_DEFAULT,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Field,
    FieldType,
    Struct,
    in_range,
)


class DecodeError(Exception):
    """Malformed input (truncated, bad length, bad varint, non-null field sent as null)."""


class EntryBudgetExceeded(Exception):  # noqa: N818 - a signal, not an error of the input
    """A decode under `entry_budget` met more array entries than allowed: the caller
    decodes the frame elsewhere (off the event loop) instead."""


# Per thread: array entries a decode may still read (None: no budget), and how many items
# of a fixed-size array (ints) count as one entry, as a shift: 0 where each may become an
# entry of the answer (a partition index), 4 (a sixteenth: one C unpack, ~36 bytes each)
# where they stay ints (the replica lists of the controller's requests).
_budget = threading.local()


def entry_budget(left: int | None, fixed_shift: int = 0) -> None:
    """Set (or clear, with None) this thread's entry budget for the decodes that follow."""
    _budget.left = left
    _budget.fixed_shift = fixed_shift


def entry_budget_left() -> int | None:
    """This thread's entry budget left (None: no budget)."""
    return getattr(_budget, "left", None)


class EncodeError(ValueError):
    """A body that cannot be encoded at this version (e.g. null in a non-nullable field)."""


class FileRange:
    """Bytes that come from a file (sent with sendfile): ``size`` bytes of ``fd`` at
    ``position``. Allowed as the value of a records field in encode_response."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FileRange)
                and (self.fd, self.position, self.size) == (other.fd, other.position, other.size))

    def __hash__(self) -> int:
        return hash((self.fd, self.position, self.size))

    def __repr__(self) -> str:
        return f"FileRange(fd={self.fd}, position={self.position}, size={self.size})"


Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[list, Any], None]
# A struct op reads into / writes from the struct's dict.
ReadOp = Callable[[memoryview, int, dict], int]
WriteOp = Callable[[list, dict], None]

# The struct format of each fixed-width type; keyed by FieldType so a Field's type indexes it.
FIXED_FORMATS: dict[FieldType, str] = {
    INT8: "b", INT16: "h", INT32: "i", INT64: "q", UINT16: "H", UINT32: "I",
    FLOAT64: "d", BOOL: "?", UUID: "16s",
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NULL_I16 = _I16.pack(-1)
_NULL_I32 = _I32.pack(-1)
ZERO_UUID = uuid.UUID(int=0)  # a topic id field left unset
EMPTY_TAGS = b"\x00"


# --- unsigned varints (compact lengths, tag numbers) ------------------------------------

def read_uvarint(mv: memoryview, pos: int) -> tuple[int, int]:
    b = mv[pos]  # IndexError past the end: caught by the public entry points
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = mv[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


_SMALL_UVARINTS = [bytes([i]) for i in range(128)]


def uvarint(n: int) -> bytes:
    if n < 128:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# --- defaults --------------------------------------------------------------------------

def default_value(field: Field) -> Any:
    """A fresh default for ``field`` (new list/dict each call: callers may mutate it)."""
    if field.default is not NO_DEFAULT:
        return field.default
    t = field.type
    if isinstance(t, Array):
        return []
    if isinstance(t, Struct):
        return {f.key: default_value(f) for f in t.fields}
    if t == STRING:
        return ""
    if t == BYTES:
        return b""
    if t == RECORDS:
        return None
    if t == UUID:
        return ZERO_UUID
    if t == BOOL:
        return False
    if t == FLOAT64:
        return 0.0
    return 0


def _is_mutable_default(field: Field) -> bool:
    return field.default is NO_DEFAULT and isinstance(field.type, (Array, Struct))


# --- length-prefixed readers -------------------------------------------------------------

def _length_reader(flexible: bool, wide: bool) -> Callable[[memoryview, int], tuple[int, int]]:
    """Length/count prefix: compact uvarint (n+1, 0 = null) in flexible versions, else
    int16 (strings) or int32 (bytes, records, arrays) with -1 = null."""
    if flexible:
        def read_compact(mv: memoryview, pos: int) -> tuple[int, int]:
            n, pos = read_uvarint(mv, pos)
            return n - 1, pos
        return read_compact
    fmt = _I32 if wide else _I16
    size = fmt.size
    unpack = fmt.unpack_from

    def read_fixed(mv: memoryview, pos: int) -> tuple[int, int]:
        return unpack(mv, pos)[0], pos + size
    return read_fixed


def _length_writer(flexible: bool, wide: bool) -> Callable[[int], bytes]:
    if flexible:
        return lambda n: uvarint(n + 1)
    return (_I32 if wide else _I16).pack


def _null_length(flexible: bool, wide: bool) -> bytes:
    if flexible:
        return b"\x00"
    return _NULL_I32 if wide else _NULL_I16


def _blob_reader(kind: str, flexible: bool, nullable: bool, name: str) -> Reader:
    read_len = _length_reader(flexible, wide=kind != STRING)

    def read(mv: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(mv, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"{name}: invalid length {n}")
        end = pos + n
        if end > len(mv):
            raise DecodeError(f"{name}: length {n} points past the end of the frame")
        if kind == STRING:
            return str(mv[pos:end], "utf-8"), end
        if kind == RECORDS:
            return mv[pos:end], end
        return bytes(mv[pos:end]), end
    return read


MAX_STRING_BYTES = 0x7FFF  # a non-flexible STRING has an int16 length


def _fit_string(name: str, data: bytes, limit: int) -> bytes:
    """A message text longer than the int16 length allows is cut (at a UTF-8 character
    boundary) rather than failing the whole response; any other string that long cannot
    be sent faithfully, so it is an EncodeError the caller turns into an error answer."""
    if not name.endswith("Message"):
        raise EncodeError(f"{name}: {len(data)} bytes exceed the {limit}-byte STRING limit")
    cut = data[:limit]
    return cut.decode("utf-8", "ignore").encode()


def _blob_writer(kind: str, flexible: bool, nullable: bool, name: str) -> Writer:
    write_len = _length_writer(flexible, wide=kind != STRING)
    null = _null_length(flexible, wide=kind != STRING)
    # Compact (flexible) lengths are uvarints: Kafka still caps strings at 32767 bytes.
    limit = MAX_STRING_BYTES

    def write(out: list, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"{name} is not nullable in this version")
            out.append(null)
            return
        if kind == STRING:
            if not isinstance(v, str):
                raise EncodeError(f"{name}: expected str, got {type(v).__name__}")
            v = v.encode()
            if len(v) > limit:
                v = _fit_string(name, v, limit)
        elif isinstance(v, memoryview) and (v.ndim != 1 or v.itemsize != 1):
            v = v.cast("B")
        out.append(write_len(len(v)))
        out.append(v)  # bytes/memoryview/FileRange kept by reference until the final join
    return write


# --- compilation --------------------------------------------------------------------------

def field_reader(field: Field, version: int, flexible: bool) -> Reader:
    t = field.type
    nullable = in_range(version, field.nullable)
    if isinstance(t, Struct):
        dec = compile_decoder(t.fields, version, flexible)
        if not nullable:
            return dec

        def read_nullable(mv: memoryview, pos: int) -> tuple[Any, int]:
            # Kafka's nullable struct: an INT8 marker, -1 null, 1 the struct follows
            if pos >= len(mv):
                raise DecodeError(f"{field.name}: truncated")
            marker = mv[pos]
            if marker == 0xFF:
                return None, pos + 1
            if marker != 1:
                raise DecodeError(f"{field.name}: bad nullable struct marker {marker}")
            return dec(mv, pos + 1)
        return read_nullable
    if isinstance(t, Array):
        return _array_reader(field, t, version, flexible, nullable)
    if t in (STRING, BYTES, RECORDS):
        return _blob_reader(t, flexible, nullable, field.name)
    fmt = struct.Struct(">" + FIXED_FORMATS[t])
    unpack, size = fmt.unpack_from, fmt.size
    if t == UUID:
        return lambda mv, pos: (uuid.UUID(bytes=unpack(mv, pos)[0]), pos + size)
    return lambda mv, pos: (unpack(mv, pos)[0], pos + size)


def _array_reader(field: Field, t: Array, version: int, flexible: bool, nullable: bool) -> Reader:
    read_count = _length_reader(flexible, wide=True)
    name = field.name
    item = t.item
    fixed = FIXED_FORMATS.get(item) if isinstance(item, str) and item != UUID else None
    item_reader = None if fixed else (
        compile_decoder(item.fields, version, flexible) if isinstance(item, Struct)
        else field_reader(Field(name, item), version, flexible))
    item_size = struct.calcsize(">" + fixed) if fixed else 1

    def read(mv: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_count(mv, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"{name}: invalid array length {n}")
        # every element takes at least one byte: bounds the loop and the allocation
        if n * item_size > len(mv) - pos:
            raise DecodeError(f"{name}: {n} elements cannot fit in the frame")
        left = getattr(_budget, "left", None)
        if left is not None:
            left -= n >> _budget.fixed_shift if fixed else n
            if left < 0:
                raise EntryBudgetExceeded(name)
            _budget.left = left
        if fixed:
            fmt = f">{n}{fixed}"
            return list(struct.unpack_from(fmt, mv, pos)), pos + n * item_size
        assert item_reader is not None  # not fixed-size
        out: list[Any] = []
        append = out.append
        for _ in range(n):
            v, pos = item_reader(mv, pos)
            append(v)
        return out, pos
    return read


def field_writer(field: Field, version: int, flexible: bool) -> Writer:
    t = field.type
    nullable = in_range(version, field.nullable)
    if isinstance(t, Struct):
        enc = compile_encoder(t.fields, version, flexible)
        if not nullable:
            return enc

        def write_nullable(out: list, v: Any) -> None:
            if v is None:
                out.append(b"\xff")
            else:
                out.append(b"\x01")
                enc(out, v)
        return write_nullable
    if isinstance(t, Array):
        return _array_writer(field, t, version, flexible, nullable)
    if t in (STRING, BYTES, RECORDS):
        return _blob_writer(t, flexible, nullable, field.name)
    pack = struct.Struct(">" + FIXED_FORMATS[t]).pack
    if t == UUID:
        return lambda out, v: out.append(pack(_uuid_bytes(v)))
    return lambda out, v: out.append(pack(v))


def _uuid_bytes(v: Any) -> bytes:
    return v.bytes if isinstance(v, uuid.UUID) else bytes(v)


def _array_writer(field: Field, t: Array, version: int, flexible: bool, nullable: bool) -> Writer:
    write_count = _length_writer(flexible, wide=True)
    null = _null_length(flexible, wide=True)
    name = field.name
    item = t.item
    fixed = FIXED_FORMATS.get(item) if isinstance(item, str) and item != UUID else None
    item_writer = None if fixed else (
        compile_encoder(item.fields, version, flexible) if isinstance(item, Struct)
        else field_writer(Field(name, item), version, flexible))
    small_packs = [struct.Struct(f">{n}{fixed}").pack for n in range(32)] if fixed else []

    def write(out: list, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"{name} is not nullable in this version")
            out.append(null)
            return
        n = len(v)
        out.append(write_count(n))
        if fixed:
            out.append((small_packs[n] if n < 32 else struct.Struct(f">{n}{fixed}").pack)(*v))
        else:
            assert item_writer is not None  # not fixed-size
            for x in v:
                item_writer(out, x)
    return write


# Keyed by the field tuple itself (Fields hash by identity), which also keeps it alive.
_decoders: dict[tuple[tuple[Field, ...], int, bool], Reader] = {}
_encoders: dict[tuple[tuple[Field, ...], int, bool], Writer] = {}


def compile_decoder(fields: tuple[Field, ...], version: int, flexible: bool) -> Reader:
    """fields at ``version`` -> ``decode(mv, pos) -> (dict, pos)``; cached per tree."""
    cache_key = (fields, version, flexible)
    dec = _decoders.get(cache_key)
    if dec is not None:
        return dec

    template: dict[str, Any] = {}     # immutable defaults of absent/tagged fields
    fresh: list[Field] = []           # absent/tagged fields with a mutable default
    ops: list[ReadOp] = []
    run: list[Field] = []             # pending consecutive fixed-width fields
    tagged: dict[int, tuple[str, Reader]] = {}

    def flush_run() -> None:
        if run:
            ops.append(_fixed_run_reader(list(run)))
            run.clear()

    for f in fields:
        present = in_range(version, f.versions)
        is_tagged = present and flexible and in_range(version, f.tagged)
        if not present or is_tagged:
            if _is_mutable_default(f):
                fresh.append(f)
            else:
                template[f.key] = default_value(f)
            if is_tagged:
                assert f.tag is not None  # Field() requires tag= with tagged=
                tagged[f.tag] = (f.key, field_reader(f, version, flexible))
            continue
        if isinstance(f.type, str) and f.type in FIXED_FORMATS:
            run.append(f)
            continue
        flush_run()
        ops.append(_single_reader(f.key, field_reader(f, version, flexible)))
    flush_run()

    fresh_t = tuple(fresh)
    ops_t = tuple(ops)
    read_tags = _tag_section_reader(tagged) if flexible else None

    def decode(mv: memoryview, pos: int) -> tuple[dict, int]:
        d = template.copy()
        for f in fresh_t:
            d[f.key] = default_value(f)
        for op in ops_t:
            pos = op(mv, pos, d)
        if read_tags is not None:
            pos = read_tags(mv, pos, d)
        return d, pos

    _decoders[cache_key] = decode
    return decode


def _single_reader(key: str, reader: Reader) -> ReadOp:
    def op(mv: memoryview, pos: int, d: dict) -> int:
        d[key], pos = reader(mv, pos)
        return pos
    return op


def _fixed_run_reader(run: list[Field]) -> ReadOp:
    fmt = struct.Struct(">" + "".join(FIXED_FORMATS[f.type] for f in run))
    keys = tuple(f.key for f in run)
    uuid_keys = tuple(f.key for f in run if f.type == UUID)
    unpack, size = fmt.unpack_from, fmt.size
    if len(keys) == 1 and not uuid_keys:
        key = keys[0]

        def op1(mv: memoryview, pos: int, d: dict) -> int:
            d[key] = unpack(mv, pos)[0]
            return pos + size
        return op1

    def op(mv: memoryview, pos: int, d: dict) -> int:
        d.update(zip(keys, unpack(mv, pos), strict=True))
        for k in uuid_keys:
            d[k] = uuid.UUID(bytes=d[k])
        return pos + size
    return op


def _tag_section_reader(tagged: dict[int, tuple[str, Reader]]) -> ReadOp:
    def read_tags(mv: memoryview, pos: int, d: dict) -> int:
        n, pos = read_uvarint(mv, pos)
        for _ in range(n):  # each iteration consumes >= 2 bytes, so n is bounded by the frame
            tag, pos = read_uvarint(mv, pos)
            size, pos = read_uvarint(mv, pos)
            end = pos + size
            if end > len(mv):
                raise DecodeError(f"tagged field {tag}: size {size} points past the frame")
            known = tagged.get(tag)
            if known is not None:  # unknown tags are skipped, as Kafka does
                key, reader = known
                d[key], _ = reader(mv[:end], pos)
            pos = end
        return pos
    return read_tags


def compile_encoder(fields: tuple[Field, ...], version: int, flexible: bool) -> Writer:
    """fields at ``version`` -> ``encode(out: list, d: dict)`` appending buffers to out."""
    cache_key = (fields, version, flexible)
    enc = _encoders.get(cache_key)
    if enc is not None:
        return enc

    ops: list[WriteOp] = []
    run: list[Field] = []
    tagged: list[tuple[int, str, Writer, Field]] = []

    def flush_run() -> None:
        if run:
            ops.append(_fixed_run_writer(list(run)))
            run.clear()

    for f in fields:
        if not in_range(version, f.versions):
            continue  # like Kafka's ignorable fields: silently not sent in this version
        if flexible and in_range(version, f.tagged):
            assert f.tag is not None  # Field() requires tag= with tagged=
            tagged.append((f.tag, f.key, field_writer(f, version, flexible), f))
            continue
        if isinstance(f.type, str) and f.type in FIXED_FORMATS:
            run.append(f)
            continue
        flush_run()
        ops.append(_single_writer(f, field_writer(f, version, flexible)))
    flush_run()
    tagged.sort(key=lambda t: t[0])

    ops_t = tuple(ops)
    write_tags = _tag_section_writer(tuple(tagged)) if flexible else None

    def encode(out: list, d: dict) -> None:
        for op in ops_t:
            op(out, d)
        if write_tags is not None:
            write_tags(out, d)

    _encoders[cache_key] = encode
    return encode


def _single_writer(f: Field, writer: Writer) -> WriteOp:
    key = f.key
    if _is_mutable_default(f):
        def op_fresh(out: list, d: dict) -> None:
            v = d.get(key, NO_DEFAULT)
            writer(out, default_value(f) if v is NO_DEFAULT else v)
        return op_fresh
    dflt = default_value(f)

    def op(out: list, d: dict) -> None:
        writer(out, d.get(key, dflt))
    return op


def _fixed_run_writer(run: list[Field]) -> WriteOp:
    fmt = struct.Struct(">" + "".join(FIXED_FORMATS[f.type] for f in run))
    pack = fmt.pack
    kd = tuple((f.key, default_value(f)) for f in run)
    types = tuple(f.type for f in run)

    def fail(vals: list, e: Exception) -> EncodeError:
        bad = ", ".join(f"{k}={v!r} ({t})" for (k, _), v, t in zip(kd, vals, types, strict=True))
        return EncodeError(f"cannot encode {bad}: {e}")

    if UUID in types:
        is_uuid = tuple(t == UUID for t in types)

        def op_uuid(out: list, d: dict) -> None:
            vals = [d.get(k, df) for k, df in kd]
            try:
                out.append(pack(*[_uuid_bytes(v) if u else v
                                  for v, u in zip(vals, is_uuid, strict=True)]))
            except (struct.error, TypeError, ValueError) as e:
                raise fail(vals, e) from None
        return op_uuid

    def op(out: list, d: dict) -> None:
        vals = [d.get(k, df) for k, df in kd]
        try:
            out.append(pack(*vals))
        except struct.error as e:  # wrong type or out of range: name the fields
            raise fail(vals, e) from None
    return op


def _tag_section_writer(tagged: tuple[tuple[int, str, Writer, Field], ...]) -> WriteOp:
    if not tagged:
        return lambda out, d: out.append(EMPTY_TAGS)
    defaults = tuple(default_value(f) for _, _, _, f in tagged)
    keys = tuple(key for _, key, _, _ in tagged)

    def write_tags(out: list, d: dict) -> None:
        for k in keys:
            if k in d:
                break
        else:  # fast path: no tagged field given at all
            out.append(EMPTY_TAGS)
            return
        sections = []
        for (tag, key, writer, _), dflt in zip(tagged, defaults, strict=True):
            v = d.get(key, NO_DEFAULT)
            if v is NO_DEFAULT or v == dflt:  # sent only when not at their default
                continue
            buf: list = []
            writer(buf, v)
            data = b"".join(buf)
            sections.append(uvarint(tag) + uvarint(len(data)) + data)
        out.append(uvarint(len(sections)))
        out.extend(sections)
    return write_tags
