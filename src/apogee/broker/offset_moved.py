"""OFFSET_MOVED_EVENT: the record a master writes when it corrects a consumer's offset.

Owns: the event RocketMQ 4.x's PullMessageProcessor stores when a pull is
answered PULL_OFFSET_MOVED (21) on a master: which group asked for which queue
at which offset, and the offset it was told to use instead. Operators and
tools read them from topic ``OFFSET_MOVED_EVENT`` (1 queue) to see consumers
that fell behind retention or ran ahead of the log.

The stored message: topic OFFSET_MOVED_EVENT, queue 0, TAGS and KEYS = the
consumer group, flag 0, sysFlag 0, reconsumeTimes 0, born and store host = the
broker's address, body = the event as JSON with RocketMQ's field names in
their serialized (alphabetical) order. A failed write is logged and
never fails the pull that caused it::

    {"consumerGroup":"g","messageQueue":{"brokerName":"b","queueId":0,"topic":"t"},
     "offsetNew":5,"offsetRequest":100}
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from apogee._util.clock import Clock
from apogee.model.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    HostPort,
    StoreMessage,
    properties_to_string,
)
from apogee.model.topic import OFFSET_MOVED_EVENT
from apogee.store.interface import MessageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffsetMovedEvent:
    consumer_group: str
    topic: str
    broker_name: str
    queue_id: int
    offset_request: int
    offset_new: int

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "consumerGroup": self.consumer_group,
                "messageQueue": {
                    "brokerName": self.broker_name,
                    "queueId": self.queue_id,
                    "topic": self.topic,
                },
                "offsetNew": self.offset_new,
                "offsetRequest": self.offset_request,
            }
        )

    @classmethod
    def decode(cls, body: bytes | memoryview) -> OffsetMovedEvent:
        data = orjson.loads(bytes(body))
        mq = data["messageQueue"]
        return cls(
            consumer_group=data["consumerGroup"],
            topic=mq["topic"],
            broker_name=mq["brokerName"],
            queue_id=int(mq["queueId"]),
            offset_request=int(data["offsetRequest"]),
            offset_new=int(data["offsetNew"]),
        )


def offset_moved_message(event: OffsetMovedEvent, broker: HostPort, now_ms: int) -> StoreMessage:
    """The stored form of ``event`` (see the module docstring)."""
    group = event.consumer_group
    return StoreMessage(
        topic=OFFSET_MOVED_EVENT,
        queue_id=0,
        body=event.encode(),
        properties=properties_to_string({PROPERTY_TAGS: group, PROPERTY_KEYS: group}),
        born_timestamp=now_ms,
        born_host=broker,
        store_host=broker,
    )


class OffsetMovedRecorder:
    """Stores each event it is given (the pull handler's ``on_offset_moved``)."""

    def __init__(
        self, store: MessageStore, broker: HostPort, clock: Clock, on_stored: Callable[[], None]
    ) -> None:
        self._store = store
        self._broker = broker
        self._clock = clock
        self._on_stored = on_stored

    def __call__(self, event: OffsetMovedEvent) -> None:
        msg = offset_moved_message(event, self._broker, self._clock.now_ms())
        result = self._store.put(msg)
        if result.status.is_stored:
            self._on_stored()
        else:
            log.warning("offset-moved event of %s not stored: %s", event, result.status.value)
