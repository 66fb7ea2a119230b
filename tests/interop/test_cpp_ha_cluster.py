"""Two masters with a slave each and two name servers, all ``apogee`` processes.

One name server and one master die; producers and push consumers (the C++
client's and Apogee's) keep working through the rest. Before
that, wipeWritePerm drains one master and addWritePerm brings it back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.admin.admin_client import AdminClient
from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.client.producer import Producer
from apogee.client.push_consumer import PushConsumer
from apogee.errors import ApogeeError
from apogee.model.message import Message
from apogee.model.results import SendStatus
from apogee.model.route import MASTER_ID, writeable
from apogee.model.topic import TopicConfig
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.ha import ha_status, master_process, slave_process
from tests.harness.cpp import run_cpp, start_cpp
from tests.interop.helpers import produce

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "HaCluster"


@contextlib.contextmanager
def brokers(root: Path, namesrv: str) -> Iterator[dict[str, BrokerProcess]]:
    procs = {
        "a-m": master_process(root, namesrv, role="ASYNC_MASTER", name="broker-a"),
        "a-s": slave_process(root, namesrv, name="broker-a"),
        "b-m": master_process(root, namesrv, role="ASYNC_MASTER", name="broker-b"),
        "b-s": slave_process(root, namesrv, name="broker-b"),
    }
    try:
        for proc in procs.values():
            proc.start()
        yield procs
    finally:
        for proc in procs.values():
            proc.stop()


async def _puts(api: BrokerApi, broker: BrokerProcess) -> int:
    return int((await api.get_broker_runtime_info(broker.address))["msgPutTotalTodayNow"])


async def test_one_name_server_and_one_master_die_and_clients_go_on(tmp_path: Path) -> None:
    with (
        NamesrvProcess(tmp_path / "ns1") as ns1,
        NamesrvProcess(tmp_path / "ns2") as ns2,
        brokers(tmp_path, f"{ns1.address};{ns2.address}") as procs,
    ):
        both = f"{ns1.address};{ns2.address}"
        async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
            api = BrokerApi(client)
            for name in ("a-m", "b-m"):
                await _wait_in_sync(client, procs[name])
            async with AdminClient(both) as admin:
                await admin.create_topic(TopicConfig(TOPIC, 4, 4), cluster="DefaultCluster")

                # graceful maintenance of broker-a: drained, then back. The C++ producer sends
                # a failed message again (up to twice): its connection-table lock can time out
                # while its own background thread connects to a broker that came back.
                await admin.wipe_write_perm("broker-a")
                before = await _puts(api, procs["a-m"])
                await produce(both, TOPIC, 40, body="drained-{i}", retry_failed_sends=4)
                assert await _puts(api, procs["a-m"]) == before, "a drained master took sends"
                await admin.add_write_perm("broker-a")
                await produce(both, TOPIC, 40, body="back-{i}", retry_failed_sends=4)
                assert await _puts(api, procs["a-m"]) > before

            consumer = await start_cpp(
                {"action": "push_consume", "namesrv": both, "topic": TOPIC,
                 "group": "ha_cluster", "run_s": 120},
                timeout_s=130,
            )  # fmt: skip
            py_got: list[str] = []
            py_consumer = PushConsumer(
                "ha_cluster_py", namesrv=both, consume_from="first",
                listener=lambda m: py_got.append(m.body.decode()), poll_namesrv_interval=1.0,
            )  # fmt: skip
            py_consumer.subscribe(TOPIC)
            async with consumer, py_consumer:
                assert await consumer.wait_for(lambda lines: _count(lines) >= 80, 60)
                await eventually(lambda: _have(py_got, 80), timeout_s=30)

                ns1.kill()
                procs["a-m"].kill()

                # the C++ producer: its first name server is dead, one master is gone
                run = await run_cpp(
                    {"action": "produce", "namesrv": both, "topic": TOPIC, "count": 100,
                     "body": "after-{i}", "send_timeout_ms": 2000, "retry_failed_sends": 4},
                    timeout_s=60,
                )  # fmt: skip
                assert run.returncode == 0, run.describe()
                assert {line["status"] for line in run.sent} == {"SEND_OK"}
                # Apogee's client: routes from the surviving name server, sends to a master
                names = NamesrvApi(client, [ns1.address, ns2.address])

                async def writable_masters() -> list[str]:
                    route = await names.get_route(TOPIC)
                    ok = {q.broker_name for q in route.queue_datas if writeable(q.perm)}
                    return [
                        b.broker_addrs[MASTER_ID]
                        for b in route.broker_datas
                        if b.broker_name in ok and MASTER_ID in b.broker_addrs
                    ]

                assert await eventually(writable_masters) == [procs["b-m"].address]
                # Apogee's producer, given the dead name server first
                async with Producer("py", namesrv=both) as producer:
                    for i in range(20):
                        sent = await producer.send(Message(TOPIC, f"py-{i}".encode()))
                        assert sent.status is SendStatus.SEND_OK
                        assert sent.message_queue.broker_name == "broker-b"
                got = await consumer.wait_for(lambda lines: _count(lines) >= 200, 60)
                run_consumer = await consumer.stop(timeout_s=10)
                # Apogee's consumer too, on routes from the surviving name server
                await eventually(lambda: _have(py_got, 200), timeout_s=60)
            assert got, run_consumer.describe()
            bodies = [str(line["body"]) for line in run_consumer.messages]
            expected = [f"drained-{i}" for i in range(40)] + [f"back-{i}" for i in range(40)]
            expected += [f"after-{i}" for i in range(100)] + [f"py-{i}" for i in range(20)]
            assert sorted(set(bodies)) == sorted(expected)
            assert sorted(set(py_got)) == sorted(expected)


async def _wait_in_sync(client: RemotingClient, master: BrokerProcess) -> None:
    async def in_sync() -> bool:
        return (await ha_status(client, master.address)).in_sync_slave_nums == 1

    await eventually(in_sync, timeout_s=20)


async def _have(got: list[str], n: int) -> bool:
    return len(set(got)) >= n


def _count(lines: list[dict[str, object]]) -> int:
    return len({line.get("body") for line in lines if line.get("event") == "message"})


async def test_a_restarted_name_server_relearns_master_and_slave_within_a_period(
    tmp_path: Path,
) -> None:
    period = {"registerNameServerPeriod": "10000"}  # RocketMQ's floor: 10 s
    with NamesrvProcess(tmp_path / "ns1") as ns1, NamesrvProcess(tmp_path / "ns2") as ns2:
        both = f"{ns1.address};{ns2.address}"
        master = master_process(tmp_path, both, role="ASYNC_MASTER", properties=period)
        slave = slave_process(tmp_path, both, properties=period)
        with master, slave:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                only_ns1 = NamesrvApi(client, [ns1.address])
                pair = {MASTER_ID: master.address, 1: slave.address}

                async def knows_both() -> bool:
                    try:
                        info = await only_ns1.get_cluster_info()
                    except ApogeeError:
                        return False
                    broker = info.broker_addr_table.get("broker-a")
                    return broker is not None and broker.broker_addrs == pair

                await eventually(knows_both, timeout_s=15)
                ns1.kill()
                ns1.start()  # empty tables: it knows what brokers tell it again
                await eventually(knows_both, timeout_s=12, interval_s=0.2)
                # the other name server never stopped knowing them
                info = await NamesrvApi(client, [ns2.address]).get_cluster_info()
                assert info.broker_addr_table["broker-a"].broker_addrs == pair
