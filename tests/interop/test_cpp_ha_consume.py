"""Consumers of a master and its slave (``apogee`` processes): the master dies, then returns.

The C++ push consumer and Apogee's client (BrokerApi pulls through PullTargets)
consume from the slave while the master is gone, from the offsets committed
before, and from the master again once it is back; offsets committed to the
slave meanwhile reach the master.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.client.pull_route import PullTargets
from apogee.errors import ApogeeError
from apogee.model.client import MessageQueue
from apogee.model.route import MASTER_ID, BrokerData
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.ha import ha_status, master_process, slave_process
from tests.harness.cpp import run_cpp, start_cpp
from tests.interop.helpers import produce

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "HaConsume"
QUEUES = 4  # what the C++ producer's auto-creation gives the topic


class PyConsumer:
    """Apogee's client consuming TOPIC as RocketMQ's consumers do with a master and
    slaves: routes refreshed from the name servers; each queue pulled where
    PullTargets says; offsets read from and committed to the master, or the
    slave with the lowest id when the master is gone."""

    def __init__(self, client: RemotingClient, namesrv: str, group: str) -> None:
        self.api = BrokerApi(client)
        self.names = NamesrvApi(client, [namesrv])
        self.group = group
        self.targets = PullTargets()
        self.offsets: dict[int, int] = {}
        self.bodies: list[str] = []
        self.pulled_from: list[int] = []

    async def _broker(self) -> BrokerData:
        route = await self.names.get_route(TOPIC)
        return route.broker_datas[0]

    @staticmethod
    def _offset_addr(broker: BrokerData) -> str:
        addrs = broker.broker_addrs
        return addrs.get(MASTER_ID) or addrs[min(addrs)]

    async def start(self) -> None:
        """Read the committed offsets (a consumer starting, or rebalanced)."""
        addr = self._offset_addr(await self._broker())
        for q in range(QUEUES):
            found = await self.api.query_consumer_offset(addr, self.group, TOPIC, q)
            self.offsets[q] = found or 0

    async def round(self) -> None:
        """Pull every queue once from where it stands, then commit."""
        broker = await self._broker()
        for q in range(QUEUES):
            mq = MessageQueue(TOPIC, broker.broker_name, q)
            target, result = await self.targets.pull(
                self.api, broker, self.group, mq, self.offsets[q], max_nums=32
            )
            self.pulled_from.append(target.broker_id)
            self.bodies += [m.body.decode() for m in result.messages]
            self.offsets[q] = result.next_begin_offset
        addr = self._offset_addr(broker)
        for q, offset in self.offsets.items():
            await self.api.update_consumer_offset(addr, self.group, TOPIC, q, offset)

    async def until(self, count: int, timeout_s: float) -> None:
        async def enough() -> bool:
            try:
                await self.round()
            except ApogeeError:  # a broker went away: the next round's route says where
                await asyncio.sleep(0.2)
            return len(self.bodies) >= count

        await eventually(enough, timeout_s=timeout_s, interval_s=0.1)


async def _committed(api: BrokerApi, addr: str, group: str) -> int:
    total = 0
    for q in range(QUEUES):
        total += await api.query_consumer_offset(addr, group, TOPIC, q) or 0
    return total


async def _slave_has_all(client: RemotingClient, master: BrokerProcess) -> bool:
    (link,) = (await ha_status(client, master.address)).ha_connection_info
    return link.diff == 0


async def test_consumers_go_on_from_the_slave_and_back_to_the_master(tmp_path: Path) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="ASYNC_MASTER")
        slave = slave_process(tmp_path, ns.address)
        master.start()
        slave.start()
        try:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                api = BrokerApi(client)
                await produce(ns.address, TOPIC, 100, body="a-{i}")
                # both consumers take the first hundred, and commit them to the master
                first = await run_cpp(
                    {"action": "push_consume", "namesrv": ns.address, "topic": TOPIC,
                     "group": "cpp_group", "until": 100, "run_s": 40},
                    timeout_s=50,
                )  # fmt: skip
                assert first.returncode == 0, first.describe()
                py = PyConsumer(client, ns.address, "py_group")
                await py.start()
                await py.until(100, timeout_s=20)
                assert sorted(py.bodies) == sorted(f"a-{i}" for i in range(100))
                for group in ("cpp_group", "py_group"):
                    for broker in (master, slave):  # the slave copies the master's offsets
                        await _committed_at_least(api, broker, group, 100)

                await produce(ns.address, TOPIC, 100, body="b-{i}")
                await eventually(lambda: _slave_has_all(client, master), 15)
                master.kill()

                # the master is gone: both go on from the slave, from the committed offsets
                second = await start_cpp(
                    {"action": "push_consume", "namesrv": ns.address, "topic": TOPIC,
                     "group": "cpp_group", "run_s": 120},
                    timeout_s=130,
                )  # fmt: skip
                async with second:
                    got_b = await second.wait_for(lambda lines: _bodies(lines) >= 100, 60)
                    assert got_b, second.lines[-20:]
                    await py.until(200, timeout_s=30)
                    assert sorted(py.bodies[100:]) == sorted(f"b-{i}" for i in range(100))
                    assert py.pulled_from[-1] == 1
                    # offsets committed to the slave while the master is away
                    await eventually(lambda: _is(api, slave.address, "py_group", 200), 15)
                    await eventually(lambda: _is(api, slave.address, "cpp_group", 200), 30)

                    master.start()  # recovery; the slave hands the offsets back
                    await eventually(lambda: _is(api, master.address, "py_group", 200), 30)
                    await eventually(lambda: _is(api, master.address, "cpp_group", 200), 30)
                    await produce(ns.address, TOPIC, 50, body="c-{i}")
                    await py.until(250, timeout_s=60)
                    assert py.pulled_from[-QUEUES:] == [MASTER_ID] * QUEUES
                    got_c = await second.wait_for(lambda lines: _bodies(lines) >= 150, 60)
                    assert got_c, second.lines[-20:]

                    async def master_serves() -> bool:
                        info = await api.get_broker_runtime_info(master.address)
                        return float(info["getTotalTps"].split()[0]) > 0

                    # Apogee's consumer is idle now: once its pulls leave the 10 s window of
                    # getTotalTps, pulls the master serves are the C++ consumer's, which
                    # come when its route (refreshed every 30 s) names the master again.
                    await asyncio.sleep(12)
                    await eventually(master_serves, timeout_s=45, interval_s=0.5)
                    run = await second.stop(timeout_s=10)
                delivered = [str(line["body"]) for line in run.messages]
                assert sorted(delivered) == sorted(
                    [f"b-{i}" for i in range(100)] + [f"c-{i}" for i in range(50)]
                ), "no message consumed before the master died may come again"
        finally:
            master.stop()
            assert slave.stop() == 0, slave.log_text()


async def _committed_at_least(api: BrokerApi, broker: BrokerProcess, group: str, n: int) -> None:
    async def check() -> bool:
        return await _is(api, broker.address, group, n)

    await eventually(check, timeout_s=15)


def _bodies(lines: list[dict[str, object]]) -> int:
    return sum(1 for line in lines if line.get("event") == "message")


async def _is(api: BrokerApi, addr: str, group: str, total: int) -> bool:
    try:
        return await _committed(api, addr, group) >= total
    except ApogeeError:
        return False
