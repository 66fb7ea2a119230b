"""Exactly-once when the driver's commit itself fails past its commit point.

A stream of two micro-batches (100 rows each) into an exactly-once sink. In
batch 1's commit the committer's client is closed right after the batch's
ledger entry was written (the sink's test seam, ``after-ledger+close``): the
commit's END_TRANSACTIONs cannot go out, the commit fails, and Spark calls
the writer's abort, which must commit what the ledger committed. The query
then fails; a re-run from the checkpoint replays batch 1, finds its ledger
entry and rolls its new half messages back.

The seam reaches the driver's commit worker through the environment of the
data source's Python function, so the test registers the source again with
it set, and without it at the end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

import apogee.spark
from apogee.model.message import Message
from apogee.spark.sink import PAUSE_ENV
from tests.spark.helpers import SparkCluster

ROWS, PER_BATCH = 200, 100


@contextmanager
def seam(spark: Any, value: str) -> Iterator[None]:
    env = spark.sparkContext.environment
    env[PAUSE_ENV] = value
    apogee.spark.register(spark)  # the data source's workers get this environment
    try:
        yield
    finally:
        env.pop(PAUSE_ENV, None)
        apogee.spark.register(spark)


def start(spark: Any, cluster: SparkCluster, source: str, result: str, checkpoint: Path) -> Any:
    return (
        spark.readStream.format("rocketmq")
        .option("namesrv", cluster.namesrv)
        .option("topics", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PER_BATCH))
        .load()
        .selectExpr("upper(cast(body as string)) as body")
        .writeStream.format("rocketmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", result)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def test_abort_after_a_commit_that_failed_past_its_ledger_entry_delivers_each_row_once(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    source, result = f"{topic_name}in", f"{topic_name}out"
    cluster.create_topic(source, 4)
    cluster.create_topic(result, 4)
    cluster.produce([(Message(source, f"row-{i}".encode()), i % 4) for i in range(ROWS)])
    expected = Counter(f"ROW-{i}".encode() for i in range(ROWS))
    marker, checkpoint = work / "closed", work / "checkpoint"

    with seam(spark, f"after-ledger+close:1:{marker}"):
        query = start(spark, cluster, source, result, checkpoint)
        with pytest.raises(StreamingQueryException, match="remoting client is closed"):
            query.awaitTermination(300)
    assert marker.exists(), "the commit of batch 1 never reached its ledger entry"

    # abort committed batch 1: every row is there once, as soon as the query failed
    # (abort rolling the ledger's halves back would lose batch 1; doing nothing would
    # leave it to the broker's checks, seconds later)
    assert Counter(m.body for m in cluster.read(result)) == expected

    query = start(spark, cluster, source, result, checkpoint)  # replays batch 1
    query.awaitTermination(300)
    assert query.exception() is None
    assert query.lastProgress is not None and query.lastProgress["batchId"] >= 1
    assert Counter(m.body for m in cluster.read(result)) == expected
