"""Typed custom headers: one dataclass per RocketMQ header class <-> ext-field map.

Owns: the exact ext-field names of every request/response header a 4.x
client, broker, name server or mqadmin uses, and their parsing rules.

Rules (RemotingCommand.decodeCommandCustomHeader):
* Field names on the wire are RocketMQ's Java field names (camelCase of the
  Python name unless a ``wire`` name is given, e.g. ``clientID``).
* A required field that is missing, or that does not parse, raises
  HeaderFieldError naming the wire field. An optional field that is missing
  or empty takes its default; one that is present but unparsable is an error
  too (bad input is refused, not silently dropped).
* Numbers parse from decimal strings ("12"), booleans from "true"/"false"
  (any case) and "1"/"0" (what the C++ client of PyPI rocketmq 0.4.4 sends).
* Unknown ext fields are ignored, which covers the 5.x routing fields (ns,
  nsd, bname, oway, lo) and the ACL fields (AccessKey, Signature,
  OnsChannel, SecurityToken).
* Output omits None; booleans become "true"/"false", numbers decimal text.

Send and pull headers are on the hot path and are decoded by straight-line
code; the rest go through one small declarative reader.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_type_hints

from apogee.codes import RequestCode
from apogee.errors import HeaderFieldError
from apogee.protocol import header_kernels, header_scan
from apogee.protocol.command import RemotingCommand

ExtFields = dict[str, str]
H = TypeVar("H", bound="ExtHeader")


# -- scalar parsing ---------------------------------------------------------


# Java's int and long: a header number must fit the field it is read into.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _int(name: str, value: str, bits: int = 64) -> int:
    try:
        number = int(value)
    except ValueError:
        raise HeaderFieldError(name, f"not an integer: {value[:40]!r}") from None
    if bits == 32:
        if not INT32_MIN <= number <= INT32_MAX:
            raise HeaderFieldError(name, f"{value[:40]} does not fit a 32-bit int")
    elif not INT64_MIN <= number <= INT64_MAX:
        raise HeaderFieldError(name, f"{value[:40]} does not fit a 64-bit long")
    return number


_BOOLS = {"true": True, "false": False, "1": True, "0": False}


def _bool(name: str, value: str) -> bool:
    # The C++ client bundled with PyPI rocketmq 0.4.4 writes booleans as "0"/"1".
    parsed = _BOOLS.get(value) if value in _BOOLS else _BOOLS.get(value.lower())
    if parsed is None:
        raise HeaderFieldError(name, f"not a boolean: {value!r}")
    return parsed


def req_str(ext: ExtFields, name: str) -> str:
    value = ext.get(name)
    if value is None:
        raise HeaderFieldError(name, "missing")
    return value


def req_int(ext: ExtFields, name: str, bits: int = 64) -> int:
    """A required number; ``bits`` is 32 for a Java int field, 64 for a long."""
    value = ext.get(name)
    if value is None:
        raise HeaderFieldError(name, "missing")
    return _int(name, value, bits)


def opt_int(ext: ExtFields, name: str, default: int | None = None, bits: int = 64) -> int | None:
    value = ext.get(name)
    if not value:
        return default
    return _int(name, value, bits)


def opt_bool(ext: ExtFields, name: str, default: bool = False) -> bool:
    value = ext.get(name)
    if not value:
        return default
    return _bool(name, value)


def bool_str(value: bool) -> str:
    return "true" if value else "false"


# -- declarative headers ----------------------------------------------------


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """Declare a field whose ext-field name is not the camelCase of its own."""
    return field(default=default, metadata={"wire": name})


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    attr: str
    wire: str
    kind: type
    required: bool


_SPECS: dict[type, tuple[_FieldSpec, ...]] = {}


def _spec(cls: type) -> tuple[_FieldSpec, ...]:
    spec = _SPECS.get(cls)
    if spec is None:
        hints = get_type_hints(cls)
        items = []
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            args = hint.__args__ if isinstance(hint, types.UnionType) else (hint,)
            kind = next(a for a in args if a is not type(None))
            required = f.default is dataclasses.MISSING
            items.append(_FieldSpec(f.name, f.metadata.get("wire", _camel(f.name)), kind, required))
        spec = _SPECS[cls] = tuple(items)
    return spec


class ExtHeader:
    """Base of the declarative headers: ``from_ext`` / ``to_ext`` by field spec."""

    __slots__ = ()

    @classmethod
    def from_ext(cls: type[H], ext: ExtFields) -> H:
        kwargs: dict[str, Any] = {}
        for f in _spec(cls):
            value = ext.get(f.wire)
            if value is None or (value == "" and f.kind is not str):
                if f.required:
                    raise HeaderFieldError(f.wire, "missing")
                continue
            if f.kind is int:
                kwargs[f.attr] = _int(f.wire, value)
            elif f.kind is bool:
                kwargs[f.attr] = _bool(f.wire, value)
            else:
                kwargs[f.attr] = value
        return cls(**kwargs)

    def to_ext(self) -> ExtFields:
        out: ExtFields = {}
        for f in _spec(type(self)):
            value = getattr(self, f.attr)
            if value is None:
                continue
            if value is True or value is False:
                out[f.wire] = bool_str(value)
            else:
                out[f.wire] = str(value)
        return out


# -- send (hot path) --------------------------------------------------------


@dataclass(slots=True)
class SendMessageRequestHeader:
    """SEND_MESSAGE (long names) and SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (a..n)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None
    broker_name: str | None = None

    @classmethod
    def from_ext(cls, ext: ExtFields) -> SendMessageRequestHeader:
        """Decode the long-named SEND_MESSAGE form."""
        return _send_header(ext, _LONG_NAMES, cls)

    @classmethod
    def from_ext_v2(cls, ext: ExtFields) -> SendMessageRequestHeader:
        """Decode the one-letter SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE form."""
        return _send_header(ext, _SHORT_NAMES, cls)

    def to_ext(self) -> ExtFields:
        out = {
            "producerGroup": self.producer_group,
            "topic": self.topic,
            "defaultTopic": self.default_topic,
            "defaultTopicQueueNums": str(self.default_topic_queue_nums),
            "queueId": str(self.queue_id),
            "sysFlag": str(self.sys_flag),
            "bornTimestamp": str(self.born_timestamp),
            "flag": str(self.flag),
            "unitMode": bool_str(self.unit_mode),
            "batch": bool_str(self.batch),
        }
        if self.properties is not None:
            out["properties"] = self.properties
        if self.reconsume_times is not None:
            out["reconsumeTimes"] = str(self.reconsume_times)
        if self.max_reconsume_times is not None:
            out["maxReconsumeTimes"] = str(self.max_reconsume_times)
        if self.broker_name is not None:
            out["brokerName"] = self.broker_name
        return out

    def to_ext_v2(self) -> ExtFields:
        out = {
            "a": self.producer_group,
            "b": self.topic,
            "c": self.default_topic,
            "d": str(self.default_topic_queue_nums),
            "e": str(self.queue_id),
            "f": str(self.sys_flag),
            "g": str(self.born_timestamp),
            "h": str(self.flag),
            "k": bool_str(self.unit_mode),
            "m": bool_str(self.batch),
        }
        if self.properties is not None:
            out["i"] = self.properties
        if self.reconsume_times is not None:
            out["j"] = str(self.reconsume_times)
        if self.max_reconsume_times is not None:
            out["l"] = str(self.max_reconsume_times)
        if self.broker_name is not None:
            out["n"] = self.broker_name
        return out


# Wire names of the send header's fields, in field order: SEND_MESSAGE's
# Java names and the one-letter names of SEND_MESSAGE_V2.
_LONG_NAMES = (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
    "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "batch",
    "maxReconsumeTimes", "brokerName",
)  # fmt: skip
_SHORT_NAMES = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "l", "n")


# The compiled decode of the usual send header; interpreted, the code below is faster.
_send_kernel = header_kernels.send_header if header_kernels.COMPILED else None


def _send_header(
    ext: ExtFields, names: tuple[str, ...], cls: type[SendMessageRequestHeader]
) -> SendMessageRequestHeader:
    """Decode a send header; every send request goes through here.

    Compiled, ``header_kernels.send_header`` reads the usual header; else,
    and where it declines, the fast path converts with plain ``int()`` and a
    dict look-up and lets any miss fall to the checked path, which accepts
    the same inputs and names the field it refuses.
    """
    if _send_kernel is not None:
        decoded: SendMessageRequestHeader | None = _send_kernel(ext, names, cls)
        if decoded is not None:
            return decoded
    return _send_header_py(ext, names, cls)


def _send_header_py(
    ext: ExtFields, names: tuple[str, ...], cls: type[SendMessageRequestHeader]
) -> SendMessageRequestHeader:
    """``_send_header`` in Python alone (and the reference of the compiled kernel)."""
    get = ext.get
    try:
        reconsume = get(names[9])
        unit = get(names[10])
        batch = get(names[11])
        max_reconsume = get(names[12])
        header = cls(
            ext[names[0]],
            ext[names[1]],
            ext[names[2]],
            int(ext[names[3]]),
            int(ext[names[4]]),
            int(ext[names[5]]),
            int(ext[names[6]]),
            int(ext[names[7]]),
            get(names[8]),
            int(reconsume) if reconsume else None,
            _BOOLS[unit] if unit else False,
            _BOOLS[batch] if batch else False,
            int(max_reconsume) if max_reconsume else None,
            get(names[13]) or None,
        )
        # Java int fields (queue nums, queue id, sysFlag, flag, reconsume
        # times) and the long bornTimestamp: anything wider goes the checked way.
        if (
            INT32_MIN <= header.queue_id <= INT32_MAX
            and INT32_MIN <= header.sys_flag <= INT32_MAX
            and INT32_MIN <= header.flag <= INT32_MAX
            and INT64_MIN <= header.born_timestamp <= INT64_MAX
            and INT32_MIN <= header.default_topic_queue_nums <= INT32_MAX
            and INT32_MIN <= (header.reconsume_times or 0) <= INT32_MAX
            and INT32_MIN <= (header.max_reconsume_times or 0) <= INT32_MAX
        ):
            return header
    except (KeyError, ValueError):
        pass
    return cls(
        req_str(ext, names[0]),
        req_str(ext, names[1]),
        req_str(ext, names[2]),
        req_int(ext, names[3], 32),
        req_int(ext, names[4], 32),
        req_int(ext, names[5], 32),
        req_int(ext, names[6]),
        req_int(ext, names[7], 32),
        ext.get(names[8]),
        opt_int(ext, names[9], bits=32),
        opt_bool(ext, names[10]),
        opt_bool(ext, names[11]),
        opt_int(ext, names[12], bits=32),
        ext.get(names[13]) or None,
    )


# The header of a SEND_MESSAGE_V2 or a PULL_MESSAGE that ``header_scan.decode_frame``
# left with its ext fields unread, read from its frame.
_lazy_send = header_scan.send_header_v2 if header_scan.COMPILED else None
_lazy_pull = header_scan.pull_header_lazy if header_scan.COMPILED else None


def decode_send_request(request: RemotingCommand) -> SendMessageRequestHeader:
    """The send header of a SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE request:
    read from its frame when ``decode_frame`` left its ext fields unread and the reader
    there takes it, else decoded from ``request.ext_fields``."""
    if _lazy_send is not None:
        header: SendMessageRequestHeader | None = _lazy_send(request, SendMessageRequestHeader)
        if header is not None:
            return header
    return decode_send_header(request.code, request.ext_fields)


def decode_send_header(code: int, ext: ExtFields) -> SendMessageRequestHeader:
    """The send header of a SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE."""
    # _send_header inlined, with the codes as plain ints: every send comes here
    names = _LONG_NAMES if code == _SEND_MESSAGE else _SHORT_NAMES
    header: SendMessageRequestHeader | None = None
    if _send_kernel is not None:
        header = _send_kernel(ext, names, SendMessageRequestHeader)
    if header is None:
        header = _send_header_py(ext, names, SendMessageRequestHeader)
    if code == _SEND_BATCH_MESSAGE:
        header.batch = True
    return header


_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader:
    """Answer to a send; ``MSG_REGION`` and ``TRACE_ON`` ride along as ext fields."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = None
    trace_on: str | None = None

    @classmethod
    def from_ext(cls, ext: ExtFields) -> SendMessageResponseHeader:
        return cls(
            req_str(ext, "msgId"),
            req_int(ext, "queueId"),
            req_int(ext, "queueOffset"),
            ext.get("transactionId"),
            ext.get("MSG_REGION"),
            ext.get("TRACE_ON"),
        )

    def to_ext(self) -> ExtFields:
        out = {
            "msgId": self.msg_id,
            "queueId": str(self.queue_id),
            "queueOffset": str(self.queue_offset),
        }
        if self.transaction_id is not None:
            out["transactionId"] = self.transaction_id
        if self.msg_region is not None:
            out["MSG_REGION"] = self.msg_region
        if self.trace_on is not None:
            out["TRACE_ON"] = self.trace_on
        return out


# -- pull (hot path) --------------------------------------------------------


# Not frozen, as the send header: a frozen dataclass's __init__ sets each of its twelve
# fields through object.__setattr__, which costs more than the rest of the decode, and
# every pull builds one (a parked pull, once more when it is run again).
@dataclass(slots=True)
class PullMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None

    @classmethod
    def from_ext(cls, ext: ExtFields) -> PullMessageRequestHeader:
        """The pull header of ``ext``; every pull request goes through here.

        Compiled, ``header_kernels.pull_header`` reads the usual header; else,
        and where it declines, the fast path converts with plain ``int()`` and
        lets any miss fall to the checked path, which accepts the same inputs
        and names the field it refuses.
        """
        if _pull_kernel is not None:
            decoded: PullMessageRequestHeader | None = _pull_kernel(ext, cls)
            if decoded is not None:
                return decoded
        return _pull_header_py(ext, cls)

    @classmethod
    def of_request(cls, request: RemotingCommand) -> PullMessageRequestHeader:
        """The pull header of a PULL_MESSAGE request: read from its frame when
        ``decode_frame`` left its ext fields unread and the reader there takes it,
        else ``from_ext(request.ext_fields)``."""
        if _lazy_pull is not None:
            decoded: PullMessageRequestHeader | None = _lazy_pull(request, cls)
            if decoded is not None:
                return decoded
        return cls.from_ext(request.ext_fields)

    def to_ext(self) -> ExtFields:
        out = {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "queueOffset": str(self.queue_offset),
            "maxMsgNums": str(self.max_msg_nums),
            "sysFlag": str(self.sys_flag),
            "commitOffset": str(self.commit_offset),
            "suspendTimeoutMillis": str(self.suspend_timeout_millis),
            "subVersion": str(self.sub_version),
        }
        if self.subscription is not None:
            out["subscription"] = self.subscription
        if self.expression_type is not None:
            out["expressionType"] = self.expression_type
        if self.max_msg_bytes is not None:
            out["maxMsgBytes"] = str(self.max_msg_bytes)
        return out


def _pull_header_py(
    ext: ExtFields, cls: type[PullMessageRequestHeader]
) -> PullMessageRequestHeader:
    """``PullMessageRequestHeader.from_ext`` in Python alone (and the reference of the
    compiled kernel)."""
    get = ext.get
    try:
        max_bytes = get("maxMsgBytes")
        header = cls(
            ext["consumerGroup"],
            ext["topic"],
            int(ext["queueId"]),
            int(ext["queueOffset"]),
            int(ext["maxMsgNums"]),
            int(ext["sysFlag"]),
            int(ext["commitOffset"]),
            int(ext["suspendTimeoutMillis"]),
            int(ext["subVersion"]),
            get("subscription"),
            get("expressionType") or None,
            int(max_bytes) if max_bytes else None,
        )
        # Java int fields (queue id, maxMsgNums, sysFlag, maxMsgBytes) and the longs:
        # anything wider goes the checked way.
        if (
            INT32_MIN <= header.queue_id <= INT32_MAX
            and INT32_MIN <= header.max_msg_nums <= INT32_MAX
            and INT32_MIN <= header.sys_flag <= INT32_MAX
            and INT32_MIN <= (header.max_msg_bytes or 0) <= INT32_MAX
            and INT64_MIN <= header.queue_offset <= INT64_MAX
            and INT64_MIN <= header.commit_offset <= INT64_MAX
            and INT64_MIN <= header.suspend_timeout_millis <= INT64_MAX
            and INT64_MIN <= header.sub_version <= INT64_MAX
        ):
            return header
    except (KeyError, ValueError):
        pass
    return cls(
        req_str(ext, "consumerGroup"),
        req_str(ext, "topic"),
        req_int(ext, "queueId", 32),
        req_int(ext, "queueOffset"),
        req_int(ext, "maxMsgNums", 32),
        req_int(ext, "sysFlag", 32),
        req_int(ext, "commitOffset"),
        req_int(ext, "suspendTimeoutMillis"),
        req_int(ext, "subVersion"),
        ext.get("subscription"),
        ext.get("expressionType") or None,
        opt_int(ext, "maxMsgBytes", bits=32),
    )


_pull_kernel = header_kernels.pull_header if header_kernels.COMPILED else None


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader:
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int

    @classmethod
    def from_ext(cls, ext: ExtFields) -> PullMessageResponseHeader:
        return cls(
            req_int(ext, "suggestWhichBrokerId"),
            req_int(ext, "nextBeginOffset"),
            req_int(ext, "minOffset"),
            req_int(ext, "maxOffset"),
        )

    def to_ext(self) -> ExtFields:
        return {
            "suggestWhichBrokerId": str(self.suggest_which_broker_id),
            "nextBeginOffset": str(self.next_begin_offset),
            "minOffset": str(self.min_offset),
            "maxOffset": str(self.max_offset),
        }


# -- broker: offsets, client management, transactions, query ----------------


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader(ExtHeader):
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetResponseHeader(ExtHeader):
    offset: int


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(ExtHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader(ExtHeader):
    topic: str
    queue_id: int
    committed: bool = True


@dataclass(frozen=True, slots=True)
class GetMaxOffsetResponseHeader(ExtHeader):
    offset: int


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader(ExtHeader):
    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class GetMinOffsetResponseHeader(ExtHeader):
    offset: int


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(ExtHeader):
    topic: str
    queue_id: int
    timestamp: int
    boundary_type: str | None = None


@dataclass(frozen=True, slots=True)
class SearchOffsetResponseHeader(ExtHeader):
    offset: int


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(ExtHeader):
    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader(ExtHeader):
    timestamp: int


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(ExtHeader):
    offset: int  # commit-log offset of the consumed message
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader(ExtHeader):
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int  # 0 NOT_TYPE, 8 COMMIT, 12 ROLLBACK
    msg_id: str
    topic: str | None = None
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader(ExtHeader):
    tran_state_table_offset: int
    commit_log_offset: int
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(ExtHeader):
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader(ExtHeader):
    consumer_group: str


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(ExtHeader):
    consumer_group: str


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(ExtHeader):
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader(ExtHeader):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(ExtHeader):
    offset: int
    topic: str | None = None


# -- broker: admin ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(ExtHeader):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    # Java marks it not-null with a default of false; the C++ admin call omits it.
    order: bool = False
    attributes: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(ExtHeader):
    topic: str


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader(ExtHeader):
    topic: str


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader(ExtHeader):
    consumer_group: str
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader(ExtHeader):
    consumer_group: str


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader(ExtHeader):
    producer_group: str


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader(ExtHeader):
    group_name: str
    clean_offset: bool = False  # 5.x name
    remove_offset: bool = False  # 4.x name


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader(ExtHeader):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResultRequestHeader(ExtHeader):
    """CONSUME_MESSAGE_DIRECTLY: an admin asks one consumer to consume one message."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None  # the offset message id
    broker_name: str | None = None  # filled in by the broker
    topic: str | None = None
    topic_sys_flag: int | None = None  # filled in by the broker
    group_sys_flag: int | None = None  # filled in by the broker


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader(ExtHeader):
    topic: str
    group: str
    timestamp: int
    is_force: bool
    queue_id: int | None = None  # 5.x
    offset: int | None = None  # 5.x


@dataclass(frozen=True, slots=True)
class QueryTopicConsumeByWhoRequestHeader(ExtHeader):
    topic: str


@dataclass(frozen=True, slots=True)
class ViewBrokerStatsDataRequestHeader(ExtHeader):
    stats_name: str  # TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE
    stats_key: str  # the topic, or "topic@group"


# -- name server ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(ExtHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int = 0
    heartbeat_timeout_millis: int | None = None  # 5.x
    enable_acting_master: bool | None = None  # 5.x


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(ExtHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(ExtHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(ExtHeader):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader(ExtHeader):
    namespace: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(ExtHeader):
    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(ExtHeader):
    value: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteKVConfigRequestHeader(ExtHeader):
    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader(ExtHeader):
    namespace: str


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerRequestHeader(ExtHeader):
    broker_name: str


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerResponseHeader(ExtHeader):
    wipe_topic_count: int


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerRequestHeader(ExtHeader):
    broker_name: str


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerResponseHeader(ExtHeader):
    add_topic_count: int


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(ExtHeader):
    topic: str
    cluster_name: str | None = None  # 5.x


@dataclass(frozen=True, slots=True)
class QueryDataVersionRequestHeader(ExtHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(ExtHeader):
    changed: bool


@dataclass(frozen=True, slots=True)
class GetTopicsByClusterRequestHeader(ExtHeader):
    cluster: str


#: Declarative request header of each request code (send and pull have their
#: own straight-line decoders: ``decode_send_header``, ``PullMessageRequestHeader``).
REQUEST_HEADERS: dict[int, type[ExtHeader]] = {
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    RequestCode.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnregisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
}

#: Declarative response header of each request code that has one.
RESPONSE_HEADERS: dict[int, type[ExtHeader]] = {
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetResponseHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetResponseHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetResponseHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeResponseHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageResponseHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerResponseHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigResponseHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerResponseHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerResponseHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionResponseHeader,
}
