"""Reading a queue back whole, for tests that check what a broker delivers.

Owns: ``read_queue``.
"""

from __future__ import annotations

from apogee.client.broker_api import BrokerApi
from apogee.errors import TopicNotExistError
from apogee.model.message import MessageExt
from apogee.model.results import PullStatus

READER_GROUP = "TOOLS_CONSUMER"


async def read_queue(api: BrokerApi, addr: str, topic: str, queue_id: int) -> list[MessageExt]:
    """Every message in the queue, pulled from offset 0 on; [] for a topic not there yet."""
    out: list[MessageExt] = []
    offset = 0
    while True:
        try:
            result = await api.pull(addr, READER_GROUP, topic, queue_id, offset)
        except TopicNotExistError:
            return out
        if result.status is not PullStatus.FOUND:
            return out
        out += result.messages
        offset = result.next_begin_offset
