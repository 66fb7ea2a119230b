"""CONSUMER_SEND_MSG_BACK: a consumer hands back a message it failed to consume.

Owns: the checks and answers of RocketMQ SendMessageProcessor's
``asyncConsumerSendMsgBack``; the rules of where the message goes live in
``apogee.broker.retry``.

Checks, in order: the group's config exists or is auto-created (26), the
broker is writeable (16), the group has retry queues (none: SUCCESS and the
message is dropped, as RocketMQ does), the retry topic exists or is created
(RW, retryQueueNums queues; creating it registers the broker with the name
servers at once) and is writeable (16), the record at the header's
commit-log offset exists (1). A dead message's ``%DLQ%<group>`` topic is
created the same way, and counted in ``Traffic`` (the metrics' messages
sent to a DLQ, per group and original topic). Any answer other than 0 loses the message for the
C++ client, so only a store failure after these checks answers 1.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from apogee.broker.config import BrokerConfig
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.retry import (
    DLQ_NUMS_PER_GROUP,
    SendBack,
    is_dead,
    max_reconsume_times,
    next_delay_level,
    random_queue,
    send_back_message,
)
from apogee.broker.topics import TopicConfigManager
from apogee.broker.traffic import Traffic
from apogee.codes import ResponseCode
from apogee.model.message import PROPERTY_RETRY_TOPIC, HostPort, MessageExt
from apogee.model.route import PERM_RW, writeable
from apogee.model.topic import dlq_topic, retry_topic
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import ConsumerSendMsgBackRequestHeader
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore

log = logging.getLogger(__name__)

_UNIT_SUB_TOPIC_FLAG = 0x2  # TopicSysFlag: UNIT_SUB


@dataclass(frozen=True, slots=True)
class SendBackSettings:
    store_host: HostPort
    permission: BrokerPermission
    max_delay_level: int

    @classmethod
    def from_config(
        cls, config: BrokerConfig, store_host: HostPort, permission: BrokerPermission
    ) -> SendBackSettings:
        return cls(store_host, permission, len(config.store.delay_levels_ms))


class SendBackHandler:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        settings: SendBackSettings,
        *,
        on_stored: Callable[[], None],
        traffic: Traffic | None = None,
    ) -> None:
        self._store = store
        self._traffic = traffic
        self._topics = topics
        self._groups = groups
        self._settings = settings
        self._on_stored = on_stored
        self.sent_back = 0  # messages stored again (retry or dead-letter)

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        group = self._groups.find_or_create(header.group)
        if group is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {header.group}",
            )
        if not self._settings.permission.writeable:
            return request.make_response(ResponseCode.NO_PERMISSION, "the broker is not writeable")
        if group.retry_queue_nums <= 0:
            log.info("group %s has no retry queues: message at %d dropped",
                     header.group, header.offset)  # fmt: skip
            return request.make_response()
        flag = _UNIT_SUB_TOPIC_FLAG if header.unit_mode else 0
        retry = self._topics.create_in_send_back(
            retry_topic(header.group), group.retry_queue_nums, PERM_RW, flag
        )
        if not writeable(retry.perm):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{retry.topic_name}] is not writeable"
            )
        original = self._look(header.offset)
        if original is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
            )
        budget = max_reconsume_times(
            group.retry_max_times, request.version, header.max_reconsume_times
        )
        queues = min(group.retry_queue_nums, retry.write_queue_nums)
        back = self._route(header, original, budget, queues)
        msg = send_back_message(
            original, back, self._settings.store_host, self._settings.max_delay_level
        )
        result = self._store.put(msg)
        if not result.status.is_stored:
            return request.make_response(ResponseCode.SYSTEM_ERROR, result.status.value)
        self._on_stored()
        self.sent_back += 1
        if back.dead and self._traffic is not None:
            topic = original.properties.get(PROPERTY_RETRY_TOPIC) or original.topic
            self._traffic.dead_letter(header.group, header.origin_topic or topic)
        return request.make_response()

    def _look(self, offset: int) -> MessageExt | None:
        if offset < 0:
            return None
        msg = self._store.look_message(offset)
        # An offset inside a record must not be read as the start of another one.
        return msg if msg is not None and msg.commit_log_offset == offset else None

    def _route(
        self, header: ConsumerSendMsgBackRequestHeader, msg: MessageExt, budget: int, queues: int
    ) -> SendBack:
        if is_dead(msg.reconsume_times, budget, header.delay_level):
            self._topics.create_in_send_back(dlq_topic(header.group), DLQ_NUMS_PER_GROUP, PERM_RW)
            return SendBack(header.group, True, 0, random_queue(DLQ_NUMS_PER_GROUP))
        level = next_delay_level(
            header.delay_level, msg.reconsume_times, self._settings.max_delay_level
        )
        return SendBack(header.group, False, level, random_queue(queues))
