"""The `kafkarepl` PySpark data source: Spark's Kafka connector schema and options over a
kafkarepl (or any Kafka) cluster, for batch and streaming reads and writes.

Options are parsed and checked here, when Spark creates the reader or writer on the
driver, so a bad option fails the query before any task starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .native import choose
from .options import SinkOptions, SourceOptions, include_headers, parse_sink, parse_source

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def source_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (timestampType: 0 CreateTime, 1 LogAppendTime)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def _check_read_schema(schema: StructType, include_headers: bool) -> None:
    expected = source_schema(include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in expected.fields]:
        raise ValueError(f"kafkarepl: the source has a fixed schema ({expected.simpleString()}); "
                         f"a user-specified schema {schema.simpleString()} is not supported")


def _source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    opts = parse_source(options, streaming=streaming)
    return replace(opts, data_plane=choose(opts.data_plane, opts.kafka, sink=False))


def _sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = parse_sink(options)
    return replace(opts, data_plane=choose(opts.data_plane, opts.kafka, sink=True))


class KafkareplDataSource(DataSource):
    """spark.read / readStream / write / writeStream .format("kafkarepl")."""

    @classmethod
    def name(cls) -> str:
        return "kafkarepl"

    def schema(self) -> StructType:
        return source_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        from .reader import KafkareplBatchReader

        opts = _source_options(self.options, streaming=False)
        _check_read_schema(schema, opts.include_headers)
        return KafkareplBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .reader import KafkareplStreamReader

        opts = _source_options(self.options, streaming=True)
        _check_read_schema(schema, opts.include_headers)
        return KafkareplStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import KafkareplWriter, validate_sink_schema

        if overwrite:
            raise ValueError("kafkarepl: save mode 'overwrite' is not supported (a topic is append-only); "
                             "use mode('append')")
        opts = _sink_options(self.options)
        validate_sink_schema(schema, opts)
        return KafkareplWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .writer import KafkareplStreamWriter, validate_sink_schema

        # Every output mode just appends records, as with Spark's Kafka sink.
        opts = _sink_options(self.options)
        validate_sink_schema(schema, opts)
        return KafkareplStreamWriter(opts)
