"""The schema a reader may be given: any of the source's columns, in any order."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from apogee.errors import ConfigError
from apogee.spark.schema import SOURCE_COLUMNS, SOURCE_SCHEMA, source_columns


def schema(*fields: tuple[Any, ...]) -> StructType:
    return StructType([StructField(*f) for f in fields])


def test_any_of_the_columns_in_any_order() -> None:
    assert source_columns(SOURCE_SCHEMA) == SOURCE_COLUMNS
    wanted = schema(("queueOffset", LongType()), ("body", BinaryType()))
    assert source_columns(wanted) == (("queueOffset", True), ("body", True))
    exact = StructType([StructField("msgId", StringType(), False)])
    assert source_columns(exact) == (("msgId", False),)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ((("value", BinaryType()),), "column 'value' is not one the rocketmq source reads"),
        ((("body", StringType()),), "column 'body' is binary in the rocketmq source, not string"),
        ((("body", BinaryType()), ("body", BinaryType())), "names a column twice"),
        ((), "at least one column"),
        ((("tags", StringType(), False),), "column 'tags' may be null"),
    ],
)
def test_other_schemas_are_refused_naming_the_column(
    fields: tuple[tuple[Any, ...], ...], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        source_columns(schema(*fields))
