"""Requests brokers send to a client, routed to the producer or consumer they concern.

Owns: BrokerRequests, the handlers a ClientInstance registers in its
HandlerTable.

* CHECK_TRANSACTION_STATE (39, oneway): a half message is still open ->
  TransactionCheckHandler, which picks the producer group by PGROUP;
* NOTIFY_CONSUMER_IDS_CHANGED (40, oneway): the group's members changed ->
  ``member.on_consumer_ids_changed()``;
* RESET_CONSUMER_CLIENT_OFFSET (220, oneway): an operator reset offsets ->
  ``await member.reset_offsets(topic, table)``;
* GET_CONSUMER_RUNNING_INFO (307): an admin asks for the consumer's state ->
  ``member.running_info()``, the answer's JSON body;
* CONSUME_MESSAGE_DIRECTLY (309): an admin hands one stored message to this
  consumer -> ``await member.consume_directly(msg)``, the answer's JSON body
  (a consumer that cannot, or a body that is not one record: SYSTEM_ERROR
  saying why).

A request for a group this instance does not serve is logged and dropped
(oneway) or answered SYSTEM_ERROR, as the Java client does.
"""

from __future__ import annotations

import logging

import orjson

from apogee.client.members import Members
from apogee.client.transaction import TransactionCheckHandler
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ClientError, ProtocolError
from apogee.model.received import decode_received
from apogee.protocol import bodies
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import HandlerTable, RequestContext

log = logging.getLogger(__name__)


class BrokerRequests:
    def __init__(self, members: Members, checks: TransactionCheckHandler) -> None:
        self._members = members
        self._checks = checks

    def register(self, table: HandlerTable) -> None:
        self._checks.register(table)
        table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self.notify_ids_changed)
        table.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.reset_offsets)
        table.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.running_info)
        table.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_directly)

    def notify_ids_changed(self, ctx: RequestContext, request: RemotingCommand) -> None:
        group = h.NotifyConsumerIdsChangedRequestHeader.from_ext(request.ext_fields).consumer_group
        member = self._members.consumers.get(group)
        if member is None:
            log.info("%s says consumers of %s changed; no such consumer here", ctx.peer, group)
            return
        member.on_consumer_ids_changed()

    async def reset_offsets(self, ctx: RequestContext, request: RemotingCommand) -> None:
        header = h.ResetOffsetRequestHeader.from_ext(request.ext_fields)
        member = self._members.consumers.get(header.group)
        if member is None:
            log.info("%s resets offsets of %s; no such consumer here", ctx.peer, header.group)
            return
        try:
            table = bodies.decode_mq_offset_table(request.body_bytes())
        except ProtocolError as exc:
            log.warning("offset reset from %s has no readable table: %s", ctx.peer, exc)
            return
        await member.reset_offsets(header.topic, table)

    def running_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = h.GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        member = self._members.consumers.get(header.consumer_group)
        if member is None:
            remark = f"The Consumer Group <{header.consumer_group}> not exist in this consumer"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        body = orjson.dumps(dict(member.running_info()), default=str)
        return request.make_response(body=body)

    async def consume_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = h.ConsumeMessageDirectlyResultRequestHeader.from_ext(request.ext_fields)
        member = self._members.consumers.get(header.consumer_group)
        if member is None:
            remark = f"The Consumer Group <{header.consumer_group}> not exist in this consumer"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        try:
            found = decode_received(request.body_bytes())
        except ProtocolError as exc:
            remark = f"the message to consume directly does not decode: {exc}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        if len(found) != 1:
            remark = f"consume directly wants one message, the body holds {len(found)}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        try:
            result = await member.consume_directly(found[0])
        except ClientError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        return request.make_response(body=orjson.dumps(dict(result)))
