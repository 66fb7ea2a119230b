"""Consumer-group administration and client views: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG, DELETE_SUBSCRIPTIONGROUP, GET_CONSUME_STATS,
GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST.

Owns: RocketMQ AdminBrokerProcessor's rules for these.

* Group changes are refused on a slave (SYSTEM_ERROR); an update whose body
  is not a SubscriptionGroupConfig, or names an illegal group, is refused
  with the reason. Deleting removes the group's offsets too when the request
  says removeOffset (4.x) or cleanOffset (5.x); an unknown group succeeds.
* Consume stats cover the header's topic, or every topic the group has
  offsets for; a topic the broker does not have, or that the group's online
  consumers do not subscribe to, is left out. Per read queue: the queue's
  max offset, the group's offset (0 when none) and the store time of the
  last consumed message; consumeTps is what the group pulled per second
  over the last minute.
* Connection lists: CONSUMER_NOT_ONLINE (206) for a group without live
  consumers; SYSTEM_ERROR for a producer group without live producers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from apogee.broker.clients import ClientChannel, ClientRegistry
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.handlers.admin_topic import SLAVE_REMARK
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.topics import TopicConfigManager
from apogee.codes import LanguageCode, ResponseCode
from apogee.model.client import MessageQueue
from apogee.model.stats import Connection, ConsumerConnection, ConsumeStats, OffsetWrapper
from apogee.model.topic import validate_group
from apogee.protocol.admin_bodies import (
    decode_subscription_group,
    encode_consume_stats,
    encode_consumer_connection,
    encode_producer_connection,
)
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from apogee.remoting.connection import Connection as Channel
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore

GroupTps = Callable[[str, str], float]


@dataclass(frozen=True, slots=True)
class GroupAdminSettings:
    broker_name: str
    is_slave: bool = False


def _connection(client: ClientChannel) -> Connection:
    channel: Hashable = client.channel
    addr = channel.peer if isinstance(channel, Channel) else str(channel)
    language = LanguageCode.__members__.get(client.language, LanguageCode.OTHER)
    return Connection(client.client_id, addr, language, client.version)


class GroupAdminHandlers:
    def __init__(
        self,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        settings: GroupAdminSettings,
    ) -> None:
        self._groups = groups
        self._offsets = offsets
        self._settings = settings

    def update(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if self._settings.is_slave:
            return request.make_response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        config = decode_subscription_group(request.body_bytes())
        problem = validate_group(config.group_name)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        self._groups.update(config)
        return request.make_response()

    def all_configs(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=self._groups.encode())

    def delete(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if self._settings.is_slave:
            return request.make_response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        h = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext_fields)
        self._groups.delete(h.group_name)
        if h.remove_offset or h.clean_offset:
            self._offsets.remove_group(h.group_name)
        return request.make_response()


class ClientViewHandlers:
    """Consume stats and the live connections of a group."""

    def __init__(
        self,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        clients: ClientRegistry,
        store: MessageStore,
        settings: GroupAdminSettings,
        *,
        group_tps: GroupTps,
    ) -> None:
        self._topics = topics
        self._offsets = offsets
        self._clients = clients
        self._store = store
        self._settings = settings
        self._group_tps = group_tps

    def consume_stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext(request.ext_fields)
        group = h.consumer_group
        topics = [h.topic] if h.topic else self._offsets.topics_of(group)
        info = self._clients.consumer_group(group)
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for topic in topics:
            config = self._topics.select(topic)
            if config is None:
                continue
            if info is not None and info.subscriptions and topic not in info.subscriptions:
                continue
            for queue_id in range(config.read_queue_nums):
                mq = MessageQueue(topic, self._settings.broker_name, queue_id)
                table[mq] = self._queue(group, topic, queue_id)
            tps += self._group_tps(group, topic)
        return request.make_response(body=encode_consume_stats(ConsumeStats(table, tps)))

    def _queue(self, group: str, topic: str, queue_id: int) -> OffsetWrapper:
        store = self._store
        broker_offset = max(store.max_offset_in_queue(topic, queue_id), 0)
        consumer_offset = max(self._offsets.query(group, topic, queue_id), 0)
        last = 0
        if consumer_offset > 0:
            last = max(store.message_store_time(topic, queue_id, consumer_offset - 1), 0)
        return OffsetWrapper(broker_offset, consumer_offset, last)

    def consumers(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = GetConsumerConnectionListRequestHeader.from_ext(request.ext_fields).consumer_group
        info = self._clients.consumer_group(group)
        if info is None:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        body = ConsumerConnection(
            connections=tuple(_connection(c) for c in info.channels.values()),
            subscription_table=dict(info.subscriptions),
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        )
        return request.make_response(body=encode_consumer_connection(body))

    def producers(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = GetProducerConnectionListRequestHeader.from_ext(request.ext_fields).producer_group
        channels = list(self._clients.producer_channels(group))
        if not channels:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist"
            )
        body = encode_producer_connection(_connection(c) for c in channels)
        return request.make_response(body=body)
