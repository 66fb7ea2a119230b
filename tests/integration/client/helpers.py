"""What the client tests share: reading a topic back whole."""

from __future__ import annotations

from apogee.client.broker_api import BrokerApi
from apogee.model.message import MessageExt
from apogee.testing.reading import read_queue


async def read_topic(api: BrokerApi, addr: str, topic: str, queues: int = 4) -> list[MessageExt]:
    """Every message of ``topic`` on the broker at ``addr``, queue by queue."""
    out: list[MessageExt] = []
    for queue_id in range(queues):
        out += await read_queue(api, addr, topic, queue_id)
    return out
