# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Messages as a consumer receives them, decoded lazily from a response body.

Owns: :class:`ReceivedMessage` and :func:`decode_received`, the decoder of
pull and query response bodies (stored commit-log records back to back, the
layout drawn in ``apogee.model.message_codec``)::

    | record 0 | record 1 | ... |      each: TOTALSIZE MAGICCODE BODYCRC QUEUEID
                                       FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG
                                       BORNTIMESTAMP BORNHOST STORETIMESTAMP
                                       STOREHOST RECONSUMETIMES PREPAREDTXOFFSET
                                       int32 body length + body
                                       int8|int16 topic length + topic
                                       int16 properties length + properties

One pass over the body checks each record's framing (the same rules as
``message_codec.check_record``, without the CRC, which clients do not check)
and records its fixed fields and where its body and properties lie. Nothing
else is built up front: the property string is parsed on first access, the
body is cut out of the response on first access and, when its sysFlag says
zlib-compressed, inflated then. Bodies compressed with LZ4 or ZSTD are
handed over as stored, with the COMPRESSED bit still set.

The fields have :class:`apogee.model.message.MessageExt`'s meaning: in
particular ``sys_flag`` has the compression bits cleared for a zlib body (the
body a consumer gets is the inflated one) and ``msg_id`` is the offset id.

Errors: bad framing (truncated, garbage, lengths that disagree) raises
``ProtocolError`` naming the byte, since nothing after it can be trusted; a
body that does not inflate or a property string that is not UTF-8 belongs to
one message only and raises ``ProtocolError`` when that part is accessed, so
the good messages around it stay readable.

This module is compiled by Cython when a C compiler is at hand (the first
line); the same source runs interpreted otherwise. ``get16``/``get32``/``get64``
(``apogee._util.bytes_be``, inlined C compiled and ``struct`` interpreted) are
the only places where the two differ in how they read bytes.
"""

from __future__ import annotations

import zlib

import cython

from apogee.errors import ProtocolError
from apogee.model.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
    HostPort,
    MessageExt,
    property_value,
    string_to_properties,
)
from apogee.model.message_codec import unpack_host
from apogee.model.msgid import create_offset_msg_id

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import get16, get32, get64
else:
    from apogee._util.bytes_be import get16, get32, get64

_MAGIC_V1 = cython.declare(cython.int, -626843481)  # 0xDAA320A7
_MAGIC_V2 = cython.declare(cython.int, -626843477)  # 0xDAA320AB
_MIN_RECORD = cython.declare(cython.Py_ssize_t, 91)
_HOST_V6 = cython.declare(cython.int, BORNHOST_V6_FLAG)
_STORE_V6 = cython.declare(cython.int, STOREHOSTADDRESS_V6_FLAG)
_COMPRESSED = cython.declare(cython.int, COMPRESSED_FLAG)
_TYPE_MASK = cython.declare(cython.int, COMPRESSION_TYPE_MASK)
_ZLIB = cython.declare(cython.int, COMPRESSION_ZLIB)


# Consumers make and drop one of these per message: a free list spares the
# allocator, and leaving them out of the cycle collector spares its tracking and
# the collections their allocations would trigger (nothing they hold can point
# back at them: strings, bytes and a dict of strings).
@cython.final
@cython.no_gc  # type: ignore[attr-defined]  # not in Cython's typing stubs
@cython.freelist(64)  # type: ignore[attr-defined]
@cython.cclass
class ReceivedMessage:
    """One received message: fixed fields now, properties and body on first use.

    Holds a reference to the whole response body it came from.
    """

    # topic and reconsume_times may be set: a consumer gives a retried message
    # its original topic back, and counts an orderly queue's local retries
    topic = cython.declare(str, visibility="public")
    queue_id = cython.declare(cython.int, visibility="readonly")
    flag = cython.declare(cython.int, visibility="readonly")
    queue_offset = cython.declare(cython.longlong, visibility="readonly")
    commit_log_offset = cython.declare(cython.longlong, visibility="readonly")
    sys_flag = cython.declare(cython.int, visibility="readonly")
    born_timestamp = cython.declare(cython.longlong, visibility="readonly")
    store_timestamp = cython.declare(cython.longlong, visibility="readonly")
    reconsume_times = cython.declare(cython.int, visibility="public")
    prepared_transaction_offset = cython.declare(cython.longlong, visibility="readonly")
    store_size = cython.declare(cython.int, visibility="readonly")
    body_crc = cython.declare(cython.int, visibility="readonly")

    _data: bytes  # the response body
    _pos: cython.Py_ssize_t  # where the record starts in it
    _body_at: cython.Py_ssize_t
    _body_len: cython.Py_ssize_t
    _props_at: cython.Py_ssize_t
    _props_len: cython.Py_ssize_t
    _inflate: cython.bint  # the stored body is zlib-compressed
    _body: object  # bytes once cut out (and inflated)
    _props: object  # dict[str, str] once parsed
    _props_text: object  # str once decoded

    def __init__(self) -> None:
        raise TypeError("ReceivedMessage objects come from decode_received()")

    @property
    def body(self) -> bytes:
        """The body: a copy of the stored bytes, zlib bodies inflated.

        Raises:
            ProtocolError: the body is marked zlib-compressed but does not inflate.
        """
        if self._body is None:
            start = self._body_at
            if self._inflate:
                try:
                    self._body = zlib.decompress(
                        memoryview(self._data)[start : start + self._body_len]
                    )
                except zlib.error as exc:
                    raise ProtocolError(
                        f"message {self.msg_id}: compressed body does not inflate"
                    ) from exc
            else:
                self._body = self._data[start : start + self._body_len]
        body: bytes = self._body  # type: ignore[assignment]
        return body

    @property
    def body_size(self) -> int:
        """Bytes of the body as stored (compressed size for a compressed body), without a copy."""
        return self._body_len

    @property
    def body_view(self) -> memoryview:
        """The body without a copy: a view of the response (or of the inflated body)."""
        if self._inflate:
            return memoryview(self.body)
        return memoryview(self._data)[self._body_at : self._body_at + self._body_len]

    @property
    def properties(self) -> dict[str, str]:
        """The user and system properties, parsed on first access (a mutable dict).

        Raises:
            ProtocolError: the stored property string is not UTF-8.
        """
        if self._props is None:
            self._props = string_to_properties(self._property_text())
        props: dict[str, str] = self._props  # type: ignore[assignment]
        return props

    def get_property(self, name: str) -> str | None:
        """One property, without parsing them all when they have not been yet."""
        if self._props is not None:
            return self.properties.get(name)
        return property_value(self._property_text(), name)

    @cython.cfunc
    def _property_text(self) -> str:
        if self._props_text is None:
            start = self._props_at
            try:
                self._props_text = self._data[start : start + self._props_len].decode()
            except UnicodeDecodeError as exc:
                raise ProtocolError(f"message {self.msg_id}: properties are not UTF-8") from exc
        text: str = self._props_text  # type: ignore[assignment]
        return text

    @property
    def tags(self) -> str | None:
        return self.get_property(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.get_property(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.get_property(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def client_msg_id(self) -> str:
        """What consumers call msgId: the unique key when present, else the offset id."""
        return self.uniq_key or self.msg_id

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + commit-log offset)."""
        return create_offset_msg_id(self._host(False), self.commit_log_offset)

    @property
    def born_host(self) -> HostPort:
        return unpack_host(self._host(True))

    @property
    def store_host(self) -> HostPort:
        return unpack_host(self._host(False))

    @cython.cfunc
    def _host(self, born: cython.bint) -> bytes:
        born_len: cython.Py_ssize_t = 20 if self.sys_flag & _HOST_V6 else 8
        if born:
            at = self._pos + 48
            return self._data[at : at + born_len]
        at = self._pos + 48 + born_len + 8
        store_len: cython.Py_ssize_t = 20 if self.sys_flag & _STORE_V6 else 8
        return self._data[at : at + store_len]

    def to_message_ext(self) -> MessageExt:
        """The same message as a :class:`MessageExt` (every part decoded now)."""
        return MessageExt(
            topic=self.topic,
            queue_id=self.queue_id,
            flag=self.flag,
            body=self.body,
            properties=dict(self.properties),
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            store_timestamp=self.store_timestamp,
            store_host=self.store_host,
            reconsume_times=self.reconsume_times,
            prepared_transaction_offset=self.prepared_transaction_offset,
            queue_offset=self.queue_offset,
            commit_log_offset=self.commit_log_offset,
            store_size=self.store_size,
            body_crc=self.body_crc,
            msg_id=self.msg_id,
        )

    def __repr__(self) -> str:
        return (
            f"ReceivedMessage(topic={self.topic!r}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, commit_log_offset={self.commit_log_offset}, "
            f"body_len={self._body_len})"
        )


def decode_received(data: bytes | bytearray | memoryview) -> list[ReceivedMessage]:
    """The records of a pull or query response body, decoded lazily.

    Raises:
        ProtocolError: a record is cut short or its framing is inconsistent
            (the message names the byte and the problem).
    """
    if type(data) is bytes:
        return _scan(data)
    return _scan(bytes(data))


@cython.cfunc
def _bad(pos: cython.Py_ssize_t, problem: str) -> ProtocolError:
    return ProtocolError(f"record at byte {pos} of the response: {problem}")


@cython.cfunc
@cython.exceptval(check=False)
def _same_topic(
    p: cython.p_uchar,
    data: bytes,
    at: cython.Py_ssize_t,
    prev_at: cython.Py_ssize_t,
    length: cython.Py_ssize_t,
) -> cython.bint:
    """Whether the topic bytes at ``at`` equal those at ``prev_at``."""
    i: cython.Py_ssize_t
    if cython.compiled:
        # a plain loop: Cython would build a generator object for all(...)
        for i in range(length):  # noqa: SIM110
            if p[at + i] != p[prev_at + i]:
                return False
        return True
    return data[at : at + length] == data[prev_at : prev_at + length]


@cython.cfunc
def _scan(data: bytes) -> list[ReceivedMessage]:
    p: cython.p_uchar = data
    end: cython.Py_ssize_t = len(data)
    out: list[ReceivedMessage] = []
    pos: cython.Py_ssize_t = 0
    topic_at: cython.Py_ssize_t
    topic_len: cython.Py_ssize_t
    prev_topic_at: cython.Py_ssize_t = -1
    prev_topic_len: cython.Py_ssize_t = -1
    topic: str = ""
    msg: ReceivedMessage
    while pos < end:
        msg = ReceivedMessage.__new__(ReceivedMessage)
        topic_len = _frame(msg, p, pos, end)
        _fill(msg, data, p)
        topic_at = msg._props_at - 2 - topic_len
        # the records of one pull share their topic: decode it once
        if topic_len != prev_topic_len or not _same_topic(
            p, data, topic_at, prev_topic_at, topic_len
        ):
            try:
                topic = data[topic_at : topic_at + topic_len].decode()
            except UnicodeDecodeError:
                raise _bad(pos, "topic is not UTF-8") from None
            prev_topic_at = topic_at
            prev_topic_len = topic_len
        msg.topic = topic
        out.append(msg)
        pos += msg.store_size
    return out


@cython.cfunc
@cython.exceptval(-1)
def _frame(
    msg: ReceivedMessage, p: cython.p_uchar, pos: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    """Check the framing of the record at ``pos``; note where its parts lie in ``msg``.

    Returns the topic length (the topic ends 2 bytes before the properties).
    """
    if end - pos < _MIN_RECORD:
        raise _bad(pos, f"cut short: {end - pos} bytes left, a record has at least 91")
    total: cython.Py_ssize_t = get32(p, pos)
    magic: cython.int = get32(p, pos + 4)
    if magic not in (_MAGIC_V1, _MAGIC_V2):
        raise _bad(pos, f"bad magic 0x{magic & 0xFFFFFFFF:08X}")
    if total < _MIN_RECORD or total > end - pos:
        raise _bad(pos, f"total size {total} out of range ({end - pos} bytes left)")
    record_end: cython.Py_ssize_t = pos + total
    sys_flag: cython.int = get32(p, pos + 36)
    store_at: cython.Py_ssize_t = pos + (76 if sys_flag & _HOST_V6 else 64)  # STOREHOST
    rest: cython.Py_ssize_t = store_at + (20 if sys_flag & _STORE_V6 else 8)  # RECONSUMETIMES
    body_at: cython.Py_ssize_t = rest + 16
    if body_at > record_end:
        raise _bad(pos, "fixed fields overrun the total size")
    body_len: cython.Py_ssize_t = get32(p, rest + 12)
    if body_len < 0 or body_len > record_end - body_at:
        raise _bad(pos, f"body length {body_len} out of range")
    topic_at: cython.Py_ssize_t = body_at + body_len
    topic_len: cython.Py_ssize_t
    if magic == _MAGIC_V2:
        if topic_at + 2 > record_end:
            raise _bad(pos, "topic length overruns the total size")
        topic_len = (p[topic_at] << 8) | p[topic_at + 1]
        topic_at += 2
    else:
        if topic_at + 1 > record_end:
            raise _bad(pos, "topic length overruns the total size")
        topic_len = p[topic_at]
        if topic_len > 127:  # the v1 length byte is signed
            topic_len -= 256
        topic_at += 1
    if topic_len <= 0 or topic_len + 2 > record_end - topic_at:
        raise _bad(pos, f"topic length {topic_len} out of range")
    if p[topic_at + topic_len - 1] == 0:
        raise _bad(pos, "topic ends in a zero byte (a record cut short)")
    props_at: cython.Py_ssize_t = topic_at + topic_len + 2
    props_len: cython.Py_ssize_t = get16(p, props_at - 2)
    if props_len < 0 or props_at + props_len != record_end:
        raise _bad(pos, f"properties length {props_len} disagrees with the total size")
    if props_len > 0 and p[record_end - 1] == 0:
        raise _bad(pos, "properties end in a zero byte (a record cut short)")

    msg._pos = pos
    msg.store_size = total
    msg.sys_flag = sys_flag  # as stored until _fill
    msg._body_at = body_at
    msg._body_len = body_len
    msg._props_at = props_at
    msg._props_len = props_len
    return topic_len


@cython.cfunc
@cython.exceptval(check=False)
def _fill(msg: ReceivedMessage, data: bytes, p: cython.p_uchar) -> cython.void:
    """Read the fixed fields of the record :func:`_frame` has checked."""
    pos: cython.Py_ssize_t = msg._pos
    sys_flag: cython.int = msg.sys_flag
    store_at: cython.Py_ssize_t = pos + (76 if sys_flag & _HOST_V6 else 64)
    rest: cython.Py_ssize_t = store_at + (20 if sys_flag & _STORE_V6 else 8)
    msg.body_crc = get32(p, pos + 8)
    msg.queue_id = get32(p, pos + 12)
    msg.flag = get32(p, pos + 16)
    msg.queue_offset = get64(p, pos + 20)
    msg.commit_log_offset = get64(p, pos + 28)
    msg.born_timestamp = get64(p, pos + 40)
    msg.store_timestamp = get64(p, store_at - 8)
    msg.reconsume_times = get32(p, rest)
    msg.prepared_transaction_offset = get64(p, rest + 4)
    msg._data = data
    msg._body = None
    msg._props = None
    msg._props_text = None
    # before 5.x every compressed body was zlib, with no type bits
    if sys_flag & _COMPRESSED and (sys_flag & _TYPE_MASK) in (0, _ZLIB):
        msg._inflate = True
        msg.sys_flag = sys_flag & ~(_COMPRESSED | _TYPE_MASK)
    else:
        msg._inflate = False
