"""Apogee's PushConsumer with a master and its slave (``apogee`` processes): the master is
SIGKILLed mid-stream, the consumer goes on from the slave, and the master comes back.

Offsets as RocketMQ's clients keep them: committed to the master, to the slave while
the route lists no master (the slave hands them to the master when it is back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from apogee.client import Message, Producer, PushConsumer
from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.errors import ApogeeError
from apogee.model.client import MessageQueue
from apogee.model.received import ReceivedMessage
from apogee.model.topic import TopicConfig
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.ha import ha_status, master_process, slave_process

pytestmark = pytest.mark.slow

TOPIC = "HaPush"
QUEUES = 2
GROUP = "cg-ha-push"


def consumer(namesrv: str, listener: Callable[[ReceivedMessage], Awaitable[None]]) -> PushConsumer:
    """A consumer of GROUP refreshing routes and committing every 0.3 s, pulling 4
    messages at a time and holding at most 8 a queue: when the first 30 are held
    back, most messages are still to pull."""
    return PushConsumer(
        GROUP, namesrv=namesrv, consume_from="first", listener=listener,
        poll_namesrv_interval=0.3, persist_offsets_interval=0.3, pull_suspend=1.0,
        pull_batch_size=4, pull_threshold_for_queue=8,
    )  # fmt: skip


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[str, BrokerProcess, BrokerProcess]]:
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="ASYNC_MASTER")
        slave = slave_process(tmp_path, ns.address)
        master.start()
        slave.start()
        try:
            yield ns.address, master, slave
        finally:
            master.kill()
            assert slave.stop() == 0, slave.log_text()


async def _committed(api: BrokerApi, addr: str) -> int:
    total = 0
    for q in range(QUEUES):
        try:
            total += await api.query_consumer_offset(addr, GROUP, TOPIC, q) or 0
        except ApogeeError:
            return -1
    return total


async def test_push_consumer_goes_on_from_the_slave_and_commits_there(
    pair: tuple[str, BrokerProcess, BrokerProcess],
) -> None:
    namesrv, master, slave = pair
    async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
        api = BrokerApi(client)
        await api.create_topic(master.address, TopicConfig(TOPIC, QUEUES, QUEUES))

        async def ready() -> bool:  # routed, and the slave knows the topic and has every byte
            route = await NamesrvApi(client, [namesrv]).get_route(TOPIC)
            (link,) = (await ha_status(client, master.address)).ha_connection_info
            copied = await api.get_all_topic_config(slave.address)
            has_topic = TOPIC in copied.topic_config_table
            return bool(route.queue_datas) and link.diff == 0 and has_topic

        async with Producer("pg", namesrv=namesrv) as producer:
            for i in range(100):
                await producer.send(Message(TOPIC, f"a-{i}".encode()))
        await eventually(ready, timeout_s=10)

        got: list[str] = []
        gate = asyncio.Event()

        async def listener(msg: ReceivedMessage) -> None:
            got.append(msg.body.decode())
            if len(got) >= 30:
                await gate.wait()  # hold the rest until the master is gone

        first = consumer(namesrv, listener)
        async with first:
            first.subscribe(TOPIC)
            await eventually(lambda: _count(got, 30), timeout_s=10)
            master.kill()
            gate.set()
            await eventually(lambda: _distinct(got, 100), timeout_s=15)
            pulled = [f.pulled_from.get(slave.address, 0) for f in first.fetchers.values()]
            assert sum(pulled) > 0, "the slave served no pull"
            # what is consumed meanwhile is committed to the slave (the only broker listed)
            await eventually(lambda: _is(api, slave.address, 100), timeout_s=5)
        assert sorted(set(got)) == sorted(f"a-{i}" for i in range(100))
        duplicates = len(got) - len(set(got))
        assert duplicates == 0, f"{duplicates} messages delivered twice"

        # a consumer of the group starting while the master is away starts from the
        # offsets committed to the slave: nothing consumed before comes again
        again: list[str] = []

        async def collect(msg: ReceivedMessage) -> None:
            again.append(msg.body.decode())

        second = consumer(namesrv, collect)
        async with second:
            second.subscribe(TOPIC)
            await eventually(lambda: _assigned(second), timeout_s=10)
            master.start()
            # the slave hands the offsets committed to it back to the master
            await eventually(lambda: _is(api, master.address, 100), timeout_s=10)
            async with Producer("pg", namesrv=namesrv) as producer:
                for i in range(50):
                    await producer.send(Message(TOPIC, f"b-{i}".encode()))
            await eventually(lambda: _distinct(again, 50), timeout_s=15)
            await eventually(lambda: _is(api, master.address, 150), timeout_s=5)
        assert sorted(again) == sorted(f"b-{i}" for i in range(50)), "old messages came again"


async def _count(got: list[str], n: int) -> bool:
    return len(got) >= n


async def _distinct(got: list[str], n: int) -> bool:
    return len(set(got)) >= n


async def _assigned(consumer: PushConsumer) -> bool:
    mqs: set[MessageQueue] = set(consumer.fetchers)
    return len({mq for mq in mqs if mq.topic == TOPIC}) == QUEUES


async def _is(api: BrokerApi, addr: str, total: int) -> bool:
    return await _committed(api, addr) == total
