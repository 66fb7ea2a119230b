"""Throw-away clusters and figures shared by the client benchmarks.

Owns: starting a name server and a broker (and its slave) as ``apogee``
processes on free ports (stores in a given directory) and stopping them; a
process's CPU seconds from /proc; percentiles of sorted microsecond samples;
the options naming the cluster (``--namesrv``, ``--flush``,
``--replication``); ``ticking``, a progress bar that fills while a timed
phase runs (on a terminal; nothing otherwise).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import click

from apogee._util.net import free_port
from apogee._util.progress import Progress
from apogee.client.namesrv_api import NamesrvApi
from apogee.remoting.client import RemotingClient

_CLK_TCK = os.sysconf("SC_CLK_TCK")

namesrv_option = click.option(
    "--namesrv", default=None, help="A running cluster's name server (default: start one)."
)
replication_option = click.option(
    "--replication",
    type=click.Choice(["none", "async", "sync"]),
    default="none",
    show_default=True,
    help="none: a lone master; async / sync: an ASYNC_MASTER / SYNC_MASTER and its slave.",
)
flush_option = click.option(
    "--flush",
    type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]),
    default="ASYNC_FLUSH",
    show_default=True,
    help="flushDiskType of the broker this command starts.",
)


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
def processes(root: Path) -> Iterator[Processes]:
    """Cluster processes started through ``Processes``, all stopped at the end."""
    procs = Processes(root)
    try:
        yield procs
    finally:
        procs.stop_all()


class Processes:
    """``apogee`` processes of a throw-away cluster; their output goes to one log."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = open(root / "cluster.log", "wb")  # noqa: SIM115  # shared by the children
        self.started: list[subprocess.Popen[bytes]] = []

    def namesrv(self) -> str:
        port = free_port()
        args = [
            "namesrv",
            "--listen",
            f"127.0.0.1:{port}",
            "--kv-config",
            str(self.root / "kv.json"),
        ]
        self._start(args, port)
        return f"127.0.0.1:{port}"

    def broker(
        self,
        namesrv: str,
        name: str,
        conf: dict[str, str],
        store: Path | None = None,
        port: int | None = None,
    ) -> tuple[int, str]:
        """A broker with these broker.conf settings; its pid and address."""
        port = port or free_port()
        settings = {"brokerIP1": "127.0.0.1", "haListenPort": str(free_port()), **conf}
        path = self.root / f"{name}.conf"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        store_dir = str(store or self.root / name)
        args = ["broker", "--namesrv", namesrv, "--listen", f"127.0.0.1:{port}",
                "--store", store_dir, "-c", str(path), "--log-level", "WARNING"]  # fmt: skip
        return self._start(args, port).pid, f"127.0.0.1:{port}"

    def _start(self, args: list[str], port: int) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "apogee", *args]
        proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        self.started.append(proc)
        _wait_listening(port, proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log.close()


@contextlib.contextmanager
def cluster(
    root: Path,
    flush: str,
    replication: str = "none",
    properties: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, int]]:
    """A name server and a broker as processes (and with ``replication`` "async" or
    "sync", its slave); yields (namesrv address, master pid).

    ``properties`` are more broker.conf settings of the master.
    """
    role = {"none": "ASYNC_MASTER", "async": "ASYNC_MASTER", "sync": "SYNC_MASTER"}[replication]
    with processes(root) as procs:
        namesrv = procs.namesrv()
        settings = {"flushDiskType": flush, "brokerRole": role, **(properties or {})}
        pid, _ = procs.broker(namesrv, "master", settings)
        if replication != "none":
            slave = {"flushDiskType": flush, "brokerRole": "SLAVE", "brokerId": "1"}
            procs.broker(namesrv, "slave", slave)
        # Listening is not registered: a command that asks the name server for a
        # master at once could otherwise find none.
        asyncio.run(_registered(namesrv, 1 if replication == "none" else 2))
        if replication != "none":
            time.sleep(1.0)  # the slave learns its master and connects
        yield namesrv, pid


async def _registered(namesrv: str, brokers: int, timeout_s: float = 30.0) -> None:
    """Wait until the name server lists ``brokers`` brokers, a master among them."""
    deadline = time.monotonic() + timeout_s
    async with RemotingClient() as remoting:
        api = NamesrvApi(remoting, [namesrv])
        while True:
            info = await api.get_cluster_info()
            table = info.broker_addr_table.values()
            if sum(len(b.broker_addrs) for b in table) >= brokers and any(
                b.master_addr() is not None for b in table
            ):
                return
            if time.monotonic() > deadline:
                raise click.ClickException(f"the brokers did not register with {namesrv}")
            await asyncio.sleep(0.05)


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


@contextlib.contextmanager
def ticking(description: str, seconds: float | None) -> Iterator[None]:
    """A bar filling over ``seconds`` (None: a spinner) while the block runs."""
    with Progress(description, seconds, unit="s") as bar:
        stop = threading.Event()
        start = time.monotonic()

        def tick() -> None:
            while not stop.wait(0.2):
                elapsed = time.monotonic() - start
                bar.update(min(elapsed, seconds) if seconds else elapsed)

        thread = threading.Thread(target=tick, name="bench-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
