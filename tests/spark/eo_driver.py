"""A Spark driver for the crash tests: a topic, upper-cased, into another topic, exactly once.

Run as ``python -m tests.spark.eo_driver NAMESRV SOURCE RESULT CHECKPOINT``; it runs until
killed. Set ``APOGEE_SPARK_PAUSE_AT`` to hold its sink commit at a chosen step.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

import apogee.spark


def main(namesrv: str, source: str, result: str, checkpoint: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("apogee-eo-driver")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    apogee.spark.register(spark)
    query = (
        spark.readStream.format("rocketmq")
        .option("namesrv", namesrv)
        .option("topics", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("upper(cast(body as string)) as body")
        .writeStream.format("rocketmq")
        .option("namesrv", namesrv)
        .option("topic", result)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
