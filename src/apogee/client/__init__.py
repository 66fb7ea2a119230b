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
