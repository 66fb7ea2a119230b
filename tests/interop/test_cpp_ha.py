"""Master and slave as ``apogee`` processes with the C++ client: SIGKILL under load."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from apogee.client.broker_api import BrokerApi
from apogee.errors import ApogeeError
from apogee.model.message import Message
from apogee.model.results import SendStatus
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.ha import (
    PROCESS_FILE_SIZE,
    commit_log_bytes,
    ha_status,
    master_process,
    records_in,
    slave_process,
)
from apogee.testing.reading import read_queue
from tests.harness.cpp import start_cpp

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "HaDurable"
QUEUES = 4


class PySender:
    """Apogee's client sending while the C++ client does: ``tasks`` loops, each
    message body unique; the bodies of SEND_OK answers are kept."""

    def __init__(self, api: BrokerApi, addr: str, tasks: int = 4) -> None:
        self.api, self.addr, self.tasks = api, addr, tasks
        self.acked: set[str] = set()
        self.other: dict[str, str] = {}  # body -> status or error of the rest
        self._stop = asyncio.Event()
        self._running: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._running = [asyncio.create_task(self._loop(t)) for t in range(self.tasks)]

    async def _loop(self, task: int) -> None:
        i = 0
        while not self._stop.is_set():
            body = f"py-{task}-{i}"
            i += 1
            msg = Message(TOPIC, body.encode())
            try:
                result = await self.api.send(
                    self.addr, "broker-a", msg, queue_id=i % QUEUES, producer_group="py"
                )
            except ApogeeError as exc:
                self.other[body] = str(exc)
                await asyncio.sleep(0.05)
                continue
            if result.status is SendStatus.SEND_OK:
                self.acked.add(body)
            else:
                self.other[body] = result.status.value

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._running)


async def _in_sync(client: RemotingClient, master: BrokerProcess) -> bool:
    return (await ha_status(client, master.address)).in_sync_slave_nums == 1


async def test_sync_master_sigkill_loses_no_acknowledged_message(tmp_path: Path) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="SYNC_MASTER")
        slave = slave_process(tmp_path, ns.address)
        master.start()
        slave.start()
        config = ClientConfig(request_timeout_s=2.0)
        try:
            async with RemotingClient(config) as client:
                await eventually(lambda: _in_sync(client, master), timeout_s=20)
                api = BrokerApi(client)
                py = PySender(api, master.address)
                cpp = await start_cpp(
                    {"action": "produce", "namesrv": ns.address, "topic": TOPIC,
                     "count": 100_000, "body": "cpp-{i}", "send_timeout_ms": 1000},
                    timeout_s=90,
                )  # fmt: skip
                async with cpp:
                    py.start()
                    assert await cpp.wait_for(lambda lines: len(lines) > 400, 60)
                    await eventually(lambda: _count(py, 300), timeout_s=30)
                    master.kill()
                    await asyncio.sleep(0.5)
                    await py.stop()
                    run = await cpp.stop(timeout_s=5)
                acked = {f"cpp-{line['index']}" for line in run.sent if line["status"] == "SEND_OK"}
                assert len(acked) >= 300, run.describe()
                acked |= py.acked

                slave_info = await ha_status(client, slave.address)
                end = slave_info.ha_client_runtime_info.max_offset
                assert end > 0
                mine = commit_log_bytes(slave.store_dir, 0, end, PROCESS_FILE_SIZE)
                theirs = commit_log_bytes(master.store_dir, 0, end, PROCESS_FILE_SIZE)
                assert mine == theirs, "the slave's commit log must be the master's, byte for byte"

                async def everything_read() -> set[str]:
                    bodies: set[str] = set()
                    for queue_id in range(QUEUES):
                        got = await read_queue(api, slave.address, TOPIC, queue_id)
                        bodies |= {m.body.decode() for m in got}
                    return bodies if acked <= bodies else set()

                with contextlib.suppress(AssertionError):  # the slave dispatches what it got
                    await eventually(everything_read, timeout_s=10)
                missing = acked - await _all_bodies(api, slave.address)
                assert not missing, f"{len(missing)} acknowledged messages not on the slave, " \
                    f"e.g. {sorted(missing)[:5]}"  # fmt: skip
        finally:
            master.kill()
            assert slave.stop() == 0, slave.log_text()


async def _count(py: PySender, n: int) -> bool:
    return len(py.acked) >= n


async def _all_bodies(api: BrokerApi, addr: str) -> set[str]:
    bodies: set[str] = set()
    for queue_id in range(QUEUES):
        bodies |= {m.body.decode() for m in await read_queue(api, addr, TOPIC, queue_id)}
    return bodies


async def test_async_master_lag_under_load_and_the_loss_window_of_a_sigkill(
    tmp_path: Path,
) -> None:
    """Measured, and reported on stdout (``pytest -s``): the lag while both clients send,
    and what a SIGKILL of the master loses. What is asserted is exact: the slave holds a
    byte-identical prefix of the master's log, and every acknowledged message it lacks is
    in the master's log past the slave's end (the loss window is the replication lag)."""
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="ASYNC_MASTER")
        slave = slave_process(tmp_path, ns.address)
        master.start()
        slave.start()
        try:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                await eventually(lambda: _in_sync(client, master), timeout_s=20)
                api = BrokerApi(client)
                py = PySender(api, master.address)
                cpp = await start_cpp(
                    {"action": "produce", "namesrv": ns.address, "topic": TOPIC,
                     "count": 100_000, "body": "cpp-{i}", "send_timeout_ms": 1000},
                    timeout_s=90,
                )  # fmt: skip
                lag_bytes: list[int] = []
                lag_ms: list[int] = []
                async with cpp:
                    py.start()
                    assert await cpp.wait_for(lambda lines: len(lines) > 200, 60)
                    for _ in range(40):  # 2 s of samples under load
                        (link,) = (await ha_status(client, master.address)).ha_connection_info
                        lag_bytes.append(link.diff)
                        lag_ms.append(link.lag_ms)
                        await asyncio.sleep(0.05)
                    master.kill()
                    await asyncio.sleep(0.5)
                    await py.stop()
                    run = await cpp.stop(timeout_s=5)
                acked = {f"cpp-{line['index']}" for line in run.sent if line["status"] == "SEND_OK"}
                acked |= py.acked
                end = (await ha_status(client, slave.address)).ha_client_runtime_info.max_offset
        finally:
            master.kill()
            assert slave.stop() == 0, slave.log_text()
    files = len(list((master.store_dir / "commitlog").iterdir()))
    records = records_in(master.store_dir, files * PROCESS_FILE_SIZE, PROCESS_FILE_SIZE)
    master_end = records[-1].commit_log_offset + records[-1].store_size
    where = {r.body.decode(): r.commit_log_offset for r in records if r.topic == TOPIC}
    assert acked <= set(where), "the master itself lost acknowledged messages"
    mine = commit_log_bytes(slave.store_dir, 0, end, PROCESS_FILE_SIZE)
    assert mine == commit_log_bytes(master.store_dir, 0, end, PROCESS_FILE_SIZE)
    lost = {body for body in acked if where[body] >= end}
    assert all(where[body] < end for body in acked - lost)
    ordered = sorted(lag_bytes)
    print(
        f"\nASYNC_MASTER: {len(acked)} acknowledged; lag under load: bytes max "
        f"{ordered[-1]} p50 {ordered[len(ordered) // 2]}, ms max {max(lag_ms)}; "
        f"SIGKILL lost {len(lost)} acknowledged messages, {master_end - end} bytes "
        f"(slave end {end}, master end {master_end})"
    )
