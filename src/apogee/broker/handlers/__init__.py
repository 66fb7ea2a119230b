"""Request handlers of the broker, one module per request family.

Imports: the handler modules. Each handler is an object built with only the
collaborators it uses, answering through its ``handle`` method(s);
``register`` puts them into a HandlerTable. All of them are synchronous
(they answer inline, or later through ``RequestContext.respond``). Request
codes without a handler here get REQUEST_CODE_NOT_SUPPORTED from the
remoting layer; the next handlers to join are CONSUMER_SEND_MSG_BACK (send
family), LOCK/UNLOCK_BATCH_MQ and the admin requests (their own modules).
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.broker.handlers.consumer import (
    ConsumerListHandler,
    HeartbeatHandler,
    QueryConsumerOffsetHandler,
    UnregisterClientHandler,
    UpdateConsumerOffsetHandler,
)
from apogee.broker.handlers.pull import PullHandler
from apogee.broker.handlers.query import MessageLookupHandlers, QueueOffsetHandlers
from apogee.broker.handlers.send import SendHandler
from apogee.codes import RequestCode
from apogee.remoting.dispatch import HandlerTable


@dataclass(frozen=True, slots=True)
class BrokerHandlers:
    send: SendHandler
    pull: PullHandler
    heartbeat: HeartbeatHandler
    unregister_client: UnregisterClientHandler
    consumer_list: ConsumerListHandler
    query_consumer_offset: QueryConsumerOffsetHandler
    update_consumer_offset: UpdateConsumerOffsetHandler
    queue_offsets: QueueOffsetHandlers
    lookups: MessageLookupHandlers

    def register(self, table: HandlerTable) -> None:
        code = RequestCode
        # Bound methods: calling one is cheaper than calling an object's __call__.
        sends = (code.SEND_MESSAGE, code.SEND_MESSAGE_V2, code.SEND_BATCH_MESSAGE)
        table.register(sends, self.send.handle)
        table.register(code.PULL_MESSAGE, self.pull.handle)
        table.register(code.HEART_BEAT, self.heartbeat.handle)
        table.register(code.UNREGISTER_CLIENT, self.unregister_client.handle)
        table.register(code.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list.handle)
        table.register(code.QUERY_CONSUMER_OFFSET, self.query_consumer_offset.handle)
        table.register(code.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset.handle)
        table.register(code.GET_MAX_OFFSET, self.queue_offsets.max_offset)
        table.register(code.GET_MIN_OFFSET, self.queue_offsets.min_offset)
        table.register(code.SEARCH_OFFSET_BY_TIMESTAMP, self.queue_offsets.offset_by_time)
        table.register(code.GET_EARLIEST_MSG_STORETIME, self.queue_offsets.earliest_time)
        table.register(code.VIEW_MESSAGE_BY_ID, self.lookups.view_by_id)
        table.register(code.QUERY_MESSAGE, self.lookups.query)
