"""Request handlers of the broker, one module per request family.

Each handler is an object built with only the collaborators it uses,
answering through its ``handle`` method or, for handler objects serving a
family of codes, one method per code; ``register`` puts them into a
HandlerTable. Most are synchronous (they
answer inline, or later through ``RequestContext.respond``); topic creation
and deletion are coroutines, since they answer after the broker registered
with the name servers. Request codes without a handler here get
REQUEST_CODE_NOT_SUPPORTED from the remoting layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.broker.handlers.acl import AclAdminHandlers
from apogee.broker.handlers.admin_consumer import ConsumerAdminHandlers
from apogee.broker.handlers.admin_group import ClientViewHandlers, GroupAdminHandlers
from apogee.broker.handlers.admin_runtime import RuntimeHandlers
from apogee.broker.handlers.admin_topic import TopicAdminHandlers
from apogee.broker.handlers.consumer import (
    CheckClientConfigHandler,
    ConsumerListHandler,
    HeartbeatHandler,
    QueryConsumerOffsetHandler,
    UnregisterClientHandler,
    UpdateConsumerOffsetHandler,
)
from apogee.broker.handlers.end_transaction import EndTransactionHandler
from apogee.broker.handlers.locks import LockHandlers
from apogee.broker.handlers.pull import PullHandler
from apogee.broker.handlers.query import MessageLookupHandlers, QueueOffsetHandlers
from apogee.broker.handlers.send import SendHandler
from apogee.broker.handlers.send_back import SendBackHandler
from apogee.codes import RequestCode
from apogee.remoting.dispatch import HandlerTable

ADMIN_GROUP = "admin"


@dataclass(frozen=True, slots=True)
class BrokerHandlers:
    send: SendHandler
    send_back: SendBackHandler
    end_transaction: EndTransactionHandler
    pull: PullHandler
    heartbeat: HeartbeatHandler
    unregister_client: UnregisterClientHandler
    check_client: CheckClientConfigHandler
    consumer_list: ConsumerListHandler
    query_consumer_offset: QueryConsumerOffsetHandler
    update_consumer_offset: UpdateConsumerOffsetHandler
    queue_offsets: QueueOffsetHandlers
    lookups: MessageLookupHandlers
    locks: LockHandlers
    topic_admin: TopicAdminHandlers
    group_admin: GroupAdminHandlers
    client_views: ClientViewHandlers
    runtime: RuntimeHandlers
    acl: AclAdminHandlers
    consumer_admin: ConsumerAdminHandlers

    def register(self, table: HandlerTable) -> None:
        code = RequestCode
        # Bound methods: calling one is cheaper than calling an object's __call__.
        sends = (code.SEND_MESSAGE, code.SEND_MESSAGE_V2, code.SEND_BATCH_MESSAGE)
        table.register(sends, self.send.handle)
        table.register(code.CONSUMER_SEND_MSG_BACK, self.send_back.handle)
        table.register(code.END_TRANSACTION, self.end_transaction.handle)
        table.register(code.PULL_MESSAGE, self.pull.handle)
        table.register(code.HEART_BEAT, self.heartbeat.handle)
        table.register(code.UNREGISTER_CLIENT, self.unregister_client.handle)
        table.register(code.CHECK_CLIENT_CONFIG, self.check_client.handle)
        table.register(code.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list.handle)
        table.register(code.QUERY_CONSUMER_OFFSET, self.query_consumer_offset.handle)
        table.register(code.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset.handle)
        table.register(code.GET_MAX_OFFSET, self.queue_offsets.max_offset)
        table.register(code.GET_MIN_OFFSET, self.queue_offsets.min_offset)
        table.register(code.SEARCH_OFFSET_BY_TIMESTAMP, self.queue_offsets.offset_by_time)
        table.register(code.GET_EARLIEST_MSG_STORETIME, self.queue_offsets.earliest_time)
        table.register(code.VIEW_MESSAGE_BY_ID, self.lookups.view_by_id)
        table.register(code.QUERY_MESSAGE, self.lookups.query)
        table.register(code.LOCK_BATCH_MQ, self.locks.lock)
        table.register(code.UNLOCK_BATCH_MQ, self.locks.unlock)
        self._register_admin(table)

    def _register_admin(self, table: HandlerTable) -> None:
        code = RequestCode
        # Admin changes wait for the name servers; one at a time, as RocketMQ
        # serialises them, so registrations go out in the order of the changes.
        table.add_group(ADMIN_GROUP, concurrency=1, queue_capacity=1000)
        topic, group, views, runtime = (
            self.topic_admin, self.group_admin, self.client_views, self.runtime
        )  # fmt: skip
        table.register(code.UPDATE_AND_CREATE_TOPIC, topic.create, group=ADMIN_GROUP)
        table.register(code.DELETE_TOPIC_IN_BROKER, topic.delete, group=ADMIN_GROUP)
        table.register(code.GET_ALL_TOPIC_CONFIG, topic.all_config)
        table.register(code.GET_TOPIC_STATS_INFO, topic.stats)
        table.register(code.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, group.update)
        table.register(code.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, group.all_configs)
        table.register(code.DELETE_SUBSCRIPTIONGROUP, group.delete)
        table.register(code.GET_CONSUME_STATS, views.consume_stats)
        table.register(code.GET_CONSUMER_CONNECTION_LIST, views.consumers)
        table.register(code.GET_PRODUCER_CONNECTION_LIST, views.producers)
        table.register(code.GET_BROKER_RUNTIME_INFO, runtime.runtime_info)
        table.register(code.GET_BROKER_CONFIG, runtime.broker_config)
        table.register(code.UPDATE_BROKER_CONFIG, runtime.update_broker_config, group=ADMIN_GROUP)
        table.register(code.GET_ALL_CONSUMER_OFFSET, runtime.all_consumer_offsets)
        table.register(code.GET_ALL_DELAY_OFFSET, runtime.all_delay_offsets)
        acl = self.acl
        table.register(code.UPDATE_AND_CREATE_ACL_CONFIG, acl.update, group=ADMIN_GROUP)
        table.register(code.DELETE_ACL_CONFIG, acl.delete, group=ADMIN_GROUP)
        table.register(code.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, acl.update_global_white,
                       group=ADMIN_GROUP)  # fmt: skip
        table.register(code.GET_BROKER_CLUSTER_ACL_INFO, acl.versions)
        ops = self.consumer_admin
        table.register(code.INVOKE_BROKER_TO_RESET_OFFSET, ops.reset_offset, group=ADMIN_GROUP)
        table.register(code.GET_CONSUMER_RUNNING_INFO, ops.running_info)
        table.register(code.CONSUME_MESSAGE_DIRECTLY, ops.consume_directly)
        table.register(code.QUERY_TOPIC_CONSUME_BY_WHO, ops.consumed_by)
        table.register(code.VIEW_BROKER_STATS_DATA, ops.stats_data)
        table.register(code.GET_ALL_PRODUCER_INFO, ops.all_producers)
