"""Exactly-once across driver crashes: the driver process is killed inside the sink's commit.

Three runs of one query (real driver processes, one checkpoint):

1. killed in batch 1's commit *before* its ledger entry: the half messages of
   batch 1 are orphans; the rerun of batch 1 commits new ones, and the broker's
   checks of the orphans are answered ROLLBACK;
2. killed in batch 3's commit *after* its ledger entry, before any half
   message was committed: the rerun of batch 3 finds the entry and rolls its
   new halves back, and the checks of the first ones are answered COMMIT;
3. runs on to the end.

The result topic must hold every row exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from apogee.model.message import Message, MessageExt
from apogee.spark.sink import PAUSE_ENV
from tests.spark.helpers import SparkCluster
from tests.spark.test_sink_abort import halves_of, unresolved
from tests.spark.test_source_stream import wait_for

ROOT = Path(__file__).resolve().parents[2]


def start_driver(
    cluster: SparkCluster, args: list[str], pause: str | None, log: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop(PAUSE_ENV, None)
    if pause is not None:
        env[PAUSE_ENV] = pause
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.eo_driver", cluster.namesrv, *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,  # its JVM and Python workers die with it
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_exactly_once_when_the_driver_dies_before_and_after_the_commit_point(
    cluster: SparkCluster, topic_name: str, work: Path
) -> None:
    source, result = f"{topic_name}in", f"{topic_name}out"
    cluster.create_topic(source, 4)
    cluster.create_topic(result, 4)
    cluster.produce([(Message(source, f"row-{i}".encode()), i % 4) for i in range(500)])
    args = [source, result, str(work / "checkpoint")]
    log = work / "driver.log"
    expected = Counter(f"ROW-{i}".encode() for i in range(500))

    for point, batch in (("before-ledger", 1), ("after-ledger", 3)):
        marker = work / f"{point}.paused"
        driver = start_driver(cluster, args, f"{point}:{batch}:{marker}", log)
        try:
            wait_for(lambda m=marker, d=driver: m.exists() or d.poll() is not None, timeout_s=180)
            assert marker.exists(), log.read_text(errors="replace")[-3000:]
        finally:
            kill(driver)
        delivered = Counter(m.body for m in cluster.read(result))
        assert all(n == 1 for n in delivered.values())
        assert len(delivered) == 100 * batch  # the paused batch is not visible yet

    driver = start_driver(cluster, args, None, log)
    try:
        wait_for(lambda: len(cluster.read(result)) >= 500, timeout_s=180)
        # every half of these rows resolved (a commit's message is stored before its op
        # record): the checks of the killed runs' halves are answered, nothing else may come
        wait_for(lambda: not unresolved(cluster, every_half(cluster, set(expected))), timeout_s=30)
        assert Counter(m.body for m in cluster.read(result)) == expected
    finally:
        kill(driver)


def every_half(cluster: SparkCluster, bodies: set[bytes]) -> list[MessageExt]:
    """Every copy of every half message carrying one of ``bodies``."""
    return [m for copies in halves_of(cluster, bodies).values() for m in copies]
