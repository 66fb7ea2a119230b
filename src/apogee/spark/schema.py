"""The DataFrame a ``rocketmq`` read returns, in Spark's types only.

Owns: ``SOURCE_SCHEMA``. Apart from ``apogee.spark.records`` (its Arrow twin
and the column builder, which need numpy and pyarrow), so that the
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
