"""Batch and streaming writers. Each task produces its rows and fails unless every one was
acknowledged (acks=all, idempotent producer). Kafka has no undo, so commit and abort on
the driver have nothing to roll back: like Spark's Kafka sink this is at-least-once (a
retried task or micro-batch may write its records again)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from .options import OptionError, SinkOptions

if TYPE_CHECKING:  # checked against the base both PySpark versions have
    from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase
else:
    try:  # Arrow input for streaming writes: PySpark 4.1+
        from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
    except ImportError:  # pragma: no cover - Rows on older PySpark; produce.py takes both
        from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase


class SinkSchemaError(ValueError):
    """The DataFrame's columns do not fit the sink."""


@dataclass
class KafkareplCommitMessage(WriterCommitMessage):
    acked: dict[str, int] = field(default_factory=dict)  # topic -> records acknowledged


def _is_bytes_like(t: DataType) -> bool:
    return isinstance(t, (BinaryType, StringType))


def _headers_ok(t: DataType) -> bool:
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in t.elementType.fields}
    return (set(fields) == {"key", "value"} and isinstance(fields["key"], StringType)
            and _is_bytes_like(fields["value"]))


def validate_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """The columns Spark's Kafka sink takes; other columns are ignored (so a DataFrame read
    from a topic can be written back as is)."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    checks = {
        "value": (_is_bytes_like, "binary or string"),
        "key": (_is_bytes_like, "binary or string"),
        "topic": (lambda t: isinstance(t, StringType), "string"),
        "partition": (lambda t: isinstance(t, IntegerType), "int"),
        "headers": (_headers_ok, "array<struct<key:string,value:binary>>"),
    }
    if "value" not in types:
        raise SinkSchemaError("kafkarepl: the DataFrame needs a 'value' column (binary or string)")
    if options.topic is None and "topic" not in types:
        raise OptionError("topic", "set the 'topic' option or give the DataFrame a 'topic' column")
    for name, (ok, expected) in checks.items():
        if name in types and not ok(types[name]):
            raise SinkSchemaError(f"kafkarepl: column '{name}' must be {expected}, not {types[name].simpleString()}")


def _write(options: SinkOptions, iterator: Iterator[Any]) -> KafkareplCommitMessage:
    if options.data_plane == "native":
        from .sink import produce_native

        return KafkareplCommitMessage(produce_native(options.kafka, options.topic, iterator,
                                                     options.flush_timeout_ms))
    from .produce import produce_all

    return KafkareplCommitMessage(produce_all(options.kafka, options.topic, iterator, options.flush_timeout_ms))


class KafkareplWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkareplCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every record is already acknowledged by the brokers."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records of tasks that succeeded stay in their topics (Kafka cannot take them back)."""


class KafkareplStreamWriter(_StreamWriterBase):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkareplCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's name
        """Every record is already acknowledged by the brokers."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """At-least-once: a re-run micro-batch writes its records again."""
