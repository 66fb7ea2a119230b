"""The ``rocketmq`` data source: Spark's entry point to the readers and writers.

Owns: ``RocketMQDataSource`` (short name ``rocketmq``), which checks the
options and hands out the batch and stream readers and writers. Spark
pickles it to the driver's planner workers and to executors.

The reader and writer modules are imported by the methods that hand them
out. Spark starts a Python process for each step of a query (looking the
source up, its schema, planning the read, the write, the stream's runners):
a process that only reads then never loads the writer's client stack, nor a
lookup either (about 0.15 s of imports each).
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from apogee.spark import FORMAT
from apogee.spark.options import SourceOptions, parse_sink, parse_source
from apogee.spark.schema import SOURCE_COLUMNS, SOURCE_SCHEMA, source_columns


class RocketMQDataSource(DataSource):
    """Read Apogee (RocketMQ-protocol) topics as DataFrames, and write DataFrames to them."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from apogee.spark.source import BatchReader  # noqa: PLC0415 - see the module's docstring

        return BatchReader(_reading(parse_source(self.options, streaming=False), schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from apogee.spark.source import StreamReader  # noqa: PLC0415

        return StreamReader(_reading(parse_source(self.options, streaming=True), schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from apogee.spark.sink import BatchWriter, check_sink_schema  # noqa: PLC0415

        opts = parse_sink(self.options)
        check_sink_schema(schema, opts)
        return BatchWriter(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from apogee.spark.sink import StreamWriter, check_sink_schema  # noqa: PLC0415

        opts = parse_sink(self.options)
        check_sink_schema(schema, opts)
        return StreamWriter(opts, schema)


def _reading(opts: SourceOptions, schema: StructType) -> SourceOptions:
    """``opts`` reading the columns of ``schema`` (the user's, or ``SOURCE_SCHEMA``)."""
    columns = source_columns(schema)
    return opts if columns == SOURCE_COLUMNS else replace(opts, columns=columns)
