"""What a producer does to messages before they go out: checks, compression, batch bodies.

Owns: ``check_message`` and ``check_batch`` (RocketMQ's client-side
Validators), ``compress_body`` (the COMPRESSED sysFlag decision) and
``encode_batches`` (batch bodies within the size limit, every message with
its UNIQ_KEY; the records are written by ``batch_body.pack_batches``). Pure: no
I/O; the caller passes the time.

Rules (Java DefaultMQProducerImpl, Validators, MessageBatch):
* a topic is legal by TopicValidator and not one producers may not send to;
  a body is bytes, not empty and at most ``max_size`` bytes;
* a single message whose body has at least ``threshold`` bytes goes out
  zlib-compressed with sysFlag bit 0x1 (COMPRESSED, the 4.x form: no
  compression-type bits, which 5.x readers take as zlib), when that makes
  it smaller; batches are never compressed;
* the messages of a batch share one topic, which is not a retry topic, and
  carry no delay level; they are cut into batches whose encoded body (22
  bytes of framing per message, its body and its property string, see
  ``apogee.model.message_codec``) stays within ``max_size``, the limit the
  broker applies to a batch; one message that alone exceeds it is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from zlib_ng import zlib_ng

from apogee.client.batch_body import first_unusual, pack_batches
from apogee.client.uniq_key import new_uniq_keys
from apogee.errors import InvalidMessageError
from apogee.model.message import (
    COMPRESSED_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
)
from apogee.model.topic import NOT_ALLOWED_SEND_TOPICS, RETRY_GROUP_TOPIC_PREFIX, validate_topic

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
DEFAULT_COMPRESS_THRESHOLD = 4096
DEFAULT_COMPRESS_LEVEL = 5

_UNIQ = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


@lru_cache(maxsize=4096)
def topic_problem(topic: str) -> str | None:
    """Why a producer may not send to ``topic``, or None (cached: topics repeat)."""
    why = validate_topic(topic)
    if why is None and topic in NOT_ALLOWED_SEND_TOPICS:
        why = f"the topic {topic} is reserved for the broker"
    return why


def check_message(msg: Message, max_size: int) -> None:
    """Refuse a message no broker would take, naming the field.

    Raises:
        InvalidMessageError: the topic or body is not acceptable.
    """
    why = topic_problem(msg.topic) if isinstance(msg.topic, str) else "the topic is not a str"
    if why is not None:
        raise InvalidMessageError(f"topic: {why}")
    body = msg.body
    if type(body) is not bytes:
        if not isinstance(body, bytes | bytearray | memoryview):
            raise InvalidMessageError(f"body: expected bytes, got {type(body).__name__}")
        body = msg.body = bytes(body)
    if not body:
        raise InvalidMessageError("body: the body is empty")
    if len(body) > max_size:
        raise InvalidMessageError(f"body: {len(body)} bytes, the limit is {max_size}")


def check_batch(messages: Sequence[Message], max_size: int) -> str:
    """Check every message of a batch and the batch rules; return the common topic.

    Raises:
        InvalidMessageError: an empty batch, mixed topics, a retry topic or a
            delay level, or a message ``check_message`` refuses.
    """
    if not messages:
        raise InvalidMessageError("messages: a batch needs at least one message")
    topic = messages[0].topic
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        raise InvalidMessageError(f"topic: a batch cannot be sent to the retry topic {topic}")
    check_message(messages[0], max_size)
    first = first_unusual(messages, topic, max_size)  # compiled: the usual batch, one C loop
    if first < 0:
        return topic
    delay = PROPERTY_DELAY_TIME_LEVEL
    # From the first unusual message on: check_message names a bad body's fault (or
    # takes another buffer as bytes), the rest are named here.
    for i in range(first, len(messages)):
        msg = messages[i]
        if msg.topic != topic:
            raise InvalidMessageError(
                f"messages[{i}].topic: {msg.topic!r}, but a batch goes to one topic ({topic!r})"
            )
        body = msg.body
        if type(body) is not bytes or not body or len(body) > max_size:
            check_message(msg, max_size)
        if delay in msg.properties:
            raise InvalidMessageError(f"messages[{i}].delay_level: batches cannot be delayed")
    return topic


def compress_body(body: bytes, threshold: int | None, level: int) -> bytes | None:
    """The compressed body to send instead of ``body``, or None to send it as it is."""
    if threshold is None or len(body) < threshold:
        return None
    packed: bytes = zlib_ng.compress(body, level)
    return packed if len(packed) < len(body) else None


#: The sysFlag a compressed single message is sent with.
COMPRESSED_SYS_FLAG = COMPRESSED_FLAG


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """One SEND_BATCH_MESSAGE body and what it holds."""

    body: bytes | bytearray  # written once, never changed after (retries send it again)
    count: int
    msg_id: str  # the UNIQ_KEYs of its messages, comma-joined (Java's SendResult.msgId)


def encode_batches(messages: Sequence[Message], now_ms: int, max_size: int) -> list[EncodedBatch]:
    """Batch bodies for ``messages`` in order, each at most ``max_size`` bytes.

    Messages without a UNIQ_KEY get one, set on the message itself (so a
    retry sends the same ids). Call ``check_batch`` first.

    Raises:
        InvalidMessageError: a message alone is larger than ``max_size``
            encoded, or its property string exceeds 32767 bytes.
    """

    def new_keys(count: int) -> list[str]:
        return new_uniq_keys(now_ms, count)

    return [EncodedBatch(*batch) for batch in pack_batches(messages, max_size, new_keys)]
