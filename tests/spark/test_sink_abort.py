"""Batch writes (``df.write``) whose job fails, and the run that follows.

The input has three partitions; every attempt of partition 2 fails after its
rows went to the sink, so the job fails and Spark calls the writer's abort
with the commit messages of partitions 0 and 1.

- exactly once: nothing of the failed job is ever visible; abort rolls back
  the halves of the tasks that reported, and its empty ledger entry makes the
  broker's checks roll back those of the failed attempts; a re-run delivers
  every row exactly once.
- at least once: what the finished tasks sent stays; a re-run sends it again.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark import TaskContext

from apogee.model.message import PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, MessageExt
from apogee.model.message_codec import decode_batch
from apogee.model.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from apogee.spark.ledger import TXN_PROPERTY, TxnTag
from tests.spark.helpers import SparkCluster
from tests.spark.test_source_stream import wait_for

PARTITIONS, PER_PARTITION, DOOMED = 3, 20, 2


def bodies(topic: str) -> list[bytes]:
    # 8 KiB each: a failing task's rows leave its Python worker before it dies
    return [f"{topic}-{i}".ljust(8192, ".").encode() for i in range(PARTITIONS * PER_PARTITION)]


def of_partition(rows: list[bytes], part: int) -> list[bytes]:
    return rows[part * PER_PARTITION : (part + 1) * PER_PARTITION]


def failing(doomed: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Passes rows on; when ``doomed``, every attempt of partition 2 then fails."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        yield from batches
        if doomed and ctx is not None and ctx.partitionId() == DOOMED:
            time.sleep(1)  # the sink sends what it got; partitions 0 and 1 finish
            raise RuntimeError("injected failure after the partition's rows")

    return run


def write(
    spark: Any, cluster: SparkCluster, topic: str, rows: list[bytes], *, doomed: bool, eo: bool
) -> None:
    df = (
        spark.sparkContext.parallelize([(b,) for b in rows], PARTITIONS)
        .toDF("body binary")
        .mapInArrow(failing(doomed), "body binary")
    )
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    try:
        (
            df.write.format("rocketmq")
            .option("namesrv", cluster.namesrv)
            .option("topic", topic)
            .option("exactlyOnce", str(eo).lower())
            .mode("append")
            .save()
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def lineage(m: MessageExt) -> int:
    """The queue offset of a half message's first copy (what END_TRANSACTION resolves)."""
    return int(m.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, m.queue_offset))


def rows_of(halves: list[MessageExt]) -> set[bytes]:
    """The rows these half messages carry (a batch half: the messages of its batch)."""
    return {bytes(item.body) for m in halves for item in decode_batch(m.body)}


def halves_of(cluster: SparkCluster, wanted: set[bytes]) -> dict[str, list[MessageExt]]:
    """The half messages (every copy) carrying these rows, by the attempt's token."""
    out: dict[str, list[MessageExt]] = {}
    for m in cluster.read(TRANS_HALF_TOPIC, 1):
        tag = TxnTag.parse(m.properties.get(TXN_PROPERTY, ""))
        if tag is not None and rows_of([m]) <= wanted:
            out.setdefault(tag.token, []).append(m)
    return out


def unresolved(cluster: SparkCluster, halves: list[MessageExt]) -> set[int]:
    """The first copies among ``halves`` that were neither committed nor rolled back
    (an op record names the first copy or one of its later copies)."""
    done = {int(m.body) for m in cluster.read(TRANS_OP_HALF_TOPIC, 1)}
    resolved = {lineage(m) for m in halves if m.queue_offset in done or lineage(m) in done}
    return {lineage(m) for m in halves} - resolved


def test_a_failed_exactly_once_write_shows_nothing_and_a_rerun_delivers_each_row_once(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 4)
    rows = bodies(topic_name)

    with pytest.raises(Exception, match="injected failure"):
        write(spark, cluster, topic_name, rows, doomed=True, eo=True)

    sent = halves_of(cluster, set(rows))
    doomed = {t: ms for t, ms in sent.items() if rows_of(ms) <= set(of_partition(rows, 2))}
    assert len(doomed) >= 2, "the failing attempts sent no half message"
    for part in (0, 1):  # the tasks that reported: rolled back by abort at once
        mine = [ms for ms in sent.values() if rows_of(ms) == set(of_partition(rows, part))]
        assert len(mine) == 1, f"partition {part} was not written by one attempt"
        assert unresolved(cluster, mine[0]) == set()

    # the failed attempts' halves: the broker asks, the ledger says roll back
    def failed() -> list[MessageExt]:  # every copy so far: checks renew the ones they ask
        return [m for t, ms in halves_of(cluster, set(rows)).items() if t in doomed for m in ms]

    wait_for(lambda: not unresolved(cluster, failed()), timeout_s=30)
    assert cluster.read(topic_name) == []

    write(spark, cluster, topic_name, rows, doomed=False, eo=True)

    assert Counter(m.body for m in cluster.read(topic_name)) == Counter(rows)


def test_a_failed_at_least_once_write_keeps_what_finished_tasks_sent(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 4)
    rows = bodies(topic_name)

    with pytest.raises(Exception, match="injected failure"):
        write(spark, cluster, topic_name, rows, doomed=True, eo=False)

    first = Counter(m.body for m in cluster.read(topic_name))
    finished = of_partition(rows, 0) + of_partition(rows, 1)
    assert {b: first[b] for b in finished} == dict.fromkeys(finished, 1)  # nothing taken back
    assert set(first) <= set(rows)

    write(spark, cluster, topic_name, rows, doomed=False, eo=False)

    again = Counter(m.body for m in cluster.read(topic_name))
    assert {b: again[b] for b in finished} == dict.fromkeys(finished, 2)  # sent twice
    assert all(again[b] >= 1 for b in rows)
