"""Retry and dead-letter rules: where a message a consumer gave up on goes next.

Owns: the decisions RocketMQ 4.x makes in SendMessageProcessor
(``asyncConsumerSendMsgBack``, ``handleRetryAndDLQ``): which retry budget
applies, when a message is dead, which delay level the next attempt waits,
and the stored form of the retried or dead message. Pure: no I/O,
no clock.

Rules:

* The budget is the group's retryMaxTimes (16), unless the request comes
  from a client at V3_4_9 (121) or later that names maxReconsumeTimes.
* Dead when reconsumeTimes >= budget, or the consumer asked for a negative
  delay level: the message goes to ``%DLQ%<group>`` (one queue, RW), not
  delayed.
* Otherwise delay level 0 means 3 + reconsumeTimes (the first retry waits
  level 3, 10 s by default), clamped to the highest level; the message is
  stored in SCHEDULE_TOPIC_XXXX on its way to ``%RETRY%<group>``.
* The new record keeps body, flag, sysFlag, born time and host; its
  reconsumeTimes is one more; RETRY_TOPIC names the topic it was first
  consumed from, ORIGIN_MESSAGE_ID the first message id of the chain; WAIT is
  false (nobody waits for this write).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from apogee.broker.schedule import schedule_placement
from apogee.codes import MQVersion
from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    HostPort,
    MessageExt,
    StoreMessage,
    properties_to_string,
)
from apogee.model.topic import dlq_topic, retry_topic

#: Queues of every dead-letter topic (RocketMQ MixAll.DLQ_NUMS_PER_GROUP).
DLQ_NUMS_PER_GROUP = 1
#: Delay level of the first retry when the consumer leaves it to the broker.
FIRST_RETRY_DELAY_LEVEL = 3


def max_reconsume_times(group_max: int, request_version: int, header_max: int | None) -> int:
    """The retry budget of one request (older clients cannot name their own)."""
    if header_max is not None and request_version >= MQVersion.V3_4_9:
        return header_max
    return group_max


def is_dead(reconsume_times: int, max_times: int, delay_level: int = 0) -> bool:
    return reconsume_times >= max_times or delay_level < 0


def next_delay_level(delay_level: int, reconsume_times: int, max_level: int) -> int:
    """The level the next attempt waits: as asked, or 3 + attempts so far; clamped."""
    if delay_level == 0:
        delay_level = FIRST_RETRY_DELAY_LEVEL + reconsume_times
    return min(delay_level, max_level)


def random_queue(queue_nums: int) -> int:
    return random.randrange(max(queue_nums, 1))


@dataclass(frozen=True, slots=True)
class SendBack:
    """Where a message goes back to, and how it is held on the way."""

    group: str
    dead: bool
    delay_level: int  # 0 when dead
    queue_id: int  # in the retry or dead-letter topic

    @property
    def topic(self) -> str:
        return dlq_topic(self.group) if self.dead else retry_topic(self.group)


def send_back_message(
    original: MessageExt, back: SendBack, store_host: HostPort, max_level: int
) -> StoreMessage:
    """The record that takes ``original``'s place in the retry or dead-letter topic."""
    props = dict(original.properties)
    props.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, original.msg_id)
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    topic, queue_id = back.topic, back.queue_id
    if back.delay_level > 0:
        props[PROPERTY_DELAY_TIME_LEVEL] = str(back.delay_level)
    text = properties_to_string(props)
    if back.delay_level > 0:
        placed = schedule_placement(topic, queue_id, text, max_level)
        if placed is not None:
            topic, queue_id, text = placed.topic, placed.queue_id, placed.properties
    return StoreMessage(
        topic=topic,
        queue_id=queue_id,
        body=original.body,
        properties=text,
        flag=original.flag,
        sys_flag=original.sys_flag,
        born_timestamp=original.born_timestamp,
        born_host=original.born_host,
        store_host=store_host,
        reconsume_times=original.reconsume_times + 1,
    )
