# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The sink's batch bodies, written straight from the Arrow columns of a record batch.

Owns: ``pack_rows``, which writes the records of one batch send
(SEND_BATCH_MESSAGE, RocketMQ ``MessageDecoder.encodeMessages``) from the
data and offset buffers of the ``body`` column, those of an optional column
of property strings (``apogee.spark.columnar`` makes it), and the rows'
order; each record gets a fresh UNIQ_KEY written from a block of ids
(``apogee.client.uniq_key.uniq_key_block``), so nothing is made per row in
Python::

    | TOTALSIZE | MAGICCODE 0 | BODYCRC 0 | FLAG 0 | BODYLEN | body | PROPLEN | properties |
      int32       int32         int32       int32    int32            int16

    properties: the row's own pairs (name 0x01 value 0x02 ...), then
                UNIQ_KEY 0x01 <28 hex digits of the block> <counter: 4 hex digits> 0x02

A first pass adds up the sizes, so the body is allocated once at its size;
a second writes the records, one ``memcpy`` per body and property string.

This module is compiled by Cython when a C compiler is at hand (the first
line); the same source runs interpreted otherwise (``APOGEE_PURE_PYTHON``),
with the same bytes: the buffers are C pointers compiled and memoryviews
interpreted, and ``apogee._util.bytes_be`` writes the numbers in both.
"""

from __future__ import annotations

import cython

from apogee.errors import InvalidMessageError
from apogee.model.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from apogee.model.message_codec import MAX_PROPERTIES_LENGTH

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import copy_bytes, put16, put32, put_hex4
    from cython.cimports.cpython.bytearray import (
        PyByteArray_AS_STRING,
        PyByteArray_FromStringAndSize,
    )
    from cython.cimports.cpython.memoryview import PyMemoryView_GET_BUFFER
else:
    from apogee._util.bytes_be import copy_bytes, put16, put32, put_hex4

_UNIQ_NAME = f"{PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}\x01".encode()
_BASE_LEN = 28  # the hex digits of an id before its counter
#: The bytes a record takes besides its body and its own properties.
RECORD_OVERHEAD = 22 + len(_UNIQ_NAME) + _BASE_LEN + 4 + 1
_FIXED = cython.declare(cython.Py_ssize_t, 22)
_MAX_PROPS = cython.declare(cython.Py_ssize_t, MAX_PROPERTIES_LENGTH)


def pack_rows(  # noqa: PLR0917  # one C call with everything it reads
    rows: object,
    body_offsets: object,
    body_data: object,
    prop_offsets: object | None,
    prop_data: object | None,
    base: bytes,
    first: int,
) -> bytearray:
    """The body of one batch send: the records of ``rows``, in their order.

    ``rows`` holds native int64 row numbers; ``body_offsets`` native int64,
    one more than the column has rows: row ``r``'s body is
    ``body_data[body_offsets[r]:body_offsets[r + 1]]``. ``prop_offsets`` and
    ``prop_data`` are the same for each row's own property string (None: no
    row has one). ``base`` is the block's id text up to the counter and
    ``first`` its first counter: the ``k``-th record's id counts
    ``(first + k) & 0xFFFF``.

    Raises:
        InvalidMessageError: a row's properties, its id included, exceed
            32767 bytes (the message names the row).
        ValueError: a row number or an offset lies outside its buffer, or
            ``base`` is not 28 bytes.
    """
    if len(base) != _BASE_LEN:
        raise ValueError(f"pack_rows: the id text before the counter is {len(base)} bytes, not 28")
    with_props = prop_offsets is not None and prop_data is not None
    views = [_flat(obj) for obj in (rows, body_offsets, body_data)]
    if with_props:
        views += [_flat(prop_offsets), _flat(prop_data)]
    if cython.compiled:
        return _pack(
            cython.cast(cython.p_longlong, _at(views[0])), len(views[0]) // 8,
            cython.cast(cython.p_longlong, _at(views[1])), len(views[1]) // 8,
            _at(views[2]), len(views[2]),
            cython.cast(cython.p_longlong, _at(views[3])) if with_props else cython.NULL,
            len(views[3]) // 8 if with_props else 0,
            _at(views[4]) if with_props else cython.NULL,
            len(views[4]) if with_props else 0,
            with_props, base, first,
        )  # fmt: skip
    longs = [v.cast("q") for v in views[:2]]
    if not with_props:
        return _pack(longs[0], len(longs[0]), longs[1], len(longs[1]), views[2], len(views[2]),
                     None, 0, None, 0, False, base, first)  # fmt: skip
    poffs = views[3].cast("q")
    return _pack(longs[0], len(longs[0]), longs[1], len(longs[1]), views[2], len(views[2]),
                 poffs, len(poffs), views[4], len(views[4]), True, base, first)  # fmt: skip


def _flat(obj: object) -> memoryview:
    """``obj``'s bytes, as a memoryview of unsigned bytes (it holds the buffer)."""
    view = memoryview(obj)  # type: ignore[arg-type]
    if not view.c_contiguous:
        raise ValueError("pack_rows takes contiguous buffers only")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


@cython.cfunc
@cython.inline
def _at(view: memoryview) -> cython.p_uchar:
    return cython.cast(cython.p_uchar, PyMemoryView_GET_BUFFER(view).buf)


@cython.cfunc
def _pack(  # noqa: PLR0917  # one C call with everything it reads
    rows: cython.p_longlong,
    count: cython.Py_ssize_t,
    offs: cython.p_longlong,
    n_offs: cython.Py_ssize_t,
    data: cython.p_uchar,
    data_len: cython.Py_ssize_t,
    poffs: cython.p_longlong,
    n_poffs: cython.Py_ssize_t,
    pdata: cython.p_uchar,
    pdata_len: cython.Py_ssize_t,
    with_props: cython.bint,
    base: bytes,
    first: cython.Py_ssize_t,
) -> bytearray:
    i: cython.Py_ssize_t
    r: cython.longlong
    size: cython.Py_ssize_t = 0
    plen: cython.Py_ssize_t
    uniq: cython.Py_ssize_t = len(_UNIQ_NAME) + _BASE_LEN + 5
    # first pass: check every row and add up the sizes
    for i in range(count):
        r = rows[i]
        if r < 0 or r + 1 >= n_offs:
            raise ValueError(f"pack_rows: row {r} is not a row of the body column")
        if offs[r] < 0 or offs[r] > offs[r + 1] or offs[r + 1] > data_len:
            raise ValueError(f"pack_rows: the body of row {r} lies outside its buffer")
        plen = uniq
        if with_props:
            if r + 1 >= n_poffs:
                raise ValueError(f"pack_rows: row {r} is not a row of the properties column")
            if poffs[r] < 0 or poffs[r] > poffs[r + 1] or poffs[r + 1] > pdata_len:
                raise ValueError(f"pack_rows: the properties of row {r} lie outside their buffer")
            plen += poffs[r + 1] - poffs[r]
        if plen > _MAX_PROPS:
            raise InvalidMessageError(
                f"row {r}: its properties take {plen} bytes, the limit is 32767"
            )
        size += _FIXED + (offs[r + 1] - offs[r]) + plen
    out: bytearray
    if cython.compiled:
        # not zero-filled (bytearray(size) would be): _write writes every byte
        out = PyByteArray_FromStringAndSize(cython.NULL, size)
        _write(cython.cast(cython.p_uchar, PyByteArray_AS_STRING(out)), rows, count, offs,
               data, poffs, pdata, with_props, base, first)  # fmt: skip
    else:
        out = bytearray(size)
        _write(memoryview(out), rows, count, offs, data, poffs, pdata, with_props, base, first)
    return out


@cython.cfunc
@cython.exceptval(check=False)
def _write(  # noqa: PLR0917  # one C call with everything it reads
    p: cython.p_uchar,
    rows: cython.p_longlong,
    count: cython.Py_ssize_t,
    offs: cython.p_longlong,
    data: cython.p_uchar,
    poffs: cython.p_longlong,
    pdata: cython.p_uchar,
    with_props: cython.bint,
    base: bytes,
    first: cython.Py_ssize_t,
) -> cython.void:
    i: cython.Py_ssize_t
    r: cython.longlong
    at: cython.Py_ssize_t = 0
    blen: cython.Py_ssize_t
    own: cython.Py_ssize_t
    name: bytes = _UNIQ_NAME
    name_len: cython.Py_ssize_t = len(name)
    uniq: cython.Py_ssize_t = name_len + _BASE_LEN + 5
    for i in range(count):
        r = rows[i]
        blen = offs[r + 1] - offs[r]
        own = poffs[r + 1] - poffs[r] if with_props else 0
        put32(p, at, _FIXED + blen + own + uniq)
        put32(p, at + 4, 0)  # MAGICCODE
        put32(p, at + 8, 0)  # BODYCRC
        put32(p, at + 12, 0)  # FLAG
        put32(p, at + 16, blen)
        at += 20
        copy_bytes(p, at, data, offs[r], blen)
        at += blen
        put16(p, at, own + uniq)
        at += 2
        if own:
            copy_bytes(p, at, pdata, poffs[r], own)
            at += own
        copy_bytes(p, at, name, 0, name_len)
        at += name_len
        copy_bytes(p, at, base, 0, _BASE_LEN)
        at += _BASE_LEN
        put_hex4(p, at, (first + i) & 0xFFFF)
        p[at + 4] = 2  # the pair's end
        at += 5
