# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: always_allow_keywords=False, binding=False
"""The model's compiled kernels: the hottest loops of hashing and the record codec.

Owns: :func:`java_hash` (Java's ``String.hashCode``), :func:`message_fields`
(tag code, KEYS and UNIQ_KEY of a property string), :func:`encode_record_into`
(one v1 commit-log record into a buffer), :func:`decode_batch` (a batch
send body into :class:`~apogee.model.message.BatchItem` values) and
:func:`offset_msg_ids` (the ids a batch send is answered with). The layouts
they read and write are drawn in ``apogee.model.message_codec``; the record
as written here::

    0 TOTALSIZE | 4 MAGICCODE | 8 BODYCRC | 12 QUEUEID | 16 FLAG
    20 QUEUEOFFSET | 28 PHYSICALOFFSET | 36 SYSFLAG | 40 BORNTIMESTAMP
    48 BORNHOST (8|20) | STORETIMESTAMP | STOREHOST (8|20) | RECONSUMETIMES
    PREPAREDTXOFFSET | int32 body length | body | topic field (length byte
    + name) | int16 properties length | properties

and a batch body, message after message::

    int32 totalSize | int32 magic | int32 bodyCRC | int32 flag |
    int32 bodyLen | body | int16 propertiesLen | properties

One source, two builds: ``setup.py`` compiles this module with Cython (the
first line) where a C compiler is at hand, and the same file runs
interpreted otherwise (``APOGEE_PURE_PYTHON=1`` forces that). The builds
differ only in how bytes are reached: compiled, a buffer is taken with
``PyObject_GetBuffer`` and read or written through a ``unsigned char *``;
interpreted, the same helpers (``get32``, ``put32``, ``find_byte``, ...
from ``apogee._util.bytes_be``, and ``_copy``, ... here) work on a
memoryview or bytes with ``struct``. Everything above those helpers is
one code path. A number that does not fit its field raises OverflowError
compiled (argument conversion) and struct.error interpreted; callers catch
both. ``kernels.pxd`` declares what ``apogee.store.kernels`` calls at C level
and the store barrier.
"""

from __future__ import annotations

import struct
import sys

import cython
from zlib_ng.zlib_ng import crc32  # the same CRC-32 as zlib, several times faster

from apogee.errors import ProtocolError
from apogee.model.message import BatchItem

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import (
        copy_bytes,
        find_byte,
        get16,
        get32,
        get64,
        put16,
        put32,
        put64,
        same_at,
    )
    from cython.cimports.cpython.buffer import (
        PyBUF_SIMPLE,
        PyBUF_WRITABLE,
        PyBuffer_Release,
        PyObject_GetBuffer,
    )
    from cython.cimports.cpython.bytes import PyBytes_FromStringAndSize
    from cython.cimports.cpython.ref import Py_INCREF
    from cython.cimports.cpython.tuple import PyTuple_SET_ITEM
    from cython.cimports.cpython.type import PyType_GenericAlloc
    from cython.cimports.cpython.unicode import (
        PyUnicode_1BYTE_DATA,
        PyUnicode_1BYTE_KIND,
        PyUnicode_DecodeUTF8,
        PyUnicode_KIND,
        PyUnicode_New,
    )
    from cython.cimports.libc.string import memcmp, memcpy, memset
else:
    from apogee._util.bytes_be import (
        copy_bytes,
        find_byte,
        get16,
        get32,
        get64,
        put16,
        put32,
        put64,
        same_at,
    )

MAGIC_V1 = cython.declare(cython.int, -626843481)  # 0xDAA320A7 as a Java int
CRC_MASK = cython.declare(cython.uint, 0x7FFFFFFF)
MAX_PROPERTIES = cython.declare(cython.Py_ssize_t, 0x7FFF)
_MASK32 = cython.declare(cython.uint, 0xFFFFFFFF)

#: (tag code, KEYS, UNIQ_KEY) of a property string
Fields = tuple[int, str | None, str | None]

# tuple.__new__, looked up once: a BatchItem built without the NamedTuple's
# Python-level __new__ (and without an attribute lookup per item)
_new_tuple = tuple.__new__
# Compiled, a BatchItem is allocated and filled in place (no argument tuples)
# where a tuple caches no hash of its own: from 3.14 on, a zero-filled one
# would claim a cached hash of 0.
_ALLOC_ITEMS = cython.declare(cython.bint, sys.version_info < (3, 14))

# -- bytes: the only code that differs between the builds -----------------------


@cython.cfunc
@cython.inline
def _copy(
    p: cython.p_uchar, at: cython.Py_ssize_t, src: cython.p_uchar, n: cython.Py_ssize_t
) -> cython.int:
    """``p[at:at + n] = src[:n]``."""
    if cython.compiled:
        memcpy(p + at, src, n)
    else:
        p[at : at + n] = src[:n]
    return 0


@cython.cfunc
@cython.inline
def _put_host(
    p: cython.p_uchar, at: cython.Py_ssize_t, host: cython.p_uchar, n: cython.Py_ssize_t,
    field: cython.Py_ssize_t,
) -> cython.int:  # fmt: skip
    """A host field of ``field`` bytes: ``host`` cut or zero-padded to it (as struct's "8s")."""
    if cython.compiled:
        memset(p + at, 0, field)
        memcpy(p + at, host, n if n < field else field)
    else:
        p[at : at + field] = bytes(host[:field]).ljust(field, b"\0")
    return 0


@cython.cfunc
@cython.inline
def _utf8(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> str:
    """``p[start:end]`` decoded, lone surrogates passed (how they were encoded)."""
    if cython.compiled:
        text: cython.p_char = cython.cast(cython.p_char, p)
        passed: str = PyUnicode_DecodeUTF8(text + start, end - start, b"surrogatepass")
        return passed
    return bytes(p[start:end]).decode("utf-8", "surrogatepass")


@cython.cfunc
@cython.inline
def _utf8_strict(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> str:
    """``p[start:end]`` decoded; UnicodeDecodeError unless it is UTF-8."""
    if cython.compiled:
        strict: str = PyUnicode_DecodeUTF8(
            cython.cast(cython.p_char, p) + start, end - start, cython.NULL
        )
        return strict
    return str(p[start:end], "utf-8")


@cython.cfunc
@cython.inline
def _store_barrier() -> cython.int:
    """Keep the C compiler from moving the stores after this point before it.

    A record's TOTALSIZE and MAGICCODE (an index entry's header and slot)
    must reach a mapped file after the rest of it; interpreted code writes
    in program order anyway.
    """
    if cython.compiled:
        store_barrier()  # type: ignore[name-defined]  # noqa: F821  # declared in kernels.pxd
    return 0


# -- Java String.hashCode -------------------------------------------------------


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _signed(h: cython.uint) -> cython.int:
    if cython.compiled:
        return cython.cast(cython.int, h)
    return h - 0x100000000 if h & 0x80000000 else h


@cython.cfunc
def fold_str(text: str, h: cython.uint) -> cython.uint:
    """``h`` folded with the UTF-16 code units of ``text`` (``h = 31 * h + unit``).

    Raises:
        UnicodeEncodeError: ``text`` holds a lone surrogate (no UTF-16 for it).
    """
    ch: cython.Py_UCS4
    c: cython.uint
    if cython.compiled and PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND:
        # Latin-1 text (the usual topic and key) is its own UTF-16 units: no
        # per-character dispatch on the string's kind
        s: cython.p_uchar = PyUnicode_1BYTE_DATA(text)
        i: cython.Py_ssize_t
        for i in range(len(text)):
            h = 31 * h + s[i]
        return h
    for ch in text:
        c = ord(ch)
        if c < 0xD800:
            h = (31 * h + c) & _MASK32
        elif c > 0xFFFF:  # a pair of surrogates in UTF-16
            c -= 0x10000
            h = (31 * h + (0xD800 + (c >> 10))) & _MASK32
            h = (31 * h + (0xDC00 + (c & 0x3FF))) & _MASK32
        elif c <= 0xDFFF:
            text.encode("utf-16-le")  # raises the encoder's own error
            raise UnicodeEncodeError("utf-16-le", text, 0, 1, "surrogates not allowed")
        else:
            h = (31 * h + c) & _MASK32
    return h


@cython.cfunc
def fold_utf8(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t,
              h: cython.uint) -> cython.uint:  # fmt: skip
    """``h`` folded with UTF-8 text ``p[start:end]``: byte by byte while ASCII."""
    i: cython.Py_ssize_t
    seed: cython.uint = h
    for i in range(start, end):
        if p[i] >= 0x80:  # UTF-16 units differ from the bytes: start over from a str
            return fold_str(_utf8(p, start, end), seed)
        h = (31 * h + p[i]) & _MASK32
    return h


def java_hash(text: str) -> int:
    """Signed 32-bit ``String.hashCode`` of ``text`` (over its UTF-16 code units).

    Raises:
        UnicodeEncodeError: ``text`` holds a lone surrogate.
    """
    return _signed(fold_str(text, 0))


# -- property strings ---------------------------------------------------------------


@cython.cfunc
def fields_of_utf8(p: cython.p_uchar, n: cython.Py_ssize_t) -> Fields:
    """(tag code, KEYS, UNIQ_KEY) of the UTF-8 property string ``p[:n]``.

    ``string_to_properties``' rules: pieces split on 0x02, each split at its
    first 0x01; the last piece with that exact name and a non-empty value
    wins. 0x01 and 0x02 never occur inside a multi-byte UTF-8 sequence, so
    bytes split as the characters do.
    """
    tags_at: cython.Py_ssize_t = -1
    tags_end: cython.Py_ssize_t = 0
    keys_at: cython.Py_ssize_t = -1
    keys_end: cython.Py_ssize_t = 0
    uniq_at: cython.Py_ssize_t = -1
    uniq_end: cython.Py_ssize_t = 0
    start: cython.Py_ssize_t = 0
    end: cython.Py_ssize_t
    sep: cython.Py_ssize_t
    name_len: cython.Py_ssize_t
    while start <= n:
        end = find_byte(p, start, n, 0x02)
        if end < 0:
            end = n
        sep = find_byte(p, start, end, 0x01)
        name_len = sep - start
        if sep > start and end > sep + 1:  # a name and a value
            if name_len == 4 and same_at(p, start, b"TAGS", 4):
                tags_at, tags_end = sep + 1, end
            elif name_len == 4 and same_at(p, start, b"KEYS", 4):
                keys_at, keys_end = sep + 1, end
            elif name_len == 8 and same_at(p, start, b"UNIQ_KEY", 8):
                uniq_at, uniq_end = sep + 1, end
        start = end + 1
    code: cython.int = 0
    if tags_at >= 0:
        code = _signed(fold_utf8(p, tags_at, tags_end, 0))
    keys = _utf8(p, keys_at, keys_end) if keys_at >= 0 else None
    uniq = _utf8(p, uniq_at, uniq_end) if uniq_at >= 0 else None
    return code, keys, uniq


def message_fields(properties: str) -> Fields:
    """(tag code, KEYS, UNIQ_KEY) of a property string; the tag code is 0 without TAGS.

    Lone surrogates pass through (only a tag holding one fails, in its hash).
    """
    if cython.compiled and properties.isascii():
        # an ASCII str's own bytes are its UTF-8: no copy, no encoder
        return fields_of_utf8(PyUnicode_1BYTE_DATA(properties), len(properties))
    raw = properties.encode("utf-8", "surrogatepass")
    return fields_of_utf8(raw, len(raw))


# -- commit-log records -------------------------------------------------------------


@cython.cfunc
def write_record(  # noqa: PLR0917  # the record's fields, positional for speed
    out: cython.p_uchar,
    out_len: cython.Py_ssize_t,
    pos: cython.longlong,
    crc: cython.int,
    queue_id: cython.int,
    flag: cython.int,
    queue_offset: cython.longlong,
    physical_offset: cython.longlong,
    sys_flag: cython.int,
    born_timestamp: cython.longlong,
    born_host: bytes,
    store_timestamp: cython.longlong,
    store_host: bytes,
    reconsume_times: cython.int,
    prepared: cython.longlong,
    body: cython.p_uchar,
    body_len: cython.Py_ssize_t,
    topic_field: bytes,
    own: cython.p_uchar,
    own_len: cython.Py_ssize_t,
    sep: cython.Py_ssize_t,
    extra: cython.p_uchar,
    extra_len: cython.Py_ssize_t,
    total_size: cython.longlong,
) -> cython.longlong:
    """Write one v1 record at ``out[pos:]``; return its TOTALSIZE.

    The properties come in two parts, written ``own[:own_len]``, a 0x02 when
    ``sep`` is 1, then ``extra[:extra_len]`` (a batch item's own properties and
    the batch's, without joining them first; one part with ``extra_len`` 0).
    TOTALSIZE (``total_size`` when not negative, else the size by the
    record's formula) and MAGICCODE go in last, after a store barrier: a
    writer killed part-way leaves no magic, so recovery never takes a
    half-written record for a whole one.

    Raises:
        ValueError: the record does not fit ``out``.
        struct.error: the properties are longer than an int16 length says.
    """
    born_len: cython.Py_ssize_t = len(born_host)
    store_len: cython.Py_ssize_t = len(store_host)
    topic_len: cython.Py_ssize_t = len(topic_field)
    props_len: cython.Py_ssize_t = own_len + sep + extra_len
    born_field: cython.Py_ssize_t = 20 if born_len == 20 else 8
    store_field: cython.Py_ssize_t = 20 if store_len == 20 else 8
    if props_len > MAX_PROPERTIES:
        raise struct.error("'h' format requires -32768 <= number <= 32767")
    extent: cython.longlong = 72 + born_field + store_field + body_len + topic_len + 2 + props_len
    # pos + extent is never computed before the check (it could overflow)
    if pos < 0 or pos > out_len or extent > out_len - pos:
        raise ValueError("the record does not fit the buffer")
    if total_size < 0:  # the formula counts the host bytes given, as RocketMQ does
        total_size = 90 + body_len + topic_len + props_len + born_len + store_len - 16
    at: cython.Py_ssize_t = cython.cast(cython.Py_ssize_t, pos)
    put32(out, at + 8, crc)
    put32(out, at + 12, queue_id)
    put32(out, at + 16, flag)
    put64(out, at + 20, queue_offset)
    put64(out, at + 28, physical_offset)
    put32(out, at + 36, sys_flag)
    put64(out, at + 40, born_timestamp)
    p: cython.Py_ssize_t = at + 48
    _put_host(out, p, born_host, born_len, born_field)
    p += born_field
    put64(out, p, store_timestamp)
    p += 8
    _put_host(out, p, store_host, store_len, store_field)
    p += store_field
    put32(out, p, reconsume_times)
    put64(out, p + 4, prepared)
    put32(out, p + 12, cython.cast(cython.int, body_len))
    p += 16
    _copy(out, p, body, body_len)
    p += body_len
    _copy(out, p, topic_field, topic_len)
    p += topic_len
    put16(out, p, cython.cast(cython.int, props_len))
    p += 2
    _copy(out, p, own, own_len)
    p += own_len
    if sep:
        out[p] = 0x02
        p += 1
    _copy(out, p, extra, extra_len)
    _store_barrier()
    put32(out, at, cython.cast(cython.int, total_size))
    put32(out, at + 4, MAGIC_V1)
    return total_size


# Positional on purpose: this runs once per stored message, and keyword
# matching of 17 arguments costs more than the encoding itself.
def encode_record_into(  # noqa: PLR0917
    buf: object,
    pos: cython.longlong,
    queue_id: cython.int,
    flag: cython.int,
    queue_offset: cython.longlong,
    physical_offset: cython.longlong,
    sys_flag: cython.int,
    born_timestamp: cython.longlong,
    born_host: bytes,
    store_timestamp: cython.longlong,
    store_host: bytes,
    reconsume_times: cython.int,
    prepared_transaction_offset: cython.longlong,
    body: object,
    topic_field: bytes,
    properties: bytes,
    body_crc: object = None,
) -> int:
    """Write one v1 record at ``buf[pos:]`` and return its size.

    ``topic_field`` is ``message_codec.topic_prefix`` of the topic (callers
    cache it per topic); ``born_host``/``store_host`` come from
    ``message_codec.pack_host`` and must agree with the IPv6 bits of
    ``sys_flag``; ``body_crc`` is computed when None. TOTALSIZE and
    MAGICCODE go in last (see :func:`write_record`).

    Raises:
        ValueError: the record does not fit ``buf`` from ``pos``.
        OverflowError, struct.error: a number does not fit its field.
    """
    crc: cython.int
    if body_crc is None:
        raw_crc: cython.uint = crc32(body)
        crc = raw_crc & CRC_MASK
    else:
        crc = body_crc  # type: ignore[assignment]
    size: cython.longlong = -1
    if cython.compiled:
        out = cython.declare(cython.Py_buffer)
        data = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(body, cython.address(data), PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(buf, cython.address(out), PyBUF_WRITABLE)
            try:
                size = write_record(
                    cython.cast(cython.p_uchar, out.buf), out.len, pos, crc, queue_id, flag,
                    queue_offset, physical_offset, sys_flag, born_timestamp, born_host,
                    store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
                    cython.cast(cython.p_uchar, data.buf), data.len, topic_field, properties,
                    len(properties), 0, properties, 0, size,
                )  # fmt: skip
            finally:
                PyBuffer_Release(cython.address(out))
        finally:
            PyBuffer_Release(cython.address(data))
    else:
        view = memoryview(buf).cast("B")  # type: ignore[arg-type]
        data_view = memoryview(body).cast("B")  # type: ignore[arg-type]
        size = write_record(
            view, len(view), pos, crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
            born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, data_view, len(data_view), topic_field, properties,
            len(properties), 0, properties, 0, size,
        )  # fmt: skip
    return size


# -- batch bodies -----------------------------------------------------------------


@cython.cfunc
@cython.inline
def _batch_item(flag: object, body: object, props: object) -> BatchItem:
    if cython.compiled and _ALLOC_ITEMS:
        item = PyType_GenericAlloc(BatchItem, 3)
        # PyTuple_SET_ITEM takes the reference over
        Py_INCREF(flag)
        PyTuple_SET_ITEM(item, 0, flag)
        Py_INCREF(body)
        PyTuple_SET_ITEM(item, 1, body)
        Py_INCREF(props)
        PyTuple_SET_ITEM(item, 2, props)
        return item  # type: ignore[no-any-return]
    made: BatchItem = _new_tuple(BatchItem, (flag, body, props))
    return made


@cython.cfunc
def _split_batch(view: memoryview, p: cython.p_uchar, end: cython.Py_ssize_t) -> list[BatchItem]:
    items: list[BatchItem] = []
    pos: cython.Py_ssize_t = 0
    total: cython.Py_ssize_t
    body_len: cython.Py_ssize_t
    props_at: cython.Py_ssize_t
    props_len: cython.Py_ssize_t
    while pos < end:
        if end - pos < 22:
            raise ProtocolError(f"batch message at byte {pos}: cut short")
        total = get32(p, pos)
        body_len = get32(p, pos + 16)
        props_at = pos + 20 + body_len + 2
        if body_len < 0 or total < 22 or props_at > end or total > end - pos:
            raise ProtocolError(f"batch message at byte {pos}: bad length fields")
        props_len = get16(p, props_at - 2)
        if props_len < 0 or props_at + props_len != pos + total:
            raise ProtocolError(f"batch message at byte {pos}: total size disagrees")
        try:
            props = _utf8_strict(p, props_at, props_at + props_len)
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"batch message at byte {pos}: properties not UTF-8") from exc
        items.append(_batch_item(get32(p, pos + 12), view[pos + 20 : props_at - 2], props))
        pos += total
    return items


def decode_batch(body: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Split a batch send body into its messages (bodies are zero-copy views).

    Raises:
        ProtocolError: the body is cut short or a length field is inconsistent.
    """
    view = memoryview(body)
    if cython.compiled:
        data = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(view, cython.address(data), PyBUF_SIMPLE)
        try:
            return _split_batch(view, cython.cast(cython.p_uchar, data.buf), data.len)
        finally:
            PyBuffer_Release(cython.address(data))
    view = view.cast("B")
    return _split_batch(view, view, len(view))


# -- offset message ids -------------------------------------------------------------


def offset_msg_ids(store_host: bytes, offsets: list[int]) -> str:
    """The ids of the records at ``offsets``, comma-joined, as a batch send's answer has them.

    Each is ``store_host`` (the packed 8 or 20 bytes) then the offset as an
    unsigned int64, in uppercase hex (``apogee.model.msgid``).

    Raises:
        OverflowError: an offset is negative or past 2**64 - 1.
    """
    n: cython.Py_ssize_t = len(offsets)
    if n == 0:
        return ""
    if cython.compiled:
        h: cython.Py_ssize_t = len(store_host)
        width: cython.Py_ssize_t = 2 * (h + 8)
        out: str = PyUnicode_New(n * (width + 1) - 1, 127)
        q: cython.p_uchar = PyUnicode_1BYTE_DATA(out)
        hp: cython.p_uchar = cython.cast(cython.p_uchar, cython.cast(cython.p_char, store_host))
        hexd: cython.p_char = b"0123456789ABCDEF"
        j: cython.Py_ssize_t
        for j in range(h):  # the host's hex once, then copied in front of every id
            q[2 * j] = hexd[hp[j] >> 4]
            q[2 * j + 1] = hexd[hp[j] & 15]
        at: cython.Py_ssize_t = 0
        i: cython.Py_ssize_t
        for i in range(n):
            value: cython.ulonglong = offsets[i]
            if i:
                q[at] = 44  # ","
                at += 1
                memcpy(q + at, q, 2 * h)
            k: cython.Py_ssize_t = at + width - 1
            while k >= at + 2 * h:
                q[k] = hexd[value & 15]
                value >>= 4
                k -= 1
            at += width
        return out
    return ",".join([(store_host + o.to_bytes(8, "big")).hex().upper() for o in offsets])


# -- a stored record, read where it lies --------------------------------------------

#: (topic, queue id, queue offset, physical offset, the values asked for, the
#: property string without the names to drop): what :func:`record_facts` reads
RecordFacts = tuple[str, int, int, int, tuple[str | None, ...], bytes]
#: Property names as UTF-8 (an alias, so that Cython takes any sequence)
Names = tuple[bytes, ...]
_MAX_NAMES = cython.declare(cython.Py_ssize_t, 16)


@cython.cfunc
@cython.exceptval(check=False)
def _is_ascii(p: cython.p_uchar, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.bint:
    i: cython.Py_ssize_t
    for i in range(start, end):  # noqa: SIM110  # a C loop compiled
        if p[i] >= 0x80:
            return False
    return True


@cython.cfunc
def _name_in(p: cython.p_uchar, start: cython.Py_ssize_t, n: cython.Py_ssize_t,
             names: Names) -> cython.Py_ssize_t:  # fmt: skip
    """Index in ``names`` (bytes) of the name ``p[start:start + n]``, or -1."""
    i: cython.Py_ssize_t
    for i in range(len(names)):
        name: bytes = names[i]
        if len(name) == n and same_at(p, start, name, n):
            return i
    return -1


@cython.cfunc
@cython.exceptval(check=False)
def _named_before(p: cython.p_uchar, base: cython.Py_ssize_t, start: cython.Py_ssize_t,
                  sep: cython.Py_ssize_t) -> cython.bint:  # fmt: skip
    """Whether a pair in ``p[base:start]`` (whole pairs) has the name ``p[start:sep]``."""
    n: cython.Py_ssize_t = sep - start
    at: cython.Py_ssize_t = base
    end: cython.Py_ssize_t
    while at < start:
        end = find_byte(p, at, start, 0x02)
        if find_byte(p, at, end, 0x01) - at == n:
            if cython.compiled:
                if memcmp(p + at, p + start, n) == 0:
                    return True
            elif p[at : at + n] == p[start:sep]:
                return True
        at = end + 1
    return False


def record_facts(record: object, wanted: tuple[bytes, ...],
                 dropped: tuple[bytes, ...]) -> RecordFacts | None:  # fmt: skip
    """What a decode of the v1 record that fills ``record`` would say, read in place.

    ``(topic, queue id, queue offset, physical offset, values, kept)``:
    ``values[i]`` is the property named ``wanted[i]`` (None when absent) and
    ``kept`` the property string without the pairs named in ``dropped``,
    byte for byte what ``properties_to_string`` makes of the decoded
    properties without those names. ``record`` is typically a view of a
    mapped commit log: nothing is copied but what is returned.

    Only for the common record: None (the caller decodes it fully, see
    ``message_codec.decode_record``) unless it is one v1 record that a decode
    takes whole, with an ASCII topic, UTF-8 properties in canonical form
    (every pair ``name 0x01 value 0x02``, name and value not empty, no name
    twice) and at most 16 names asked for in all.
    """
    if len(wanted) + len(dropped) > _MAX_NAMES:
        return None
    if cython.compiled:
        data = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(record, cython.address(data), PyBUF_SIMPLE)
        try:
            return _record_facts(cython.cast(cython.p_uchar, data.buf), data.len, wanted, dropped)
        finally:
            PyBuffer_Release(cython.address(data))
    raw = bytes(record)  # type: ignore[call-overload]  # a buffer
    return _record_facts(raw, len(raw), wanted, dropped)


@cython.cfunc
def _record_facts(  # one pass; each way out is a reason to decode
    p: cython.p_uchar, n: cython.Py_ssize_t, wanted: Names, dropped: Names
) -> RecordFacts | None:
    if n < 91 or get32(p, 0) != n or get32(p, 4) != MAGIC_V1:
        return None
    sys_flag: cython.int = get32(p, 36)
    at: cython.Py_ssize_t = (
        48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
    )  # the body length
    if at + 4 > n:
        return None
    body_len: cython.Py_ssize_t = get32(p, at)
    at += 4
    if body_len < 0 or body_len > n - at - 1:
        return None
    at += body_len
    topic_len: cython.Py_ssize_t = p[at]
    at += 1
    if topic_len == 0 or topic_len > 127 or at + topic_len + 2 > n:
        return None  # a length byte past 127 is negative: no topic
    if p[at + topic_len - 1] == 0 or not _is_ascii(p, at, at + topic_len):
        return None
    topic = _utf8_strict(p, at, at + topic_len)
    at += topic_len
    props_len: cython.Py_ssize_t = get16(p, at)
    at += 2
    if props_len < 0 or at + props_len != n or (props_len and p[n - 1] != 0x02):
        return None  # a cut tail (zeros) ends without 0x02 too
    if not _is_ascii(p, at, n):
        try:
            _utf8_strict(p, at, n)
        except UnicodeDecodeError:
            return None
    values: list[str | None] = [None] * len(wanted)
    kept_len: cython.Py_ssize_t = props_len
    start: cython.Py_ssize_t = at
    end: cython.Py_ssize_t
    sep: cython.Py_ssize_t
    i: cython.Py_ssize_t
    while start < n:
        end = find_byte(p, start, n, 0x02)
        sep = find_byte(p, start, end, 0x01)
        if sep <= start or sep + 1 >= end or _named_before(p, at, start, sep):
            return None  # no name, no value or a name twice: not canonical
        i = _name_in(p, start, sep - start, wanted)
        if i >= 0:
            values[i] = _utf8_strict(p, sep + 1, end)
        if _name_in(p, start, sep - start, dropped) >= 0:
            kept_len -= end + 1 - start
        start = end + 1
    return (
        topic, get32(p, 12), get64(p, 20), get64(p, 28), tuple(values),
        _kept(p, at, n, dropped, kept_len),
    )  # fmt: skip


@cython.cfunc
def _kept(p: cython.p_uchar, at: cython.Py_ssize_t, n: cython.Py_ssize_t, dropped: Names,
          kept_len: cython.Py_ssize_t) -> bytes:  # fmt: skip
    """The canonical pairs of ``p[at:n]`` not named in ``dropped`` (``kept_len`` bytes)."""
    if kept_len == n - at:
        if cython.compiled:
            whole: bytes = PyBytes_FromStringAndSize(cython.cast(cython.p_char, p) + at, kept_len)
            return whole
        return bytes(p[at:n])
    out: bytes
    q: cython.p_uchar
    if cython.compiled:
        out = PyBytes_FromStringAndSize(cython.NULL, kept_len)
        q = cython.cast(cython.p_uchar, cython.cast(cython.p_char, out))
    else:
        q = bytearray(kept_len)
    w: cython.Py_ssize_t = 0
    start: cython.Py_ssize_t = at
    end: cython.Py_ssize_t
    while start < n:
        end = find_byte(p, start, n, 0x02)
        if _name_in(p, start, find_byte(p, start, end, 0x01) - start, dropped) < 0:
            copy_bytes(q, w, p, start, end + 1 - start)
            w += end + 1 - start
        start = end + 1
    if not cython.compiled:
        out = bytes(q)
    return out
