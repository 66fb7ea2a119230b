"""Messages as values: property strings, system flags, and what is stored.

Owns: the property-string codec, the property key names, the message sysFlag
bits, the message a broker hands to the store (:class:`StoreMessage`,
:class:`StoreBatch`), the decoded stored message (:class:`MessageExt`) and the
client-side :class:`Message`.

Property string (RocketMQ ``MessageDecoder.messageProperties2String``)::

    name 0x01 value 0x02  name 0x01 value 0x02 ...

Every pair, the last one included, ends with 0x02; pairs whose value is None
are not written. Parsing splits on 0x02, splits each piece at its first 0x01
and keeps the pair only when both name and value are non-empty; a later
duplicate name wins (Java ``HashMap.put``), which is what makes the batch
property merge of the store work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

# Property keys (RocketMQ MessageConst).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_BUYER_ID = "BUYER_ID"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
PROPERTY_MQ2_FLAG = "MQ2_FLAG"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_INSTANCE_ID = "INSTANCE_ID"
PROPERTY_CORRELATION_ID = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL = "TTL"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_DUP_INFO = "DUP_INFO"
PROPERTY_TRANSIENT_PREFIX = "__RMQ.TRANSIENT."

#: Properties a message of a batch of half messages may not carry itself: the broker
#: writes them once for the whole batch (or, for the delay level and the lineage, not
#: at all). An Apogee extension (RocketMQ has no batches of half messages).
HALF_BATCH_RESERVED = (
    PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_DELAY_TIME_LEVEL,
)  # fmt: skip

# Message sysFlag bits (RocketMQ MessageSysFlag).
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300

#: A host as Python's socket layer names it: (address text, port).
HostPort = tuple[str, int]


def transaction_type(sys_flag: int) -> int:
    """The transaction kind bits: NOT, PREPARED, COMMIT or ROLLBACK."""
    return sys_flag & TRANSACTION_TYPE_MASK


def with_transaction_type(sys_flag: int, tx_type: int) -> int:
    """``sys_flag`` with its transaction bits replaced by ``tx_type``."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | tx_type


def properties_to_string(properties: Mapping[str, str | None]) -> str:
    """Encode a property map; pairs whose value is None are skipped."""
    # a list, not a generator: join() makes one of a generator first anyway
    return "".join(
        [f"{name}\x01{value}\x02" for name, value in properties.items() if value is not None]
    )


def string_to_properties(text: str | None) -> dict[str, str]:
    """Decode a property string by RocketMQ's rules (see the module docstring)."""
    out: dict[str, str] = {}
    if not text:
        return out
    for piece in text.split(PROPERTY_SEPARATOR):
        name, _, value = piece.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            out[name] = value
    return out


def property_value(text: str, name: str) -> str | None:
    """``string_to_properties(text).get(name)`` without building the dict.

    A handful of ``rfind`` calls instead of a split per pair: the store calls
    this for TAGS, KEYS and UNIQ_KEY of every message it appends. The last
    pair named ``name`` wins; a pair with an empty value is skipped, so then
    the full parse decides.
    """
    marker = PROPERTY_SEPARATOR + name + NAME_VALUE_SEPARATOR
    at = text.rfind(marker)
    if at >= 0:
        start = at + len(marker)
    elif text.startswith(marker[1:]):
        start = len(marker) - 1
    else:
        return None
    end = text.find(PROPERTY_SEPARATOR, start)
    value = text[start:] if end < 0 else text[start:end]
    if value:
        return value
    return string_to_properties(text).get(name)


def merge_batch_properties(inner: str, batch: str) -> str:
    """The stored property string of one message of a batch (J4 batch encoder).

    The batch-level properties follow the message's own, with a 0x02 inserted
    when the message's string does not already end with one.
    """
    if not batch:
        return inner
    if inner and not inner.endswith(PROPERTY_SEPARATOR):
        return inner + PROPERTY_SEPARATOR + batch
    return inner + batch


@dataclass(slots=True)
class StoreMessage:
    """One message as the broker hands it to the store for appending.

    ``properties`` is the encoded property string, stored as is; the store
    derives the tag code, keys and unique key from it.
    """

    topic: str
    queue_id: int
    body: bytes | bytearray | memoryview
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    store_host: HostPort = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class BatchItem(NamedTuple):
    """One message of a batch body: its flag, body and own property string."""

    flag: int
    body: bytes | memoryview
    properties: str


@dataclass(slots=True)
class StoreBatch:
    """A batch send: many messages for one topic queue, appended in one call.

    ``properties`` are the batch-level properties (request header plus what
    the broker adds, such as CLUSTER); the store appends them to every item's
    own properties, as RocketMQ's batch encoder does.
    """

    topic: str
    queue_id: int
    items: list[BatchItem]
    properties: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    store_host: HostPort = ("127.0.0.1", 0)
    reconsume_times: int = 0


@dataclass(frozen=True, slots=True)
class MessageExt:
    """A stored message decoded from its commit-log record."""

    topic: str
    queue_id: int
    flag: int
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    born_host: HostPort
    store_timestamp: int
    store_host: HostPort
    reconsume_times: int
    prepared_transaction_offset: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    body_crc: int
    msg_id: str  # the offset message id (store host + commit-log offset)

    @property
    def body_size(self) -> int:
        return len(self.body)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def client_msg_id(self) -> str:
        """What consumers call msgId: the unique key when present, else the offset id."""
        return self.uniq_key or self.msg_id


@dataclass(slots=True, init=False)
class Message:
    """A message as a producer builds it.

    ``tags``, ``keys`` and ``delay_level`` are stored as the TAGS, KEYS and
    DELAY properties, as RocketMQ's Message does; ``keys`` may be one string
    or several, joined with spaces. ``properties`` is copied, so the caller's
    mapping is never changed by the producer (which adds UNIQ_KEY).
    """

    topic: str
    body: bytes
    flag: int
    properties: dict[str, str]

    def __init__(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        flag: int = 0,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties = {} if properties is None else dict(properties)
        if tags is not None:
            self.properties[PROPERTY_TAGS] = tags
        if keys is not None:
            self.keys = keys
        if delay_level:
            self.delay_level = delay_level

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        _put(self.properties, PROPERTY_TAGS, value)

    @property
    def keys(self) -> str | None:
        """The KEYS property: space-separated keys the broker indexes."""
        return self.properties.get(PROPERTY_KEYS)

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if value is not None and not isinstance(value, str):
            value = KEY_SEPARATOR.join(value)
        _put(self.properties, PROPERTY_KEYS, value)

    @property
    def delay_level(self) -> int:
        """The delay level (1..18 on a default broker); 0 for none."""
        value = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(value) if value and value.lstrip("-").isdigit() else 0

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        _put(self.properties, PROPERTY_DELAY_TIME_LEVEL, str(level) if level else None)

    @property
    def uniq_key(self) -> str | None:
        """The producer's unique id (UNIQ_KEY), set on the first send."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


def _put(properties: dict[str, str], name: str, value: str | None) -> None:
    if value is None:
        properties.pop(name, None)
    else:
        properties[name] = value
