"""Client management and consumer offsets: HEART_BEAT, UNREGISTER_CLIENT,
CHECK_CLIENT_CONFIG, GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET,
UPDATE_CONSUMER_OFFSET.

Owns: RocketMQ ClientManageProcessor's and ConsumerManageProcessor's rules.

* HEART_BEAT registers producers and consumers of the sending connection
  before it answers (the C++ client asks for the consumer list right after,
  on the same connection), creates each consumer group's config if allowed
  and its ``%RETRY%<group>`` topic (retryQueueNums queues, RW); creating a
  topic registers the broker with the name servers at once.
* CHECK_CLIENT_CONFIG (a Java push consumer asks before it starts, for each
  subscription that is not TAG): SUCCESS when the broker can filter by it,
  else SYSTEM_ERROR (property filters off) or SUBSCRIPTION_PARSE_FAILED
  naming the problem.
* QUERY_CONSUMER_OFFSET without a committed offset answers 0 when the queue
  still starts at 0 and its first message is in memory (so a new group
  reads a young queue from the start), else QUERY_NOT_FOUND.
"""

from __future__ import annotations

from apogee.broker.clients import ClientRegistry
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.property_filter import FilterRefusedError, compile_subscription
from apogee.broker.topics import TopicConfigManager
from apogee.codes import ResponseCode
from apogee.model.route import PERM_RW
from apogee.model.subscription import is_tag_type
from apogee.model.topic import retry_topic
from apogee.protocol.bodies import (
    decode_check_client_body,
    decode_heartbeat,
    encode_consumer_id_list,
)
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from apogee.remoting.dispatch import RequestContext
from apogee.store.interface import MessageStore
from apogee.store.results import GetStatus

_UNIT_SUB_TOPIC_FLAG = 0x2


class HeartbeatHandler:
    def __init__(
        self,
        clients: ClientRegistry,
        groups: SubscriptionGroupManager,
        topics: TopicConfigManager,
    ) -> None:
        self._clients = clients
        self._groups = groups
        self._topics = topics

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        heartbeat = decode_heartbeat(request.body_bytes())
        channel = ctx.require_channel()
        language, version = request.language.name, request.version
        for consumer in heartbeat.consumers:
            config = self._groups.find_or_create(consumer.group_name)
            if config is not None:
                flag = _UNIT_SUB_TOPIC_FLAG if consumer.unit_mode else 0
                self._topics.create_in_send_back(
                    retry_topic(consumer.group_name), config.retry_queue_nums, PERM_RW, flag
                )
            self._clients.register_consumer(
                channel, heartbeat.client_id, consumer, language=language, version=version
            )
        for producer in heartbeat.producers:
            self._clients.register_producer(
                channel,
                heartbeat.client_id,
                producer.group_name,
                language=language,
                version=version,
            )
        return request.make_response()


class UnregisterClientHandler:
    def __init__(self, clients: ClientRegistry) -> None:
        self._clients = clients

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext(request.ext_fields)
        channel = ctx.require_channel()
        if header.producer_group:
            self._clients.unregister_producer(header.producer_group, channel)
        if header.consumer_group:
            self._clients.unregister_consumer(header.consumer_group, channel)
        return request.make_response()


class CheckClientConfigHandler:
    def __init__(self, *, property_filter: bool) -> None:
        self._property_filter = property_filter

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        sub = decode_check_client_body(request.body_bytes()).subscription
        if sub is None or is_tag_type(sub.expression_type):
            return request.make_response()
        try:
            compile_subscription(sub.expression_type, sub.sub_string, enabled=self._property_filter)
        except FilterRefusedError as refused:
            return request.make_response(refused.code, refused.remark)
        return request.make_response()


class ConsumerListHandler:
    def __init__(self, clients: ClientRegistry) -> None:
        self._clients = clients

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.from_ext(request.ext_fields)
        ids = self._clients.consumer_ids(header.consumer_group)
        if not ids:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
            )
        return request.make_response(body=encode_consumer_id_list(ids))


class QueryConsumerOffsetHandler:
    def __init__(self, offsets: ConsumerOffsetManager, store: MessageStore) -> None:
        self._offsets = offsets
        self._store = store

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self._offsets.query(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            return request.make_response(ext_fields={"offset": str(offset)})
        zero_allowed = header.set_zero_if_not_found is not False
        if zero_allowed and self._starts_in_memory(header.topic, header.queue_id):
            return request.make_response(ext_fields={"offset": "0"})
        return request.make_response(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def _starts_in_memory(self, topic: str, queue_id: int) -> bool:
        if self._store.min_offset_in_queue(topic, queue_id) > 0:
            return False
        # The store flags a read whose data lies beyond the in-memory window
        # (it would suggest a slave); that is RocketMQ's "on disk" test.
        first = self._store.get(topic, queue_id, 0, 1)
        return first.status is not GetStatus.FOUND or not first.suggest_pulling_from_slave


class UpdateConsumerOffsetHandler:
    def __init__(self, offsets: ConsumerOffsetManager) -> None:
        self._offsets = offsets

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        self._offsets.commit(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return request.make_response()
