"""Operating on consumers from the admin side: INVOKE_BROKER_TO_RESET_OFFSET,
GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, QUERY_TOPIC_CONSUME_BY_WHO,
VIEW_BROKER_STATS_DATA and GET_ALL_PRODUCER_INFO.

Owns: RocketMQ's rules for these (Broker2Client.resetOffset,
AdminBrokerProcessor), with one difference said below.

* Reset (mqadmin resetOffsetByTime, skipAccumulatedMessage): per write queue
  of the topic, the offset of the first message stored at or after the
  timestamp (-1: the queue's end); with isForce, or when it is below the
  group's offset, it becomes the group's offset. A topic the broker does not
  have, or a group with no offset on it, is SYSTEM_ERROR. The answer's body
  is the table (ResetOffsetBody). Unlike RocketMQ, the broker writes the new
  offsets into its own table too, so a group with no consumer online starts
  there (RocketMQ answers CONSUMER_NOT_ONLINE and leaves it to the tool);
  the group's online consumers are told (RESET_CONSUMER_CLIENT_OFFSET,
  oneway) so they do not commit their old offsets over it: in
  ResetOffsetBody, or, to a C++ client, in the list form it reads
  (RocketMQ's ResetOffsetBodyForC, which Java brokers send when told the
  consumers are C++).
* Running info: forwarded to the client's own connection, whose answer is
  returned as it is; a client not connected here is SYSTEM_ERROR.
* Consume directly (mqadmin queryMsgById -g -d, the Dashboard's resend): the
  broker adds its brokerName and the topic's and group's sys flags to the
  header, puts the stored record the offset msgId points at into the body
  and forwards it to the client like running info; the client's answer
  (ConsumeMessageDirectlyResult) comes back as it is. A msgId that is not
  an offset id of this store, or a record that is gone, is SYSTEM_ERROR.
* Consumed by whom: the groups with a live consumer subscribed to the
  topic, and those with an offset on it.
* Stats data: TOPIC_PUT_NUMS / TOPIC_PUT_SIZE (key: topic) and
  GROUP_GET_NUMS / GROUP_GET_SIZE (key: topic@group), over the last minute,
  hour and day; an unknown name or a key never seen is SYSTEM_ERROR.
* All producers: every producer channel, by group (ProducerTableInfo).
"""

from __future__ import annotations

import time
from collections.abc import Hashable

from apogee.broker.broker2client import Broker2Client
from apogee.broker.clients import ClientRegistry
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.topics import TopicConfigManager
from apogee.broker.traffic import STATS_NAMES, TrafficHistory
from apogee.codes import LanguageCode, RequestCode, ResponseCode
from apogee.errors import ApogeeError
from apogee.model.client import MessageQueue
from apogee.model.msgid import OffsetMsgId, classify_msg_id
from apogee.protocol.admin_bodies import encode_mq_offset_table
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from apogee.protocol.ops_bodies import (
    BrokerStatsData,
    ProducerInfo,
    StatsItem,
    encode_broker_stats_data,
    encode_group_list,
    encode_offset_list_for_c,
    encode_producer_table,
)
from apogee.remoting.connection import Connection
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore

#: how long a forwarded admin request waits for the consumer's answer
CALL_CONSUMER_TIMEOUT_S = 5.0


def _peer(channel: Hashable) -> str:
    return channel.peer if isinstance(channel, Connection) else str(channel)


class ConsumerAdminHandlers:
    def __init__(
        self,
        broker_name: str,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientRegistry,
        to_clients: Broker2Client,
        history: TrafficHistory,
    ) -> None:
        self._broker_name = broker_name
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._clients = clients
        self._to_clients = to_clients
        self._history = history

    # -- reset ----------------------------------------------------------------------

    def reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        config = self._topics.select(h.topic)
        if config is None:
            remark = f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        current = self._offsets.queue_offsets(h.group, h.topic)
        if not current:
            remark = f"the consumer group <{h.group}> has no offset on topic {h.topic}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        table: dict[MessageQueue, int] = {}
        for queue_id in range(config.write_queue_nums):
            if h.queue_id is not None and h.queue_id >= 0 and queue_id != h.queue_id:
                continue
            now_at = current.get(queue_id, 0)
            if h.offset is not None and h.offset >= 0 and h.queue_id is not None:
                target = h.offset
            elif h.timestamp < 0:
                target = max(self._store.max_offset_in_queue(h.topic, queue_id), 0)
            else:
                target = max(self._store.offset_by_time(h.topic, queue_id, h.timestamp), 0)
            chosen = target if h.is_force or target < now_at else now_at
            table[MessageQueue(h.topic, self._broker_name, queue_id)] = chosen
            self._offsets.commit(h.group, h.topic, queue_id, chosen)
        body = encode_mq_offset_table(table)
        info = self._clients.consumer_group(h.group)
        if info is not None:
            ext = ResetOffsetRequestHeader(h.topic, h.group, h.timestamp, h.is_force).to_ext()
            code = RequestCode.RESET_CONSUMER_CLIENT_OFFSET
            by_language: dict[bool, list[Hashable]] = {True: [], False: []}
            for client in info.channels.values():
                by_language[client.language == "CPP"].append(client.channel)
            self._to_clients.tell_all(by_language[False], RemotingCommand.oneway(code, ext, body))
            body_c = encode_offset_list_for_c(table)
            self._to_clients.tell_all(by_language[True], RemotingCommand.oneway(code, ext, body_c))
        return request.make_response(body=body)

    # -- running info ---------------------------------------------------------------

    async def running_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        forward = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, dict(request.ext_fields or {})
        )
        return await self._call_consumer(request, forward, h.consumer_group, h.client_id)

    # -- consume directly ------------------------------------------------------------

    async def consume_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext(request.ext_fields)
        ext = dict(request.ext_fields or {})
        ext["brokerName"] = self._broker_name
        if h.topic and (topic_config := self._topics.select(h.topic)) is not None:
            ext["topicSysFlag"] = str(topic_config.topic_sys_flag)
        if (group_config := self._groups.get(h.consumer_group)) is not None:
            ext["groupSysFlag"] = str(group_config.group_sys_flag)
        try:
            where = classify_msg_id(h.msg_id or "")
        except ValueError as exc:
            remark = f"msgId {h.msg_id!r} is not a message id: {exc}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        if not isinstance(where, OffsetMsgId):
            remark = f"msgId {h.msg_id} is a unique key; this request needs the offset msgId"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        record = self._store.read_message(where.offset)
        if record is None:
            remark = f"can not find message by the offset, {where.offset}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        forward = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, bytes(record))
        return await self._call_consumer(request, forward, h.consumer_group, h.client_id or "")

    async def _call_consumer(
        self, request: RemotingCommand, forward: RemotingCommand, group: str, client_id: str
    ) -> RemotingCommand:
        """Send ``forward`` to the consumer's own connection; its answer, as it is."""
        info = self._clients.consumer_group(group)
        channel = None
        if info is not None:
            channel = next(
                (c.channel for c in info.channels.values() if c.client_id == client_id), None
            )
        if not isinstance(channel, Connection) or channel.closed:
            remark = f"The Consumer <{group}> <{client_id}> not online"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        try:
            answer = await channel.invoke(forward, CALL_CONSUMER_TIMEOUT_S)
        except ApogeeError as exc:
            remark = f"consumer {client_id} at {channel.peer} did not answer: {exc}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        return request.make_response(answer.code, answer.remark, body=answer.body_bytes())

    # -- who consumes ---------------------------------------------------------------

    def consumed_by(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = QueryTopicConsumeByWhoRequestHeader.from_ext(request.ext_fields).topic
        groups = {g for g, t in self._offsets.groups_and_topics() if t == topic}
        for group, info in self._clients.consumers.items():
            if topic in info.subscriptions:
                groups.add(group)
        return request.make_response(body=encode_group_list(groups))

    # -- traffic ----------------------------------------------------------------------

    def stats_data(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
        if h.stats_name not in STATS_NAMES or not self._history.knows(h.stats_name, h.stats_key):
            remark = f"The stats <{h.stats_name}> <{h.stats_key}> not exist"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        now = time.monotonic()
        items = [
            StatsItem(*self._history.window(h.stats_name, h.stats_key, ring, now))
            for ring in ("minute", "hour", "day")
        ]
        data = BrokerStatsData(items[0], items[1], items[2])
        return request.make_response(body=encode_broker_stats_data(data))

    # -- producers ----------------------------------------------------------------------

    def all_producers(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        table = {
            group: [
                ProducerInfo(
                    c.client_id,
                    _peer(c.channel),
                    (LanguageCode.__members__.get(c.language) or LanguageCode.OTHER).name,
                    c.version,
                    c.last_update_ms,
                )
                for c in channels.values()
            ]
            for group, channels in self._clients.producers.items()
            if channels
        }
        return request.make_response(body=encode_producer_table(table))
