"""Topic administration: UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER,
GET_ALL_TOPIC_CONFIG, GET_TOPIC_STATS_INFO.

Owns: RocketMQ AdminBrokerProcessor's rules for these four.

* Create/update and delete are refused on a slave, and for a name that is
  not a legal topic or is a system topic (SYSTEM_ERROR with RocketMQ's
  remark, as 4.x answers); create also refuses an invalid perm, queue count
  or filter type, naming the field. Both answer after the broker has
  registered its new topic table with the name servers, so a route lookup
  right after the answer sees the change.
* Delete drops the topic's config, its consume queues and every group's
  offsets of it; deleting a topic the broker does not have succeeds.
* Topic stats list every write queue with min/max offset and the store time
  of its last message; TOPIC_NOT_EXIST for an unknown topic.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.topics import TopicConfigManager
from apogee.codes import ResponseCode
from apogee.model.client import MessageQueue
from apogee.model.route import perm_is_valid
from apogee.model.stats import TopicOffset, TopicStatsTable
from apogee.model.topic import MULTI_TAG, SINGLE_TAG, TopicConfig, is_system_topic, validate_topic
from apogee.protocol.admin_bodies import encode_topic_stats_table
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore

log = logging.getLogger(__name__)

SLAVE_REMARK = (
    "Can't modify topic or subscription group from slave broker, "
    "please execute it from master broker."
)
#: More queues than this per topic is a typo, not a plan (RocketMQ has no limit).
MAX_QUEUE_NUMS = 1024 * 64

Register = Callable[[], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class TopicAdminSettings:
    broker_name: str
    is_slave: bool = False


def topic_name_problem(topic: str) -> str | None:
    """RocketMQ's TopicValidator remark for a name admin requests may not use."""
    problem = validate_topic(topic)
    if problem is not None:
        return problem
    if is_system_topic(topic):
        return f"The topic[{topic}] is conflict with system topic."
    return None


def _config_problem(h: CreateTopicRequestHeader) -> str | None:
    for name, value in (
        ("readQueueNums", h.read_queue_nums),
        ("writeQueueNums", h.write_queue_nums),
    ):
        if not 0 < value <= MAX_QUEUE_NUMS:
            return f"{name} must be 1..{MAX_QUEUE_NUMS}, not {value}"
    if not perm_is_valid(h.perm):
        return f"perm must be 0..7, not {h.perm}"
    if h.topic_filter_type not in (SINGLE_TAG, MULTI_TAG):
        return f"topicFilterType must be SINGLE_TAG or MULTI_TAG, not {h.topic_filter_type!r}"
    return None


class TopicAdminHandlers:
    def __init__(
        self,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        store: MessageStore,
        settings: TopicAdminSettings,
        *,
        register: Register,
    ) -> None:
        self._topics = topics
        self._offsets = offsets
        self._store = store
        self._settings = settings
        self._register = register

    async def create(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if self._settings.is_slave:
            return request.make_response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        h = CreateTopicRequestHeader.from_ext(request.ext_fields)
        problem = topic_name_problem(h.topic) or _config_problem(h)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        config = TopicConfig(
            h.topic, h.read_queue_nums, h.write_queue_nums, h.perm, h.topic_filter_type,
            h.topic_sys_flag or 0, h.order,
        )  # fmt: skip
        log.info("topic %s created or updated by %s: %s", h.topic, ctx.peer, config)
        self._topics.update(config)
        await self._register()
        return request.make_response()

    async def delete(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if self._settings.is_slave:
            return request.make_response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        topic = DeleteTopicRequestHeader.from_ext(request.ext_fields).topic
        problem = topic_name_problem(topic)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        known = self._topics.delete(topic)
        queues = self._store.delete_topics([topic])
        groups = self._offsets.remove_topic(topic)
        log.info("topic %s deleted by %s (known: %s, %d queues, offsets of %d groups)",
                 topic, ctx.peer, known, queues, groups)  # fmt: skip
        if known:
            await self._register()
        return request.make_response()

    def all_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=self._topics.encode())

    def stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = GetTopicStatsInfoRequestHeader.from_ext(request.ext_fields).topic
        config = self._topics.select(topic)
        if config is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self._store
        table: dict[MessageQueue, TopicOffset] = {}
        for queue_id in range(config.write_queue_nums):
            low = max(store.min_offset_in_queue(topic, queue_id), 0)
            high = max(store.max_offset_in_queue(topic, queue_id), 0)
            last = store.message_store_time(topic, queue_id, high - 1) if high > 0 else 0
            mq = MessageQueue(topic, self._settings.broker_name, queue_id)
            table[mq] = TopicOffset(low, high, max(last, 0))
        return request.make_response(body=encode_topic_stats_table(TopicStatsTable(table)))
