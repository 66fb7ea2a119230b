"""Consuming one message an admin hands over (CONSUME_MESSAGE_DIRECTLY).

Owns: :func:`consume_directly`, what a push consumer does when the broker
forwards a message from mqadmin ``queryMsgById -g -d`` or the dashboard's
resend, and the answer's JSON (RocketMQ's ConsumeMessageDirectlyResult)::

    {"order": false, "autoCommit": true, "consumeResult": "CR_SUCCESS",
     "remark": null, "spentTimeMills": 3}

The listener is called once, outside the consumer's queues: no offset
moves, nothing is sent back on failure, and the consume counters stay as
they are (RocketMQ's consumeMessageDirectly does the same). The answer
says what the listener did: CR_SUCCESS, CR_LATER (RECONSUME_LATER) or
CR_THROW_EXCEPTION with the exception in ``remark``. A message of the
group's retry or dead-letter topic is shown to the listener under its
original topic (RETRY_TOPIC), as a redelivery would be.
"""

from __future__ import annotations

import inspect
import logging
import time

from apogee.client.listener import ConsumeStatus, Listener
from apogee.model.message import PROPERTY_RETRY_TOPIC
from apogee.model.received import ReceivedMessage
from apogee.model.topic import dlq_topic, retry_topic

log = logging.getLogger(__name__)


async def consume_directly(
    listener: Listener, msg: ReceivedMessage, group: str, *, orderly: bool
) -> dict[str, object]:
    """Call ``listener`` on ``msg`` once; the ConsumeMessageDirectlyResult fields."""
    original = msg.get_property(PROPERTY_RETRY_TOPIC)
    if original and msg.topic in (retry_topic(group), dlq_topic(group)):
        msg.topic = original
    remark: str | None = None
    began = time.monotonic()
    try:
        answer = listener(msg)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        log.warning("listener failed on message %s consumed directly: %r", msg.client_msg_id, exc)
        result, remark = "CR_THROW_EXCEPTION", repr(exc)
    else:
        result = "CR_LATER" if answer is ConsumeStatus.RECONSUME_LATER else "CR_SUCCESS"
    return {
        "order": orderly,
        "autoCommit": True,
        "consumeResult": result,
        "remark": remark,
        "spentTimeMills": int((time.monotonic() - began) * 1000),
    }
