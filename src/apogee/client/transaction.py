"""Transactional producing, the building blocks: half sends, ending, answering checks.

Owns: LocalTransactionState, ``send_half`` (a message marked as RocketMQ's
TransactionMQProducer marks it), ``send_half_batch`` (many messages in one
request and one transaction: an Apogee broker's extension) and
``send_half_batch_body`` (the same, its body already encoded),
``end_transaction`` (END_TRANSACTION built from the half's SendResult) and
TransactionCheckHandler, which answers the broker's CHECK_TRANSACTION_STATE
with the state a producer group's callback returns.

Rules (Java DefaultMQProducerImpl and ClientRemotingProcessor):
* a half message has TRAN_MSG=true, PGROUP=<producer group>, no DELAY, and
  sysFlag PREPARED; it is sent synchronously;
* END_TRANSACTION names the half by the SendResult's queue offset
  (tranStateTableOffset) and the commit-log offset inside its offset message
  id; msgId is the UNIQ_KEY; it goes oneway unless an answer is asked for;
* a check is routed by the PGROUP of the message it carries; the answer goes
  oneway on the connection the check came in on, with
  fromTransactionCheck=true. A callback that raises answers UNKNOW (the
  broker asks again later), with the error text as the remark.

The connection must belong to a RemotingClient built with a HandlerTable the
handler is registered in, and the producer group must be announced by
heartbeat on it, or the broker has nowhere to send its checks.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from enum import Enum

from apogee.client.broker_api import BrokerApi, inflate
from apogee.client.uniq_key import new_uniq_key
from apogee.codes import RequestCode
from apogee.errors import ProtocolError
from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    MessageExt,
    properties_to_string,
)
from apogee.model.message_codec import decode_record
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.results import SendResult
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from apogee.remoting.dispatch import HandlerTable, RequestContext

log = logging.getLogger(__name__)


class LocalTransactionState(Enum):
    """What the producer's local transaction decided (Java LocalTransactionState)."""

    COMMIT_MESSAGE = TRANSACTION_COMMIT_TYPE
    ROLLBACK_MESSAGE = TRANSACTION_ROLLBACK_TYPE
    UNKNOW = TRANSACTION_NOT_TYPE  # sic: RocketMQ's spelling


#: Called with the half message a check is about (topic and queue are the real ones).
CheckListener = Callable[[MessageExt], LocalTransactionState | Awaitable[LocalTransactionState]]


async def send_half(
    api: BrokerApi,
    addr: str,
    broker_name: str,
    msg: Message,
    *,
    queue_id: int,
    producer_group: str,
    timeout_s: float | None = None,
) -> SendResult:
    """Send ``msg`` as a half message: stored, but invisible until committed.

    ``msg`` gets TRAN_MSG, PGROUP and a UNIQ_KEY, and loses DELAY, as in Java.
    """
    msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
    msg.properties[PROPERTY_PRODUCER_GROUP] = producer_group
    return await api.send(
        addr,
        broker_name,
        msg,
        queue_id=queue_id,
        producer_group=producer_group,
        sys_flag=TRANSACTION_PREPARED_TYPE,
        timeout_s=timeout_s,
    )


async def send_half_batch(
    api: BrokerApi,
    addr: str,
    broker_name: str,
    messages: Sequence[Message],
    *,
    queue_id: int,
    producer_group: str,
    properties: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> SendResult:
    """Send ``messages`` (one topic) in one request as one transaction: one result.

    An Apogee broker stores them as one half message holding the whole batch:
    ending it commits every message at once (consecutive offsets of the
    queue) or rolls every one back, and a check asks about them once.
    ``properties`` belong to the transaction: a check's message carries them
    and the commit adds them to every message. The result's ``msg_id`` and
    ``transaction_id`` are the transaction's own id.

    RocketMQ's brokers refuse a batch with the PREPARED flag: MESSAGE_ILLEGAL
    (a BrokerResponseError), and nothing is stored; send the messages one by
    one with ``send_half`` then.

    Raises:
        ProtocolError: the broker answered with one id per message (it stored
            each message as a half message of its own).
    """
    tx_id = new_uniq_key(api.clock.now_ms())
    for msg in messages:  # the broker writes these for the whole batch
        msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        msg.properties.pop(PROPERTY_TRANSACTION_PREPARED, None)
        msg.properties.pop(PROPERTY_PRODUCER_GROUP, None)
    result = await api.send_batch(
        addr,
        broker_name,
        messages,
        queue_id=queue_id,
        producer_group=producer_group,
        timeout_s=timeout_s,
        sys_flag=TRANSACTION_PREPARED_TYPE,
        properties=_half_batch_properties(properties, producer_group, tx_id),
    )
    return _transaction_result(result, len(messages), tx_id)


async def send_half_batch_body(  # noqa: PLR0917  # a batch send's pieces
    api: BrokerApi,
    addr: str,
    broker_name: str,
    topic: str,
    body: bytes | bytearray,
    count: int,
    *,
    queue_id: int,
    producer_group: str,
    properties: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> SendResult:
    """``send_half_batch`` for a batch body already encoded: ``count`` messages of
    ``topic``, each with its UNIQ_KEY and without TRAN_MSG, PGROUP or DELAY
    (``BrokerApi.send_batch_body``). The same answer and the same errors.
    """
    tx_id = new_uniq_key(api.clock.now_ms())
    result = await api.send_batch_body(
        addr,
        broker_name,
        topic,
        body,
        tx_id,
        queue_id=queue_id,
        producer_group=producer_group,
        timeout_s=timeout_s,
        sys_flag=TRANSACTION_PREPARED_TYPE,
        properties=_half_batch_properties(properties, producer_group, tx_id),
    )
    return _transaction_result(result, count, tx_id)


def _half_batch_properties(
    properties: Mapping[str, str] | None, producer_group: str, tx_id: str
) -> str:
    """The batch-level properties of a batch of half messages: one transaction's."""
    props = dict(properties or {})
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    props[PROPERTY_PRODUCER_GROUP] = producer_group
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = tx_id
    return properties_to_string(props)


def _transaction_result(result: SendResult, count: int, tx_id: str) -> SendResult:
    """A batch of half messages' answer as one transaction's, ``tx_id`` its id."""
    if "," in result.offset_msg_id:
        raise ProtocolError(
            f"a batch of {count} half messages was answered with one id per message"
        )
    return dataclasses.replace(result, msg_id=tx_id, transaction_id=tx_id)


def end_header(
    result: SendResult, producer_group: str, state: LocalTransactionState
) -> EndTransactionRequestHeader:
    """The END_TRANSACTION header for the half message ``result`` describes.

    Raises:
        ValueError: ``result.offset_msg_id`` is not an offset message id.
    """
    return EndTransactionRequestHeader(
        producer_group=producer_group,
        tran_state_table_offset=result.queue_offset,
        commit_log_offset=parse_offset_msg_id(result.offset_msg_id).offset,
        commit_or_rollback=state.value,
        msg_id=result.msg_id,
        topic=result.message_queue.topic,
        transaction_id=result.transaction_id or result.msg_id,
    )


async def end_transaction(
    api: BrokerApi,
    addr: str,
    result: SendResult,
    producer_group: str,
    state: LocalTransactionState,
    *,
    remark: str | None = None,
    oneway: bool = True,
) -> None:
    """Commit, roll back or leave open (UNKNOW) the half message sent as ``result``."""
    header = end_header(result, producer_group, state)
    await api.end_transaction(addr, header, remark=remark, oneway=oneway)


class TransactionCheckHandler:
    """Answers CHECK_TRANSACTION_STATE for the producer groups given listeners."""

    def __init__(self) -> None:
        self._listeners: dict[str, CheckListener] = {}
        self.answered = 0

    def add_listener(self, producer_group: str, listener: CheckListener) -> None:
        self._listeners[producer_group] = listener

    def remove_listener(self, producer_group: str) -> None:
        self._listeners.pop(producer_group, None)

    def register(self, table: HandlerTable) -> None:
        table.register(RequestCode.CHECK_TRANSACTION_STATE, self.handle)

    async def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        try:
            msg = inflate(decode_record(request.body_bytes()))
        except ProtocolError as exc:
            log.warning("check from %s carries no readable message: %s", ctx.peer, exc)
            return None
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP, "")
        listener = self._listeners.get(group)
        if listener is None:
            log.info("check from %s for producer group %r, which is not here", ctx.peer, group)
            return None
        state, remark = await _decide(listener, msg)
        answer = EndTransactionRequestHeader(
            producer_group=group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=msg.uniq_key or header.msg_id or msg.msg_id,
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        end = RemotingCommand.oneway(RequestCode.END_TRANSACTION, answer.to_ext())
        end.remark = remark
        await ctx.require_channel().invoke_oneway(end)
        self.answered += 1
        return None


async def _decide(
    listener: CheckListener, msg: MessageExt
) -> tuple[LocalTransactionState, str | None]:
    try:
        state: object = listener(msg)  # callers outside mypy may return anything
        if inspect.isawaitable(state):
            state = await state
    except Exception as exc:
        log.exception("transaction check listener failed on %s", msg.uniq_key)
        return LocalTransactionState.UNKNOW, f"check listener failed: {exc!r}"
    if not isinstance(state, LocalTransactionState):
        return LocalTransactionState.UNKNOW, f"check listener returned {state!r}"
    return state, None
