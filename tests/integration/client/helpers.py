"""What the client tests share: reading a topic back whole, a group's committed offset,
a name server and a broker as ``apogee`` processes (``apogee.testing.cluster``)."""

from __future__ import annotations

from apogee.client import Producer
from apogee.client.broker_api import BrokerApi
from apogee.model.client import MessageQueue
from apogee.model.message import MessageExt
from apogee.testing.reading import read_queue


async def read_topic(api: BrokerApi, addr: str, topic: str, queues: int = 4) -> list[MessageExt]:
    """Every message of ``topic`` on the broker at ``addr``, queue by queue."""
    out: list[MessageExt] = []
    for queue_id in range(queues):
        out += await read_queue(api, addr, topic, queue_id)
    return out


async def committed_offset(namesrv: str, group: str, mq: MessageQueue) -> int | None:
    """The offset the broker of ``mq`` keeps for ``group`` (None: none)."""
    async with Producer("reader", namesrv=namesrv, instance_name="offset-reader") as p:
        routes = p.instance.routes
        await routes.get_route(mq.topic)
        addr = routes.master_addr(mq.broker_name)
        assert addr is not None
        api = p.instance.broker_api
        return await api.query_consumer_offset(
            addr, group, mq.topic, mq.queue_id, set_zero_if_not_found=False
        )
