"""SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE: checks, store.put, the answer.

Owns: RocketMQ's msgCheck (permissions, topic name, auto-creation, queue
id), the broker's additions to a message (CLUSTER, born and store hosts,
the delayed-message placement), the client's own retry path (a send to
``%RETRY%<group>`` whose reconsumeTimes has reached the group's budget goes
to ``%DLQ%<group>`` instead, undelayed; 26 when the group has no config),
transactional half messages (TRAN_MSG=true: stored in the half queue, see
``apogee.broker.transaction``, and entered in the TransactionBook; refused
with 16 under rejectTransactionMessage; a batch send with sysFlag PREPARED
is one transaction, stored as one half record holding the batch: an Apogee
extension), batch bodies (inflated as a whole
when the C++ client compressed them), SYNC_FLUSH waits and the store-status
-> response-code table.

Hot path: the handler is synchronous and answers inline. Only a send with
WAIT=true to a SYNC_FLUSH or SYNC_MASTER broker is answered later, from the
future of its group-commit generation, of its replication generation
(``apogee.broker.ha.transfer``), or of both joined (one loop callback per
generation, never a task per request). Topics that passed the name and
permission checks are cached until the topic table changes. A slave refuses
every send (SERVICE_NOT_AVAILABLE, as RocketMQ's store does).

Status -> code (SendMessageProcessor.handlePutMessageResult):

    PUT_OK 0 | FLUSH_DISK_TIMEOUT 10 | SLAVE_NOT_AVAILABLE 11 | FLUSH_SLAVE_TIMEOUT 12
    (all four carry msgId/queueId/queueOffset: the message is stored)
    MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED 13 | SERVICE_NOT_AVAILABLE 14
    CREATE_MAPPED_FILE_FAILED, OS_PAGECACHE_BUSY, UNKNOWN_ERROR 1
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from apogee.broker.config import BrokerConfig
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.records import InflateError, inflate
from apogee.broker.retry import DLQ_NUMS_PER_GROUP, is_dead, max_reconsume_times, random_queue
from apogee.broker.schedule import DELAY_MARKER, BadDelayLevelError, schedule_placement
from apogee.broker.topics import TopicConfigManager
from apogee.broker.traffic import DELAY, FIFO, NORMAL, TRANSACTION, Traffic
from apogee.broker.transaction import (
    TRAN_MARKER,
    batch_half,
    half_batch_problem,
    half_message,
    is_half_message,
)
from apogee.broker.transaction_book import TransactionBook
from apogee.codes import ResponseCode
from apogee.errors import ProtocolError
from apogee.model.message import (
    COMPRESSED_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    BatchItem,
    HostPort,
    StoreBatch,
    StoreMessage,
    properties_to_string,
    property_value,
    string_to_properties,
    transaction_type,
)
from apogee.model.message_codec import MAX_TOPIC_LENGTH_V1, decode_batch
from apogee.model.route import PERM_RW, writeable
from apogee.model.topic import (
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicConfig,
    dlq_topic,
    validate_topic,
)
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import SendMessageRequestHeader, decode_send_request
from apogee.remoting.dispatch import RequestContext, ResponseBatch
from apogee.store.config import FlushDiskType
from apogee.store.interface import MessageStore
from apogee.store.results import PutResult, PutStatus

_STORED_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
}
_FAILED_CODES = {
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}
_PUT_OK = PutStatus.PUT_OK  # an Enum class attribute costs a metaclass look-up
_BUFFERS = (bytes, bytearray, memoryview)
_WAIT_FALSE = "WAIT\x01false"
_SHARDING_MARKER = "__SHARDINGKEY\x01"
_UNIT_TOPIC_FLAG = 0x1  # TopicSysFlag: UNIT
_UNIT_SUB_TOPIC_FLAG = 0x2  # TopicSysFlag: UNIT_SUB (retry topics)


@dataclass(frozen=True, slots=True)
class SendSettings:
    cluster_name: str
    store_host: HostPort
    permission: BrokerPermission
    max_delay_level: int
    max_message_size_bytes: int
    sync_flush: bool = False
    sync_master: bool = False
    is_slave: bool = False
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    reject_transaction_message: bool = False

    @classmethod
    def from_config(
        cls, config: BrokerConfig, store_host: HostPort, permission: BrokerPermission
    ) -> SendSettings:
        return cls(
            cluster_name=config.broker_cluster_name,
            store_host=store_host,
            permission=permission,
            max_delay_level=len(config.store.delay_levels_ms),
            max_message_size_bytes=config.store.max_message_size_bytes,
            sync_flush=config.store.flush_disk_type is FlushDiskType.SYNC_FLUSH,
            sync_master=config.is_sync_master,
            is_slave=config.is_slave,
            region_id=config.region_id,
            trace_on=config.trace_on,
            reject_transaction_message=config.reject_transaction_message,
        )


def _without_delay(props: str) -> str:
    if DELAY_MARKER not in props:
        return props
    parsed = string_to_properties(props)
    parsed.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    return properties_to_string(parsed)


def _message_type(props: str, tx_id: str | None, batch: bool) -> str:
    """RocketMQ 5's message_type label of a send (BrokerMetricsManager.getMessageType)."""
    if tx_id is not None:
        return TRANSACTION
    if batch:
        return NORMAL
    if _SHARDING_MARKER in props:
        return FIFO
    return DELAY if DELAY_MARKER in props else NORMAL


class _RefusedError(Exception):
    """A msgCheck failure: the response code and remark to answer with."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


Waiter = tuple[RequestContext, PutResult, int, str | None]
_SLAVE_REMARK = "service not available now: this broker is a slave; messages are sent to its master"


class Replicas(Protocol):
    """SYNC_MASTER's replication waiters (``apogee.broker.ha.transfer.GroupTransfer``)."""

    def request(self, end_offset: int) -> Future[PutStatus]: ...
    def join(
        self, flushed: Future[PutStatus], replicated: Future[PutStatus]
    ) -> Future[PutStatus]: ...


class SendHandler:
    """Serves the three send codes; see the module docstring."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        settings: SendSettings,
        *,
        on_stored: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
        transactions: TransactionBook,
        replicas: Replicas | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self._store = store
        self._replicas = replicas if settings.sync_master else None
        self._waits = settings.sync_flush or self._replicas is not None
        self._traffic = traffic
        self._transactions = transactions
        self._topics = topics
        self._groups = groups
        self._settings = settings
        self._on_stored = on_stored
        self._loop = loop
        self._loop_thread = threading.get_ident()  # built on the loop's thread
        self._store_host = settings.store_host
        self._cluster_property = f"CLUSTER\x01{settings.cluster_name}\x02"
        self._trace_on = "true" if settings.trace_on else "false"
        self._ready: dict[str, TopicConfig] = {}  # topics that passed msgCheck
        topics.add_listener(self._ready.clear)
        self._flushing: dict[Future[PutStatus], list[Waiter]] = {}

    # -- entry -----------------------------------------------------------------

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if self._settings.is_slave:
            return request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, _SLAVE_REMARK)
        header = decode_send_request(request)
        props = header.properties or ""
        tx_id: str | None = None
        kind: str | None = None  # the traffic label, when the properties do not tell it
        try:
            config = self._ready.get(header.topic) or self._check_topic(header)
            queue_id = header.queue_id
            if not 0 <= queue_id < config.write_queue_nums:  # else a queue it names
                queue_id = self._queue_id(header, config, ctx)
            if header.batch and transaction_type(header.sys_flag) == TRANSACTION_PREPARED_TYPE:
                result = self._put_half_batch(ctx, request, header, queue_id)
                kind = TRANSACTION
                tx_id = property_value(props, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            elif header.batch:
                result = self._put_batch(ctx, request, header, queue_id)
            elif TRAN_MARKER in props and is_half_message(props):
                result = self._put_half(ctx, request, header, queue_id)
                tx_id = property_value(props, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            else:
                result = self._put_one(ctx, request, header, queue_id)
        except _RefusedError as refused:
            return request.make_response(refused.code, refused.remark)
        status = result.status
        if status is _PUT_OK or status.is_stored:  # PUT_OK first: no property call
            self._on_stored()
            if self._traffic is not None:
                self._traffic.put(
                    header.topic,
                    kind or _message_type(props, tx_id, header.batch),
                    max(result.msg_count, 1),
                    len(request.body or b""),
                )
            wait = self._waits and _WAIT_FALSE not in props
            if wait and status is _PUT_OK:
                return self._after_flush(ctx, result, queue_id, tx_id)
        return self._response(request, status, result, queue_id, tx_id)

    # -- msgCheck ----------------------------------------------------------------

    def _check_topic(self, header: SendMessageRequestHeader) -> TopicConfig:
        topic = header.topic
        if not self._settings.permission.writeable:
            raise _RefusedError(ResponseCode.NO_PERMISSION, "the broker is not writeable")
        problem = validate_topic(topic)
        if problem is not None:
            raise _RefusedError(ResponseCode.SYSTEM_ERROR, problem)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise _RefusedError(
                ResponseCode.NO_PERMISSION, f"sending to topic {topic} is forbidden"
            )
        config = self._topics.select(topic) or self._create(header)
        if config is None:
            raise _RefusedError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not writeable(config.perm):
            raise _RefusedError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] is not writeable")
        self._ready[topic] = config
        return config

    def _create(self, header: SendMessageRequestHeader) -> TopicConfig | None:
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            flag = _UNIT_SUB_TOPIC_FLAG if header.unit_mode else 0
            return self._topics.create_in_send_back(header.topic, 1, topic_sys_flag=flag)
        flag = _UNIT_TOPIC_FLAG if header.unit_mode else 0
        return self._topics.create_in_send(
            header.topic, header.default_topic, header.default_topic_queue_nums, flag
        )

    @staticmethod
    def _queue_id(
        header: SendMessageRequestHeader, config: TopicConfig, ctx: RequestContext
    ) -> int:
        queue_id = header.queue_id
        if queue_id < 0:
            return random.randrange(max(config.write_queue_nums, 1))
        if queue_id >= max(config.read_queue_nums, config.write_queue_nums):
            raise _RefusedError(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic {config.topic_name} has "
                f"{config.write_queue_nums} queues; producer {ctx.peer}",
            )
        return queue_id

    # -- putting -----------------------------------------------------------------

    def _properties(self, header: SendMessageRequestHeader) -> str:
        props = header.properties or ""
        if props and not props.endswith("\x02"):
            props += "\x02"
        return props + self._cluster_property

    def _put_one(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
    ) -> PutResult:
        props = self._properties(header)
        topic, store_qid = header.topic, queue_id
        dead = None
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            dead = self._dead_letter(header, request.version)
            if dead is not None:
                topic, store_qid = dead
                props = _without_delay(props)
        if DELAY_MARKER in props:
            try:
                placed = schedule_placement(topic, queue_id, props, self._settings.max_delay_level)
            except BadDelayLevelError as exc:
                raise _RefusedError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
            if placed is not None:
                topic, store_qid, props = placed.topic, placed.queue_id, placed.properties
        body = request.body
        # bytes first, and a tuple: isinstance against a union builds it per call
        if type(body) is not bytes and not isinstance(body, _BUFFERS):
            body = request.body_bytes()
        msg = StoreMessage(
            topic, store_qid, body, props, header.flag, header.sys_flag, header.born_timestamp,
            ctx.responder.peer_address, self._store_host, header.reconsume_times or 0,
        )  # fmt: skip
        result = self._store.put(msg)
        if dead is not None and result.status.is_stored and self._traffic is not None:
            group = header.topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
            self._traffic.dead_letter(group, property_value(props, PROPERTY_RETRY_TOPIC) or "")
        return result

    def _put_half(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
    ) -> PutResult:
        """A transactional half message: into the half queue, and into the book."""
        if self._settings.reject_transaction_message:
            raise _RefusedError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self._store_host[0]}] sending transaction message is forbidden",
            )
        real = StoreMessage(
            header.topic, queue_id, request.body_bytes(), self._properties(header), header.flag,
            header.sys_flag, header.born_timestamp, ctx.responder.peer_address, self._store_host,
            header.reconsume_times or 0,
        )  # fmt: skip
        result = self._store.put(half_message(real))
        if result.status.is_stored:
            self._transactions.opened(result.queue_offset)
        return result

    def _dead_letter(
        self, header: SendMessageRequestHeader, version: int
    ) -> tuple[str, int] | None:
        """The dead-letter queue a retry send goes to instead, if its budget is spent."""
        group_name = header.topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
        group = self._groups.find_or_create(group_name)
        if group is None:
            raise _RefusedError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group_name}",
            )
        budget = max_reconsume_times(group.retry_max_times, version, header.max_reconsume_times)
        if not is_dead(header.reconsume_times or 0, budget):
            return None
        dlq = self._topics.create_in_send_back(dlq_topic(group_name), DLQ_NUMS_PER_GROUP, PERM_RW)
        return dlq.topic_name, random_queue(DLQ_NUMS_PER_GROUP)

    def _put_batch(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
    ) -> PutResult:
        topic = header.topic
        if len(topic) > MAX_TOPIC_LENGTH_V1:
            raise _RefusedError(ResponseCode.MESSAGE_ILLEGAL, "topic of a batch is too long")
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise _RefusedError(
                ResponseCode.MESSAGE_ILLEGAL, "batch sends to retry topics are refused"
            )
        if transaction_type(header.sys_flag) != TRANSACTION_NOT_TYPE:
            # the store takes committed batches (a batch half's commit), never from a client
            raise _RefusedError(
                ResponseCode.MESSAGE_ILLEGAL, "a batch cannot carry transaction messages"
            )
        return self._store.put_batch(self._batch(ctx, request, header, queue_id))

    def _batch(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
    ) -> StoreBatch:
        _, sys_flag, items = self._batch_body(request, header)
        return StoreBatch(
            header.topic, queue_id, items, self._properties(header), sys_flag,
            header.born_timestamp, ctx.responder.peer_address, self._store_host,
            header.reconsume_times or 0,
        )  # fmt: skip

    def _batch_body(
        self, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> tuple[bytes | memoryview, int, list[BatchItem]]:
        """A batch send's body (inflated), its sysFlag without COMPRESSED, its messages."""
        body: bytes | memoryview = request.body_bytes()
        sys_flag = header.sys_flag
        try:
            if sys_flag & COMPRESSED_FLAG:
                # The C++ client compresses a whole batch body of 4 KiB or more.
                body = inflate(body, self._settings.max_message_size_bytes)
                sys_flag &= ~COMPRESSED_FLAG
            items = decode_batch(body)
        except (InflateError, ProtocolError) as exc:
            raise _RefusedError(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}") from None
        if not items:
            raise _RefusedError(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
        return body, sys_flag, items

    def _put_half_batch(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
    ) -> PutResult:
        """A batch of half messages (an Apogee extension): one transaction, stored as
        one half record holding the batch (``apogee.broker.transaction``); the answer
        is a single send's."""
        if self._settings.reject_transaction_message:
            raise _RefusedError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self._store_host[0]}] sending transaction message is forbidden",
            )
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise _RefusedError(ResponseCode.MESSAGE_ILLEGAL, "half messages to a retry topic")
        body, sys_flag, items = self._batch_body(request, header)
        problem = half_batch_problem(items)
        if problem is not None:
            raise _RefusedError(ResponseCode.MESSAGE_ILLEGAL, problem)
        real = StoreMessage(
            header.topic, queue_id, body, self._properties(header), header.flag, sys_flag,
            header.born_timestamp, ctx.responder.peer_address, self._store_host,
            header.reconsume_times or 0,
        )  # fmt: skip
        result = self._store.put(batch_half(real, len(items), header.producer_group))
        if result.status.is_stored:
            self._transactions.opened(result.queue_offset)
        return result

    # -- answering ---------------------------------------------------------------

    def _response(
        self,
        request: RemotingCommand,
        status: PutStatus,
        result: PutResult,
        queue_id: int,
        transaction_id: str | None = None,
    ) -> RemotingCommand:
        code = _STORED_CODES.get(status)
        if code is None:
            failed = _FAILED_CODES.get(status, ResponseCode.SYSTEM_ERROR)
            # the client names the response code; the status is said only when it differs
            remark = result.reason or status.value
            if result.reason and status.value != failed.name:
                remark = f"{status.value}: {result.reason}"
            return request.make_response(failed, remark)
        ext = {
            "msgId": result.msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            "MSG_REGION": self._settings.region_id,
            "TRACE_ON": self._trace_on,
        }
        if transaction_id is not None:
            ext["transactionId"] = transaction_id
        return request.make_response(code, None, ext)

    def _after_flush(
        self, ctx: RequestContext, result: PutResult, queue_id: int, tx_id: str | None
    ) -> RemotingCommand | None:
        future = self._store.flush_future(result)
        if self._replicas is not None:
            replicated = self._replicas.request(result.end_offset)
            future = self._replicas.join(future, replicated)
        if future.done():
            return self._response(ctx.request, future.result(), result, queue_id, tx_id)
        waiters = self._flushing.get(future)
        if waiters is None:
            waiters = self._flushing[future] = []
            future.add_done_callback(self._flushed_elsewhere)
        waiters.append((ctx, result, queue_id, tx_id))
        return None

    def _flushed_elsewhere(self, future: Future[PutStatus]) -> None:
        # Runs where the group commit answers: on the loop when the store is
        # loop-driven (the broker's), else on a store thread: hop onto the
        # loop then, once per generation.
        if threading.get_ident() == self._loop_thread:
            self._flushed(future)
        else:
            self._loop.call_soon_threadsafe(self._flushed, future)

    def _flushed(self, future: Future[PutStatus]) -> None:
        status = future.result()
        with ResponseBatch() as batch:  # a connection's answers in one send
            for ctx, result, queue_id, tx_id in self._flushing.pop(future, ()):
                batch.respond(ctx, self._response(ctx.request, status, result, queue_id, tx_id))

    @property
    def waiting_for_flush(self) -> int:
        return sum(len(w) for w in self._flushing.values())

    async def drain(self, timeout_s: float) -> bool:
        """Wait until every SYNC_FLUSH or SYNC_MASTER send is answered; False on timeout."""
        deadline = self._loop.time() + timeout_s
        while self._flushing and self._loop.time() < deadline:
            await asyncio.sleep(0.005)
        return not self._flushing
