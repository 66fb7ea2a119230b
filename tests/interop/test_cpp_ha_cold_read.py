"""The C++ client reading a backlog the master counts as cold: the master (alive) names
its slave in suggestWhichBrokerId, the client pulls from the slave, and reads everything.

``accessMessageInMemoryMaxRatio=0`` on the master makes any backlog cold there; the
slave keeps the default (30 % on a slave), so it sees the data as hot and names the
master again: the client goes back and forth, and both serve pulls.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.client.broker_api import BrokerApi
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.ha import ha_status, master_process, slave_process
from tests.harness.cpp import run_cpp
from tests.interop.helpers import produce

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "HaCold"
COUNT = 120
QUEUES = 4  # what the C++ producer's auto-creation gives the topic


async def _gets(api: BrokerApi, broker: BrokerProcess) -> int:
    """Messages the broker handed out to pulls today (GET_BROKER_RUNTIME_INFO)."""
    return int((await api.get_broker_runtime_info(broker.address))["msgGetTotalTodayNow"])


@pytest.mark.parametrize("action", ["pull_consume", "push_consume"])
async def test_cpp_consumer_reads_a_cold_backlog_from_the_slave(
    tmp_path: Path, action: str
) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(
            tmp_path, ns.address, role="ASYNC_MASTER",
            properties={"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"},
        )  # fmt: skip
        slave = slave_process(tmp_path, ns.address)
        with master, slave:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                api = BrokerApi(client)
                await produce(ns.address, TOPIC, COUNT, body="m-{i}")

                async def slave_ready() -> bool:  # every byte, and the topic, on the slave
                    (link,) = (await ha_status(client, master.address)).ha_connection_info
                    topics = await api.get_all_topic_config(slave.address)
                    return link.diff == 0 and TOPIC in topics.topic_config_table

                await eventually(slave_ready, timeout_s=10)
                assert await _gets(api, slave) == 0
                spec: dict[str, object] = {
                    "action": action, "namesrv": ns.address, "topic": TOPIC,
                    "group": f"cold_{action}", "until": COUNT, "run_s": 20, "deadline_s": 30,
                }  # fmt: skip
                if action == "push_consume":
                    spec["orderly"] = True  # one queue's messages delivered in queue order
                    # A group behind by a backlog: with no offset committed, a new push
                    # consumer starts at the queues' end (the broker does not answer 0 for
                    # a queue whose head is cold), and there would be nothing to read.
                    for queue_id in range(QUEUES):
                        await api.update_consumer_offset(
                            master.address, f"cold_{action}", TOPIC, queue_id, 0
                        )
                else:
                    spec["max_num"] = 8
                run = await run_cpp(spec, timeout_s=40)
                assert run.returncode == 0, run.describe()
                served_by_slave = await _gets(api, slave)
                served_by_master = await _gets(api, master)
    assert served_by_slave > 0, "the slave served no pull: the master's suggestion was not taken"
    assert served_by_master > 0
    assert served_by_slave + served_by_master >= COUNT
    delivered = run.messages
    assert sorted(str(m["body"]) for m in delivered) == sorted(f"m-{i}" for i in range(COUNT))
    by_queue: dict[int, list[int]] = {}
    for m in delivered:
        by_queue.setdefault(int(str(m["queue_id"])), []).append(int(str(m["queue_offset"])))
    for queue_id, offsets in by_queue.items():
        assert offsets == list(range(len(offsets))), f"queue {queue_id} out of order: {offsets}"
