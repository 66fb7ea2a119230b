"""The orders pipeline: JSON order events in, per-minute revenue per region out.

Owns: the order event (JSON, one message each), ``generate`` (publishes a
deterministic stream of them), ``revenue_frame`` (the Structured Streaming
transformation) and ``start`` (the two output queries: the result topic
through the exactly-once sink, and Parquet files).

Event, the body of one message on the source topic (tag ``order``)::

    {"orderId": "o-17", "region": "emea", "amount": 12.5, "eventTime": 1700000000000}

Result, one message per closed window on the result topic (tag ``revenue``,
keys ``<region>``, sharded by region so each region's windows stay in order)
and one row per window in Parquet::

    {"windowStart": ..., "windowEnd": ..., "region": "emea", "revenue": 99.5, "orders": 7}

Windows are one minute of event time; a watermark (default 1 minute) says
how late an event may come. Results are appended once the watermark has
passed a window, so each window is written once. A finite run of the
generator ends with a ``tick`` event past its last window, which moves the
watermark on (ticks are counted in no window); ``run_until_idle`` then stops
the job once every window is written.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812  # PySpark's own convention
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType, StructField, StructType

from apogee.model.message import PROPERTY_KEYS, PROPERTY_TAGS, Message
from apogee.model.results import SendResult
from apogee.spark._io import Cluster

REGIONS = ("amer", "apac", "emea", "latam")
MINUTE_MS = 60_000
EVENT_SCHEMA = StructType(
    [
        StructField("orderId", StringType()),
        StructField("region", StringType()),
        StructField("amount", DoubleType()),
        StructField("eventTime", LongType()),
        StructField("tick", BooleanType()),
    ]
)


RESULT_COLUMNS = ("windowStart", "windowEnd", "region", "revenue", "orders")


@dataclass(frozen=True, slots=True)
class JobConfig:
    namesrv: str
    source_topic: str = "orders"
    result_topic: str = "orders-revenue"
    parquet_dir: str = "orders-pipeline/parquet"
    checkpoint_dir: str = "orders-pipeline/checkpoint"
    watermark: str = "1 minute"
    max_offsets_per_trigger: int = 50_000
    trigger_seconds: float = 2.0


def events(count: int, *, start_ms: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """``count`` order events over about one minute of event time per 600 orders.

    A few arrive out of order (up to 20 s late), well inside any watermark of
    a minute or more, so every one of them counts.
    """
    rng = random.Random(seed)
    for i in range(count):
        late = rng.random() < 0.05
        at = start_ms + i * 100 - (rng.randrange(1, 20_000) if late else 0)
        yield {
            "orderId": f"o-{i}",
            "region": rng.choice(REGIONS),
            "amount": round(rng.uniform(1, 500), 2),
            "eventTime": max(at, start_ms),
        }


def tick(after_ms: int) -> dict[str, Any]:
    """An event that only moves event time (and so the watermark) past ``after_ms``."""
    return {"orderId": "tick", "region": "", "amount": 0.0, "eventTime": after_ms, "tick": True}


def generate(namesrv: str, topic: str, count: int, *, start_ms: int, seed: int = 7) -> int:
    """Publish ``count`` events and a closing tick to ``topic``; the number of messages sent."""
    cluster = Cluster.of(namesrv)
    queues = cluster.queues(topic, for_write=True)
    if not queues:
        raise ValueError(f"topic {topic!r} does not exist; create it first")
    pending: list[Future[SendResult]] = []
    batch: list[Message] = []
    last = start_ms
    sent = 0

    def flush() -> None:
        nonlocal batch
        if batch:
            pending.append(cluster.send_batch(queues[len(pending) % len(queues)], batch, "orders"))
            batch = []

    for item in [*events(count, start_ms=start_ms, seed=seed), None]:
        event = item if item is not None else tick(last + 3 * MINUTE_MS)
        last = max(last, int(event["eventTime"]))
        props = {PROPERTY_TAGS: "order", PROPERTY_KEYS: str(event["orderId"])}
        batch.append(Message(topic, orjson.dumps(event), properties=props))
        sent += 1
        if len(batch) >= 256:
            flush()
    flush()
    for future in pending:
        future.result(60)
    return sent


def revenue_frame(spark: SparkSession, config: JobConfig) -> DataFrame:
    """Source topic -> parsed events -> one-minute event-time windows per region."""
    raw = (
        spark.readStream.format("rocketmq")
        .option("namesrv", config.namesrv)
        .option("topics", config.source_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        .load()
    )
    parsed = raw.select(F.from_json(F.col("body").cast("string"), EVENT_SCHEMA).alias("e")).select(
        "e.*"
    )
    timed = parsed.withColumn("ts", F.timestamp_millis("eventTime")).withWatermark(
        "ts", config.watermark
    )
    # Drop ticks after the watermark has seen them. The condition names the event time
    # on purpose: Spark pushes filters that do not below the watermark.
    orders = timed.where(~F.coalesce(F.col("tick"), F.col("ts").isNull()))
    return (
        orders.groupBy(F.window("ts", "1 minute"), F.col("region"))
        .agg(F.round(F.sum("amount"), 2).alias("revenue"), F.count("*").alias("orders"))
        .select(
            F.unix_millis(F.col("window.start")).alias("windowStart"),
            F.unix_millis(F.col("window.end")).alias("windowEnd"),
            "region",
            "revenue",
            "orders",
        )
    )


def as_messages(results: DataFrame) -> DataFrame:
    """Result rows as the sink's columns: a JSON body, tag, keys and sharding key."""
    return results.select(
        F.to_json(F.struct(*RESULT_COLUMNS)).alias("body"),
        F.lit("revenue").alias("tags"),
        F.col("region").alias("keys"),
        F.col("region").alias("shardingKey"),
    )


def start(spark: SparkSession, config: JobConfig) -> list[StreamingQuery]:
    """Start the two output queries (result topic, exactly once; Parquet)."""
    results = revenue_frame(spark, config)
    checkpoint = Path(config.checkpoint_dir)
    to_topic = as_messages(results)
    queries = []
    for name, frame, writer_format, options in (
        (
            "orders-revenue-topic",
            to_topic,
            "rocketmq",
            {"namesrv": config.namesrv, "topic": config.result_topic, "exactlyOnce": "true"},
        ),
        ("orders-revenue-parquet", results, "parquet", {"path": config.parquet_dir}),
    ):
        writer = (
            frame.writeStream.queryName(name)
            .format(writer_format)
            .outputMode("append")
            .options(**options)
            .option("checkpointLocation", str(checkpoint / name))
        )
        writer = writer.trigger(processingTime=f"{config.trigger_seconds} seconds")
        queries.append(writer.start())
    return queries


def idle(query: StreamingQuery) -> bool:
    """Whether ``query`` has read all the topic holds and written every window it holds.

    Trigger.AvailableNow would stop before the batch that emits the last
    windows (they close when the watermark moves, which happens at the end
    of a batch); so a finite run waits for this instead: no backlog, no rows
    in the last batch, no window left in the state.
    """
    progress = query.lastProgress
    if not progress or progress["numInputRows"] != 0:
        return False
    for source in progress["sources"]:
        latest = source.get("latestOffset")
        if not latest or orjson.loads(latest)["offsetsBehindLatest"]["total"] != 0:
            return False
    return all(op["numRowsTotal"] == 0 for op in progress["stateOperators"])


def run_until_idle(queries: list[StreamingQuery], timeout_s: float = 3600.0) -> None:
    """Wait until every query is ``idle``, then stop them (a finite run of the job)."""
    deadline = time.monotonic() + timeout_s
    while not all(idle(q) for q in queries):
        for q in queries:
            if not q.isActive:
                raise RuntimeError(f"query {q.name} stopped: {q.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the pipeline was not idle after {timeout_s} s")
        time.sleep(0.5)
    for q in queries:
        q.stop()
