"""Apache Spark connector: the ``rocketmq`` data source and sink, and pipeline jobs.

Owns: ``register``, the one call that makes ``spark.read.format("rocketmq")``
and ``df.write.format("rocketmq")`` (batch and streaming) work in a session.
Needs the ``apogee[spark]`` extra (PySpark, pyarrow, pandas) and Java 17+.
Pure Python, so executors import it from the same installation.
"""

from __future__ import annotations

import os
import sys
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


def python_for_workers() -> str:
    """The interpreter Spark's Python workers should run: this one, unless told otherwise.

    Set it (as ``PYSPARK_PYTHON``) before the session starts, so executors
    import the same ``apogee``.
    """
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


__all__ = ["FORMAT", "python_for_workers", "register"]
