"""``apogee bench replication``: how fast an empty slave catches up with its master.

Owns: preloading a master's store in-process (single messages of
``--body-size`` until the commit log holds ``--size`` bytes, consume queues
built, files of RocketMQ's default 1 GiB so everything is in the file a new
slave starts from), then a name server, that master and an empty slave as
``apogee`` processes, and the figures: the commit-log bytes copied per
second from the slave's first byte to its last, the seconds until its
consume queues are built too, and both processes' CPU. Polls the slave's HA
status every 50 ms (``GET_BROKER_HA_STATUS``). Measures, never asserts.

On a terminal a bar on stderr fills with the bytes preloaded, then with the
bytes the slave has; the figures end as a summary table (``--json``: one
JSON object instead).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import uvloop

from apogee._util.net import free_port
from apogee._util.progress import Progress, print_summary
from apogee.bench.cluster import cpu_seconds, processes
from apogee.client.broker_api import BrokerApi
from apogee.errors import ApogeeError
from apogee.model.message import StoreMessage, properties_to_string
from apogee.remoting.client import RemotingClient
from apogee.store.config import StoreConfig
from apogee.store.file_store import FileMessageStore

TOPIC = "BenchReplication"
QUEUES = 8
POOL = 1024


@dataclass(frozen=True)
class CatchUp:
    bytes: int
    preload_s: float
    transfer_s: float
    mb_per_s: float
    first_byte_after_s: float  # from starting the slave process
    dispatched_after_s: float  # consume queues built, from the first byte
    master_cpu_percent: float | None
    slave_cpu_percent: float | None


def preload(root: Path, size: int, body_size: int, bar: Progress | None = None) -> float:
    """Fill a master's store at ``root`` until its commit log holds ``size`` bytes."""
    host, born = ("127.0.0.1", 10911), ("127.0.0.1", 51234)
    body = b"x" * body_size
    props = [
        properties_to_string({"UNIQ_KEY": f"7F00000100{i:022X}", "TAGS": f"Tag{i % 4}"})
        for i in range(POOL)
    ]
    msgs = [
        StoreMessage(TOPIC, i % QUEUES, body, props[i], 0, 0, 1, born, host) for i in range(POOL)
    ]
    began = time.perf_counter()
    store = FileMessageStore.open(StoreConfig(store_path_root_dir=root))
    try:
        i = 0
        while store.commit_log_max_offset() < size:
            store.put(msgs[i & (POOL - 1)])
            i += 1
            if i & 1023 == 0:
                store.dispatch_step(4096)
                if bar is not None:
                    bar.update(store.commit_log_max_offset())
        while store.dispatch_step(4096):
            pass
    finally:
        store.close()
    return time.perf_counter() - began


async def _watch(
    start_slave: Callable[[], object],
    slave: str,
    target: int,
    timeout_s: float,
    bar: Progress | None = None,
) -> tuple[float, float, float]:
    """Start the slave; seconds until its first byte, its last byte and its dispatch being
    done (polled from before it starts, so its first byte is seen when it comes)."""
    async with RemotingClient() as client:
        api = BrokerApi(client, timeout_s=5)
        began = time.perf_counter()
        starting = asyncio.create_task(asyncio.to_thread(start_slave))
        first = last = dispatched = 0.0
        while time.perf_counter() - began < timeout_s:
            now = time.perf_counter() - began
            try:
                status = await api.get_broker_ha_status(slave)
                end = status.ha_client_runtime_info.max_offset
                if bar is not None:
                    bar.update(min(end, target))
                if end and not first:
                    first = now
                if end >= target and not last:
                    last = now
                if last:
                    info = await api.get_broker_runtime_info(slave)
                    if int(info["dispatchBehindBytes"]) == 0:
                        dispatched = now
                        break
            except ApogeeError:
                pass  # not listening yet
            await asyncio.sleep(0.05)
        await starting
        return first, last, dispatched


@click.command("replication")
@click.option("--size", default=1_000_000_000, show_default=True, help="Commit-log bytes.")
@click.option("--body-size", default=1024, show_default=True, help="Message body bytes.")
@click.option("--timeout", default=600.0, show_default=True, help="Give up after seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def replication_bench(*, size: int, body_size: int, timeout: float, as_json: bool) -> None:
    """Preload a master, start an empty slave; report the catch-up rate."""
    work = Path(tempfile.mkdtemp(prefix="apogee-bench-replication-"))
    try:
        with Progress("preloading the master", size, unit="bytes") as bar:
            preload_s = preload(work / "master-store", size, body_size, bar)
            target = _end_of(work / "master-store")
            bar.describe("starting the slave")
            bar.update(0, target)
            result = _catch_up(work, target, preload_s, timeout, bar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if as_json:
        click.echo(json.dumps(asdict(result)))
        return
    print_summary("bench replication", [(k, str(v)) for k, v in asdict(result).items()])


def _catch_up(work: Path, target: int, preload_s: float, timeout: float, bar: Progress) -> CatchUp:
    """A name server, the preloaded master and an empty slave; how the slave caught up."""
    with processes(work) as procs:
        namesrv = procs.namesrv()
        master_pid, _ = procs.broker(namesrv, "master", {"brokerRole": "ASYNC_MASTER"},
                                     store=work / "master-store")  # fmt: skip
        cpu_m0 = cpu_seconds(master_pid)
        started = time.perf_counter()
        port = free_port()
        conf = {"brokerRole": "SLAVE", "brokerId": "1"}
        slave: list[int] = []

        def start_slave() -> None:
            slave.append(procs.broker(namesrv, "slave", conf, port=port)[0])

        bar.describe("slave catching up")
        watched = _watch(start_slave, f"127.0.0.1:{port}", target, timeout, bar)
        first, last, dispatched = uvloop.run(watched)
        wall = time.perf_counter() - started
        cpu_m, cpu_s = cpu_seconds(master_pid), cpu_seconds(slave[0])
    transfer = max(last - first, 1e-9)
    return CatchUp(
        bytes=target,
        preload_s=round(preload_s, 1),
        transfer_s=round(transfer, 2),
        mb_per_s=round(target / transfer / 1e6, 1) if last else 0.0,
        first_byte_after_s=round(first, 2),
        dispatched_after_s=round(dispatched - first, 2) if dispatched else -1.0,
        master_cpu_percent=None
        if cpu_m is None or cpu_m0 is None
        else round(100 * (cpu_m - cpu_m0) / wall, 1),
        slave_cpu_percent=None if cpu_s is None else round(100 * cpu_s / wall, 1),
    )


def _end_of(root: Path) -> int:
    store = FileMessageStore.open(StoreConfig(store_path_root_dir=root))
    try:
        return store.commit_log_max_offset()
    finally:
        store.close()
