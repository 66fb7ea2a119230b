"""Typed calls to one broker, addressed by "host:port".

Owns: BrokerApi, one coroutine per broker request a producer, consumer or
admin tool makes: send, pull, offsets, message lookups, client management,
locks, transactions, topic and group administration, runtime figures.

Rules:
* A non-success response code raises ``error_for_code(code, remark)``, except
  where the code is an expected outcome: the pull statuses (19, 20, 21), the
  stored-but-not-synced send codes (10, 11, 12), and QUERY_NOT_FOUND for a
  consumer offset (None) or a key query (no messages).
* Sends use SEND_MESSAGE_V2 (one-letter header fields) and SEND_BATCH_MESSAGE
  for batches, and give every message a UNIQ_KEY if it has none, setting it
  on the caller's Message as the Java client does, so a retry keeps its id.
* Decoded messages have zlib-compressed bodies inflated; bodies compressed
  with LZ4 or ZSTD (5.x producers) are handed over as stored, with the
  COMPRESSED bit still set in ``sys_flag``.
* ``pull(..., lazy=True)`` gives ``ReceivedMessage`` objects, decoded in one
  compiled pass with properties and body left for first access (what
  consumers use); the default gives fully decoded ``MessageExt`` values.
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypeVar, overload

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee._util.props import parse_properties
from apogee.client.batch_body import pack_batches
from apogee.client.uniq_key import new_uniq_key, new_uniq_keys
from apogee.codes import CURRENT_VERSION, RequestCode, ResponseCode, SerializeType
from apogee.errors import ClientError, ProtocolError, error_for_code
from apogee.model.client import HeartbeatData, MessageQueue
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    MessageExt,
    properties_to_string,
)
from apogee.model.message_codec import decode_record, encode_batch, iter_records
from apogee.model.received import ReceivedMessage, decode_received
from apogee.model.results import PullResult, PullStatus, SendResult, SendStatus
from apogee.model.stats import ConsumerConnection, ConsumeStats, HARuntimeInfo, TopicStatsTable
from apogee.model.subscription import SubscriptionData
from apogee.model.topic import AUTO_CREATE_TOPIC_KEY, TopicConfig
from apogee.protocol import admin_bodies, bodies
from apogee.protocol import headers as h
from apogee.protocol.command import DEFAULT_LANGUAGE, RemotingCommand, new_command
from apogee.protocol.header_scan import PullAnswer, SendAnswer
from apogee.remoting.client import RemotingClient

#: Queues a topic gets when a send auto-creates it from TBW102 (Java producer default).
DEFAULT_TOPIC_QUEUE_NUMS = 4

# Pull sysFlag bits (RocketMQ PullSysFlag).
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_CLASS_FILTER = 0x8

_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
_FOUND = PullStatus.FOUND
_UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
log = logging.getLogger(__name__)
_JSON = SerializeType.JSON
_SEND_V2 = RequestCode.SEND_MESSAGE_V2
_SEND_BATCH = RequestCode.SEND_BATCH_MESSAGE
PULL_CODE = int(RequestCode.PULL_MESSAGE)


def inflate(msg: MessageExt) -> MessageExt:
    """``msg`` with a zlib-compressed body inflated and the COMPRESSED bit cleared."""
    if not msg.sys_flag & COMPRESSED_FLAG:
        return msg
    kind = msg.sys_flag & COMPRESSION_TYPE_MASK
    if kind not in (0, COMPRESSION_ZLIB):  # 0: before 5.x every compressed body was zlib
        return msg
    try:
        body = zlib.decompress(msg.body)
    except zlib.error as exc:
        raise ProtocolError(f"message {msg.msg_id}: compressed body does not inflate") from exc
    flags = msg.sys_flag & ~(COMPRESSED_FLAG | COMPRESSION_TYPE_MASK)
    return dataclasses.replace(msg, body=body, sys_flag=flags)


def decode_messages(body: bytes) -> list[MessageExt]:
    """The records of a pull or query response body, bodies inflated.

    A body that claims zlib compression and does not inflate belongs to one
    message only: that message is handed over as stored (COMPRESSED still set
    in ``sys_flag``, as for LZ4 or ZSTD) and logged, and the others are not
    held back.
    """
    out: list[MessageExt] = []
    for msg in iter_records(body):
        try:
            out.append(inflate(msg))
        except ProtocolError as exc:
            log.warning("%s; handed over as stored", exc)
            out.append(msg)
    return out


M = TypeVar("M")  # the message type of a PullResult: eager or lazily decoded


def _pull_result(
    status: PullStatus, answer: h.PullMessageResponseHeader, messages: list[M]
) -> PullResult[M]:
    """The PullResult of one answer, its offsets and suggested broker taken by name."""
    return _new_pull_result(
        status,
        answer.next_begin_offset,
        answer.min_offset,
        answer.max_offset,
        answer.suggest_which_broker_id,
        messages,
    )


_NO_SPLIT = 2**31 - 1  # BrokerApi sends a batch as given: one body, whatever its size


def _ensure_uniq_key(msg: Message, now: int) -> str:
    key = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if not key:
        key = msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = new_uniq_key(now)
    return key


def send_request(ext: dict[str, str], body: bytes | bytearray, batch: bool) -> RemotingCommand:
    """The SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) request of a prepared header and body."""
    code = _SEND_BATCH if batch else _SEND_V2
    return new_command(code, DEFAULT_LANGUAGE, CURRENT_VERSION, 0, 0, None, ext, body, _JSON)


_new_object = object.__new__
# SendResult is a frozen dataclass: its __init__ sets each field through
# object.__setattr__, which costs twice what its slots' own setters do. A
# send builds one per message, so send_result builds it with those setters.
_SEND_RESULT_FIELDS = (
    "status", "message_queue", "queue_offset", "offset_msg_id", "msg_id", "transaction_id",
    "region_id",
)  # fmt: skip
if tuple(f.name for f in dataclasses.fields(SendResult)) != _SEND_RESULT_FIELDS:
    raise ImportError("SendResult's fields changed: send_result must set every one")
(
    _set_status,
    _set_queue,
    _set_offset,
    _set_offset_msg_id,
    _set_msg_id,
    _set_transaction_id,
    _set_region_id,
) = (getattr(SendResult, name).__set__ for name in _SEND_RESULT_FIELDS)

# PullResult, frozen too, is built the same way: a consumer builds one per pull.
_PULL_RESULT_FIELDS = (
    "status", "next_begin_offset", "min_offset", "max_offset", "suggest_which_broker_id",
    "messages",
)  # fmt: skip
if tuple(f.name for f in dataclasses.fields(PullResult)) != _PULL_RESULT_FIELDS:
    raise ImportError("PullResult's fields changed: _new_pull_result must set every one")
_set_pull_status, _set_next, _set_min, _set_max, _set_suggested, _set_messages = (
    getattr(PullResult, name).__set__ for name in _PULL_RESULT_FIELDS
)


def _new_pull_result(  # noqa: PLR0917  # every field of PullResult, positional for speed
    status: PullStatus,
    next_begin: int,
    min_offset: int,
    max_offset: int,
    suggested: int,
    messages: list[M],
) -> PullResult[M]:
    result: PullResult[M] = _new_object(PullResult)
    _set_pull_status(result, status)
    _set_next(result, next_begin)
    _set_min(result, min_offset)
    _set_max(result, max_offset)
    _set_suggested(result, suggested)
    _set_messages(result, messages)
    return result


def pull_command(ext: dict[str, str]) -> RemotingCommand:
    """A consumer's PULL_MESSAGE of a prepared header (``PullMessageRequestHeader.to_ext()``)."""
    return new_command(PULL_CODE, DEFAULT_LANGUAGE, CURRENT_VERSION, 0, 0, None, ext, b"", _JSON)


def pull_result(response: RemotingCommand | PullAnswer) -> PullResult[ReceivedMessage]:
    """A consumer's pull answer as its result: messages decoded lazily, no tag re-check
    (the consumer filters). The answer is a command, or the ``PullAnswer`` a client
    connection read from a whole answer (``header_scan.pull_answer``)."""
    if isinstance(response, tuple):
        _, code, remark, next_begin, min_offset, max_offset, suggested, body = response
        status = _pull_status(code, remark)
    else:
        status = _pull_status(response.code, response.remark)
        next_begin, min_offset, max_offset, suggested = _pull_offsets(response.ext_fields)
        body = response.body_bytes() if status is _FOUND else b""
    return _new_pull_result(
        status,
        next_begin,
        min_offset,
        max_offset,
        suggested,
        decode_received(body) if status is _FOUND else [],
    )


def _pull_status(code: int, remark: str | None) -> PullStatus:
    """The status of a pull answer's code; raises for a code that is no pull status."""
    status = _PULL_STATUS.get(code)
    if status is None:
        raise error_for_code(code, remark)
    return status


def _pull_offsets(answer: dict[str, str]) -> tuple[int, int, int, int]:
    """(nextBeginOffset, minOffset, maxOffset, suggestWhichBrokerId) of a pull answer's
    ext fields; raises naming a missing or malformed field."""
    try:
        return (
            int(answer["nextBeginOffset"]),
            int(answer["minOffset"]),
            int(answer["maxOffset"]),
            int(answer["suggestWhichBrokerId"]),
        )
    except (KeyError, ValueError):
        h.PullMessageResponseHeader.from_ext(answer)  # raises, naming the field
        raise


def send_result(
    response: RemotingCommand | SendAnswer, mq: MessageQueue, msg_id: str
) -> SendResult:
    """The result of a send to ``mq`` from the broker's answer; raises for a failure code.

    The answer is its command, or the fields ``header_scan.send_answer`` read
    from it (what a client connection gives a send's future when it can).
    """
    if isinstance(response, tuple):
        _, code, remark, offset_msg_id, queue_id, offset, transaction_id, region = response
        status = _SEND_STATUS.get(code)
        if status is None:
            raise error_for_code(code, remark)
        return _result(status, mq, queue_id, offset, offset_msg_id, msg_id, transaction_id, region)
    assert isinstance(response, RemotingCommand)
    status = _SEND_STATUS.get(response.code)
    if status is None:
        raise error_for_code(response.code, response.remark)
    answer = response.ext_fields
    try:
        queue_id = int(answer["queueId"])
        offset = int(answer["queueOffset"])
        offset_msg_id = answer["msgId"]
    except (KeyError, ValueError):
        h.SendMessageResponseHeader.from_ext(answer)  # raises, naming the field
        raise
    return _result(
        status,
        mq,
        queue_id,
        offset,
        offset_msg_id,
        msg_id,
        answer.get("transactionId"),
        answer.get("MSG_REGION"),
    )


def _result(  # noqa: PLR0917  # every field of SendResult, positional for speed
    status: SendStatus,
    mq: MessageQueue,
    queue_id: int,
    offset: int,
    offset_msg_id: str,
    msg_id: str,
    transaction_id: str | None,
    region: str | None,
) -> SendResult:
    result: SendResult = _new_object(SendResult)
    _set_status(result, status)
    _set_queue(
        result,
        mq if queue_id == mq.queue_id else MessageQueue(mq.topic, mq.broker_name, queue_id),
    )
    _set_offset(result, offset)
    _set_offset_msg_id(result, offset_msg_id)
    _set_msg_id(result, msg_id)
    _set_transaction_id(result, transaction_id)
    _set_region_id(result, region)
    return result


class BrokerApi:
    def __init__(
        self,
        remoting: RemotingClient,
        *,
        timeout_s: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.remoting = remoting
        self.timeout_s = timeout_s
        self.clock = clock

    async def _call(
        self,
        addr: str,
        code: int,
        header: h.ExtHeader | dict[str, str] | None = None,
        body: bytes = b"",
        *,
        ok: Iterable[int] = (ResponseCode.SUCCESS,),
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        ext = header.to_ext() if isinstance(header, h.ExtHeader) else header
        request = RemotingCommand.request(code, ext, body)
        response = await self.remoting.invoke(addr, request, timeout_s or self.timeout_s)
        if response.code not in ok:
            raise error_for_code(response.code, response.remark)
        return response

    async def _oneway(
        self, addr: str, code: int, header: h.ExtHeader | None, body: bytes = b""
    ) -> None:
        ext = header.to_ext() if header is not None else None
        await self.remoting.invoke_oneway(addr, RemotingCommand.oneway(code, ext, body))

    # -- send ---------------------------------------------------------------------

    async def send(
        self,
        addr: str,
        broker_name: str,
        msg: Message,
        *,
        queue_id: int,
        producer_group: str,
        sys_flag: int = 0,
        reconsume_times: int | None = None,
        max_reconsume_times: int | None = None,
        default_topic: str = AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        timeout_s: float | None = None,
    ) -> SendResult:
        """Send one message to queue ``queue_id`` of the broker at ``addr``."""
        born = self.clock.now_ms()
        uniq = _ensure_uniq_key(msg, born)
        header = h.SendMessageRequestHeader(
            producer_group=producer_group,
            topic=msg.topic,
            default_topic=default_topic,
            default_topic_queue_nums=default_topic_queue_nums,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=born,
            flag=msg.flag,
            properties=properties_to_string(msg.properties),
            reconsume_times=reconsume_times,
            max_reconsume_times=max_reconsume_times,
        )
        return await self._send(
            addr,
            broker_name,
            RequestCode.SEND_MESSAGE_V2,
            header,
            body=msg.body,
            uniq=uniq,
            timeout_s=timeout_s,
        )

    async def send_batch(
        self,
        addr: str,
        broker_name: str,
        messages: Sequence[Message],
        *,
        queue_id: int,
        producer_group: str,
        default_topic: str = AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        timeout_s: float | None = None,
        sys_flag: int = 0,
        properties: str = "",
    ) -> SendResult:
        """Send messages of one topic as one batch; they get consecutive offsets.

        ``sys_flag`` and ``properties`` are the batch-level ones (the broker adds
        the properties to every message); RocketMQ clients send none.
        """
        if not messages:
            raise ClientError("a batch needs at least one message")
        topic = messages[0].topic
        if any(m.topic != topic for m in messages):
            raise ClientError("every message of a batch must have the same topic")
        born = self.clock.now_ms()
        body: bytes | bytearray
        if all(type(m.body) is bytes for m in messages):  # what the compiled packer takes
            packed = pack_batches(messages, _NO_SPLIT, lambda n: new_uniq_keys(born, n))
            body, _, uniq = packed[0]
        else:
            uniq = ",".join(_ensure_uniq_key(m, born) for m in messages)
            body = encode_batch(messages)
        return await self.send_batch_body(
            addr, broker_name, topic, body, uniq, queue_id=queue_id,
            producer_group=producer_group, default_topic=default_topic,
            default_topic_queue_nums=default_topic_queue_nums, timeout_s=timeout_s,
            sys_flag=sys_flag, properties=properties, born=born,
        )  # fmt: skip

    async def send_batch_body(  # a send header's fields
        self,
        addr: str,
        broker_name: str,
        topic: str,
        body: bytes | bytearray,
        msg_ids: str,
        *,
        queue_id: int,
        producer_group: str,
        default_topic: str = AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        timeout_s: float | None = None,
        sys_flag: int = 0,
        properties: str = "",
        born: int | None = None,
    ) -> SendResult:
        """Send a batch body already encoded (``MessageDecoder.encodeMessages``'s layout,
        each message with its UNIQ_KEY) for ``topic``, as ``send_batch`` does.

        ``msg_ids`` becomes the result's ``msg_id``: the messages' UNIQ_KEYs,
        comma-joined, or "" for a caller that does not keep them.
        """
        header = h.SendMessageRequestHeader(
            producer_group=producer_group,
            topic=topic,
            default_topic=default_topic,
            default_topic_queue_nums=default_topic_queue_nums,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=self.clock.now_ms() if born is None else born,
            flag=0,
            properties=properties,
            batch=True,
        )
        return await self._send(
            addr,
            broker_name,
            RequestCode.SEND_BATCH_MESSAGE,
            header,
            body=body,
            uniq=msg_ids,
            timeout_s=timeout_s,
        )

    async def _send(
        self,
        addr: str,
        broker_name: str,
        code: int,
        header: h.SendMessageRequestHeader,
        *,
        body: bytes | bytearray,
        uniq: str,
        timeout_s: float | None,
    ) -> SendResult:
        mq = MessageQueue(header.topic, broker_name, header.queue_id)
        ext = header.to_ext_v2()
        return await self.send_v2(addr, mq, ext, body, uniq, timeout_s, batch=header.batch)

    async def send_v2(  # noqa: PLR0917  # the send path: positional, no keyword matching
        self,
        addr: str,
        mq: MessageQueue,
        ext: dict[str, str],
        body: bytes | bytearray,
        msg_id: str,
        timeout_s: float | None,
        *,
        batch: bool = False,
    ) -> SendResult:
        """Send a prepared SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header and body to ``mq``.

        The producer's path: ``ext`` is ``SendMessageRequestHeader.to_ext_v2()``
        for ``mq`` (queue id included); ``msg_id`` becomes the result's msg_id.
        """
        conn = self.remoting.pooled(addr) or await self.remoting.connection(addr)
        response = await conn.request(
            send_request(ext, body, batch),
            timeout_s or self.timeout_s or self.remoting.config.request_timeout_s,
        )
        return send_result(response, mq, msg_id)

    async def send_v2_oneway(
        self, addr: str, ext: dict[str, str], body: bytes, *, batch: bool = False
    ) -> None:
        """``send_v2`` without an answer: the message is written to the connection."""
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        request = new_command(code, DEFAULT_LANGUAGE, CURRENT_VERSION, 0, 0, None, ext, body, _JSON)
        await self.remoting.invoke_oneway(addr, request)

    # -- pull -----------------------------------------------------------------------

    @overload
    async def pull(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_nums: int = 32,
        expression: str | None = "*",
        sub_version: int = 0,
        commit_offset: int | None = None,
        suspend_timeout_ms: int = 0,
        timeout_s: float | None = None,
        lazy: Literal[False] = False,
    ) -> PullResult[MessageExt]: ...

    @overload
    async def pull(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_nums: int = 32,
        expression: str | None = "*",
        sub_version: int = 0,
        commit_offset: int | None = None,
        suspend_timeout_ms: int = 0,
        timeout_s: float | None = None,
        lazy: Literal[True],
    ) -> PullResult[ReceivedMessage]: ...

    async def pull(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_nums: int = 32,
        expression: str | None = "*",
        sub_version: int = 0,
        commit_offset: int | None = None,
        suspend_timeout_ms: int = 0,
        timeout_s: float | None = None,
        lazy: bool = False,
    ) -> PullResult[MessageExt] | PullResult[ReceivedMessage]:
        """Pull up to ``max_nums`` messages from ``offset``.

        ``expression`` (a TAG expression) is sent with the pull; None relies on
        the subscription the group registered by heartbeat. ``commit_offset``
        rides along as the group's new committed offset. With
        ``suspend_timeout_ms`` > 0 the broker may hold the pull that long
        waiting for messages (long polling); the network timeout grows by it.
        ``lazy`` picks the message type (see the module docstring).
        """
        sys_flag = PULL_SUBSCRIPTION if expression is not None else 0
        if commit_offset is not None:
            sys_flag |= PULL_COMMIT_OFFSET
        if suspend_timeout_ms > 0:
            sys_flag |= PULL_SUSPEND
        header = h.PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset or 0,
            suspend_timeout_millis=suspend_timeout_ms,
            sub_version=sub_version,
            subscription=expression,
            expression_type="TAG" if expression is not None else None,
        )
        wait = (timeout_s or self.timeout_s or self.remoting.config.request_timeout_s) + (
            suspend_timeout_ms / 1000
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await self.remoting.invoke(addr, request, wait)
        if response.code not in _PULL_STATUS:
            raise error_for_code(response.code, response.remark)
        answer = h.PullMessageResponseHeader.from_ext(response.ext_fields)
        status = _PULL_STATUS[response.code]
        found = status is PullStatus.FOUND
        # the broker filters on tag hashes; equal hashes of other tags pass it
        sub = SubscriptionData.build(topic, expression) if expression is not None else None
        if sub is not None and sub.is_all:
            sub = None
        if lazy:
            received = decode_received(response.body_bytes()) if found else []
            if sub is not None:
                received = [m for m in received if sub.matches_tag(m.tags)]
            return _pull_result(status, answer, received)
        messages = decode_messages(response.body_bytes()) if found else []
        if sub is not None:
            messages = [m for m in messages if sub.matches_tag(m.tags)]
        return _pull_result(status, answer, messages)

    # -- offsets ----------------------------------------------------------------------

    async def query_consumer_offset(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        *,
        set_zero_if_not_found: bool | None = None,
    ) -> int | None:
        """The group's committed offset of the queue; None when it has none.

        ``set_zero_if_not_found=False`` asks a broker that would answer 0 for a
        new group on a young queue (RocketMQ 4.x) to say "none" instead (5.x
        field; older brokers ignore it).
        """
        response = await self._call(
            addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            h.QueryConsumerOffsetRequestHeader(group, topic, queue_id, set_zero_if_not_found),
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return h.QueryConsumerOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int, *, oneway: bool = False
    ) -> None:
        header = h.UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        if oneway:
            await self._oneway(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)
        else:
            await self._call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)

    async def get_max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """The queue's next offset to be written (exclusive end)."""
        response = await self._call(
            addr, RequestCode.GET_MAX_OFFSET, h.GetMaxOffsetRequestHeader(topic, queue_id)
        )
        return h.GetMaxOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def get_min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        response = await self._call(
            addr, RequestCode.GET_MIN_OFFSET, h.GetMinOffsetRequestHeader(topic, queue_id)
        )
        return h.GetMinOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The queue offset of the message stored closest to ``timestamp_ms``."""
        response = await self._call(
            addr,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            h.SearchOffsetRequestHeader(topic, queue_id, timestamp_ms),
        )
        return h.SearchOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def get_earliest_msg_store_time(self, addr: str, topic: str, queue_id: int) -> int:
        response = await self._call(
            addr,
            RequestCode.GET_EARLIEST_MSG_STORETIME,
            h.GetEarliestMsgStoretimeRequestHeader(topic, queue_id),
        )
        return h.GetEarliestMsgStoretimeResponseHeader.from_ext(response.ext_fields).timestamp

    # -- message lookups ----------------------------------------------------------------

    async def view_message(self, addr: str, commit_log_offset: int) -> MessageExt:
        """The message stored at ``commit_log_offset`` (from an offset msgId)."""
        response = await self._call(
            addr, RequestCode.VIEW_MESSAGE_BY_ID, h.ViewMessageRequestHeader(commit_log_offset)
        )
        return inflate(decode_record(response.body_bytes()))

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        *,
        max_num: int = 64,
        begin_ms: int = 0,
        end_ms: int = 2**63 - 1,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """Messages indexed under ``key`` (a KEYS token, or the UNIQ_KEY when ``unique_key``)."""
        ext = h.QueryMessageRequestHeader(topic, key, max_num, begin_ms, end_ms).to_ext()
        if unique_key:
            ext[_UNIQUE_KEY_QUERY] = "true"
        response = await self._call(
            addr,
            RequestCode.QUERY_MESSAGE,
            ext,
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        found = decode_messages(response.body_bytes())
        # the index matches on key hashes; drop the collisions
        if unique_key:
            return [m for m in found if m.topic == topic and m.uniq_key == key]
        return [m for m in found if m.topic == topic and key in (m.keys or "").split(" ")]

    # -- client management ---------------------------------------------------------------

    async def heartbeat(self, addr: str, heartbeat: HeartbeatData) -> None:
        await self._call(addr, RequestCode.HEART_BEAT, body=bodies.encode_heartbeat(heartbeat))

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        *,
        producer_group: str | None = None,
        consumer_group: str | None = None,
    ) -> None:
        header = h.UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        await self._call(addr, RequestCode.UNREGISTER_CLIENT, header)

    async def get_consumer_ids(self, addr: str, group: str) -> list[str]:
        """Client ids of the group's live consumers on this broker."""
        response = await self._call(
            addr,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            h.GetConsumerListByGroupRequestHeader(group),
        )
        return bodies.decode_consumer_id_list(response.body_bytes())

    async def lock_batch(
        self, addr: str, request: bodies.LockBatchRequestBody
    ) -> tuple[MessageQueue, ...]:
        """Lock queues for orderly consumption; returns those now held by the client."""
        body = bodies.encode_lock_batch_request(request)
        response = await self._call(addr, RequestCode.LOCK_BATCH_MQ, body=body)
        return bodies.decode_lock_batch_response(response.body_bytes())

    async def unlock_batch(
        self, addr: str, request: bodies.LockBatchRequestBody, *, oneway: bool = False
    ) -> None:
        body = bodies.encode_lock_batch_request(request)
        if oneway:
            await self._oneway(addr, RequestCode.UNLOCK_BATCH_MQ, None, body)
        else:
            await self._call(addr, RequestCode.UNLOCK_BATCH_MQ, body=body)

    async def send_back(
        self,
        addr: str,
        msg: MessageExt | ReceivedMessage,
        group: str,
        delay_level: int = 0,
        *,
        max_reconsume_times: int | None = None,
    ) -> None:
        """Hand a message the consumer failed on back to the broker for retry.

        Delay level 0 lets the broker pick 3 + reconsume times; a negative one
        sends the message straight to the dead-letter queue.
        """
        header = h.ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        await self._call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header)

    async def end_transaction(
        self,
        addr: str,
        header: h.EndTransactionRequestHeader,
        *,
        remark: str | None = None,
        oneway: bool = True,
    ) -> None:
        """Commit or roll back a half message (oneway, as the Java producer sends it)."""
        request_type = RemotingCommand.oneway if oneway else RemotingCommand.request
        request = request_type(RequestCode.END_TRANSACTION, header.to_ext())
        request.remark = remark
        if oneway:
            await self.remoting.invoke_oneway(addr, request)
            return
        response = await self.remoting.invoke(addr, request, self.timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, response.remark)

    # -- topic and group administration ------------------------------------------------------

    async def create_topic(
        self, addr: str, config: TopicConfig, *, default_topic: str = AUTO_CREATE_TOPIC_KEY
    ) -> None:
        """Create or update the topic on this broker (it then registers with the name servers)."""
        header = h.CreateTopicRequestHeader(
            topic=config.topic_name,
            default_topic=default_topic,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
        )
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)

    async def delete_topic(self, addr: str, topic: str) -> None:
        await self._call(
            addr, RequestCode.DELETE_TOPIC_IN_BROKER, h.DeleteTopicRequestHeader(topic)
        )

    async def get_all_topic_config(self, addr: str) -> bodies.TopicConfigWrapper:
        response = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return bodies.decode_topic_config_wrapper(response.body_bytes())

    async def update_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        body = admin_bodies.encode_subscription_group(config)
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)

    async def delete_subscription_group(
        self, addr: str, group: str, *, clean_offset: bool = False
    ) -> None:
        # 4.x brokers read removeOffset, 5.x cleanOffset: send both
        header = h.DeleteSubscriptionGroupRequestHeader(group, clean_offset, clean_offset)
        await self._call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)

    # -- runtime figures ------------------------------------------------------------------

    async def get_broker_config(self, addr: str) -> dict[str, str]:
        """The broker's settings, as RocketMQ key=value pairs."""
        response = await self._call(addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties(response.body_bytes().decode("utf-8", "replace"))

    async def update_broker_config(self, addr: str, settings: Mapping[str, str]) -> None:
        """Change run-time settings (e.g. brokerPermission) on one broker."""
        body = "".join(f"{k}={v}\n" for k, v in settings.items()).encode()
        await self._call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)

    async def get_broker_runtime_info(self, addr: str) -> dict[str, str]:
        response = await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return bodies.decode_kv_table(response.body_bytes())

    async def get_broker_ha_status(self, addr: str) -> HARuntimeInfo:
        """A master's slave connections, or a slave's connection to its master."""
        response = await self._call(addr, RequestCode.GET_BROKER_HA_STATUS)
        return admin_bodies.decode_ha_runtime_info(response.body_bytes())

    async def get_topic_stats(self, addr: str, topic: str) -> TopicStatsTable:
        response = await self._call(
            addr, RequestCode.GET_TOPIC_STATS_INFO, h.GetTopicStatsInfoRequestHeader(topic)
        )
        return admin_bodies.decode_topic_stats_table(response.body_bytes())

    async def get_consume_stats(
        self, addr: str, group: str, topic: str | None = None
    ) -> ConsumeStats:
        response = await self._call(
            addr, RequestCode.GET_CONSUME_STATS, h.GetConsumeStatsRequestHeader(group, topic)
        )
        return admin_bodies.decode_consume_stats(response.body_bytes())

    async def get_consumer_connections(self, addr: str, group: str) -> ConsumerConnection:
        response = await self._call(
            addr,
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            h.GetConsumerConnectionListRequestHeader(group),
        )
        return admin_bodies.decode_consumer_connection(response.body_bytes())
