"""The orders pipeline job, checked against the same aggregates computed in plain Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from apogee.spark.orders import JobConfig, generate, run_until_idle, start
from tests.spark.helpers import SparkCluster
from tests.spark.standalone import SPARK_HOME, StandaloneCluster

ROOT = Path(__file__).resolve().parents[2]
START_MS = 1_700_000_040_000  # on a minute boundary
Windows = dict[tuple[int, str], tuple[float, int]]


def expected_windows(cluster: SparkCluster, topic: str) -> Windows:
    """Per (window start, region): revenue and order count, from the published events."""
    sums: dict[tuple[int, str], float] = defaultdict(float)
    counts: dict[tuple[int, str], int] = defaultdict(int)
    for msg in cluster.read(topic):
        event = orjson.loads(msg.body)
        if event.get("tick"):
            continue
        key = (event["eventTime"] // 60_000 * 60_000, event["region"])
        sums[key] += event["amount"]
        counts[key] += 1
    return {k: (round(sums[k], 2), counts[k]) for k in sums}


def topic_windows(cluster: SparkCluster, topic: str) -> Windows:
    out: Windows = {}
    for msg in cluster.read(topic):
        row = json.loads(msg.body)
        assert msg.tags == "revenue" and msg.keys == row["region"]
        key = (row["windowStart"], row["region"])
        assert key not in out, f"window {key} written twice"
        out[key] = (row["revenue"], row["orders"])
    return out


def parquet_windows(spark: Any, path: Path) -> Windows:
    rows = spark.read.parquet(str(path)).collect()
    out = {(r.windowStart, r.region): (r.revenue, r.orders) for r in rows}
    assert len(out) == len(rows)
    return out


def close(got: Windows, want: Windows) -> bool:
    return got.keys() == want.keys() and all(
        abs(got[k][0] - want[k][0]) < 0.01 and got[k][1] == want[k][1] for k in want
    )


def test_the_orders_job_on_local_matches_a_plain_python_computation(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    source, result = f"{topic_name}orders", f"{topic_name}revenue"
    cluster.create_topic(source, 4)
    cluster.create_topic(result, 4)
    sent = generate(cluster.namesrv, source, 3000, start_ms=START_MS)
    assert sent == 3001  # and the closing tick
    config = JobConfig(
        namesrv=cluster.namesrv,
        source_topic=source,
        result_topic=result,
        parquet_dir=str(work / "parquet"),
        checkpoint_dir=str(work / "checkpoint"),
        max_offsets_per_trigger=1501,
        trigger_seconds=0.5,
    )

    run_until_idle(start(spark, config), timeout_s=300)

    want = expected_windows(cluster, source)
    assert len(want) == 5 * 4  # five minutes of events, four regions
    got = topic_windows(cluster, result)
    assert close(got, want), _debug(got, want)
    assert close(parquet_windows(spark, work / "parquet"), want)


def _debug(got: Windows, want: Windows) -> str:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    diff = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    return f"missing {missing} extra {extra} differ {[(k, got[k], want[k]) for k in diff]}"


@pytest.mark.cluster
def test_the_orders_job_on_a_standalone_cluster_matches_plain_python(
    spark: Any, cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    source, result = f"{topic_name}orders", f"{topic_name}revenue"
    cluster.create_topic(source, 4)
    cluster.create_topic(result, 4)
    generate(cluster.namesrv, source, 2400, start_ms=START_MS)
    standalone = StandaloneCluster(work / "standalone")
    (work / "standalone").mkdir()
    standalone.start()
    try:
        job = subprocess.run(
            [
                sys.executable, "-m", "apogee", "pipeline", "orders",
                "--namesrv", cluster.namesrv, "--master", standalone.master_url,
                "--source-topic", source, "--result-topic", result,
                "--workdir", str(work / "job"), "--once",
                "--conf", "spark.executor.memory=512m",
                "--conf", "spark.ui.enabled=false",
            ],
            env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-5000:]
        apps = standalone.state()["completedapps"] + standalone.state()["activeapps"]
    finally:
        standalone.stop()
    # the executors ran in the workers' own JVMs, one per worker
    executors = standalone.executor_logs()
    assert {p.parents[2].name for p in executors} == {"worker0", "worker1"}
    assert any(a["name"] == "apogee-orders-pipeline" for a in apps)
    want = expected_windows(cluster, source)
    assert len(want) == 4 * 4
    got = topic_windows(cluster, result)
    assert close(got, want), _debug(got, want)
    assert close(parquet_windows(spark, work / "job" / "parquet"), want)


def test_the_orders_job_as_a_declarative_pipeline_matches_plain_python(
    cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    source, result = f"{topic_name}orders", f"{topic_name}revenue"
    cluster.create_topic(source, 4)
    cluster.create_topic(result, 4)
    generate(cluster.namesrv, source, 2400, start_ms=START_MS)
    project = work / "declarative-orders"
    shutil.copytree(ROOT / "examples" / "declarative-orders", project)
    spec = project / "spark-pipeline.yml"
    storage = f"file://{work / 'storage'}"
    spec.write_text(spec.read_text().replace("file:///tmp/apogee-orders-pipeline/storage", storage))
    env = {
        **os.environ,
        "APOGEE_NAMESRV": cluster.namesrv,
        "APOGEE_SOURCE_TOPIC": source,
        "APOGEE_RESULT_TOPIC": result,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    run = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-pipelines"), "run", "--spec", str(spec)],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    assert "Run is COMPLETED" in output, output[-5000:]
    # PySpark 4.3's Connect client trips over the accumulator updates of Python workers at
    # the end of the event stream, after the run completed; that is its only failure here.
    assert run.returncode == 0 or "UNKNOWN_RESPONSE" in output, output[-5000:]
    want = expected_windows(cluster, source)
    got = topic_windows(cluster, result)
    assert close(got, want), _debug(got, want)
