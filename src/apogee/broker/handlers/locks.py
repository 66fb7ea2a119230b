"""LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: queue locks of orderly consumers.

Owns: the answers of RocketMQ AdminBrokerProcessor's ``lockBatchMQ`` and
``unlockBatchMQ``; the lock rules live in ``apogee.broker.locks``.

Both take a LockBatchRequestBody (consumerGroup, clientId, mqSet; the C++
client leaves out onlyThisBroker). LOCK answers ``{"lockOKMQSet": [...]}``,
the queues of the request the client holds now; UNLOCK answers SUCCESS. A
body that is not that JSON is a ProtocolError, answered SYSTEM_ERROR with
the reason.
"""

from __future__ import annotations

from apogee.broker.locks import RebalanceLockManager
from apogee.protocol.bodies import decode_lock_batch_request, encode_lock_batch_response
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import RequestContext


class LockHandlers:
    def __init__(self, locks: RebalanceLockManager) -> None:
        self._locks = locks

    def lock(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = decode_lock_batch_request(request.body_bytes())
        held = self._locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response(body=encode_lock_batch_response(held))

    def unlock(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = decode_lock_batch_request(request.body_bytes())
        self._locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response()
