# cython: language_level=3, boundscheck=False, wraparound=False
"""The bodies of batch sends (SEND_BATCH_MESSAGE), written in one pass.

Owns: :func:`first_unusual`, the pass of ``outgoing.check_batch`` over a batch's
messages, :func:`block_keys`, the texts of a block of UNIQ_KEYs (a batch's new
ids), and :func:`pack_batches`, the kernel of ``outgoing.encode_batches``: the
messages of a send given their UNIQ_KEYs and framed back to back into bodies
of at most ``max_size`` bytes (RocketMQ ``MessageDecoder.encodeMessages``,
drawn in ``apogee.model.message_codec``)::

    | TOTALSIZE | MAGICCODE 0 | BODYCRC 0 | FLAG | BODYLEN | body | PROPLEN | properties |
      int32       int32         int32       int32  int32            int16

A first pass encodes each message's property string and adds up the sizes
(so each body is allocated once, at its size); a second writes the records.
The common message carries nothing but its UNIQ_KEY: its property string is
written from the key without building the string first.

This module is compiled by Cython when a C compiler is at hand (the first
line); the same source runs interpreted otherwise. The two differ in the
second pass only: compiled, records are written into one buffer (``_write``);
interpreted, their parts are joined (``_joined``), which is faster there.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

import cython

from apogee.errors import InvalidMessageError
from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
)
from apogee.model.message_codec import MAX_PROPERTIES_LENGTH

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import put16, put32, put_hex4
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.cpython.unicode import PyUnicode_1BYTE_DATA, PyUnicode_New
    from cython.cimports.libc.string import memcpy
else:
    from apogee._util.bytes_be import put16, put32, put_hex4

_UNIQ = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_UNIQ_FIELD = f"{_UNIQ}\x01".encode()  # the name and its separator, before the key
_FIXED = cython.declare(cython.Py_ssize_t, 22)  # framing bytes of one message
_MAX_PROPS = cython.declare(cython.Py_ssize_t, MAX_PROPERTIES_LENGTH)

_HEAD = struct.Struct(">iiiii")  # TOTALSIZE MAGICCODE BODYCRC FLAG BODYLEN
_I16 = struct.Struct(">h")


# The writers of _write (with bytes_be's put16/put32 for the numbers): a few C
# statements a field once compiled. _write runs compiled only (it writes into a
# new bytes object through its pointer); interpreted code joins the parts
# instead (``_joined``), which a call a field would make slower anyway.


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _put_bytes(
    p: cython.p_uchar, at: cython.Py_ssize_t, src: cython.p_uchar, n: cython.Py_ssize_t
) -> cython.void:
    # a plain loop the C compiler turns into a memcpy: a slice assignment would
    # cost a slice object, index conversions and a buffer request
    j: cython.Py_ssize_t
    for j in range(n):
        p[at + j] = src[j]


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _put_ascii(p: cython.p_uchar, at: cython.Py_ssize_t, text: str) -> cython.void:
    """Write ``text``, known to be ASCII, as bytes (without encoding it first).

    An ASCII str keeps one byte a character: they are copied as they are.
    """
    _put_bytes(p, at, cython.cast(cython.p_uchar, PyUnicode_1BYTE_DATA(text)), len(text))


def first_unusual(messages: Sequence[Message], topic: str, max_size: int) -> int:
    """The index of the first message of ``messages`` that is not a usual batch member; -1.

    A usual member goes to ``topic``, has a body of 1 to ``max_size`` bytes
    (``bytes``, not another buffer) and no delay level: what every message of
    a batch must be (``outgoing.check_batch`` takes over at the first other one).
    """
    n: cython.Py_ssize_t = len(messages)
    limit: cython.Py_ssize_t = max_size
    size: cython.Py_ssize_t
    i: cython.Py_ssize_t
    delay: str = PROPERTY_DELAY_TIME_LEVEL
    for i in range(n):
        msg = messages[i]
        if msg.topic != topic:
            return i
        body = msg.body
        if type(body) is not bytes:
            return i
        size = len(body)
        if size == 0 or size > limit or delay in msg.properties:
            return i
    return -1


def block_keys(base: str, first: int, count: int) -> list[str]:
    """The ``count`` UNIQ_KEYs of a block (``uniq_key.uniq_key_block``): key ``k`` is
    ``base``, then the counter ``(first + k) & 0xFFFF`` as four uppercase hex digits.

    Compiled, each key is a new str written through its pointer: a batch of a
    hundred messages makes a hundred of them.
    """
    if not cython.compiled or not base.isascii():
        return [f"{base}{(first + k) & 0xFFFF:04X}" for k in range(count)]
    n: cython.Py_ssize_t = len(base)
    src: cython.p_uchar = PyUnicode_1BYTE_DATA(base)
    start: cython.longlong = first
    k: cython.Py_ssize_t
    keys: list[str] = []
    for k in range(count):
        key = PyUnicode_New(n + 4, 127)
        out: cython.p_uchar = PyUnicode_1BYTE_DATA(key)
        memcpy(out, src, n)
        put_hex4(out, n, (start + k) & 0xFFFF)
        keys.append(key)
    return keys


def pack_batches(
    messages: Sequence[Message], max_size: int, new_keys: Callable[[int], list[str]]
) -> list[tuple[bytes | bytearray, int, str]]:
    """(body, message count, comma-joined UNIQ_KEYs) of each batch, in message order.

    Messages without a UNIQ_KEY get one of ``new_keys(count)``, set on the
    message itself (so that sending it again sends the same id). Every body
    must be ``bytes`` (``check_batch``).

    Raises:
        InvalidMessageError: a message alone is larger than ``max_size``
            encoded, or its property string exceeds 32767 bytes.
    """
    n: cython.Py_ssize_t = len(messages)
    limit: cython.Py_ssize_t = max_size
    i: cython.Py_ssize_t
    _give_keys(messages, new_keys)
    # first pass: what each message's properties take, and where batches end
    props: list[bytes | None] = []  # None: only the UNIQ_KEY, written from ``keys``
    keys: list[str] = []
    ends: list[int] = []  # index after each batch's last message
    sizes: list[int] = []  # each batch's body size
    size: cython.Py_ssize_t = 0
    total: cython.Py_ssize_t
    plen: cython.Py_ssize_t
    uniq_len: cython.Py_ssize_t = len(_UNIQ_FIELD)
    for i in range(n):
        msg = messages[i]
        properties = msg.properties
        key: str = properties[_UNIQ]
        keys.append(key)
        if len(properties) == 1 and key.isascii():  # the common case: nothing but the id
            props.append(None)
            plen = uniq_len + len(key) + 1
        else:
            encoded = "".join([f"{k}\x01{v}\x02" for k, v in properties.items()]).encode()
            plen = len(encoded)
            if plen > _MAX_PROPS:
                raise InvalidMessageError(
                    f"messages[{i}].properties: {plen} bytes, the limit is 32767"
                )
            props.append(encoded)
        total = _FIXED + len(msg.body) + plen
        if size + total > limit:
            if total > limit:
                raise InvalidMessageError(
                    f"messages[{i}]: {total} bytes encoded, more than a batch may hold ({limit})"
                )
            ends.append(i)
            sizes.append(size)
            size = 0
        size += total
    ends.append(n)
    sizes.append(size)
    # second pass: each batch's records into a buffer of its size
    out: list[tuple[bytes | bytearray, int, str]] = []
    start: cython.Py_ssize_t = 0
    buf: bytes
    for end, body_size in zip(ends, sizes, strict=True):
        if cython.compiled:
            # not zero-filled (bytearray(n) would be): _write writes every byte
            buf = PyBytes_FromStringAndSize(cython.NULL, body_size)
            _write(buf, messages, props, keys, start, end)
        else:
            buf = _joined(messages, props, keys, start, end)
        out.append((buf, end - start, ",".join(keys[start:end])))
        start = end
    return out


@cython.cfunc
def _give_keys(messages: Sequence[Message], new_keys: Callable[[int], list[str]]) -> cython.int:
    """Set a new UNIQ_KEY on each message that has none, in one call to ``new_keys``."""
    n: cython.Py_ssize_t = len(messages)
    i: cython.Py_ssize_t
    missing: cython.Py_ssize_t = 0
    for i in range(n):
        if _UNIQ not in messages[i].properties:
            missing += 1
    if missing:
        fresh = iter(new_keys(missing))
        for i in range(n):
            properties = messages[i].properties
            if _UNIQ not in properties:
                properties[_UNIQ] = next(fresh)
    return 0


@cython.cfunc
def _write(  # noqa: PLR0917  # private, positional on purpose
    buf: bytes,
    messages: Sequence[Message],
    props: list[bytes | None],
    keys: list[str],
    start: cython.Py_ssize_t,
    end: cython.Py_ssize_t,
) -> cython.int:
    # its data: a bytes object just made, referred to nowhere else yet
    p: cython.p_uchar = cython.cast(cython.p_uchar, PyBytes_AS_STRING(buf))
    uniq_field: bytes = _UNIQ_FIELD
    at: cython.Py_ssize_t = 0
    blen: cython.Py_ssize_t
    plen: cython.Py_ssize_t
    klen: cython.Py_ssize_t
    uniq_len: cython.Py_ssize_t = len(_UNIQ_FIELD)
    i: cython.Py_ssize_t
    for i in range(start, end):
        msg = messages[i]
        body: bytes = msg.body
        blen = len(body)
        src: cython.p_uchar = body
        encoded = props[i]
        if encoded is None:
            key: str = keys[i]
            klen = len(key)
            plen = uniq_len + klen + 1
        else:
            plen = len(encoded)
        put32(p, at, _FIXED + blen + plen)  # TOTALSIZE
        put32(p, at + 4, 0)  # MAGICCODE and BODYCRC: 0 (the buffer is not zero-filled)
        put32(p, at + 8, 0)
        put32(p, at + 12, msg.flag)
        put32(p, at + 16, blen)
        at += 20
        _put_bytes(p, at, src, blen)
        at += blen
        put16(p, at, plen)
        at += 2
        if encoded is None:
            _put_bytes(p, at, uniq_field, uniq_len)
            at += uniq_len
            _put_ascii(p, at, key)
            at += klen
            p[at] = 2  # the property separator
            at += 1
        else:
            _put_bytes(p, at, encoded, plen)
            at += plen
    return 0


def _joined(
    messages: Sequence[Message],
    props: list[bytes | None],
    keys: list[str],
    start: int,
    end: int,
) -> bytes:
    """What ``_write`` writes, as interpreted code makes it fastest: parts, one join."""
    head = _HEAD.pack
    plen = _I16.pack
    parts: list[bytes] = []
    for i in range(start, end):
        msg = messages[i]
        encoded = props[i]
        if encoded is None:
            encoded = _UNIQ_FIELD + keys[i].encode() + b"\x02"
        body = msg.body
        total = 22 + len(body) + len(encoded)
        parts += (head(total, 0, 0, msg.flag, len(body)), body, plen(len(encoded)), encoded)
    return b"".join(parts)
