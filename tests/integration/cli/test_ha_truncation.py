"""A master that lost the tail of its log (corrupted, dropped by recovery) and its slave.

Real ``apogee`` processes. The slave holds bytes its master no longer has:
when they meet again it truncates its log to match (and says so in its log),
whether the master has written new records since or not, and from then on
its log is the master's, byte for byte, and so are the messages it serves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.client.broker_api import BrokerApi
from apogee.errors import ApogeeError
from apogee.model.message import Message, MessageExt
from apogee.model.results import SendStatus
from apogee.model.stats import HARuntimeInfo
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.store.segment import segment_name
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

pytestmark = pytest.mark.slow

TOPIC = "Torn"


async def _send(api: BrokerApi, master: BrokerProcess, bodies: list[str]) -> None:
    for i, body in enumerate(bodies):
        msg = Message(TOPIC, body.encode())
        sent = await api.send(master.address, "broker-a", msg, queue_id=i % 2, producer_group="p")
        assert sent.status is SendStatus.SEND_OK


async def _end(client: RemotingClient, broker: BrokerProcess) -> int:
    async def asked() -> HARuntimeInfo | None:
        try:  # a broker just restarted: the pooled connection to the old one fails first
            return await ha_status(client, broker.address)
        except ApogeeError:
            return None

    status = await eventually(asked)
    if status.master:
        return status.master_commit_log_max_offset
    return status.ha_client_runtime_info.max_offset


def _records(broker: BrokerProcess) -> list[MessageExt]:
    files = len(list((broker.store_dir / "commitlog").iterdir()))
    return records_in(broker.store_dir, files * PROCESS_FILE_SIZE, PROCESS_FILE_SIZE)


def _corrupt(broker: BrokerProcess, record: MessageExt) -> None:
    """Flip a byte inside ``record``'s body in the master's file (its CRC no longer holds)."""
    start = record.commit_log_offset - record.commit_log_offset % PROCESS_FILE_SIZE
    path = broker.store_dir / "commitlog" / segment_name(start)
    at = record.commit_log_offset - start + record.store_size - 30
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


async def _same(client: RemotingClient, api: BrokerApi, m: BrokerProcess, s: BrokerProcess) -> None:
    async def caught_up() -> bool:
        return await _end(client, s) == await _end(client, m)

    await eventually(caught_up, timeout_s=20)
    end = await _end(client, s)
    mine = commit_log_bytes(s.store_dir, 0, end, PROCESS_FILE_SIZE)
    assert mine == commit_log_bytes(m.store_dir, 0, end, PROCESS_FILE_SIZE)

    async def same_messages() -> bool:
        for q in (0, 1):
            ours = [x.body for x in await read_queue(api, s.address, TOPIC, q)]
            theirs = [x.body for x in await read_queue(api, m.address, TOPIC, q)]
            if ours != theirs:
                return False
        return True

    await eventually(same_messages, timeout_s=10)


async def test_a_slave_truncates_what_its_master_lost(tmp_path: Path) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="ASYNC_MASTER")
        slave = slave_process(tmp_path, ns.address)
        master.start()
        slave.start()
        try:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                api = BrokerApi(client)
                await _send(api, master, [f"a-{i}" for i in range(60)])
                await _same(client, api, master, slave)

                # 1. the master crashes; a record 5 from the end is corrupt on its disk
                ahead = await _end(client, slave)
                master.kill()
                await client.close_connection(master.address)
                lost = _records(master)[-5]
                _corrupt(master, lost)
                master.start()  # recovery drops the corrupt record and all after it
                assert await _end(client, master) == lost.commit_log_offset < ahead
                await _same(client, api, master, slave)
                text = slave.log_text()
                assert f"truncated the commit log from {ahead} to {lost.commit_log_offset}" in text
                await _send(api, master, [f"b-{i}" for i in range(20)])
                await _same(client, api, master, slave)

                # 2. again, but the master writes new records where the lost ones were
                # before its slave is back: the logs part inside the slave's tail
                slave.stop()
                ahead = await _end(client, master)
                master.kill()
                await client.close_connection(master.address)
                lost = _records(master)[-3]
                _corrupt(master, lost)
                master.start()
                await _send(api, master, [f"c-{i}" for i in range(10)])
                assert await _end(client, master) > ahead
                slave.start()
                await _same(client, api, master, slave)
                truncated = f"truncated the commit log from {ahead} to {lost.commit_log_offset}"
                assert truncated in slave.log_text()
                bodies = {x.body.decode() for q in (0, 1)
                          for x in await read_queue(api, slave.address, TOPIC, q)}  # fmt: skip
                assert {f"c-{i}" for i in range(10)} <= bodies
                assert not {f"b-{i}" for i in range(17, 20)} & bodies  # the lost ones
        finally:
            master.stop()
            slave.stop()
