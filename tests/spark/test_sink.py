"""The ``rocketmq`` sink: at-least-once batch and stream writes, and exactly-once streams."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from apogee.model.message import Message, MessageExt
from apogee.model.topic import TRANS_HALF_TOPIC
from apogee.spark._io import Cluster
from apogee.spark.ledger import TXN_PROPERTY, Ledger, TxnTag
from tests.spark.helpers import SparkCluster
from tests.spark.test_sink_abort import unresolved
from tests.spark.test_source_stream import wait_for

ROW_SCHEMA = StructType(
    [
        StructField("body", BinaryType()),
        StructField("tags", StringType()),
        StructField("keys", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("shardingKey", StringType()),
        StructField("delayLevel", IntegerType()),
    ]
)


def test_a_batch_write_delivers_every_row_with_its_columns(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 4)
    rows: list[tuple[Any, ...]] = [
        (
            b"\x00row\x00%d" % i,
            f"tag{i % 2}",
            f"key{i}",
            {"n": str(i)},
            "user-7" if i % 5 == 0 else None,
            None,
        )
        for i in range(200)
    ]
    later = (b"later", None, None, None, None, 1)  # delay level 1: one second
    rows.append(later)

    # the 200 rows go column by column (apogee.spark.columnar), the delayed row row by row
    for part in (rows[:200], [later]):
        df = spark.createDataFrame(part, ROW_SCHEMA).coalesce(1)
        writer = df.write.format("rocketmq").option("namesrv", cluster.namesrv)
        writer.option("topic", topic_name).mode("append").save()

    got = [m for m in cluster.read(topic_name) if m.body != b"later"]
    by_body = {m.body: m for m in got}
    assert Counter(m.body for m in got) == Counter(r[0] for r in rows[:200])
    for body, tag, key, props, _, _ in rows[:200]:
        m = by_body[body]
        assert (m.tags, m.keys, m.properties["n"]) == (tag, key, props["n"])
    sharded = [m for m in got if m.properties.get("__SHARDINGKEY") == "user-7"]
    assert len({m.queue_id for m in sharded}) == 1  # one key, one queue ...
    assert [m.body for m in sorted(sharded, key=lambda m: m.queue_offset)] == [
        r[0] for r in rows if r[4] == "user-7"
    ]  # ... in the order written
    wait_for(lambda: b"later" in {m.body for m in cluster.read(topic_name)}, timeout_s=30)


def fail_once(marker: Path) -> Any:
    """A mapInArrow function: upper-cases bodies; the first attempt of one task dies midway."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        doomed = ctx is not None and ctx.partitionId() == 1 and not marker.exists()
        done = 0
        for batch in batches:
            for start in range(0, batch.num_rows, 10):
                part = batch.slice(start, 10)
                body = pc.utf8_upper(part.column(0).cast(pa.string())).cast(pa.binary())
                yield pa.RecordBatch.from_arrays([body], names=["body"])
                done += part.num_rows
                if doomed and done >= 40:
                    time.sleep(1)  # let the sink send what it has
                    marker.write_text("failed once")
                    raise RuntimeError("injected failure in the middle of a batch")

    return run


def run_pipeline(
    spark: Any, cluster: SparkCluster, source: str, result: str, work: Path, *, exactly_once: bool
) -> str:
    df = (
        spark.readStream.format("rocketmq")
        .option("namesrv", cluster.namesrv)
        .option("topics", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "200")
        .load()
        .select("body")
        .mapInArrow(fail_once(work / "failed"), "body binary")
    )
    # small Arrow batches into the sink: it gets (and sends) rows before the failure
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        query = (
            df.writeStream.format("rocketmq")
            .option("namesrv", cluster.namesrv)
            .option("topic", result)
            .option("exactlyOnce", str(exactly_once).lower())
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert not query.isActive
    assert query.exception() is None, query.exception()
    return str(query.id)


def test_exactly_once_stream_survives_a_task_failing_mid_batch(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    source, result = f"{topic_name}in", f"{topic_name}out"
    cluster.create_topic(source, 4)
    cluster.create_topic(result, 4)
    # bodies of 8 KiB: the failing task's first rows leave its Python worker before it dies
    # (small ones would sit in the worker's output buffer)
    bodies = [f"order-{i}".ljust(8192, ".").encode() for i in range(600)]
    cluster.produce([(Message(source, b), i % 4) for i, b in enumerate(bodies)])

    query_id = run_pipeline(spark, cluster, source, result, work, exactly_once=True)

    assert (work / "failed").exists()
    expected = Counter(b.upper() for b in bodies)
    assert Counter(m.body for m in cluster.read(result)) == expected
    # the failed attempt had sent half messages that were never committed
    tags = {
        TxnTag.parse(m.properties[TXN_PROPERTY])
        for m in cluster.read(TRANS_HALF_TOPIC, 1)
        if m.properties.get(TXN_PROPERTY, "").startswith(query_id)
    }
    ledger = Ledger(Cluster.of(cluster.namesrv))
    committed = {
        (t.batch_id, token)
        for t in tags
        if t is not None
        for token in ledger.lookup(query_id, t.batch_id) or []
    }
    orphans = {(t.batch_id, t.token) for t in tags if t is not None} - committed
    assert orphans, "the failing attempt sent nothing before it failed"

    # the broker asks about the failed attempt's halves; once each is resolved (its op
    # record is stored after a commit's message), none can still come into the topic
    def orphaned() -> list[MessageExt]:  # every copy so far: checks renew the ones they ask
        return [
            m
            for m in cluster.read(TRANS_HALF_TOPIC, 1)
            if (t := TxnTag.parse(m.properties.get(TXN_PROPERTY, ""))) is not None
            and (t.batch_id, t.token) in orphans
        ]

    wait_for(lambda: not unresolved(cluster, orphaned()), timeout_s=30)
    assert Counter(m.body for m in cluster.read(result)) == expected


def test_at_least_once_stream_loses_nothing_when_a_task_fails(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    source, result = f"{topic_name}in", f"{topic_name}out"
    cluster.create_topic(source, 4)
    cluster.create_topic(result, 4)
    cluster.produce([(Message(source, f"order-{i}".encode()), i % 4) for i in range(300)])

    run_pipeline(spark, cluster, source, result, work, exactly_once=False)

    assert (work / "failed").exists()
    got = Counter(m.body for m in cluster.read(result))
    assert set(got) == {f"ORDER-{i}".encode() for i in range(300)}
    assert sum(got.values()) >= 300
