"""The transactional producer: a message becomes visible only if the local transaction commits.

Owns: TransactionProducer and TransactionSendResult.

``send_batch_in_transaction(messages, local_tx, arg)`` does the same for a
batch of one topic, as one transaction (an Apogee broker's extension: see
``apogee.client.transaction.send_half_batch``).

``send_in_transaction(msg, local_tx, arg)`` (Java TransactionMQProducer):
1. sends ``msg`` as a half message (TRAN_MSG, PGROUP, PREPARED sysFlag, no
   delay), with the producer's retries; the broker stores it out of sight;
2. if the half was stored (SEND_OK), runs ``local_tx(msg, arg)`` (a function
   or a coroutine function) for a LocalTransactionState; a stored-but-not-
   flushed half is rolled back without running it;
3. ends the transaction with END_TRANSACTION (oneway): COMMIT makes the
   message visible, ROLLBACK drops it, UNKNOW leaves it open.

When ``local_tx`` raises, the transaction is left UNKNOW (the exception text
goes to the broker as the remark) and the exception propagates. An open
transaction, or one whose producer died before ending it, is resolved by the
broker's check-back: it asks a live producer of the same group
(CHECK_TRANSACTION_STATE) and ``checker(half_message)`` answers, so every
process of a group must be started with a checker that can decide from the
message alone (its keys, its properties, the transaction id).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from apogee.client.outgoing import check_batch
from apogee.client.producer import Producer
from apogee.client.transaction import (
    CheckListener,
    LocalTransactionState,
    end_transaction,
    send_half_batch,
)
from apogee.errors import ClientError
from apogee.model.client import MessageQueue
from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    Message,
)
from apogee.model.results import SendResult, SendStatus

log = logging.getLogger(__name__)

#: ``local_tx(msg, arg)``: runs the local transaction, says how it ended.
LocalTransaction = Callable[
    [Message, Any], LocalTransactionState | Awaitable[LocalTransactionState]
]
#: ``local_tx(messages, arg)`` of a batch sent in one transaction.
BatchTransaction = Callable[
    [Sequence[Message], Any], LocalTransactionState | Awaitable[LocalTransactionState]
]


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """The half message's SendResult and what the local transaction decided."""

    local_state: LocalTransactionState = LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    """A Producer whose ``send_in_transaction`` ties a message to a local transaction.

    ::

        async def checker(half: MessageExt) -> LocalTransactionState:
            return COMMIT_MESSAGE if order_saved(half.keys) else ROLLBACK_MESSAGE

        async with TransactionProducer("orders-tx", namesrv=..., checker=checker) as p:
            await p.send_in_transaction(Message("orders", b"..."), save_order)
    """

    def __init__(self, group: str, *, checker: CheckListener, **options: Any) -> None:
        super().__init__(group, **options)
        if not callable(checker):
            raise ClientError(f"checker: {checker!r} is not callable")
        self._checker = checker

    async def send_in_transaction(
        self,
        msg: Message,
        local_tx: LocalTransaction,
        arg: Any = None,
        *,
        timeout: float | None = None,
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``local_tx(msg, arg)``, end the transaction."""
        half = await self.send_half(msg, timeout=timeout)
        return await self.settle(half, lambda: local_tx(msg, arg))

    async def send_batch_in_transaction(
        self,
        messages: Sequence[Message],
        local_tx: BatchTransaction,
        arg: Any = None,
        *,
        properties: Mapping[str, str] | None = None,
        queue: MessageQueue | None = None,
        timeout: float | None = None,
    ) -> TransactionSendResult:
        """``send_in_transaction`` for a batch of one topic: all its messages or none.

        An Apogee extension (see ``send_half_batch``): the batch is one half
        message on the broker, so the commit makes every message visible at
        once, at consecutive offsets of one queue (``queue``, else the next in
        turn), and a rollback drops them all. ``properties`` belong to the
        transaction: the checker sees them on the half message it is asked
        about (its body is the batch), and the commit adds them to every
        message. ``local_tx(messages, arg)`` decides. One request, no retries;
        the batch must fit one message (``max_message_size``).

        Raises:
            BrokerResponseError: MESSAGE_ILLEGAL from a broker that does not take
                batches of half messages (RocketMQ's own); nothing was stored.
        """
        half = await self.send_batch_half(
            messages, properties=properties, queue=queue, timeout=timeout
        )
        return await self.settle(half, lambda: local_tx(messages, arg))

    async def send_batch_half(
        self,
        messages: Sequence[Message],
        *,
        properties: Mapping[str, str] | None = None,
        queue: MessageQueue | None = None,
        timeout: float | None = None,
    ) -> SendResult:
        """The first step alone of ``send_batch_in_transaction``: the batch's half message."""
        check_batch(messages, self.config.max_message_size)
        routes = self._started_routes()
        queue = await self._target(routes, messages[0], queue, None, None)
        addr = await self._master(routes, queue)
        return await send_half_batch(
            self.instance.broker_api, addr, queue.broker_name, messages,
            queue_id=queue.queue_id, producer_group=self.group, properties=properties,
            timeout_s=timeout or self.config.send_timeout_s,
        )  # fmt: skip

    async def settle(
        self, half: SendResult, run_local: Callable[[], object]
    ) -> TransactionSendResult:
        """Run the local transaction (``run_local()``, awaited if it returns an awaitable)
        for a stored ``half`` and end the transaction as it decides; roll back a half
        that was not stored safely. A local transaction that raises leaves it UNKNOW."""
        if half.status is not SendStatus.SEND_OK:
            return await self.end_unstored(half)
        try:
            outcome = run_local()
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except Exception as exc:
            await self.end_transaction(half, LocalTransactionState.UNKNOW, remark=failed(exc))
            raise
        return await self.end_with(half, outcome)

    async def send_half(self, msg: Message, *, timeout: float | None = None) -> SendResult:
        """The first step alone: store ``msg`` as a half message (invisible until committed)."""
        msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = self.group
        return await self.send(msg, timeout=timeout)

    async def end_transaction(
        self, half: SendResult, state: LocalTransactionState, *, remark: str | None = None
    ) -> None:
        """The last step alone: commit, roll back or leave open the half message ``half``."""
        routes = self._started_routes()
        addr = await self._master(routes, half.message_queue)
        await end_transaction(
            self.instance.broker_api, addr, half, self.group, state, remark=remark
        )

    async def end_unstored(self, half: SendResult) -> TransactionSendResult:
        """Roll back a half that was not stored safely (its status is not SEND_OK)."""
        state = LocalTransactionState.ROLLBACK_MESSAGE
        await self.end_transaction(half, state, remark=f"half message {half.status.value}")
        return _with_state(half, state)

    async def end_with(self, half: SendResult, outcome: object) -> TransactionSendResult:
        """End ``half`` as the local transaction's ``outcome`` says (UNKNOW if it is no state)."""
        if isinstance(outcome, LocalTransactionState):
            state, remark = outcome, None
        else:
            state, remark = LocalTransactionState.UNKNOW, f"local transaction returned {outcome!r}"
            log.warning("%s for %s; leaving the transaction open", remark, half.msg_id)
        await self.end_transaction(half, state, remark=remark)
        return _with_state(half, state)


def failed(exc: BaseException) -> str:
    """The remark END_TRANSACTION carries for a local transaction that raised ``exc``."""
    return f"local transaction failed: {exc!r}"


def _with_state(result: SendResult, state: LocalTransactionState) -> TransactionSendResult:
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return TransactionSendResult(**fields, local_state=state)
