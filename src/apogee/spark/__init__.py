"""Apache Spark connector: the ``rocketmq`` data source and sink, and pipeline jobs.

Owns: ``register``, the one call that makes ``spark.read.format("rocketmq")``
and ``df.write.format("rocketmq")`` (batch and streaming) work in a session.
Needs the ``apogee[spark]`` extra (PySpark, pyarrow, pandas) and Java 17+.
Pure Python, so executors import it from the same installation: start the
session with ``PYSPARK_PYTHON`` naming the interpreter that has apogee.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "rocketmq"


def register(spark: SparkSession) -> None:
    """Register the ``rocketmq`` format with ``spark``.

    Also turns on Python filter pushdown for the session, which the batch
    reader needs to take ``tags`` filters to the broker.
    """
    # imported here so that importing apogee.spark does not start loading PySpark
    from apogee.spark.datasource import RocketMQDataSource  # noqa: PLC0415

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(RocketMQDataSource)


__all__ = ["FORMAT", "register"]
