"""Asyncio Python client: producers and consumers on a shared client instance.

The names a user needs, in one place::

    from apogee.client import Message, Producer, PushConsumer

    async with Producer("orders-app", namesrv="127.0.0.1:9876") as producer:
        await producer.send(Message("orders", b"...", tags="created", keys=["o-1"]))

    async with PushConsumer("orders-app", namesrv="127.0.0.1:9876") as consumer:
        consumer.subscribe("orders", "created")
        async for msg in consumer:
            print(msg.body)

``apogee.client.sync`` has the same clients for code without an event loop.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apogee.client.instance import ClientInstance, InstanceConfig
    from apogee.client.listener import ConsumeStatus
    from apogee.client.lite_pull_consumer import LitePullConsumer
    from apogee.client.producer import Producer, ProducerConfig
    from apogee.client.push_consumer import PushConsumer
    from apogee.client.selectors import QueueSelector, select_by_hash, select_random
    from apogee.client.transaction import LocalTransactionState
    from apogee.client.transaction_producer import TransactionProducer, TransactionSendResult
    from apogee.model.client import MessageQueue
    from apogee.model.message import Message, MessageExt
    from apogee.model.received import ReceivedMessage
    from apogee.model.results import SendResult, SendStatus
    from apogee.protocol.signing import SessionCredentials

#: name -> the module that defines it. Imported on first use (PEP 562), so that a
#: process importing one part of the client (``apogee.client.broker_api``, as the
#: Spark connector's planner processes do) does not import all of it first.
_HOME = {
    "ClientInstance": "apogee.client.instance",
    "InstanceConfig": "apogee.client.instance",
    "ConsumeStatus": "apogee.client.listener",
    "LitePullConsumer": "apogee.client.lite_pull_consumer",
    "Producer": "apogee.client.producer",
    "ProducerConfig": "apogee.client.producer",
    "PushConsumer": "apogee.client.push_consumer",
    "QueueSelector": "apogee.client.selectors",
    "select_by_hash": "apogee.client.selectors",
    "select_random": "apogee.client.selectors",
    "LocalTransactionState": "apogee.client.transaction",
    "TransactionProducer": "apogee.client.transaction_producer",
    "TransactionSendResult": "apogee.client.transaction_producer",
    "MessageQueue": "apogee.model.client",
    "Message": "apogee.model.message",
    "MessageExt": "apogee.model.message",
    "ReceivedMessage": "apogee.model.received",
    "SendResult": "apogee.model.results",
    "SendStatus": "apogee.model.results",
    "SessionCredentials": "apogee.protocol.signing",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "ClientInstance",
    "ConsumeStatus",
    "InstanceConfig",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "Producer",
    "ProducerConfig",
    "PushConsumer",
    "QueueSelector",
    "ReceivedMessage",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "TransactionProducer",
    "TransactionSendResult",
    "select_by_hash",
    "select_random",
]
