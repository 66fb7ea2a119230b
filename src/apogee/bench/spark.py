"""``apogee bench spark``: the Spark connector's throughput, with Parquet as the yardstick.

Owns: the Spark benchmark. In one run, on one SparkSession (``local[2]`` by
default) and a throw-away broker (unless ``--namesrv``):

1. preload N messages of ``--size`` bytes into a 4-queue topic;
2. batch read: the topic through the ``rocketmq`` source, and the same rows
   from a Parquet file written from it, each drained with the ``noop`` sink;
   and what Spark takes in from a Python source that only replays one decoded
   batch (the ceiling of any Python data source with this schema);
3. sink: the Parquet rows written to topics, at-least-once and exactly-once,
   after one untimed write that starts the sink's clients in the Python workers;
4. streaming end to end: source -> transformation -> exactly-once sink
   (Trigger.AvailableNow), rows/s from query start to end, and Spark's
   own split of the time (durationMs: addBatch is the write and its commit);
   three queries over the same rows: the first pays for starting the
   streaming workers, the third gives the reader a schema of the two
   columns the query uses.

With a broker it started, the sink figures come with the broker's CPU
seconds over each (how much of the time the broker was the one working).

``--only sink`` skips the read figures (2 and the reader's parts): the
sink writes and the stream, the exactly-once path, in a shorter run.

The reader's own parts (pulls, decoding to Arrow) are timed outside Spark on
the same data right after the batch read; ``--profile`` adds a cProfile of
one queue's read.

On a terminal a bar on stderr names the phase running; the figures end as a
summary table (``--json``: one JSON object instead). Figures are reported,
never judged. The broker this command starts lets a
pull carry up to 1024 messages / 4 MiB (``maxTransferCountOnMessageInMemory``
and ``maxTransferBytesOnMessageInMemory``; RocketMQ's defaults are 32 / 256 KiB).
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import orjson
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from apogee._util.progress import Progress, print_summary
from apogee.bench.cluster import cluster, cpu_seconds, namesrv_option
from apogee.spark.worker_archive import print_startup_hint

# the stream's two columns, for the query that reads only them
_NARROW = "body binary, tags string"
BULK_PULLS = {
    "maxTransferCountOnMessageInMemory": "1024",
    "maxTransferBytesOnMessageInMemory": str(4 << 20),
}


@click.command("spark")
@namesrv_option
@click.option("--messages", "count", default=200_000, show_default=True)
@click.option("--size", default=1024, show_default=True, help="Body bytes per message.")
@click.option("--master", default="local[2]", show_default=True)
@click.option(
    "--only",
    type=click.Choice(["all", "sink"]),
    default="all",
    show_default=True,
    help="sink: only the sink writes and the stream (the exactly-once path), no read figures.",
)
@click.option("--profile", is_flag=True, help="Print a cProfile of one queue's read.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def spark_bench(  # noqa: PLR0917  # click passes every option
    namesrv: str | None,
    count: int,
    size: int,
    master: str,
    only: str,
    profile: bool,
    as_json: bool,
) -> None:
    """Batch read vs Parquet, sink writes, and streaming end to end, on Spark."""
    root = Path(tempfile.mkdtemp(prefix="apogee-bench-spark-"))
    try:
        phases = f"of {len(PHASES)} phases"
        with (
            Progress("starting the cluster", len(PHASES), unit=phases) as bar,
            _cluster(namesrv, root) as (ns, broker_pid),
        ):
            figures = _run(
                ns, root, count, size, master=master, reads=only == "all", profile=profile,
                bar=bar, broker_pid=broker_pid,
            )  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if as_json:
        click.echo(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
        return
    rows = [
        (key, f"{value:,.0f}" if isinstance(value, float) and value > 10 else f"{value}")
        for key, value in figures.items()
        if key != "profile"
    ]
    print_summary("bench spark", rows)
    if "profile" in figures:
        click.echo(figures["profile"])


@contextlib.contextmanager
def _cluster(namesrv: str | None, root: Path) -> Iterator[tuple[str, int | None]]:
    """The name server, and the broker's pid when this command started it."""
    if namesrv is not None:
        yield namesrv, None
        return
    (root / "cluster").mkdir()
    with cluster(root / "cluster", "ASYNC_FLUSH", properties=BULK_PULLS) as (ns, pid):
        yield ns, pid


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _rate(count: int, action: Callable[[], object]) -> float | str:
    """Rows per second of ``action``; a failure is a figure too (its first line)."""
    try:
        return count / _timed(action)
    except Exception as exc:  # Spark raises Py4J and streaming errors alike
        return f"failed: {str(exc).strip().splitlines()[0][:200]}"


#: what the bar names, in the order ``_run`` goes through them
PHASES = ("preloading", "starting Spark", "batch reads", "reader parts", "sink writes",
          "streaming")  # fmt: skip


def _phase(bar: Progress, index: int) -> None:
    bar.describe(PHASES[index])
    bar.update(index)


def _run(
    ns: str,
    root: Path,
    count: int,
    size: int,
    *,
    master: str,
    reads: bool,
    profile: bool,
    bar: Progress,
    broker_pid: int | None,
) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415  # PySpark loads for this command only

    import apogee.spark  # noqa: PLC0415
    from apogee.spark._io import Cluster  # noqa: PLC0415

    tag = f"bench{int(time.time())}"
    source, out_alo, out_eo, out_cold, out_warm, out_narrow, out_first = (
        f"{tag}{s}" for s in ("in", "alo", "eo", "st", "st2", "st3", "w")
    )
    io_cluster = Cluster.of(ns)
    for topic in (source, out_alo, out_eo, out_cold, out_warm, out_narrow, out_first):
        io_cluster.ensure_topic(topic, 4)
    _phase(bar, 0)
    preload = _timed(lambda: _preload(io_cluster, source, count, size))
    _phase(bar, 1)

    print_startup_hint()
    spark = (
        SparkSession.builder.master(master)
        .appName("apogee-bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # the phase bar is the one on stderr
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    apogee.spark.register(spark)
    figures: dict[str, Any] = {"messages": count, "body_bytes": size, "master": master}
    figures["preload rows/s (python client)"] = count / preload
    try:
        _phase(bar, 2)
        df = spark.read.format("rocketmq").option("namesrv", ns).option("topics", source).load()
        parquet = str(root / "rows.parquet")
        df.write.mode("overwrite").parquet(parquet)  # also warms up the Python workers
        pq = spark.read.parquet(parquet)

        def drain(frame: Any) -> None:
            frame.write.format("noop").mode("overwrite").save()

        if reads:
            figures.update(_reads(spark, ns, source, df, pq, drain, count))
            _phase(bar, 3)
            figures.update(_reader_parts(io_cluster, source, profile))
        _phase(bar, 4)

        bodies = pq.select("body")

        def write(topic: str, exactly: str) -> None:
            writer = bodies.write.format("rocketmq").option("namesrv", ns).option("topic", topic)
            writer.option("exactlyOnce", exactly).mode("append").save()

        # untimed: the first write through the sink starts its Python workers' clients,
        # which made whichever mode ran first look about half as fast
        write(out_first, "false")
        for name, topic, exactly in (
            ("at-least-once", out_alo, "false"),
            ("exactly-once", out_eo, "true"),
        ):
            busy = cpu_seconds(broker_pid)
            figures[f"sink write rows/s ({name})"] = _rate(
                count,
                lambda t=topic, e=exactly: write(t, e),  # type: ignore[misc]
            )
            figures[f"  broker CPU s ({name})"] = _busy(broker_pid, busy)

        _phase(bar, 5)
        # twice: the first query pays for the streaming workers' start-up, the second
        # (same rows, its own checkpoint and result topic) shows the steady rate; a third
        # gives the reader a schema of the two columns the query uses
        for run, out, schema in (
            ("first query", out_cold, None),
            ("second query", out_warm, None),
            ("third query, schema body and tags", out_narrow, _NARROW),
        ):
            busy = cpu_seconds(broker_pid)
            stages: dict[str, int] = {}
            figures[f"stream e2e rows/s ({run}: source -> upper -> exactly-once sink)"] = _rate(
                count,
                lambda o=out, st=stages, sc=schema: _stream(spark, ns, source, o, root, st, sc),  # type: ignore[misc]
            )
            figures[f"  broker CPU s (stream, {run})"] = _busy(broker_pid, busy)
            for stage, ms in sorted(stages.items(), key=lambda kv: -kv[1]):
                figures[f"  stream {stage} ms ({run})"] = ms
    finally:
        spark.stop()
    bar.update(len(PHASES))
    return figures


def _reads(  # noqa: PLR0917  # the pieces of one run
    spark: Any, ns: str, source: str, df: Any, pq: Any, drain: Callable[[Any], None], count: int
) -> dict[str, Any]:
    """Batch reads: the source and Parquet drained, and the Python source ceiling."""
    figures: dict[str, Any] = {}
    source_s = min(_timed(lambda: drain(df)) for _ in range(2))
    parquet_s = min(_timed(lambda: drain(pq)) for _ in range(2))
    figures["batch read rows/s (rocketmq source)"] = count / source_s
    figures["batch read rows/s (parquet)"] = count / parquet_s
    figures["source / parquet"] = round(parquet_s / source_s, 3)
    # what Spark takes from any Python source with this schema: one decoded batch
    # handed over again and again, no broker, no decoding
    spark.dataSource.register(ReplaySource)
    replay = (
        spark.read.format("apogee-bench-replay")
        .option("namesrv", ns)
        .option("topic", source)
        .option("rows", str(count))
        .load()
    )
    drain(replay)
    replay_s = min(_timed(lambda: drain(replay)) for _ in range(2))
    figures["python source ceiling rows/s (replayed batch)"] = count / replay_s
    return figures


class _ReplayReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(4)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from apogee.spark._io import Cluster  # noqa: PLC0415
        from apogee.spark.records import ColumnBuilder  # noqa: PLC0415

        cluster = Cluster.of(self.options["namesrv"])
        q = cluster.queues(self.options["topic"])[0]
        builder = ColumnBuilder(q.topic, q.broker_name, q.queue_id)
        builder.add(cluster.pull(q, 0, 1024, None).result(60).body, 1 << 62, None)
        batch = builder.flush()
        for _ in range(int(self.options["rows"]) // 4 // max(batch.num_rows, 1)):
            yield batch


class ReplaySource(DataSource):
    """One real decoded batch, handed to Spark over and over: the Python source ceiling."""

    @classmethod
    def name(cls) -> str:
        return "apogee-bench-replay"

    def schema(self) -> StructType:
        from apogee.spark.schema import SOURCE_SCHEMA  # noqa: PLC0415

        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _ReplayReader(dict(self.options))


def _preload(cluster: Any, topic: str, count: int, size: int) -> None:
    from apogee.model.message import Message  # noqa: PLC0415

    queues = cluster.queues(topic, for_write=True)
    body = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    pending = []
    per_batch = max(1, min(256, (1 << 20) // (size + 64)))
    for i in range(0, count, per_batch):
        n = min(per_batch, count - i)
        msgs = [Message(topic, body) for _ in range(n)]
        pending.append(cluster.send_batch(queues[(i // per_batch) % len(queues)], msgs, "bench"))
        if len(pending) > 32:
            pending.pop(0).result(60)
    for future in pending:
        future.result(60)


def _busy(pid: int | None, before: float | None) -> float | str:
    after = cpu_seconds(pid)
    if after is None or before is None:
        return "n/a (a running cluster)"
    return round(after - before, 2)


def _stream(  # noqa: PLR0917  # the pieces of one run
    spark: Any,
    ns: str,
    source: str,
    result: str,
    root: Path,
    stages: dict[str, int],
    schema: str | None = None,
) -> None:
    """Run the stream to its end; ``stages`` gets Spark's durationMs summed over its batches.

    ``schema``: given to the reader, so that it makes only those columns.
    """
    reader = spark.readStream.format("rocketmq")
    if schema is not None:
        reader = reader.schema(schema)
    query = (
        reader.option("namesrv", ns)
        .option("topics", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100000")
        .load()
        .selectExpr("upper(cast(body as string)) as body", "tags")
        .writeStream.format("rocketmq")
        .option("namesrv", ns)
        .option("topic", result)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(root / f"checkpoint-{result}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    for progress in query.recentProgress:
        for stage, ms in (progress.durationMs or {}).items():
            stages[stage] = stages.get(stage, 0) + int(ms)
    if query.exception() is not None:
        raise click.ClickException(str(query.exception()))


def _reader_parts(cluster: Any, topic: str, profile: bool) -> dict[str, Any]:
    """Pull and decode times of the reader itself, one queue, outside Spark."""
    from apogee.spark._io import QueueRef  # noqa: PLC0415
    from apogee.spark.options import parse_source  # noqa: PLC0415
    from apogee.spark.reading import QueueRange, read_range  # noqa: PLC0415
    from apogee.spark.records import ColumnBuilder  # noqa: PLC0415

    q: QueueRef = cluster.queues(topic)[0]
    end = cluster.offsets([q], "max")[0]
    bodies: list[bytes] = []
    offset = 0
    started = time.perf_counter()
    while offset < end:
        got = cluster.pull(q, offset, 1024, None).result(60)
        bodies.append(got.body)
        offset = got.next_begin_offset
    pull_s = time.perf_counter() - started
    builder = ColumnBuilder(q.topic, q.broker_name, q.queue_id)
    started = time.perf_counter()
    for body in bodies:
        builder.add(body, end, None)
    decode_s = time.perf_counter() - started
    started = time.perf_counter()
    builder.flush()
    arrow_s = time.perf_counter() - started
    opts = parse_source({"namesrv": cluster.namesrv, "topics": topic}, streaming=False)
    part = QueueRange(q, 0, end)
    whole_s = _timed(lambda: sum(b.num_rows for b in read_range(part, opts)))
    figures: dict[str, Any] = {
        "reader alone rows/s (one queue, pulls + decode)": end / whole_s,
        "  pulls only rows/s": end / pull_s,
        "  decode to columns rows/s": end / decode_s,
        "  columns to Arrow rows/s": end / arrow_s,
    }
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        sum(b.num_rows for b in read_range(part, opts))
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(15)
        figures["profile"] = text.getvalue()
    return figures
