"""Offsets a query needs that the broker's retention deleted: fail, or skip with a warning.

A broker of its own, whose retention deletes every commit-log file but the
newest at each cleaning pass (``fileReservedTime=0``, every hour a
``deleteWhen`` hour, 64 KiB files, a pass every second): a stream that has read the first
messages falls behind while the files holding the next ones are deleted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from apogee.model.message import Message
from apogee.spark._io import Cluster
from apogee.spark.options import parse_source
from apogee.spark.reading import DataLossError, QueueRange, read_range
from apogee.testing.cluster import BrokerProcess, NamesrvProcess
from tests.spark.helpers import SparkCluster
from tests.spark.test_source_stream import wait_for

RETENTION = {
    "mappedFileSizeCommitLog": str(64 * 1024),
    "fileReservedTime": "0",
    "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
    "cleanResourceInterval": "1000",
}


@pytest.fixture(scope="module")
def shrinking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    root = tmp_path_factory.mktemp("retention-cluster")
    namesrv = NamesrvProcess(root / "namesrv")
    namesrv.start()
    broker = BrokerProcess(root / "store", namesrv.address, properties=RETENTION)
    try:
        broker.start()
        yield SparkCluster(namesrv.address, broker.address, root)
    finally:
        broker.stop()
        namesrv.stop()


def body(i: int) -> bytes:
    return f"m{i}:".encode().ljust(2000, b".")


def run(spark: Any, cluster: SparkCluster, topic: str, work: Path, **options: str) -> Any:
    reader = spark.readStream.format("rocketmq").option("namesrv", cluster.namesrv)
    for key, value in {"topics": topic, "startingOffsets": "earliest", **options}.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .selectExpr("queueOffset", "body")
        .writeStream.format("parquet")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with contextlib.suppress(StreamingQueryException):  # returned below
        query.awaitTermination(120)
    assert not query.isActive, "the availableNow query did not finish"
    return query.exception()


def test_a_stream_behind_retention_fails_naming_the_lost_range_or_skips_it(
    spark: Any, shrinking: SparkCluster, topic_name: str, work: Path
) -> None:
    shrinking.create_topic(topic_name, 1)
    shrinking.produce([(Message(topic_name, body(i)), 0) for i in range(5)])
    assert run(spark, shrinking, topic_name, work) is None  # read up to offset 5
    shrinking.produce([(Message(topic_name, body(i)), 0) for i in range(5, 200)])
    cluster = Cluster.of(shrinking.namesrv)
    queue = cluster.queues(topic_name)[0]
    # the cleaning pass (every second here) deletes the messages the stream has not read: every
    # commit-log file but the one written last and the empty one made ready after it
    # (kept: its successor has no write time yet); the queue's minimum stays put then
    commit_log = shrinking.root / "store" / "commitlog"
    wait_for(
        lambda: len(list(commit_log.iterdir())) <= 2 and cluster.offsets([queue], "min")[0] > 5,
        timeout_s=40,
    )
    first_kept = cluster.offsets([queue], "min")[0]

    error = run(spark, shrinking, topic_name, work)

    assert error is not None
    assert f"offsets 5..{first_kept} of {topic_name}/broker-a/0 are no longer" in str(error)
    assert "failOnDataLoss=false" in str(error)

    assert run(spark, shrinking, topic_name, work, failOnDataLoss="false") is None

    rows = spark.read.parquet(str(work / "out")).collect()
    assert sorted(r.queueOffset for r in rows) == [*range(5), *range(first_kept, 200)]
    assert all(bytes(r.body) == body(r.queueOffset) for r in rows)

    # a batch read's range planned before the deletion: the same rule, outside Spark
    planned = QueueRange(queue, 0, 200)
    strict = parse_source({"namesrv": shrinking.namesrv, "topics": topic_name}, streaming=False)
    with pytest.raises(DataLossError, match=f"offsets 0..{first_kept} of {topic_name}"):
        list(read_range(planned, strict))
    lenient = parse_source(
        {"namesrv": shrinking.namesrv, "topics": topic_name, "failOnDataLoss": "false"},
        streaming=False,
    )
    kept = [r["queueOffset"] for b in read_range(planned, lenient) for r in b.to_pylist()]
    assert kept == list(range(first_kept, 200))
