"""The broker-a master and slave broker.conf files of docs/ha.md, run as ``apogee broker``
processes on one machine the way the page says (each its own ports and store,
``brokerIP1=127.0.0.1``).

What the files leave to defaults is checked against the processes: the master's
replication port is listenPort + 1 and the slave learns it from the name server; the
pair replicates under SYNC_MASTER; the slave registers with its brokerId and refuses
sends with SERVICE_NOT_AVAILABLE; the ``apogee admin haStatus`` and ``clusterList``
commands (processes too) show the pair and its roles, and ``wipeWritePerm`` /
``addWritePerm`` drain the master's queues and bring them back, as the page's
maintenance section does.
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from apogee._util.net import free_port
from apogee._util.props import parse_properties
from apogee.client.namesrv_api import NamesrvApi
from apogee.client.producer import Producer
from apogee.codes import ResponseCode
from apogee.model.message import Message
from apogee.model.results import SendStatus
from apogee.model.route import writeable
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.ha import PROCESS_FILE_SIZE, commit_log_bytes, ha_status
from tests.integration.broker.wire import send as wire_send

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[3] / "docs" / "ha.md"


def documented(name: str) -> dict[str, str]:
    """The properties of the page's ``name`` block."""
    found = re.search(
        rf"`{re.escape(name)}`[^\n]*:\n\n```properties\n(.*?)```", DOC.read_text(), re.DOTALL
    )
    assert found is not None, f"docs/ha.md has no {name} block"
    return parse_properties(found.group(1))


def port_with_next_free() -> int:
    """A free port whose successor is free too (the master's default replication port)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no free port with a free successor")


async def admin(*args: str) -> dict[str, Any]:
    """``apogee admin <args> --json`` as a process; its JSON document."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "apogee", "admin", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = orjson.loads(done.stdout)
    assert isinstance(doc, dict)
    return doc


async def test_the_documented_master_and_slave_replicate_on_listen_port_plus_one(
    tmp_path: Path,
) -> None:
    master_conf, slave_conf = documented("broker-a-master.conf"), documented("broker-a-slave.conf")
    assert (master_conf["brokerId"], master_conf["brokerRole"]) == ("0", "SYNC_MASTER")
    assert (slave_conf["brokerId"], slave_conf["brokerRole"]) == ("1", "SLAVE")
    assert "haMasterAddress" not in slave_conf  # learned from the name servers
    port = port_with_next_free()
    with NamesrvProcess(tmp_path / "ns") as ns:

        def on_this_machine(conf: dict[str, str], name: str) -> dict[str, str | None]:
            store = tmp_path / name
            return {**conf, "namesrvAddr": ns.address, "brokerIP1": "127.0.0.1",
                    "storePathRootDir": str(store)}  # fmt: skip

        # the master's haListenPort is left out: its comment says listenPort + 1
        master = BrokerProcess(
            tmp_path / "a-m", ns.address, port=port,
            properties={**on_this_machine(master_conf, "a-m"), "haListenPort": None},
        )  # fmt: skip
        slave = BrokerProcess(
            tmp_path / "a-s", ns.address, properties=on_this_machine(slave_conf, "a-s")
        )
        with master, slave:
            async with (
                RemotingClient(ClientConfig(request_timeout_s=3.0)) as client,
                Producer("pg-doc", namesrv=ns.address) as producer,
            ):

                async def in_sync() -> bool:
                    return (await ha_status(client, master.address)).in_sync_slave_nums == 1

                await eventually(in_sync, timeout_s=15, interval_s=0.1)
                replication = f"127.0.0.1:{port + 1}"
                info = (await ha_status(client, slave.address)).ha_client_runtime_info
                assert info.master_addr == replication
                for i in range(5):
                    sent = await producer.send(Message("Documented", b"m%d" % i))
                    assert sent.status is SendStatus.SEND_OK  # the slave has it
                refused = await wire_send(client, slave.address, "Documented", b"to the slave")
                assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark

                (group,) = (await admin("haStatus", "-n", ns.address))["brokers"]
                assert group["brokerName"] == "broker-a"
                on_master, on_slave = group["nodes"]
                assert (on_master["brokerId"], on_master["addr"]) == (0, master.address)
                assert (on_slave["brokerId"], on_slave["addr"]) == (1, slave.address)
                assert on_master["master"] and not on_slave["master"]
                assert on_master["inSyncSlaveNums"] == 1
                end = on_master["masterCommitLogMaxOffset"]
                assert on_slave["haClientRuntimeInfo"]["masterAddr"] == replication
                assert on_slave["haClientRuntimeInfo"]["maxOffset"] == end
                listed = (await admin("clusterList", "-n", ns.address))["brokers"]
                roles = [(b["brokerId"], b["addr"], b["role"]) for b in listed]
                assert roles == [(0, master.address, "SYNC_MASTER"), (1, slave.address, "SLAVE")]
                mine = commit_log_bytes(slave.store_dir, 0, end, PROCESS_FILE_SIZE)
                assert mine == commit_log_bytes(master.store_dir, 0, end, PROCESS_FILE_SIZE)

                # the page's maintenance of one master: its queues drained, then back
                names = NamesrvApi(client, [ns.address])

                async def writable() -> set[bool]:
                    route = await names.get_route("Documented")
                    return {writeable(q.perm) for q in route.queue_datas}

                wiped = await admin("wipeWritePerm", "-n", ns.address, "-b", "broker-a")
                assert wiped["topicCounts"][ns.address] >= 1
                assert await writable() == {False}
                await admin("addWritePerm", "-n", ns.address, "-b", "broker-a")
                assert await writable() == {True}
            assert slave.stop() == 0, slave.log_text()
            assert master.stop() == 0, master.log_text()
