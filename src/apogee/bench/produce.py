"""``apogee bench produce``: C++ client producers against a broker, one message at a time.

Owns: starting a throw-away name server and broker (``apogee namesrv`` / ``apogee broker``
processes on free ports, store in a temporary directory) unless ``--namesrv`` names a running
cluster; running ``apogee.bench.cpp_producer`` processes for each thread count; and the
report: messages/s, p50/p99 send latency, failures, and the broker's CPU use when this
command started it. Imports: the standard library, click and ``apogee.bench.cpp_producer``'s
command line (never its module: it loads librocketmq).

Needs PyPI ``rocketmq==0.4.4`` (the dev extra). Measures, never asserts.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import click

_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Round:
    threads: int
    msgs_per_s: float
    p50_ms: float
    p99_ms: float
    sent: int
    failed: int
    broker_cpu_percent: float | None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise click.ClickException(f"a cluster process exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise click.ClickException(f"nothing listens on 127.0.0.1:{port}")


@contextlib.contextmanager
def _cluster(root: Path, flush: str) -> Iterator[tuple[str, int]]:
    """A name server and a broker as processes; yields (namesrv address, broker pid)."""
    ns_port, broker_port = _free_port(), _free_port()
    conf = root / "broker.conf"
    conf.write_text(f"brokerIP1=127.0.0.1\nflushDiskType={flush}\n")
    log = open(root / "cluster.log", "wb")  # noqa: SIM115  # shared by both children
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for args, port in (
            (["namesrv", "--listen", f"127.0.0.1:{ns_port}", "--kv-config",
              str(root / "kv.json")], ns_port),
            (["broker", "--namesrv", f"127.0.0.1:{ns_port}", "--listen",
              f"127.0.0.1:{broker_port}", "--store", str(root / "store"), "-c", str(conf),
              "--log-level", "WARNING"], broker_port),
        ):  # fmt: skip
            proc = subprocess.Popen([sys.executable, "-m", "apogee", *args], stdout=log, stderr=log)
            procs.append(proc)
            _wait_listening(port, proc)
        yield f"127.0.0.1:{ns_port}", procs[1].pid
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def _cpu_seconds(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime


def _percentile(sorted_us: array.array[int], q: float) -> float:
    if not sorted_us:
        return float("nan")
    return sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))] / 1000


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
    senders = _start_senders(load, threads, work)
    time.sleep(load.warmup_s)
    cpu_before, wall_before = _cpu_seconds(broker_pid), time.monotonic()
    time.sleep(load.seconds)
    cpu_after, wall_after = _cpu_seconds(broker_pid), time.monotonic()
    sent = failed = 0
    latencies: array.array[int] = array.array("I")
    for latency_file, proc in senders:
        out, _ = proc.communicate(timeout=load.seconds + load.warmup_s + 60)
        summary = json.loads(out.splitlines()[-1]) if out.strip() else {}
        sent += int(summary.get("sent", 0))
        failed += int(summary.get("failed", 0))
        if summary.get("first_error"):
            click.echo(f"{threads} threads: a send failed: {summary['first_error']}", err=True)
        with contextlib.suppress(FileNotFoundError):
            latencies.frombytes(latency_file.read_bytes())
    ordered = array.array("I", sorted(latencies))
    cpu = None
    if cpu_before is not None and cpu_after is not None:
        cpu = round(100 * (cpu_after - cpu_before) / (wall_after - wall_before), 1)
    return Round(
        threads,
        round(sent / load.seconds, 1),
        round(_percentile(ordered, 0.5), 3),
        round(_percentile(ordered, 0.99), 3),
        sent,
        failed,
        cpu,
    )


@click.command("produce")
@click.option(
    "--namesrv", default=None, help="A running cluster's name server (default: start one)."
)
@click.option("--threads", default="1,8,32", show_default=True, help="Sender thread counts.")
@click.option("--processes", default=1, show_default=True, help="Producer processes per round.")
@click.option("--seconds", default=10.0, show_default=True, help="Measured time per round.")
@click.option("--warmup", default=1.0, show_default=True, help="Unmeasured seconds first.")
@click.option("--per-producer", default=8, show_default=True, help="Threads per C++ producer.")
@click.option("--body-size", default=1024, show_default=True, help="Message body bytes.")
@click.option("--topic", default="BenchProduce", show_default=True)
@click.option(
    "--flush",
    type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]),
    default="ASYNC_FLUSH",
    show_default=True,
    help="flushDiskType of the broker this command starts.",
)
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
    as_json: bool,
) -> None:
    """Send with C++ client threads, one message at a time; report rate and latency."""
    counts = [int(t) for t in threads.split(",") if t.strip()]
    work = Path(tempfile.mkdtemp(prefix="apogee-bench-produce-"))
    broker_pid = None
    try:
        with contextlib.ExitStack() as stack:
            if namesrv is None:
                namesrv, broker_pid = stack.enter_context(_cluster(work, flush))
            load = Load(namesrv, topic, seconds, warmup, body_size, processes, per_producer)
            rounds = [_round(load, n, broker_pid, work) for n in counts]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "body_size": body_size,
        "seconds": seconds,
        "flush": flush if broker_pid is not None else "external",
        "rounds": [asdict(r) for r in rounds],
    }
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo("threads     msgs/s   p50 ms   p99 ms  failed  broker CPU")
    for r in rounds:
        cpu = "-" if r.broker_cpu_percent is None else f"{r.broker_cpu_percent}%"
        click.echo(
            f"{r.threads:>7} {r.msgs_per_s:>10} {r.p50_ms:>8} {r.p99_ms:>8} {r.failed:>7} {cpu:>11}"
        )
