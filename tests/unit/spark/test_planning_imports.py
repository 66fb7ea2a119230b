"""What Spark's driver-side Python processes load with the data source.

Spark starts Python processes on the driver to plan a query (the schema,
partitions, offsets; a fresh interpreter per streaming query for its source):
they unpickle ``RocketMQDataSource``, so they import ``apogee.spark.datasource``.
numpy, pyarrow and the column builder are for reading rows, on executors. The
reader and the writer load only when asked for: a process that looks the
source up or asks its schema loads neither, one that plans a read no sink.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SOURCE, SINK = "apogee.spark.source", "apogee.spark.sink"


def loaded_after(call: str) -> set[str]:
    code = (
        "import json, sys, apogee.spark.datasource as d; "
        "from pyspark.sql.types import StructType; "
        "read = d.RocketMQDataSource({'namesrv': 'x', 'topics': 't'}); "
        "write = d.RocketMQDataSource({'namesrv': 'x', 'topic': 't'}); "
        "rows = StructType.fromJson({'type': 'struct', 'fields': ["
        "{'name': 'body', 'type': 'binary', 'nullable': True, 'metadata': {}}]}); "
        f"{call}; print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(
    ("call", "wanted", "unwanted"),
    [
        ("read.schema()", set(), {SOURCE, SINK}),
        ("read.reader(read.schema())", {SOURCE}, {SINK}),
        ("read.streamReader(read.schema())", {SOURCE}, {SINK}),
        ("write.writer(rows, False)", {SINK}, {SOURCE}),
        ("write.streamWriter(rows, False)", {SINK}, {SOURCE}),
    ],
)  # fmt: skip
def test_the_data_source_loads_only_what_each_step_needs(
    call: str, wanted: set[str], unwanted: set[str]
) -> None:
    loaded = loaded_after(call)
    assert wanted <= loaded
    assert not unwanted & loaded
    assert not {"numpy", "pyarrow", "apogee.spark.records"} & loaded
