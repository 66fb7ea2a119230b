"""Transactional messages: how half, committed, op and check records are made.

Owns: the record rewrites of RocketMQ's transactional message bridge and
end-transaction processor, as pure functions over model values. No store, no clock
(callers pass the time in), no I/O.

Where things live (RocketMQ 4.x, TransactionalMessageBridge)::

    half message  RMQ_SYS_TRANS_HALF_TOPIC, queue 0; REAL_TOPIC / REAL_QID keep
                  its destination; sysFlag transaction bits cleared, so the
                  record is dispatched into the half topic's consume queue
    op record     RMQ_SYS_TRANS_OP_HALF_TOPIC, the half's queue id; TAGS "d";
                  body = the half's queue offset as decimal text
    committed     REAL_TOPIC / REAL_QID; REAL_*, TRAN_MSG removed; sysFlag
                  transaction bits COMMIT (8); PREPARED TRANSACTION OFFSET = the
                  half record's commit-log offset
    discarded     TRANS_CHECK_MAX_TIME_TOPIC, queue 0, the half's properties

A half message that the check service puts again (to move its check
forward, RocketMQ's way) is a new *copy* in the half queue. Every copy
carries TRAN_PREPARED_QUEUE_OFFSET, the queue offset of the first copy: its
*lineage*, which is what an END_TRANSACTION resolves, whichever copy it names.
A lineage number a producer wrote itself is dropped when the half is stored.

A batch of half messages (SEND_BATCH_MESSAGE with sysFlag PREPARED, which
RocketMQ's own store refuses as MESSAGE_ILLEGAL) is an Apogee extension: one
transaction for the whole batch. It is stored as one half record whose body
is the batch body as sent (inflated) and whose properties are the batch's
own plus APOGEE_HALF_BATCH (the message count); it is checked, committed and
rolled back as one. A commit appends the batch's messages to the real queue
in one batch append (consecutive queue offsets, each message with its own
properties followed by the half's, less the ones a commit drops and the
half's UNIQ_KEY, the transaction's id)::

    half record   body = [item 1][item 2]...  (the batch send's body format)
                  properties = batch-level ones + REAL_TOPIC, REAL_QID,
                  TRAN_MSG, PGROUP, APOGEE_HALF_BATCH=<count>
    committed     REAL_TOPIC / REAL_QID: <count> records, sysFlag COMMIT (8),
                  PREPARED TRANSACTION OFFSET 0 (a batch append writes none)
"""

from __future__ import annotations

from apogee.model.message import (
    HALF_BATCH_RESERVED,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    BatchItem,
    HostPort,
    MessageExt,
    StoreBatch,
    StoreMessage,
    properties_to_string,
    property_value,
    string_to_properties,
    with_transaction_type,
)
from apogee.model.message_codec import decode_batch, encode_record
from apogee.model.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from apogee.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

#: The internal group whose offsets of the half and op queues are the check progress.
TRANSACTION_GROUP = "CID_RMQ_SYS_TRANS"
HALF_QUEUE_ID = 0
REMOVE_TAG = "d"
#: Set on a half record that holds a whole batch: its message count.
PROPERTY_HALF_BATCH = "APOGEE_HALF_BATCH"
#: Cheap pre-test on the raw property string before parsing it.
TRAN_MARKER = PROPERTY_TRANSACTION_PREPARED + "\x01"


def is_half_message(properties: str) -> bool:
    """TRAN_MSG is "true" in any letter case (Java ``Boolean.parseBoolean``)."""
    if TRAN_MARKER not in properties:
        return False
    value = property_value(properties, PROPERTY_TRANSACTION_PREPARED)
    return value is not None and value.lower() == "true"


def half_message(msg: StoreMessage) -> StoreMessage:
    """The half record a transactional send becomes (``msg`` names the real topic/queue).

    A DELAY level is dropped, as the Java producer does before sending: a
    delayed half message would leave the half queue.
    """
    return _half_of(msg, string_to_properties(msg.properties))


def _half_of(msg: StoreMessage, props: dict[str, str]) -> StoreMessage:
    """``half_message`` of ``msg`` whose properties, parsed, are ``props``."""
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    props.pop(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, None)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return StoreMessage(
        TRANS_HALF_TOPIC, HALF_QUEUE_ID, msg.body, properties_to_string(props), msg.flag,
        with_transaction_type(msg.sys_flag, TRANSACTION_NOT_TYPE), msg.born_timestamp,
        msg.born_host, msg.store_host, msg.reconsume_times,
    )  # fmt: skip


# each name of HALF_BATCH_RESERVED with its separator, as it starts a pair
_BATCH_RESERVED = tuple(f"{name}\x01" for name in HALF_BATCH_RESERVED)


def half_batch_problem(items: list[BatchItem]) -> str | None:
    """Why a batch of half messages cannot be stored as it is; None when it can."""
    for item in items:
        props = item.properties
        for name in _BATCH_RESERVED:
            if name in props and (props.startswith(name) or f"\x02{name}" in props):
                return f"a message of a batch of half messages sets {name[:-1]} itself"
    return None


def batch_half(real: StoreMessage, count: int, producer_group: str) -> StoreMessage:
    """The one half record a batch of ``count`` half messages becomes.

    ``real`` names the real topic and queue, holds the batch body (inflated)
    and the batch-level properties. Check the items with ``half_batch_problem``
    first.
    """
    props = string_to_properties(real.properties)
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    props.setdefault(PROPERTY_PRODUCER_GROUP, producer_group)
    props[PROPERTY_HALF_BATCH] = str(count)
    return _half_of(real, props)


def is_batch_half(half: MessageExt) -> bool:
    """Whether ``half`` holds a whole batch (see the module docstring)."""
    return PROPERTY_HALF_BATCH in half.properties


def committed_batch(half: MessageExt, topic: str, queue_id: int) -> StoreBatch:
    """The batch a committed batch half becomes in its real topic.

    Raises:
        ProtocolError: the half's body is not a batch body.
    """
    return StoreBatch(
        topic, queue_id, decode_batch(half.body), _committed_properties(half, _BATCH_DROPS),
        with_transaction_type(half.sys_flag, TRANSACTION_COMMIT_TYPE), half.born_timestamp,
        half.born_host, half.store_host, half.reconsume_times,
    )  # fmt: skip


def lineage(half: MessageExt) -> int:
    """The queue offset of the first copy of this half message."""
    text = half.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
    return lineage_of(text, half.queue_offset)


def lineage_of(text: str | None, queue_offset: int) -> int:
    """The lineage a copy at ``queue_offset`` with TRAN_PREPARED_QUEUE_OFFSET ``text`` has."""
    if text and text.isdigit() and int(text) <= queue_offset:
        return int(text)
    return queue_offset


def destination(half: MessageExt) -> tuple[str, int] | None:
    """REAL_TOPIC / REAL_QID of a half record; None when either is missing or bad."""
    topic = half.properties.get(PROPERTY_REAL_TOPIC)
    queue_text = half.properties.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic or not queue_text.isdigit():
        return None
    return topic, int(queue_text)


def end_problem(half: MessageExt | None, header: EndTransactionRequestHeader) -> str | None:
    """Why END_TRANSACTION may not act on ``half``; None when it may (checkPrepareMessage)."""
    if half is None:
        return f"commitLogOffset {header.commit_log_offset}: no prepared transaction message there"
    if half.commit_log_offset != header.commit_log_offset:
        return (
            f"commitLogOffset {header.commit_log_offset} is not the start of a record "
            f"(the record there starts at {half.commit_log_offset})"
        )
    if half.topic != TRANS_HALF_TOPIC:
        return (
            f"commitLogOffset {header.commit_log_offset}: the message there is not a half message"
        )
    group = half.properties.get(PROPERTY_PRODUCER_GROUP)
    if group != header.producer_group:
        return f"producerGroup {header.producer_group!r} is not the half message's ({group!r})"
    if half.queue_offset != header.tran_state_table_offset:
        return (
            f"tranStateTableOffset {header.tran_state_table_offset} is not the half "
            f"message's queue offset {half.queue_offset}"
        )
    if destination(half) is None:
        return "the half message names no REAL_TOPIC / REAL_QID"
    return None


#: What END_TRANSACTION reads of a half record where it lies
#: (``apogee.model.kernels.record_facts``), and what a commit leaves out of its properties.
HALF_FACTS = (
    PROPERTY_PRODUCER_GROUP.encode(), PROPERTY_REAL_TOPIC.encode(),
    PROPERTY_REAL_QUEUE_ID.encode(), PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET.encode(),
    PROPERTY_HALF_BATCH.encode(),
)  # fmt: skip
_DROPS = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED)
COMMIT_DROPS = tuple(name.encode() for name in _DROPS)
#: What a batch commit leaves out of the half's properties, which the store then
#: appends to every message's own: also the marker and the transaction's own id.
_BATCH_DROPS = (*_DROPS, PROPERTY_HALF_BATCH, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


def _committed_properties(half: MessageExt, drops: tuple[str, ...]) -> str:
    """The property string of ``half`` without the names in ``drops``."""
    props = dict(half.properties)
    for name in drops:
        props.pop(name, None)
    return properties_to_string(props)


def committed_message(half: MessageExt, topic: str, queue_id: int) -> StoreMessage:
    """The record a committed half message becomes in its real topic."""
    return StoreMessage(
        topic, queue_id, half.body, _committed_properties(half, _DROPS), half.flag,
        with_transaction_type(half.sys_flag, TRANSACTION_COMMIT_TYPE), half.born_timestamp,
        half.born_host, half.store_host, half.reconsume_times,
        prepared_transaction_offset=half.commit_log_offset,
    )  # fmt: skip


def op_message(half: MessageExt, store_host: HostPort, now_ms: int) -> StoreMessage:
    """The "d" record saying the half copy at ``half.queue_offset`` is resolved."""
    return op_record(half.queue_id, half.queue_offset, store_host, now_ms)


_OP_PROPERTIES = properties_to_string(
    {PROPERTY_TAGS: REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "false"}
)


def op_record(queue_id: int, queue_offset: int, store_host: HostPort, now_ms: int) -> StoreMessage:
    """``op_message`` of the half copy at ``queue_offset`` of half queue ``queue_id``."""
    return StoreMessage(
        TRANS_OP_HALF_TOPIC, queue_id, str(queue_offset).encode(), _OP_PROPERTIES, 0, 0,
        now_ms, store_host, store_host,
    )  # fmt: skip


def renewed_half(half: MessageExt, *, checked: bool) -> StoreMessage:
    """A new copy of ``half`` for the end of the half queue.

    ``checked``: a check is sent for this copy, so its TRANSACTION_CHECK_TIMES
    goes up by one (absent counts as 0). Every copy names its lineage.
    """
    props = dict(half.properties)
    props[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(lineage(half))
    if checked:
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_times(half) + 1)
    return StoreMessage(
        TRANS_HALF_TOPIC, half.queue_id, half.body, properties_to_string(props), half.flag,
        half.sys_flag, half.born_timestamp, half.born_host, half.store_host,
        half.reconsume_times,
    )  # fmt: skip


def discarded_message(half: MessageExt) -> StoreMessage:
    """The copy kept in TRANS_CHECK_MAX_TIME_TOPIC of a half message checked too often."""
    return StoreMessage(
        TRANS_CHECK_MAX_TIME_TOPIC, 0, half.body, properties_to_string(half.properties),
        half.flag, half.sys_flag, half.born_timestamp, half.born_host, half.store_host,
        half.reconsume_times,
    )  # fmt: skip


def check_times(half: MessageExt) -> int:
    """How many checks were sent for this lineage so far."""
    text = half.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES, "")
    return int(text) if text.isdigit() else 0


def immunity_ms(half: MessageExt, timeout_ms: int) -> int | None:
    """CHECK_IMMUNITY_TIME_IN_SECONDS in ms; ``timeout_ms`` if unreadable; None if absent."""
    text = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    if text is None:
        return None
    try:
        seconds = int(text)
    except ValueError:
        return timeout_ms
    return timeout_ms if seconds < 0 else seconds * 1000


def check_request(copy: MessageExt) -> tuple[CheckTransactionStateRequestHeader, bytes]:
    """CHECK_TRANSACTION_STATE for a half copy: header, and the copy as its real message.

    The body is the record layout with topic and queue set back to REAL_TOPIC /
    REAL_QID (AbstractTransactionalMessageCheckListener.sendCheckMessage).
    """
    topic, queue_id = destination(copy) or (copy.topic, copy.queue_id)
    uniq = copy.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=copy.queue_offset,
        commit_log_offset=copy.commit_log_offset,
        topic=topic,
        msg_id=uniq,
        transaction_id=uniq,
        offset_msg_id=copy.msg_id,
    )
    body = encode_record(
        topic=topic, body=copy.body, queue_id=queue_id, flag=copy.flag,
        properties=properties_to_string(copy.properties), queue_offset=copy.queue_offset,
        physical_offset=copy.commit_log_offset, sys_flag=copy.sys_flag,
        born_timestamp=copy.born_timestamp, born_host=copy.born_host,
        store_timestamp=copy.store_timestamp, store_host=copy.store_host,
        reconsume_times=copy.reconsume_times,
    )  # fmt: skip
    return header, body
