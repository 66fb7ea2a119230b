"""The broker's CPU per END_TRANSACTION, outside Spark, as the exactly-once sink sends them.

Starts a name server and a broker as ``apogee`` processes (or uses a running
cluster, ``--namesrv`` and ``--broker-pid``), then per round: N rows sent as
half messages in batches per queue (``Cluster.send_halves``, as the sink's
tasks do: each batch one transaction), then one END_TRANSACTION per batch
(``Cluster.end_transactions``: oneway frames in windows, as the sink's driver
does). The figures are the broker process's CPU seconds (``/proc/<pid>/stat``,
user + system) during the ends, per END_TRANSACTION and per row, and the
wall-clock rate of the ends. ``--rollback`` ends with ROLLBACK instead
of COMMIT. ``--py-spy FILE`` records the broker during the ends of the last
round (py-spy must be installed; a speedscope or flame file, by extension).

    .venv/bin/python benchmarks/end_transaction.py --count 20000 --rounds 3
    .venv/bin/python benchmarks/end_transaction.py --count 20000 --py-spy /tmp/end.svg

Not a test: nothing here asserts a speed. Compare code versions by alternating
runs on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from apogee.bench.cluster import cluster, cpu_seconds
from apogee.client.transaction import LocalTransactionState
from apogee.model.message import Message
from apogee.spark._io import Cluster, HalfRef


@contextlib.contextmanager
def _target(args: argparse.Namespace) -> Iterator[tuple[str, int | None]]:
    if args.namesrv:
        yield args.namesrv, args.broker_pid
        return
    with (
        tempfile.TemporaryDirectory(prefix="apogee-endtx-") as tmp,
        cluster(Path(tmp), args.flush) as (namesrv, pid),
    ):
        yield namesrv, pid


def _halves(io: Cluster, topic: str, count: int, size: int, batch: int) -> list[HalfRef]:
    queues = io.ensure_topic(topic, 4)
    body = os.urandom(size)
    rows = [(queues[i % len(queues)], Message(topic, body)) for i in range(count)]
    common = {"APOGEE_TXN": uuid.uuid4().hex}
    return io.send_halves(rows, "bench_endtx_pg", batch, common).result(600)


@contextlib.contextmanager
def _recording(pid: int | None, path: str | None) -> Iterator[None]:
    if not path or pid is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    fmt = "speedscope" if path.endswith(".json") else "flamegraph"
    proc = subprocess.Popen(
        [spy, "record", "-p", str(pid), "-o", path, "-f", fmt, "-r", "250", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        proc.send_signal(2)  # SIGINT: py-spy writes its file
        proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--count", type=int, default=20000, help="rows per round")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--batch", type=int, default=256, help="half messages per batch send")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rollback", action="store_true", help="end with ROLLBACK, not COMMIT")
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--namesrv", help="a running cluster's name server")
    parser.add_argument("--broker-pid", type=int, help="its broker's pid (for the CPU figure)")
    parser.add_argument("--py-spy", dest="py_spy", help="record the broker's last round here")
    parser.add_argument("--json", action="store_true", help="one JSON line of figures")
    args = parser.parse_args()
    state = (
        LocalTransactionState.ROLLBACK_MESSAGE if args.rollback
        else LocalTransactionState.COMMIT_MESSAGE
    )  # fmt: skip
    per_end_us: list[float] = []
    per_row_us: list[float] = []
    rates: list[float] = []
    half_us: list[float] = []
    with _target(args) as (namesrv, pid):
        io = Cluster.of(namesrv, timeout_s=30.0)
        topic = f"endtx{int(time.time())}"
        _halves(io, topic, 2000, args.size, args.batch)  # warm-up: topic, routes, connections
        for r in range(args.rounds):
            before = cpu_seconds(pid)
            refs = _halves(io, topic, args.count, args.size, args.batch)
            middle = cpu_seconds(pid)
            last = r == args.rounds - 1
            with _recording(pid, args.py_spy if last else None):
                started = time.perf_counter()
                io.end_transactions(refs, "bench_endtx_pg", state)
                took = time.perf_counter() - started
                after = cpu_seconds(pid)
            rates.append(len(refs) / took)
            if before is not None and middle is not None and after is not None:
                half_us.append((middle - before) / args.count * 1e6)
                per_end_us.append((after - middle) / len(refs) * 1e6)
                per_row_us.append((after - middle) / args.count * 1e6)
        io.close()
    figures = {
        "count": args.count,
        "kind": "rollback" if args.rollback else "commit",
        "broker_cpu_us_per_end": [round(x, 1) for x in per_end_us],
        "broker_cpu_us_per_row_ended": [round(x, 2) for x in per_row_us],
        "broker_cpu_us_per_row_sent": [round(x, 1) for x in half_us],
        "ends_per_s": [round(x) for x in rates],
        "median_us_per_end": round(statistics.median(per_end_us), 1) if per_end_us else None,
        "load": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
