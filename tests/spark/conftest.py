"""Spark connector tests: one SparkSession (local[2]) and one real cluster for the whole run.

The cluster is a real ``apogee namesrv`` and ``apogee broker`` process pair;
its transaction checks run every second (halves older than 2 s are asked
about) so that the exactly-once tests see check-backs within seconds. Every
test uses its own topics, so they share the cluster without seeing each
other's messages.

The session is ``local[2,4]``: two worker threads, as local[2], and up to
four attempts per task, so that a task failing on purpose is run again.

Every JVM the tests start (this session, the crash tests' drivers, the
standalone cluster's daemons and executors, ``spark-pipelines``) runs with
the client compiler only and the serial collector: they live for seconds to
minutes on small data, where the optimising compiler's work does not pay
back. Measured here: a session's start and two small jobs take 25 s of CPU
instead of 43 s; the four slowest tests, run twice each way in alternation,
took 826 s of CPU instead of 1,110 s (wall time: 629 s instead of 672 s).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import apogee.spark
from apogee.testing.cluster import BrokerProcess, NamesrvProcess
from tests.spark.helpers import SparkCluster

#: Read by every ``java`` launcher (JDK 9+), so it reaches JVMs started by scripts too.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

TRANSACTION_CHECKS = {
    "transactionCheckInterval": "1000",
    "transactionTimeOut": "2000",
    "transactionCheckMax": "100",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    root = tmp_path_factory.mktemp("spark-cluster")
    namesrv = NamesrvProcess(root / "namesrv")
    namesrv.start()
    broker = BrokerProcess(root / "store", namesrv.address, properties=TRANSACTION_CHECKS)
    try:
        broker.start()
        yield SparkCluster(namesrv.address, broker.address, root)
    finally:
        broker.stop()
        namesrv.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("apogee-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    apogee.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def topic_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path
