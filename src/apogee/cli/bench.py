"""``apogee bench``: benchmarks, loaded lazily by name.

Owns: the bench command table; each entry is a click command in ``apogee.bench``.
"""

from __future__ import annotations

import click

from apogee.cli.main import LazyGroup

# benchmark name -> "module:attribute"
BENCH_COMMANDS: dict[str, str] = {}
BENCH_COMMANDS["store"] = "apogee.bench.store:store_bench"
BENCH_COMMANDS["produce"] = "apogee.bench.produce:produce_bench"
BENCH_COMMANDS["consume"] = "apogee.bench.consume:consume_bench"
BENCH_COMMANDS["e2e"] = "apogee.bench.e2e:e2e_bench"
BENCH_COMMANDS["replication"] = "apogee.bench.replication:replication_bench"
BENCH_COMMANDS["spark"] = "apogee.bench.spark:spark_bench"


@click.group(cls=LazyGroup, lazy_commands=BENCH_COMMANDS)
def bench() -> None:
    """Measure throughput and latency."""
