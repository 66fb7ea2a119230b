"""``apogee pipeline``: Spark pipeline jobs (the ``apogee[spark]`` extra).

Owns: ``apogee pipeline orders`` (the orders job of ``apogee.spark.orders``,
on ``local[N]`` or a standalone cluster) and ``apogee pipeline
generate-orders`` (its event generator alone).
"""

from __future__ import annotations

import os
import sys
import time

import click


def _spark_session(master: str, app: str, confs: tuple[str, ...]) -> object:
    # executors import apogee from the interpreter running this command
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415  # PySpark loads only for this command

    import apogee.spark  # noqa: PLC0415
    from apogee.spark.worker_archive import print_startup_hint  # noqa: PLC0415

    print_startup_hint()

    builder = SparkSession.builder.master(master).appName(app)
    builder = builder.config("spark.sql.shuffle.partitions", "4")
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"--conf wants KEY=VALUE, not {item!r}")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    apogee.spark.register(spark)
    return spark


@click.group()
def pipeline() -> None:
    """Run Spark pipeline jobs against a cluster (needs apogee[spark] and Java 17+)."""


_namesrv = click.option(
    "--namesrv", "-n", required=True, envvar="NAMESRV_ADDR", help="Name servers, HOST:PORT[;...]."
)


@pipeline.command("generate-orders")
@_namesrv
@click.option("--topic", default="orders", show_default=True)
@click.option("--count", default=10_000, show_default=True, help="Order events to publish.")
@click.option("--start-ms", type=int, default=None, help="Event time of the first order.")
@click.option("--seed", default=7, show_default=True)
def generate_orders(namesrv: str, topic: str, count: int, start_ms: int | None, seed: int) -> None:
    """Publish JSON order events (and a closing tick) to TOPIC."""
    from apogee.spark._io import Cluster  # noqa: PLC0415
    from apogee.spark.orders import generate  # noqa: PLC0415

    Cluster.of(namesrv).ensure_topic(topic, 4)
    first = start_ms if start_ms is not None else int(time.time() * 1000)
    sent = generate(namesrv, topic, count, start_ms=first, seed=seed)
    click.echo(f"published {sent} messages to {topic}")


@pipeline.command("orders")
@_namesrv
@click.option("--master", default="local[2]", show_default=True, help="local[N] or spark://H:P.")
@click.option("--source-topic", default="orders", show_default=True)
@click.option("--result-topic", default="orders-revenue", show_default=True)
@click.option("--workdir", default="orders-pipeline", show_default=True,
              help="Checkpoints and Parquet go here (every worker must see it).")  # fmt: skip
@click.option("--watermark", default="1 minute", show_default=True)
@click.option("--generate", "generate_count", type=int, default=0,
              help="Publish this many order events before the job starts.")  # fmt: skip
@click.option("--once", is_flag=True,
              help="Stop when the topic is read and every closed window written.")  # fmt: skip
@click.option("--conf", "confs", multiple=True, help="Extra Spark setting KEY=VALUE.")
def orders(  # noqa: PLR0917  # click passes every option
    namesrv: str,
    master: str,
    source_topic: str,
    result_topic: str,
    workdir: str,
    watermark: str,
    generate_count: int,
    once: bool,
    confs: tuple[str, ...],
) -> None:
    """Per-minute revenue per region from JSON order events, on Spark."""
    from apogee.spark._io import Cluster  # noqa: PLC0415
    from apogee.spark.orders import JobConfig, generate, run_until_idle, start  # noqa: PLC0415

    root = os.path.abspath(workdir)
    config = JobConfig(
        namesrv=namesrv,
        source_topic=source_topic,
        result_topic=result_topic,
        parquet_dir=os.path.join(root, "parquet"),
        checkpoint_dir=os.path.join(root, "checkpoint"),
        watermark=watermark,
    )
    cluster = Cluster.of(namesrv)
    cluster.ensure_topic(source_topic, 4)
    cluster.ensure_topic(result_topic, 4)
    if generate_count:
        sent = generate(namesrv, source_topic, generate_count, start_ms=int(time.time() * 1000))
        click.echo(f"published {sent} order messages to {source_topic}")
    spark = _spark_session(master, "apogee-orders-pipeline", confs)
    queries = start(spark, config)  # type: ignore[arg-type]
    click.echo(f"running {', '.join(str(q.name) for q in queries)} on {master}")
    try:
        if once:
            run_until_idle(queries)
        for query in queries:
            query.awaitTermination()
    finally:
        for query in queries:
            query.stop()
        spark.stop()  # type: ignore[attr-defined]
    click.echo(f"done: results in topic {result_topic} and under {config.parquet_dir}")
