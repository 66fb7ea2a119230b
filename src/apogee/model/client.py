"""Clients as a broker sees them: heartbeats, consumer settings, message queues.

Owns: ConsumeType, MessageModel, ConsumeFromWhere (values are RocketMQ's
enum ordinals, names its enum names, so both the Java form and the C++
ordinal form map onto them), ProducerData, ConsumerData, HeartbeatData and
MessageQueue.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from apogee.model.subscription import SubscriptionData


class ConsumeType(IntEnum):
    CONSUME_ACTIVELY = 0  # pull
    CONSUME_PASSIVELY = 1  # push
    CONSUME_POP = 2  # 5.x


class MessageModel(IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; ordered like Java's compareTo."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        # MessageQueue.toString: the consistent-hash allocator hashes this text.
        return (
            f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, "
            f"queueId={self.queue_id}]"
        )


@dataclass(frozen=True, slots=True)
class ProducerData:
    group_name: str


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    client_id: str
    producers: tuple[ProducerData, ...] = ()
    consumers: tuple[ConsumerData, ...] = ()
