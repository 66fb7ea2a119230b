"""Asyncio Python client: producers (plain and transactional) on a shared client instance.

The names a user needs, in one place::

    from apogee.client import Message, Producer

    async with Producer("orders-app", namesrv="127.0.0.1:9876") as producer:
        await producer.send(Message("orders", b"...", tags="created", keys=["o-1"]))

``apogee.client.sync`` has the same producers for code without an event loop.
"""

from apogee.client.instance import ClientInstance, InstanceConfig
from apogee.client.producer import Producer, ProducerConfig
from apogee.client.selectors import QueueSelector, select_by_hash, select_random
from apogee.client.transaction import LocalTransactionState
from apogee.client.transaction_producer import TransactionProducer, TransactionSendResult
from apogee.model.client import MessageQueue
from apogee.model.message import Message, MessageExt
from apogee.model.results import SendResult, SendStatus
from apogee.protocol.signing import SessionCredentials

__all__ = [
    "ClientInstance",
    "InstanceConfig",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "Producer",
    "ProducerConfig",
    "QueueSelector",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "TransactionProducer",
    "TransactionSendResult",
    "select_by_hash",
    "select_random",
]
