"""What Spark's driver-side Python processes load with the data source.

Spark starts Python processes on the driver to plan a query (the schema,
partitions, offsets; a fresh interpreter per streaming query for its source):
they unpickle ``RocketMQDataSource``, so they import ``apogee.spark.datasource``.
numpy, pyarrow and the column builder are for reading rows, on executors.
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_data_source_loads_without_numpy_pyarrow_or_the_column_builder() -> None:
    code = (
        "import json, sys, apogee.spark.datasource as d; "
        "d.RocketMQDataSource({'namesrv': 'x', 'topics': 't'}).schema(); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "apogee.spark.source" in loaded and "apogee.spark.sink" in loaded
    assert not {"numpy", "pyarrow", "apogee.spark.records"} & loaded
