"""Throw-away clusters and figures shared by the client benchmarks.

Owns: starting a name server and a broker as ``apogee`` processes on free
ports (store in a given directory) and stopping them; a process's CPU
seconds from /proc; percentiles of sorted microsecond samples; the options
naming the cluster (``--namesrv``, ``--flush``). Imports: the
standard library and click.
"""

from __future__ import annotations

import array
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import click

_CLK_TCK = os.sysconf("SC_CLK_TCK")

namesrv_option = click.option(
    "--namesrv", default=None, help="A running cluster's name server (default: start one)."
)
flush_option = click.option(
    "--flush",
    type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]),
    default="ASYNC_FLUSH",
    show_default=True,
    help="flushDiskType of the broker this command starts.",
)


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
def cluster(
    root: Path, flush: str, properties: Mapping[str, str] | None = None
) -> Iterator[tuple[str, int]]:
    """A name server and a broker as processes; yields (namesrv address, broker pid).

    ``properties`` are more broker.conf settings.
    """
    ns_port, broker_port = _free_port(), _free_port()
    conf = root / "broker.conf"
    extra = "".join(f"{k}={v}\n" for k, v in (properties or {}).items())
    conf.write_text(f"brokerIP1=127.0.0.1\nflushDiskType={flush}\n{extra}")
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


def cpu_seconds(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime


def percentile(sorted_us: array.array[int], q: float) -> float:
    if not sorted_us:
        return float("nan")
    return sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))] / 1000
