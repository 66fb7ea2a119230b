"""The DataFrame a ``rocketmq`` read returns, in Spark's types only.

Owns: ``SOURCE_SCHEMA`` and ``source_columns``, the check of a schema a
reader is given (``spark.read.schema(...)``): any of the source's columns,
in any order, so that a query reads only what it uses. Apart from
``apogee.spark.records`` (its Arrow twin and the column builder, which need
numpy and pyarrow), so that the
processes Spark starts on the driver to plan a query (the data source's
schema, partitions and offsets) import neither.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from apogee.errors import ConfigError

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("brokerName", StringType(), False),
        StructField("queueId", IntegerType(), False),
        StructField("queueOffset", LongType(), False),
        StructField("msgId", StringType(), False),
        StructField("tags", StringType(), True),
        StructField("keys", StringType(), True),
        StructField("body", BinaryType(), False),
        StructField("properties", MapType(StringType(), StringType(), True), False),
        StructField("bornTimestamp", TimestampType(), False),
        StructField("storeTimestamp", TimestampType(), False),
        StructField("reconsumeTimes", IntegerType(), False),
    ]
)

#: The source's columns, each with whether it may hold nulls.
SOURCE_COLUMNS = tuple((f.name, f.nullable) for f in SOURCE_SCHEMA.fields)
_BY_NAME = {f.name: f for f in SOURCE_SCHEMA.fields}


def source_columns(schema: StructType) -> tuple[tuple[str, bool], ...]:
    """The columns ``schema`` asks the source for, in its order, each with whether
    ``schema`` lets it hold nulls (Spark checks the batches against it).

    Raises:
        ConfigError: a column the source does not have, one of another type,
            a column that may be null (``tags``, ``keys``) declared not null,
            a column named twice, or no column at all.
    """
    names = tuple(f.name for f in schema.fields)
    if not names:
        raise ConfigError("the rocketmq source needs at least one column in its schema")
    for f in schema.fields:
        known = _BY_NAME.get(f.name)
        if known is None:
            raise ConfigError(
                f"column '{f.name}' is not one the rocketmq source reads ({', '.join(_BY_NAME)})"
            )
        if f.dataType != known.dataType:
            raise ConfigError(
                f"column '{f.name}' is {known.dataType.simpleString()} in the rocketmq source, "
                f"not {f.dataType.simpleString()}"
            )
        if known.nullable and not f.nullable:
            raise ConfigError(f"column '{f.name}' may be null: it cannot be declared not null")
    if len(set(names)) != len(names):
        raise ConfigError(f"the schema names a column twice: {', '.join(names)}")
    return tuple((f.name, f.nullable) for f in schema.fields)
