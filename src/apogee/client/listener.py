"""What a push consumer's application answers, and what happens to a message it failed on.

Owns: :class:`ConsumeStatus` (the listener's answer), the ``Listener`` type,
:func:`is_async_listener`, :func:`outcome` (an answer or an exception read
as success or failure) and :class:`Retrier`, which hands a failed message
back to the broker (CONSUMER_SEND_MSG_BACK).

A listener is a plain function or a coroutine function taking one
``ReceivedMessage``. Returning ``ConsumeStatus.RECONSUME_LATER`` or raising
means failed (an exception is logged with the message's id); anything else
(None, ``ConsumeStatus.SUCCESS``, whatever the function happens to return)
means done. What a failure leads to is the consume
service's: a retry through the broker (concurrent, CLUSTERING), a local
retry after a pause (orderly), nothing (BROADCASTING).

Send-back rules (RocketMQ ConsumeMessageConcurrentlyService.sendMessageBack,
SendMessageProcessor.asyncConsumerSendMsgBack): the request goes to the
master of the broker the message was pulled from, with the commit-log
offset of the stored record, the retry delay level (0: the broker picks
3 + reconsume times) and the group's maximum reconsume times; the broker
stores a copy in ``%RETRY%<group>`` (or, once the message was retried the
maximum number of times, or with delay level -1, in ``%DLQ%<group>``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from enum import Enum

from apogee.client.broker_api import BrokerApi
from apogee.client.route_cache import RouteCache
from apogee.errors import ApogeeError
from apogee.model.client import MessageQueue
from apogee.model.received import ReceivedMessage

log = logging.getLogger(__name__)


class ConsumeStatus(Enum):
    """A listener's answer (Java's ConsumeConcurrentlyStatus / ConsumeOrderlyStatus)."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


#: ``listener(message)``: a plain function or a coroutine function; only
#: RECONSUME_LATER (or an exception) is a failure
Listener = Callable[[ReceivedMessage], object]

_RECONSUME_LATER = ConsumeStatus.RECONSUME_LATER
#: send back straight to the dead-letter queue
DLQ_DELAY_LEVEL = -1


def is_async_listener(listener: object) -> bool:
    """Whether calling ``listener`` gives a coroutine (functions and callable objects)."""
    if inspect.iscoroutinefunction(listener):
        return True
    call = getattr(listener, "__call__", None)  # noqa: B004  # a callable object's method
    return inspect.iscoroutinefunction(call)


def outcome(answer: object) -> bool:
    """False for RECONSUME_LATER, True for anything else."""
    return answer is not ConsumeStatus.RECONSUME_LATER


def failed(exc: BaseException, msg: ReceivedMessage) -> bool:
    """Log a listener's exception; always False (failed)."""
    log.warning(
        "listener failed on message %s of %s (queue %d offset %d): %r",
        msg.client_msg_id,
        msg.topic,
        msg.queue_id,
        msg.queue_offset,
        exc,
        exc_info=exc,
    )
    return False


async def consume_one(listener: Listener, msg: ReceivedMessage) -> bool:
    """Call ``listener`` on ``msg`` (awaiting it if it gives an awaitable); success or not."""
    try:
        answer = listener(msg)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        return failed(exc, msg)
    return answer is not _RECONSUME_LATER


class Retrier:
    """Hands failed messages back to the broker (see the module docstring)."""

    def __init__(
        self,
        api: BrokerApi,
        routes: RouteCache,
        group: str,
        *,
        max_reconsume_times: int,
        delay_level: int = 0,
    ) -> None:
        self._api = api
        self._routes = routes
        self.group = group
        self.max_reconsume_times = max_reconsume_times
        self.delay_level = delay_level
        self.sent_back = 0
        self.dead = 0

    async def send_back(
        self, mq: MessageQueue, msg: ReceivedMessage, delay_level: int | None = None
    ) -> bool:
        """Hand ``msg`` back for a retry (or the DLQ); False when the broker did not take it."""
        level = self.delay_level if delay_level is None else delay_level
        addr = self._routes.master_addr(mq.broker_name)
        if addr is None:
            log.info("cannot send %s back: broker %s has no master", msg.msg_id, mq.broker_name)
            self._routes.request_refresh(mq.topic)
            return False
        try:
            await self._api.send_back(
                addr, msg, self.group, level, max_reconsume_times=self.max_reconsume_times
            )
        except ApogeeError as exc:
            log.info("sending %s back to %s failed: %s", msg.msg_id, addr, exc)
            return False
        if level < 0:
            self.dead += 1
        else:
            self.sent_back += 1
        return True
