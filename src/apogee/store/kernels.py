# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: always_allow_keywords=False, binding=False
"""The store's compiled kernels: batches, consume-queue units, index entries, pwrite.

Owns: :func:`prepare_batch` and :func:`encode_batch` (a batch send into
commit-log records and their hand-off entries), :func:`take_handoff` (the
entries that continue the log, for the reput), :func:`write_units` (a run of
consume-queue units into one segment), :func:`index_work` and
:func:`index_put` (key hashes of dispatched records, and putting them into a
mapped index file) and :func:`pwrite_all` (a buffer into a file, all of it).
Layouts: the record in ``apogee.model.message_codec``, the index file in
``apogee.store.index_file``; a consume-queue unit (``consume_queue``)::

    int64 commit-log offset | int32 record size | int64 tag code

One source, two builds, as ``apogee.model.kernels`` (which this module
calls at C level through ``kernels.pxd`` when compiled, and as Python
functions when interpreted, from the model's source even where only the
model's module was compiled): bytes are reached through the helpers below
and the integer readers and writers of ``apogee._util.bytes_be``,
``unsigned char *`` compiled and a memoryview interpreted; all else is one
code path. Buffers are released before a kernel returns, so a mapping they
came from can be closed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

import cython
from zlib_ng.zlib_ng import crc32

from apogee.store.dispatch import (
    E_COMMIT_LOG_OFFSET,
    E_CONSUME_QUEUE_OFFSET,
    E_KEYS,
    E_MSG_SIZE,
    E_QUEUE_ID,
    E_STORE_TIMESTAMP,
    E_SYS_FLAG,
    E_TAGS_CODE,
    E_TOPIC,
    E_UNIQ_KEY,
    DispatchEntry,
)

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import copy_bytes, get32, put16, put32, put64
    from cython.cimports.apogee.model.kernels import (
        fields_of_utf8,
        fold_str,
        store_barrier,
        write_record,
    )
    from cython.cimports.cpython.buffer import (
        PyBUF_SIMPLE,
        PyBUF_WRITABLE,
        PyBuffer_Release,
        PyObject_GetBuffer,
    )
    from cython.cimports.cpython.bytes import PyBytes_FromStringAndSize
    from cython.cimports.cpython.long import PyLong_AsUnsignedLongLongMask
    from cython.cimports.cpython.unicode import PyUnicode_AsUTF8AndSize
    from cython.cimports.libc.errno import EINTR, errno
    from cython.cimports.libc.string import memcpy
    from cython.cimports.posix.unistd import pwrite
else:
    from apogee._util.bytes_be import copy_bytes, get32, put16, put32, put64
    from apogee._util.compiled import is_compiled, load_interpreted
    from apogee.model import kernels as _model

    if is_compiled(_model):  # only this module failed to build: use the model's source too
        _model = load_interpreted("apogee.model.kernels")
    fields_of_utf8 = _model.fields_of_utf8
    fold_str = _model.fold_str
    write_record = _model.write_record

CRC_MASK = cython.declare(cython.uint, 0x7FFFFFFF)
# Constants past 2**31 are declared: as bare literals Cython makes them Python ints
_MASK32 = cython.declare(cython.uint, 0xFFFFFFFF)
_SIGN32 = cython.declare(cython.uint, 0x80000000)
INT32_MIN = cython.declare(cython.longlong, -0x80000000)
INT32_MAX = cython.declare(cython.longlong, 0x7FFFFFFF)
INT64_MAX = cython.declare(cython.longlong, 0x7FFFFFFFFFFFFFFF)
CQ_UNIT = cython.declare(cython.Py_ssize_t, 20)
INDEX_HEADER = cython.declare(cython.longlong, 40)
INDEX_SLOT = cython.declare(cython.longlong, 4)
INDEX_ENTRY = cython.declare(cython.longlong, 20)
# Writes below this size keep the GIL: the system call copies a record into
# the page cache in about a microsecond, less than a GIL hand-over costs, and
# a caller holding the GIL keeps other threads from slipping in between an
# append and the request that follows it.
PWRITE_KEEP_GIL = cython.declare(cython.longlong, 65536)

# A DispatchEntry's positions (``apogee.store.dispatch``) as C numbers: indexing a
# tuple by one is a C array read, by the module's Python int a lookup and a call.
_TOPIC = cython.declare(cython.Py_ssize_t, E_TOPIC)
_QUEUE_ID = cython.declare(cython.Py_ssize_t, E_QUEUE_ID)
_OFFSET = cython.declare(cython.Py_ssize_t, E_COMMIT_LOG_OFFSET)
_SIZE = cython.declare(cython.Py_ssize_t, E_MSG_SIZE)
_TAGS_CODE = cython.declare(cython.Py_ssize_t, E_TAGS_CODE)
_STORE_TIME = cython.declare(cython.Py_ssize_t, E_STORE_TIMESTAMP)
_QUEUE_OFFSET = cython.declare(cython.Py_ssize_t, E_CONSUME_QUEUE_OFFSET)
_KEYS = cython.declare(cython.Py_ssize_t, E_KEYS)
_UNIQ_KEY = cython.declare(cython.Py_ssize_t, E_UNIQ_KEY)
_SYS_FLAG = cython.declare(cython.Py_ssize_t, E_SYS_FLAG)

_BATCH_TOO_BIG = cython.declare(cython.int, 0)
_PROPERTIES_TOO_LONG = cython.declare(cython.int, 1)
_ITEM_TOO_BIG = cython.declare(cython.int, 2)

# Aliases for the lists the kernels take and give: Cython reads an unknown
# name as "object", where a subscripted ``list[tuple]`` would make it check
# each item for an exact tuple (and refuse the NamedTuple BatchItem).
BatchItems = Sequence[tuple[int, bytes | memoryview, str]]
Entries = list[DispatchEntry]
IndexWork = list[tuple[int, int, list[int]]]
Hashes = list[int]
#: (rec, key) and the index file header's fields, as index_put returns them
IndexState = tuple[int, int, int, int, int, int, int, int]


# -- bytes: the only code that differs between the builds -----------------------


@cython.cfunc
@cython.inline
def _store_barrier() -> cython.int:
    """Keep the C compiler from moving the stores after this point before it."""
    if cython.compiled:
        store_barrier()
    return 0


@cython.cfunc
def _utf8_of(text: str) -> bytes:
    """``text`` as UTF-8 (strict: UnicodeEncodeError for a lone surrogate), for
    the interpreted build; compiled code reads the str's own UTF-8 in place."""
    return text.encode()


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _separated(own: cython.p_uchar, own_len: cython.Py_ssize_t,
               extra_len: cython.Py_ssize_t) -> cython.Py_ssize_t:  # fmt: skip
    """1 when a 0x02 goes between a batch item's own properties and the batch's: both
    are there and the item's do not end with one (``merge_batch_properties``)."""
    return 1 if extra_len > 0 and own_len > 0 and own[own_len - 1] != 0x02 else 0


# -- batches --------------------------------------------------------------------------

# prepare_batch's answer when the batch can be stored: (_BATCH_OK, total bytes)
_BATCH_OK = cython.declare(cython.int, 3)


def prepare_batch(
    items: BatchItems,
    extra: str,
    max_body: cython.longlong,
    fixed: cython.longlong,
    max_record: cython.longlong,
) -> tuple[int, int]:
    """Whether a batch can be stored, found before the put lock: ``(3, total bytes)``.

    First the body limit over the whole batch (bodies, property strings and
    22 bytes of framing per item): ``(0, total)`` when over ``max_body``.
    Then per item its stored properties (its own, a 0x02, ``extra``, the
    batch's: see :func:`encode_batch`) and record size (``fixed`` plus body
    and properties): ``(1, size)`` for properties over 32767 bytes, ``(2,
    size)`` for a record over ``max_record``. Nothing is made per item: the
    sizes are counted, and :func:`encode_batch` writes the records.

    Raises:
        TypeError: an item is not a (flag, body, str) tuple.
        UnicodeEncodeError: a property string holds a lone surrogate.
    """
    total_body: cython.longlong = 0
    item: object
    for item in items:
        _check_batch_item(item)
        t = cython.cast(tuple, item)  # checked, and a BatchItem is a tuple subclass
        total_body += len(t[1]) + len(t[2]) + 22
    if total_body > max_body:
        return _BATCH_TOO_BIG, total_body
    total: cython.longlong = 0
    size: cython.longlong
    plen: cython.Py_ssize_t
    own_len: cython.Py_ssize_t = 0
    extra_len: cython.Py_ssize_t = -1  # counted with the first item (no item: never encoded)
    for item in items:
        _check_batch_item(item)
        t = cython.cast(tuple, item)
        own: str = t[2]
        if cython.compiled:
            op: cython.p_uchar = cython.cast(
                cython.p_uchar, PyUnicode_AsUTF8AndSize(own, cython.address(own_len))
            )
            if extra_len < 0:
                extra_len = 0
                if len(extra) > 0:
                    PyUnicode_AsUTF8AndSize(extra, cython.address(extra_len))
        else:
            op = _utf8_of(own)
            own_len = len(op)
            if extra_len < 0:
                extra_len = len(_utf8_of(extra))
        plen = own_len + _separated(op, own_len, extra_len) + extra_len
        size = fixed + len(t[1]) + plen
        if plen > 0x7FFF:
            return _PROPERTIES_TOO_LONG, size
        if size > max_record:
            return _ITEM_TOO_BIG, size
        total += size
    return _BATCH_OK, total


@cython.cfunc
@cython.inline
def _check_batch_item(item: object) -> cython.int:
    # read as a tuple once it is one: indexing a BatchItem (a tuple subclass)
    # as an object would look its __getitem__ up by name each time
    problem = "batch items are (flag, body, properties)"
    if not isinstance(item, tuple):
        raise TypeError(problem)
    t = cython.cast(tuple, item)
    if len(t) != 3 or not isinstance(t[2], str):
        raise TypeError(problem)
    return 0


def encode_batch(  # noqa: PLR0917  # positional for speed, as encode_record_into
    buf: object,
    pos: cython.longlong,
    base_offset: cython.longlong,
    queue_id: object,
    first_queue_offset: cython.longlong,
    sys_flag: cython.int,
    born_timestamp: cython.longlong,
    born_host: bytes,
    store_timestamp: cython.longlong,
    store_host: bytes,
    reconsume_times: cython.int,
    topic_field: bytes,
    items: BatchItems,
    extra: str,
    topic: str,
) -> tuple[list[int], Entries]:
    """Write a batch at ``buf[pos:]``: its offsets and hand-off entries.

    ``items`` and ``extra`` are what :func:`prepare_batch` accepted. Record
    i holds item i's flag and body, and as properties the item's own, then
    (when both are there and the item's do not end with one) a 0x02, then
    ``extra`` (``apogee.model.message.merge_batch_properties``), written
    straight from the strings' UTF-8. It gets queue offset
    ``first_queue_offset + i`` and physical offset ``base_offset + `` its
    position in ``buf``; its TOTALSIZE is the bytes it takes (a record with
    odd-sized hosts counts what is written). Returns the offsets and one
    dispatch entry per record, its tag code, keys and unique key read from
    the properties written.

    Raises:
        TypeError: an item is not a (flag, body, str) tuple.
        UnicodeEncodeError: a property string holds a lone surrogate.
        ValueError: the batch does not fit ``buf``.
        OverflowError, struct.error: a number does not fit its field.
    """
    qid: cython.int = queue_id  # type: ignore[assignment]  # checked once, as an int32
    offsets: list[int] = []
    entries: Entries = []
    if cython.compiled:
        out = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(buf, cython.address(out), PyBUF_WRITABLE)
        try:
            _encode_batch(
                cython.cast(cython.p_uchar, out.buf), out.len, pos, base_offset, qid, queue_id,
                first_queue_offset, sys_flag, born_timestamp, born_host, store_timestamp,
                store_host, reconsume_times, topic_field, items, extra, topic, offsets, entries,
            )  # fmt: skip
        finally:
            PyBuffer_Release(cython.address(out))
    else:
        with memoryview(buf).cast("B") as view:  # type: ignore[arg-type]
            _encode_batch(
                view, len(view), pos, base_offset, qid, queue_id, first_queue_offset, sys_flag,
                born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
                topic_field, items, extra, topic, offsets, entries,
            )  # fmt: skip
    return offsets, entries


@cython.cfunc
def _encode_batch(  # noqa: PLR0915, PLR0917  # one loop over the items, both builds inline
    out: cython.p_uchar,
    out_len: cython.Py_ssize_t,
    pos: cython.longlong,
    base_offset: cython.longlong,
    qid: cython.int,
    queue_id: object,
    first_queue_offset: cython.longlong,
    sys_flag: cython.int,
    born_timestamp: cython.longlong,
    born_host: bytes,
    store_timestamp: cython.longlong,
    store_host: bytes,
    reconsume_times: cython.int,
    topic_field: bytes,
    items: BatchItems,
    extra: str,
    topic: str,
    offsets: list[int],
    entries: Entries,
) -> cython.int:
    fixed: cython.longlong = (
        72 + (20 if len(born_host) == 20 else 8) + (20 if len(store_host) == 20 else 8)
        + len(topic_field) + 2
    )  # fmt: skip
    store_ts: object = store_timestamp
    flags: object = sys_flag
    own_len: cython.Py_ssize_t = 0
    extra_len: cython.Py_ssize_t = 0
    if cython.compiled:
        nothing: cython.p_char = b""
        ep: cython.p_uchar = cython.cast(cython.p_uchar, nothing)
        if len(items) > 0 and len(extra) > 0:
            ep = cython.cast(
                cython.p_uchar, PyUnicode_AsUTF8AndSize(extra, cython.address(extra_len))
            )
    else:
        ep = _utf8_of(extra) if len(items) > 0 else b""
        extra_len = len(ep)
    i: cython.Py_ssize_t
    for i in range(len(items)):
        item: object = items[i]
        _check_batch_item(item)
        t = cython.cast(tuple, item)
        flag: cython.int = t[0]
        own: str = t[2]
        if cython.compiled:
            op: cython.p_uchar = cython.cast(
                cython.p_uchar, PyUnicode_AsUTF8AndSize(own, cython.address(own_len))
            )
        else:
            op = _utf8_of(own)
            own_len = len(op)
        sep: cython.Py_ssize_t = _separated(op, own_len, extra_len)
        plen: cython.Py_ssize_t = own_len + sep + extra_len
        # pos and i are never negative: the sums overflow only past INT64_MAX
        if (base_offset > 0 and pos > INT64_MAX - base_offset) or (
            first_queue_offset > 0 and i > INT64_MAX - first_queue_offset
        ):
            raise OverflowError("argument out of range")
        phys: cython.longlong = base_offset + pos
        qoff: cython.longlong = first_queue_offset + i
        raw_crc: cython.uint = crc32(t[1])
        crc: cython.int = raw_crc & CRC_MASK
        extent: cython.longlong
        if cython.compiled:
            body = cython.declare(cython.Py_buffer)
            PyObject_GetBuffer(t[1], cython.address(body), PyBUF_SIMPLE)
            try:
                extent = fixed + body.len + plen
                write_record(
                    out, out_len, pos, crc, qid, flag, qoff, phys, sys_flag, born_timestamp,
                    born_host, store_timestamp, store_host, reconsume_times, 0,
                    cython.cast(cython.p_uchar, body.buf), body.len, topic_field, op, own_len,
                    sep, ep, extra_len, extent,
                )  # fmt: skip
            finally:
                PyBuffer_Release(cython.address(body))
        else:
            with memoryview(t[1]).cast("B") as data:
                extent = fixed + len(data) + plen
                write_record(
                    out, out_len, pos, crc, qid, flag, qoff, phys, sys_flag, born_timestamp,
                    born_host, store_timestamp, store_host, reconsume_times, 0, data, len(data),
                    topic_field, op, own_len, sep, ep, extra_len, extent,
                )  # fmt: skip
        # the index fields, read from the properties just written (their UTF-8)
        code, keys, uniq = fields_of_utf8(_part(out, pos + extent - plen, plen), plen)
        at: object = phys  # one int object for both lists
        offsets.append(at)  # type: ignore[arg-type]
        entries.append(
            (topic, queue_id, at, extent, code, store_ts, qoff, keys, uniq, flags, 0)  # type: ignore[arg-type]
        )
        pos += extent
    return 0


@cython.cfunc
@cython.inline
def _part(p: cython.p_uchar, at: cython.longlong, n: cython.Py_ssize_t) -> cython.p_uchar:
    """``p[at:at + n]``, where the fields readers take it (they search bytes interpreted)."""
    if cython.compiled:
        return p + at
    return bytes(p[at : at + n])


# -- a record derived from a stored one ------------------------------------------------

#: (size, body length, body CRC, sysFlag of the source, tag code, keys, unique key,
#: the source's packed STOREHOST)
Derived = tuple[int, int, int, int, int, str | None, str | None, bytes]
MAGIC_V1 = cython.declare(cython.int, -626843481)  # 0xDAA320A7 as a Java int


@cython.cfunc
@cython.exceptval(check=False)
def _body_at(p: cython.p_uchar, n: cython.Py_ssize_t) -> cython.Py_ssize_t:
    """Where the body of the v1 record filling ``p[:n]`` starts; -1 if it is not one.

    Checked: the size field, the magic, and that the body leaves room for a
    topic field and a properties length.
    """
    if n < 91 or get32(p, 0) != n or get32(p, 4) != MAGIC_V1:
        return -1
    flags: cython.int = get32(p, 36)
    at: cython.Py_ssize_t = 48 + (20 if flags & 0x10 else 8) + 8 + (20 if flags & 0x20 else 8) + 16
    if at > n:
        return -1
    body_len: cython.Py_ssize_t = get32(p, at - 4)
    if body_len < 0 or body_len > n - at - 3:
        return -1
    return at


def derived_record(src: object, topic_field: bytes, props: bytes) -> Derived | None:
    """What :func:`encode_derived` needs to know before it writes, or None.

    ``src`` is a whole v1 record (typically a view of the commit log), the
    new record its copy with ``topic_field`` (length byte and name) and the
    UTF-8 property string ``props``. Returns ``(size, body length, body CRC,
    src's sysFlag, tag code, KEYS, UNIQ_KEY, STOREHOST)`` of the new record
    (tag code, keys and unique key of ``props``, as
    ``apogee.model.kernels.message_fields`` reads them; STOREHOST's bytes, as
    ``message_codec.pack_host`` gives them, for its message id); None when
    ``src`` is not a whole v1 record.
    """
    at: cython.Py_ssize_t
    flags: cython.int
    body_len: cython.Py_ssize_t
    host_at: cython.Py_ssize_t
    view = memoryview(src)  # type: ignore[arg-type]  # a buffer
    try:
        if cython.compiled:
            data = cython.declare(cython.Py_buffer)
            PyObject_GetBuffer(view, cython.address(data), PyBUF_SIMPLE)
            try:
                p: cython.p_uchar = cython.cast(cython.p_uchar, data.buf)
                at = _body_at(p, data.len)
                if at < 0:
                    return None
                flags = get32(p, 36)
                body_len = get32(p, at - 4)
                host_at = 56 + (20 if flags & 0x10 else 8)
                host: bytes = PyBytes_FromStringAndSize(
                    cython.cast(cython.p_char, p) + host_at, 20 if flags & 0x20 else 8
                )
            finally:
                PyBuffer_Release(cython.address(data))
        else:
            with view.cast("B") as raw:
                at = _body_at(raw, len(raw))
                if at < 0:
                    return None
                flags = get32(raw, 36)
                body_len = get32(raw, at - 4)
                host_at = 56 + (20 if flags & 0x10 else 8)
                host = bytes(raw[host_at : host_at + (20 if flags & 0x20 else 8)])
        with view[at : at + body_len] as body:
            raw_crc: cython.uint = crc32(body)
    finally:
        view.release()
    size: cython.Py_ssize_t = (
        48 + (20 if flags & 0x10 else 8) + 8 + (20 if flags & 0x20 else 8) + 16 + body_len
        + len(topic_field) + 2 + len(props)
    )  # fmt: skip
    code, keys, uniq = fields_of_utf8(props, len(props))
    return size, body_len, raw_crc & CRC_MASK, flags, code, keys, uniq, host


def encode_derived(  # noqa: PLR0917  # positional for speed, as encode_record_into
    buf: object,
    pos: cython.longlong,
    src: object,
    queue_id: cython.int,
    queue_offset: cython.longlong,
    physical_offset: cython.longlong,
    sys_flag: cython.int,
    store_timestamp: cython.longlong,
    prepared: cython.longlong,
    topic_field: bytes,
    props: bytes,
    crc: cython.int,
    size: cython.longlong,
) -> None:
    """Write at ``buf[pos:]`` a copy of the v1 record ``src`` with fields replaced.

    Copied from ``src``: FLAG, BORNTIMESTAMP, both hosts, RECONSUMETIMES and
    the body. Given: QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG (its host
    bits must be ``src``'s), STORETIMESTAMP, PREPARED TRANSACTION OFFSET,
    the topic field, the properties and the body CRC; ``size`` as
    :func:`derived_record` gave it. TOTALSIZE and MAGICCODE go in last,
    after a store barrier, as ``apogee.model.kernels.write_record`` does.

    Raises:
        ValueError: ``src`` is not a whole v1 record, the sizes disagree or
            the record does not fit ``buf``.
        OverflowError, struct.error: a number does not fit its field.
    """
    if cython.compiled:
        out = cython.declare(cython.Py_buffer)
        data = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(src, cython.address(data), PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(buf, cython.address(out), PyBUF_WRITABLE)
            try:
                _encode_derived(
                    cython.cast(cython.p_uchar, out.buf), out.len, pos,
                    cython.cast(cython.p_uchar, data.buf), data.len, queue_id, queue_offset,
                    physical_offset, sys_flag, store_timestamp, prepared, topic_field, props,
                    crc, size,
                )  # fmt: skip
            finally:
                PyBuffer_Release(cython.address(out))
        finally:
            PyBuffer_Release(cython.address(data))
    else:
        with memoryview(buf).cast("B") as view, memoryview(src).cast("B") as source:  # type: ignore[arg-type]
            _encode_derived(
                view, len(view), pos, source, len(source), queue_id, queue_offset,
                physical_offset, sys_flag, store_timestamp, prepared, topic_field, props, crc,
                size,
            )  # fmt: skip


@cython.cfunc
def _encode_derived(  # noqa: PLR0917
    out: cython.p_uchar,
    out_len: cython.Py_ssize_t,
    pos: cython.longlong,
    src: cython.p_uchar,
    src_len: cython.Py_ssize_t,
    queue_id: cython.int,
    queue_offset: cython.longlong,
    physical_offset: cython.longlong,
    sys_flag: cython.int,
    store_timestamp: cython.longlong,
    prepared: cython.longlong,
    topic_field: bytes,
    props: bytes,
    crc: cython.int,
    size: cython.longlong,
) -> cython.int:
    body_at: cython.Py_ssize_t = _body_at(src, src_len)
    if body_at < 0:
        raise ValueError("the source is not a whole v1 record")
    flags: cython.int = get32(src, 36)
    born: cython.Py_ssize_t = 20 if flags & 0x10 else 8
    stored: cython.Py_ssize_t = 20 if flags & 0x20 else 8
    if (sys_flag ^ flags) & 0x30:
        raise ValueError("the host bits of the sysFlag are not the source's")
    body_len: cython.Py_ssize_t = get32(src, body_at - 4)
    topic_len: cython.Py_ssize_t = len(topic_field)
    props_len: cython.Py_ssize_t = len(props)
    if props_len > 0x7FFF:
        raise struct.error("'h' format requires -32768 <= number <= 32767")
    if size != body_at + body_len + topic_len + 2 + props_len:
        raise ValueError("the size is not the derived record's")
    if pos < 0 or pos > out_len or size > out_len - pos:
        raise ValueError("the record does not fit the buffer")
    at: cython.Py_ssize_t = cython.cast(cython.Py_ssize_t, pos)
    put32(out, at + 8, crc)
    put32(out, at + 12, queue_id)
    copy_bytes(out, at + 16, src, 16, 4)  # FLAG
    put64(out, at + 20, queue_offset)
    put64(out, at + 28, physical_offset)
    put32(out, at + 36, sys_flag)
    copy_bytes(out, at + 40, src, 40, 8 + born)  # BORNTIMESTAMP, BORNHOST
    p: cython.Py_ssize_t = 48 + born
    put64(out, at + p, store_timestamp)
    p += 8
    copy_bytes(out, at + p, src, p, stored + 4)  # STOREHOST, RECONSUMETIMES
    p += stored + 4
    put64(out, at + p, prepared)
    p += 8
    copy_bytes(out, at + p, src, p, 4 + body_len)  # body length, body
    p += 4 + body_len
    if cython.compiled:
        memcpy(out + at + p, cython.cast(cython.p_char, topic_field), topic_len)
    else:
        out[at + p : at + p + topic_len] = topic_field
    p += topic_len
    put16(out, at + p, cython.cast(cython.int, props_len))
    p += 2
    if cython.compiled:
        memcpy(out + at + p, cython.cast(cython.p_char, props), props_len)
    else:
        out[at + p : at + p + props_len] = props
    _store_barrier()
    put32(out, at, cython.cast(cython.int, size))
    put32(out, at + 4, MAGIC_V1)
    return 0


# -- the reput's hand-off ------------------------------------------------------------


def take_handoff(
    handoff: object,
    taken: Entries,
    cursor: cython.longlong,
    limit: cython.longlong,
    budget: cython.longlong,
) -> tuple[int, int]:
    """Move the entries at the front of ``handoff`` that continue the log to ``taken``.

    From the front of ``handoff`` (a deque of hand-off entries), while an
    entry's physical offset is ``cursor`` and its record ends by ``limit``
    (``cursor`` then moves to that end), at most ``budget`` entries. Returns
    (how many moved, the cursor after them). The reput's fast lane: records
    this process appended are dispatched from their entries, not parsed.

    Raises:
        TypeError: an entry is not a tuple.
    """
    n: cython.longlong = 0
    popleft = handoff.popleft  # type: ignore[attr-defined]
    while n < budget and handoff:
        entry: object = handoff[0]  # type: ignore[index]
        if not isinstance(entry, tuple):
            raise TypeError("hand-off entries are tuples")
        t = cython.cast(tuple, entry)
        phys: cython.longlong = t[_OFFSET]
        size: cython.longlong = t[_SIZE]
        if phys != cursor or size > limit - cursor:
            break
        taken.append(popleft())
        cursor += size
        n += 1
    return n, cursor


# -- consume queues ------------------------------------------------------------------


@cython.cfunc
@cython.inline
def _tx_bits(flag: object) -> cython.long:
    """``flag & 0xC`` as Python's ``&`` gives it for an int of any size."""
    if cython.compiled and type(flag) is int:  # exactly int: no __and__ to honour
        # the low bits of an int of any size (two's complement): no new object
        return cython.cast(cython.long, PyLong_AsUnsignedLongLongMask(flag) & 0xC)
    bits: cython.long = flag & 0xC  # type: ignore[operator]
    return bits


@cython.cfunc
@cython.inline
def _is_next_unit(logical: object, expect: cython.longlong) -> cython.bint:
    """Whether ``logical * 20 == expect``, for a logical offset of any size.

    Compared by division, so that a logical offset whose product is past
    int64 is "no" rather than a wrapped equality.
    """
    if expect % CQ_UNIT != 0:
        return False
    try:
        value: cython.longlong = logical  # type: ignore[assignment]
    except OverflowError:
        return False
    return value == expect // CQ_UNIT


def write_units(  # noqa: PLR0917  # the store's calling convention
    view: object,
    seg_start: cython.longlong,
    wrote: cython.longlong,
    seg_size: cython.longlong,
    entries: Entries,
    i: cython.longlong,
    j: cython.longlong,
    topic: str,
    queue_id: object,
) -> int:
    """Write the units of ``entries[i:j]`` into one segment; return how many.

    From ``entries[i]`` on (a negative ``i`` counts from the end, as list
    indexing does), while an entry is of (``topic``, ``queue_id``), of a
    queued transaction type (not PREPARED or ROLLBACK), its logical offset
    is the segment's next unit (``seg_start + wrote``) and the segment has
    room (``wrote < seg_size``). ``view`` is the segment's mapping.

    Raises:
        IndexError: ``i`` is before the start of ``entries``.
        struct.error: a unit does not fit the view, or a size is past int32.
    """
    if cython.compiled:
        out = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(view, cython.address(out), PyBUF_WRITABLE)
        try:
            return _write_units(
                cython.cast(cython.p_uchar, out.buf), out.len, seg_start, wrote, seg_size,
                entries, i, j, topic, queue_id,
            )  # fmt: skip
        finally:
            PyBuffer_Release(cython.address(out))
    with memoryview(view).cast("B") as mv:  # type: ignore[arg-type]
        return _write_units(mv, len(mv), seg_start, wrote, seg_size, entries, i, j, topic,
                            queue_id)  # fmt: skip


@cython.cfunc
def _write_units(  # noqa: PLR0917
    out: cython.p_uchar,
    out_len: cython.Py_ssize_t,
    seg_start: cython.longlong,
    wrote: cython.longlong,
    seg_size: cython.longlong,
    entries: Entries,
    i: cython.longlong,
    j: cython.longlong,
    topic: str,
    queue_id: object,
) -> cython.Py_ssize_t:
    count: cython.Py_ssize_t = 0
    n: cython.Py_ssize_t
    at: cython.longlong
    size: cython.longlong
    j = min(j, len(entries))
    while i < j and wrote < seg_size:
        n = len(entries)  # read afresh: a comparison below may run Python code
        at = i + n if i < 0 else i
        if at < 0 or at >= n:
            raise IndexError("list index out of range")
        entry: object = entries[at]
        if not (isinstance(entry, tuple) and len(entry) == 11):
            raise TypeError("a dispatch entry is an 11-tuple")
        e = cython.cast(tuple, entry)
        bits: cython.long = _tx_bits(e[_SYS_FLAG])
        if bits in (0x4, 0xC):  # PREPARED and ROLLBACK never enter a queue
            break
        if not _is_next_unit(e[_QUEUE_OFFSET], seg_start + wrote):
            break
        qid = e[_QUEUE_ID]
        if qid is not queue_id and qid != queue_id:
            break
        if e[_TOPIC] != topic:
            break
        size = e[_SIZE]
        if size < INT32_MIN or size > INT32_MAX or wrote < 0 or wrote + CQ_UNIT > out_len:
            raise struct.error("a unit does not fit")
        w: cython.Py_ssize_t = cython.cast(cython.Py_ssize_t, wrote)
        put64(out, w, e[_OFFSET])
        put32(out, w + 8, cython.cast(cython.int, size))
        put64(out, w + 12, e[_TAGS_CODE])
        wrote += CQ_UNIT
        count += 1
        i += 1
    return count


# -- index files -----------------------------------------------------------------------


@cython.cfunc
def _key_hashes(topic: str, keys: str | None, uniq: str | None) -> Hashes:
    """Index hashes of topic#UNIQ_KEY and topic#token for each distinct non-empty token of KEYS.

    "topic#" is folded once, and only when there is a key to hash (a topic
    that cannot be hashed fails only then).
    """
    hashes: Hashes = []
    prefix: cython.longlong = -1
    if uniq:
        prefix = (31 * fold_str(topic, 0) + 0x23) & _MASK32
        hashes.append(_abs_hash(fold_str(uniq, cython.cast(cython.uint, prefix))))
    if keys:
        seen: list[str] = [uniq] if uniq else []
        token: str
        for token in keys.split(" "):
            if not token or token in seen:
                continue
            seen.append(token)
            if prefix < 0:
                prefix = (31 * fold_str(topic, 0) + 0x23) & _MASK32
            hashes.append(_abs_hash(fold_str(token, cython.cast(cython.uint, prefix))))
    return hashes


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _abs_hash(h: cython.uint) -> cython.int:
    """abs(hashCode) with MIN_VALUE -> 0: RocketMQ's index key hash."""
    if h & _SIGN32:
        return 0 if h == _SIGN32 else cython.cast(cython.int, (~h + 1) & _MASK32)
    return cython.cast(cython.int, h)


def index_work(entries: Sequence[tuple[object, ...]]) -> list[tuple[object, object, Hashes]]:
    """(offset, store time, key hashes) of the entries that have keys to index, in order.

    ROLLBACK records and records without keys are left out.

    Raises:
        TypeError: an entry is not a dispatch entry (11-tuple, str or None keys).
        UnicodeEncodeError: a topic or key to hash holds a lone surrogate.
    """
    work: list[tuple[object, object, Hashes]] = []
    entry: object
    for entry in entries:
        if not (isinstance(entry, tuple) and len(entry) == 11):
            raise TypeError("a dispatch entry is an 11-tuple")
        e = cython.cast(tuple, entry)
        keys = e[_KEYS]
        uniq = e[_UNIQ_KEY]
        if not (keys is None or isinstance(keys, str)) or not (
            uniq is None or isinstance(uniq, str)
        ):
            raise TypeError("keys and unique key must be str or None")
        if not (keys or uniq) or _tx_bits(e[_SYS_FLAG]) == 0xC:  # nothing to index, or ROLLBACK
            continue
        topic = e[_TOPIC]
        if not isinstance(topic, str):
            raise TypeError("the topic must be a str")
        hashes = _key_hashes(topic, keys, uniq)
        if hashes:
            work.append((e[_OFFSET], e[_STORE_TIME], hashes))
    return work


def index_put(  # noqa: PLR0917  # the file's header fields, in and out
    mm: object,
    slot_num: cython.longlong,
    index_num: cython.longlong,
    begin_ts: cython.longlong,
    end_ts: cython.longlong,
    begin_phy: cython.longlong,
    end_phy: cython.longlong,
    slot_count: cython.longlong,
    count: cython.longlong,
    work: IndexWork,
    rec: cython.longlong,
    key: cython.longlong,
) -> IndexState:
    """Put records of ``work`` into one mapped index file until done or full.

    From record ``rec``, key ``key``; a record at or below the file's end
    offset was indexed already and is skipped (checked before its first key
    only). Returns ``(rec, key, beginTimestamp, endTimestamp,
    beginPhyOffset, endPhyOffset, hashSlotCount, indexCount)``, ``key`` 0
    once all the work is in. Each put writes the entry, then the header,
    then the slot, so that a torn put is unreachable.

    Raises:
        ValueError: the sizes or counts do not describe an index file in ``mm``.
        struct.error, OverflowError: a hash is past int32, an offset past int64.
    """
    if not (0 < slot_num <= INT32_MAX and 0 < index_num <= INT32_MAX) or min(count, rec, key) < 0:
        raise ValueError("bad index_put() arguments")
    if cython.compiled:
        out = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(mm, cython.address(out), PyBUF_WRITABLE)
        try:
            return _index_put(
                cython.cast(cython.p_uchar, out.buf), out.len, slot_num, index_num, begin_ts,
                end_ts, begin_phy, end_phy, slot_count, count, work, rec, key,
            )  # fmt: skip
        finally:
            PyBuffer_Release(cython.address(out))
    with memoryview(mm).cast("B") as view:  # type: ignore[arg-type]
        return _index_put(view, len(view), slot_num, index_num, begin_ts, end_ts, begin_phy,
                          end_phy, slot_count, count, work, rec, key)  # fmt: skip


@cython.cfunc
def _index_put(  # noqa: PLR0915, PLR0917  # one loop, in the file's put order
    base: cython.p_uchar,
    length: cython.Py_ssize_t,
    slot_num: cython.longlong,
    index_num: cython.longlong,
    begin_ts: cython.longlong,
    end_ts: cython.longlong,
    begin_phy: cython.longlong,
    end_phy: cython.longlong,
    slot_count: cython.longlong,
    count: cython.longlong,
    work: IndexWork,
    rec: cython.longlong,
    key: cython.longlong,
) -> IndexState:
    if not isinstance(work, list):
        raise TypeError("index_put() takes the work as a list")
    jobs = cython.cast(list, work)
    entries_pos: cython.longlong = INDEX_HEADER + slot_num * INDEX_SLOT
    if entries_pos + index_num * INDEX_ENTRY > length:
        raise ValueError("the buffer is smaller than the index file")
    phy: cython.longlong
    ts: cython.longlong
    h: cython.longlong
    slot: cython.longlong
    slot_pos: cython.Py_ssize_t
    prev: cython.int
    diff: cython.longlong
    e: cython.Py_ssize_t
    full: cython.bint = False
    while not full:
        if rec >= len(jobs):  # read afresh: converting a field may run Python code
            key = 0
            break
        item: object = jobs[rec]
        if not (isinstance(item, tuple) and len(item) == 3 and isinstance(item[2], list)):
            raise TypeError("index work items are (offset, time, hashes)")
        t = cython.cast(tuple, item)
        phy = t[0]
        ts = t[1]
        hashes = cython.cast(list, t[2])  # checked above
        if key == 0 and (phy < end_phy or (phy == end_phy and count > 1) or not hashes):
            rec += 1  # indexed already, or nothing to index
            continue
        while key < len(hashes):
            if count >= index_num:
                full = True
                break
            h = hashes[key]
            if h < INT32_MIN or h > INT32_MAX:
                raise struct.error("'i' format requires -2147483648 <= number <= 2147483647")
            slot = h % slot_num
            if slot < 0:  # C's remainder; Python's is never negative
                slot += slot_num
            slot_pos = cython.cast(cython.Py_ssize_t, INDEX_HEADER + slot * INDEX_SLOT)
            prev = get32(base, slot_pos)
            if prev <= 0 or prev >= count:
                prev = 0
                slot_count += 1
            if count == 1:
                # RocketMQ computes entry 1's diff against the inherited begin and
                # then moves begin; moving first stores the true time (diff 0).
                begin_ts = ts
                begin_phy = phy
            diff = 0
            if begin_ts > 0 and ts > begin_ts:  # ts - begin_ts cannot overflow then
                diff = min((ts - begin_ts) // 1000, INT32_MAX)
            e = cython.cast(cython.Py_ssize_t, entries_pos + count * INDEX_ENTRY)
            put32(base, e, cython.cast(cython.int, h))
            put64(base, e + 4, phy)
            put32(base, e + 12, cython.cast(cython.int, diff))
            put32(base, e + 16, prev)
            count += 1
            end_phy = phy
            # the newest time rather than RocketMQ's last one: a clock stepping
            # back must not shrink the range that queries compare against
            if ts > end_ts:  # noqa: PLR1730
                end_ts = ts
            _store_barrier()  # entry, then header, then slot
            put64(base, 0, begin_ts)
            put64(base, 8, end_ts)
            put64(base, 16, begin_phy)
            put64(base, 24, phy)
            put32(base, 32, cython.cast(cython.int, slot_count))
            put32(base, 36, cython.cast(cython.int, count))
            _store_barrier()
            put32(base, slot_pos, cython.cast(cython.int, count - 1))
            key += 1
        if not full:
            rec += 1
            key = 0
    return rec, key, begin_ts, end_ts, begin_phy, end_phy, slot_count, count


# -- writing a file ----------------------------------------------------------------------


def pwrite_all(fd: cython.int, buf: object, length: cython.longlong,
               offset: cython.longlong) -> None:  # fmt: skip
    """Write ``buf[:length]`` to ``fd`` at ``offset``, all of it.

    Writes of 64 KiB or more release the GIL for the system call; smaller
    ones keep it (see ``PWRITE_KEEP_GIL``).

    Raises:
        ValueError: ``length`` or ``offset`` is out of range.
        OSError: the system call failed (or wrote nothing: EIO).
    """
    if cython.compiled:
        data = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(buf, cython.address(data), PyBUF_SIMPLE)
        try:
            _pwrite_all(fd, cython.cast(cython.p_uchar, data.buf), data.len, length, offset)
        finally:
            PyBuffer_Release(cython.address(data))
    else:
        with memoryview(buf).cast("B") as view:  # type: ignore[arg-type]
            _pwrite_all(fd, view, len(view), length, offset)


@cython.cfunc
def _pwrite_all(fd: cython.int, p: cython.p_uchar, size: cython.Py_ssize_t,
                length: cython.longlong, offset: cython.longlong) -> cython.int:  # fmt: skip
    if length < 0 or length > size or offset < 0:
        raise ValueError("length or offset out of range")
    done: cython.longlong = 0
    n: cython.longlong
    while done < length:
        n = _pwrite(fd, p, done, length - done, offset + done)
        if n == 0:
            raise OSError(5, os.strerror(5))  # EIO: nothing written, nothing will be
        if n > 0:
            done += n
    return 0


@cython.cfunc
def _pwrite(fd: cython.int, p: cython.p_uchar, at: cython.longlong, n: cython.longlong,
            offset: cython.longlong) -> cython.longlong:  # fmt: skip
    """One pwrite of ``p[at:at + n]``: bytes written, or -1 to try again (EINTR)."""
    if cython.compiled:
        written: cython.longlong
        if n < PWRITE_KEEP_GIL:
            written = pwrite(fd, p + at, n, offset)
        else:
            with cython.nogil:
                written = pwrite(fd, p + at, n, offset)
        if written < 0:
            err: cython.int = errno
            if err == EINTR:
                return -1
            raise OSError(err, os.strerror(err))
        return written
    wrote: int = os.pwrite(fd, p[at : at + n], offset)  # retries EINTR itself
    return wrote
