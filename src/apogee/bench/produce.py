"""``apogee bench produce``: C++ client producers against a broker, one message at a time.

Owns: running ``apogee.bench.cpp_producer`` processes for each thread count against a
throw-away cluster (``apogee.bench.cluster``, store in a temporary directory; with
``--replication async|sync`` a master and its slave) unless ``--namesrv`` names a
running one; and the report: messages/s, p50/p99 send latency,
failures, and the broker's CPU use when this command started it. The C++ producer runs by
its command line, never imported here: its module loads librocketmq.

Needs PyPI ``rocketmq==0.4.4`` (the dev extra). Measures, never asserts.
"""

from __future__ import annotations

import array
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import uvloop

from apogee._util.progress import print_table
from apogee.bench.cluster import (
    cluster,
    cpu_seconds,
    flush_option,
    namesrv_option,
    percentile,
    replication_option,
    ticking,
)
from apogee.bench.consume import Target, ensure_topic


@dataclass(frozen=True)
class Round:
    threads: int
    msgs_per_s: float
    p50_ms: float
    p99_ms: float
    sent: int
    failed: int
    broker_cpu_percent: float | None


@dataclass(frozen=True)
class Load:
    """What every round sends."""

    namesrv: str
    topic: str
    seconds: float
    warmup_s: float
    body_size: int
    processes: int
    per_producer: int


def _start_senders(
    load: Load, threads: int, work: Path
) -> list[tuple[Path, subprocess.Popen[bytes]]]:
    processes = max(1, min(load.processes, threads))
    shares = [threads // processes + (i < threads % processes) for i in range(processes)]
    started = []
    for i, share in enumerate(shares):
        latency_file = work / f"latency-{threads}-{i}.bin"
        spec = {
            "namesrv": load.namesrv,
            "topic": load.topic,
            "threads": share,
            "seconds": load.seconds,
            "warmup_s": load.warmup_s,
            "body_size": load.body_size,
            "threads_per_producer": load.per_producer,
            "group": f"apogee_bench_{i}",
            "latency_file": str(latency_file),
        }
        command = [sys.executable, "-m", "apogee.bench.cpp_producer", json.dumps(spec)]
        started.append((latency_file, subprocess.Popen(command, stdout=subprocess.PIPE)))
    return started


def _round(load: Load, threads: int, broker_pid: int | None, work: Path) -> Round:
    with ticking(f"{threads} sender threads", load.warmup_s + load.seconds):
        senders = _start_senders(load, threads, work)
        time.sleep(load.warmup_s)
        cpu_before, wall_before = cpu_seconds(broker_pid), time.monotonic()
        time.sleep(load.seconds)
        cpu_after, wall_after = cpu_seconds(broker_pid), time.monotonic()
    sent = failed = 0
    latencies: array.array[int] = array.array("I")
    for latency_file, proc in senders:
        out, _ = proc.communicate(timeout=load.seconds + load.warmup_s + 60)
        summary = json.loads(out.splitlines()[-1]) if out.strip() else {}
        sent += int(summary.get("sent", 0))
        failed += int(summary.get("failed", 0))
        if summary.get("first_error"):
            click.echo(f"{threads} threads: a send failed: {summary['first_error']}", err=True)
            if load.per_producer > 1 and "No route info" in str(summary["first_error"]):
                # the topic was created before the round: the route is there
                click.echo(
                    "  the C++ client says so when its threads contend for the lock of one "
                    "producer's connection table (its log: 'get timed_mutex timeout'); "
                    "--per-producer 1 gives each thread its own producer",
                    err=True,
                )
        with contextlib.suppress(FileNotFoundError):
            latencies.frombytes(latency_file.read_bytes())
    ordered = array.array("I", sorted(latencies))
    cpu = None
    if cpu_before is not None and cpu_after is not None:
        cpu = round(100 * (cpu_after - cpu_before) / (wall_after - wall_before), 1)
    return Round(
        threads,
        round(sent / load.seconds, 1),
        round(percentile(ordered, 0.5), 3),
        round(percentile(ordered, 0.99), 3),
        sent,
        failed,
        cpu,
    )


@click.command("produce")
@namesrv_option
@click.option("--threads", default="1,8,32", show_default=True, help="Sender thread counts.")
@click.option("--processes", default=1, show_default=True, help="Producer processes per round.")
@click.option("--seconds", default=10.0, show_default=True, help="Measured time per round.")
@click.option("--warmup", default=1.0, show_default=True, help="Unmeasured seconds first.")
@click.option("--per-producer", default=8, show_default=True, help="Threads per C++ producer.")
@click.option("--body-size", default=1024, show_default=True, help="Message body bytes.")
@click.option("--topic", default="BenchProduce", show_default=True)
@flush_option
@replication_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def produce_bench(
    *,
    namesrv: str | None,
    threads: str,
    processes: int,
    seconds: float,
    warmup: float,
    per_producer: int,
    body_size: int,
    topic: str,
    flush: str,
    replication: str,
    as_json: bool,
) -> None:
    """Send with C++ client threads, one message at a time; report rate and latency."""
    counts = [int(t) for t in threads.split(",") if t.strip()]
    work = Path(tempfile.mkdtemp(prefix="apogee-bench-produce-"))
    broker_pid = None
    try:
        with contextlib.ExitStack() as stack:
            if namesrv is None:
                namesrv, broker_pid = stack.enter_context(cluster(work, flush, replication))
            # the topic exists before the first send: no producer meets "No route info"
            uvloop.run(ensure_topic(Target(namesrv, topic, 8)))
            load = Load(namesrv, topic, seconds, warmup, body_size, processes, per_producer)
            rounds = [_round(load, n, broker_pid, work) for n in counts]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "body_size": body_size,
        "seconds": seconds,
        "flush": flush if broker_pid is not None else "external",
        "replication": replication if broker_pid is not None else "external",
        "rounds": [asdict(r) for r in rounds],
    }
    if as_json:
        click.echo(json.dumps(result))
        return
    header = ["threads", "msgs/s", "p50 ms", "p99 ms", "failed", "broker CPU"]
    rows = [
        [str(r.threads), f"{r.msgs_per_s:,.0f}", str(r.p50_ms), str(r.p99_ms), str(r.failed),
         "-" if r.broker_cpu_percent is None else f"{r.broker_cpu_percent}%"]
        for r in rounds
    ]  # fmt: skip
    caption = f"{body_size} B bodies, flush {result['flush']}, replication {result['replication']}"
    print_table("bench produce", header, rows, caption)
