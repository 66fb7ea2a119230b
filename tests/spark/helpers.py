"""Helpers of the Spark tests: producing to and reading from the real test cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.errors import TopicNotExistError
from apogee.model.message import Message, MessageExt
from apogee.model.results import SendResult
from apogee.model.topic import TopicConfig
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually
from apogee.testing.reading import read_queue

BROKER = "broker-a"


@dataclass
class SparkCluster:
    namesrv: str
    broker: str
    root: Path

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """Create (or resize) the topic and wait until the name server routes it so."""
        asyncio.run(_create(self.namesrv, self.broker, topic, queues))

    def produce(self, messages: Sequence[tuple[Message, int]]) -> list[SendResult]:
        """Send each (message, queue id) in order; the broker's answers."""
        return asyncio.run(_produce(self.broker, messages))

    def read(self, topic: str, queues: int = 4) -> list[MessageExt]:
        """Everything in the topic's queues, queue by queue."""
        return asyncio.run(_read(self.broker, topic, queues))

    def runtime(self) -> dict[str, str]:
        return asyncio.run(_runtime(self.broker))


async def _create(namesrv: str, addr: str, topic: str, queues: int) -> None:
    async with RemotingClient() as client:
        api = BrokerApi(client, timeout_s=10)
        await api.create_topic(addr, TopicConfig(topic, queues, queues))
        names = NamesrvApi(client, [namesrv], timeout_s=10)

        async def routed() -> bool:
            try:
                route = await names.get_route(topic)
            except TopicNotExistError:
                return False
            return any(q.read_queue_nums == queues for q in route.queue_datas)

        await eventually(routed, timeout_s=10)


async def _produce(addr: str, messages: Sequence[tuple[Message, int]]) -> list[SendResult]:
    async with RemotingClient() as client:
        api = BrokerApi(client, timeout_s=10)
        return [
            await api.send(addr, BROKER, m, queue_id=q, producer_group="test-producer")
            for m, q in messages
        ]


async def _read(addr: str, topic: str, queues: int) -> list[MessageExt]:
    async with RemotingClient() as client:
        api = BrokerApi(client, timeout_s=10)
        out: list[MessageExt] = []
        for q in range(queues):
            out += await read_queue(api, addr, topic, q)
        return out


async def _runtime(addr: str) -> dict[str, str]:
    async with RemotingClient() as client:
        return await BrokerApi(client, timeout_s=10).get_broker_runtime_info(addr)
