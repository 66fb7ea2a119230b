"""Streaming reads: admission control, checkpoint restarts, lag, new queues, group commits."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from apogee.model.message import Message
from apogee.spark.options import parse_source
from apogee.spark.planning import flatten
from apogee.spark.reading import QueueRange
from apogee.spark.source import StreamReader
from tests.spark.helpers import SparkCluster


def produce(cluster: SparkCluster, topic: str, start: int, count: int, queues: int = 4) -> None:
    cluster.produce(
        [(Message(topic, f"m{i}".encode()), i % queues) for i in range(start, start + count)]
    )


def stream(spark: Any, cluster: SparkCluster, **options: str) -> Any:
    reader = spark.readStream.format("rocketmq").option("namesrv", cluster.namesrv)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df: Any, out: Path, checkpoint: Path) -> list[dict[str, Any]]:
    query = (
        df.selectExpr("topic", "queueId", "queueOffset", "cast(body as string) as body")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def test_max_offsets_per_trigger_and_a_restart_from_the_checkpoint_lose_and_repeat_nothing(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    cluster.create_topic(topic_name, 4)
    produce(cluster, topic_name, 0, 200)
    df = stream(
        spark, cluster, topics=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="70"
    )
    out, checkpoint = work / "out", work / "checkpoint"

    first = run_available_now(df, out, checkpoint)
    produce(cluster, topic_name, 200, 130)
    second = run_available_now(df, out, checkpoint)

    sizes = [p["numInputRows"] for p in first + second]
    assert max(sizes) <= 70
    assert sum(p["numInputRows"] for p in first) == 200
    assert sum(p["numInputRows"] for p in second) == 130
    bodies = [r.body for r in spark.read.parquet(str(out)).collect()]
    assert len(bodies) == 330
    assert set(bodies) == {f"m{i}" for i in range(330)}
    # the lag the source reports with each batch: what is still waiting after it
    lag = [json.loads(p["sources"][0]["latestOffset"])["offsetsBehindLatest"] for p in first]
    assert lag[0]["total"] == 200 - 70
    assert lag[-1]["total"] == 0


def test_admission_control_min_rows_waits_max_rows_splits_by_backlog(
    cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 4)
    cluster.produce(
        [(Message(topic_name, b"x"), q) for q, n in enumerate((40, 10, 0, 2)) for _ in range(n)]
    )
    options = {
        "namesrv": cluster.namesrv,
        "topics": topic_name,
        "startingOffsets": "earliest",
        "minOffsetsPerTrigger": "60",
        "maxOffsetsPerTrigger": "20",
        "maxTriggerDelay": "400ms",
    }
    reader = StreamReader(parse_source(options, streaming=True))
    try:
        start = reader.initialOffset()
        assert isinstance(reader.getDefaultReadLimit(), ReadMinRows)
        # 52 waiting, 60 wanted: no batch until the delay has passed
        assert reader.latestOffset(start, ReadMinRows(60)) == start
        time.sleep(0.5)
        end = flatten(reader.latestOffset(start, ReadMinRows(60)))
        taken = {k[2]: v - flatten(start)[k] for k, v in end.items()}
        assert sum(taken.values()) == 20  # the max applies too
        assert taken[0] > taken[1] > 0 and taken[2] == 0
        limited = flatten(reader.latestOffset(start, ReadMaxRows(13)))
        assert sum(v - flatten(start)[k] for k, v in limited.items()) == 13
        everything = flatten(reader.latestOffset(start, ReadAllAvailable()))
        assert {k[2]: v for k, v in everything.items()} == {0: 40, 1: 10, 2: 0, 3: 2}
        planned = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
        parts = [p for p in planned if isinstance(p, QueueRange)]
        assert len(parts) == len(planned)
        assert sorted((p.queue.queue_id, p.start, p.end) for p in parts) == [
            (0, 0, 40),
            (1, 0, 10),
            (3, 0, 2),
        ]
    finally:
        reader.stop()


def test_a_running_query_picks_up_new_topics_and_queues_and_commits_to_a_group(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    group = f"g{topic_name}"
    first, second = f"{topic_name}p1", f"{topic_name}p2"
    cluster.create_topic(first, 2)
    produce(cluster, first, 0, 20, queues=2)
    df = stream(
        spark,
        cluster,
        topicPattern=f"{topic_name}p[0-9]",
        startingOffsets="earliest",
        consumerGroup=group,
    )
    query = (
        df.selectExpr("topic", "queueId", "cast(body as string) as body")
        .writeStream.format("memory")
        .queryName(f"q{topic_name}")
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    table = f"q{topic_name}"

    def rows() -> set[tuple[str, int, str]]:
        return {(r.topic, r.queueId, r.body) for r in spark.table(table).collect()}

    try:
        wait_for(lambda: len(rows()) == 20)
        cluster.create_topic(first, 4)  # two more queues
        cluster.create_topic(second, 2)  # a new topic the pattern matches
        cluster.produce([(Message(first, f"n{i}".encode()), 2 + i % 2) for i in range(10)])
        produce(cluster, second, 100, 10, queues=2)
        wait_for(lambda: len(rows()) == 40)
        got = rows()
        assert {(t, q) for t, q, _ in got} == {(first, q) for q in range(4)} | {
            (second, q) for q in range(2)
        }
        wait_for(lambda: committed(cluster, group, first) == {0: 10, 1: 10, 2: 5, 3: 5})
    finally:
        query.stop()
    assert len(rows()) == 40


def committed(cluster: SparkCluster, group: str, topic: str) -> dict[int, int]:
    """The group's offsets as ``apogee admin consumerProgress`` shows them."""
    out = subprocess.run(
        [sys.executable, "-m", "apogee", "admin", "consumerProgress", "-n", cluster.namesrv,
         "-g", group, "--json"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    if out.returncode != 0:
        return {}
    found: dict[int, int] = {}
    for row in json.loads(out.stdout)["queues"]:
        if row["topic"] == topic:
            found[row["queueId"]] = row["consumerOffset"]
    return found


def wait_for(check: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.3)


def test_starting_timestamp_starts_each_queue_at_its_first_message_stored_at_or_after_it(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    cluster.create_topic(topic_name, 4)
    produce(cluster, topic_name, 0, 16)  # m0..m15, every queue
    early = max(m.store_timestamp for m in cluster.read(topic_name))
    wait_for(lambda: time.time() * 1000 > early + 5)  # the next message is stored later
    # later messages in queues 0 and 1 only: queues 2 and 3 have nothing at or after it
    cluster.produce([(Message(topic_name, f"m{i}".encode()), i % 2) for i in range(16, 26)])
    boundary = min(m.store_timestamp for m in cluster.read(topic_name) if int(m.body[1:]) >= 16)
    assert boundary > early
    df = stream(spark, cluster, topics=topic_name, startingTimestamp=str(boundary))
    out, checkpoint = work / "out", work / "checkpoint"

    run_available_now(df, out, checkpoint)
    produce(cluster, topic_name, 26, 8)  # every queue again
    run_available_now(df, out, checkpoint)

    rows = spark.read.parquet(str(out)).collect()
    assert sorted(int(r.body[1:]) for r in rows) == list(range(16, 34))
    # queues 2 and 3 started at their end, not at their earliest offset
    assert sorted((r.queueId, r.queueOffset) for r in rows if r.queueId >= 2) == [
        (2, 4), (2, 5), (3, 4), (3, 5)
    ]  # fmt: skip
