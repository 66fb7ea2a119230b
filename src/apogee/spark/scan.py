# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The source's work per record of a pull body: one pass that finds every field, and the copies.

Owns: ``scan_records``, which walks the records of a pull body (the
commit-log layout drawn in ``apogee.model.message_codec``) up to the first
whose QUEUEOFFSET reaches the read's end, checks their framing, and writes
their fixed fields and where their parts lie into two tables of native
int64; and ``copy_fields``, which copies the byte runs one table column pair
names (bodies, tags, property names...) back to back into the data buffer of
an Arrow column: one ``memcpy`` each, the only copy a value makes in the
Python worker. ``apogee.spark.records`` turns the tables into columns with
numpy, so nothing is made per record in Python.

The row table, ``ROW_WIDTH`` int64 per record, in ``ROW_FIELDS`` order::

    | QUEUEOFFSET | BORNTIMESTAMP | STORETIMESTAMP | RECONSUMETIMES | SYSFLAG |
    | body at | body length | STOREHOST at | STOREHOST length | PHYSICALOFFSET at |
    | TAGS at | TAGS length | KEYS at | KEYS length | UNIQ_KEY at | UNIQ_KEY length |
    | properties at | properties length | map entries |

    "at" is a byte position in the pull body; a TAGS, KEYS or UNIQ_KEY
    length of -1 means the record has none. "map entries" counts the
    record's rows in the entry table, dropped ones included.

The entry table, ``ENTRY_WIDTH`` int64 per property pair that goes to the
``properties`` map (every pair but TAGS, KEYS and UNIQ_KEY)::

    | name at | name length | value at | value length |

    both lengths -1: dropped, a later pair of the record has the same name.

Property strings follow RocketMQ's rules (``apogee.model.message``): pairs
split at 0x02, name and value at the first 0x01, pairs with an empty name
or value dropped, a later pair with the same name wins. 0x01 and 0x02 never
occur inside a multi-byte UTF-8 character, so bytes split as the characters
do; the strings are checked to be UTF-8 where they become Arrow columns.

This module is compiled by Cython when a C compiler is at hand (the first
line); the same source runs interpreted otherwise (``APOGEE_PURE_PYTHON``),
with the same results. ``get16``/``get32``/``get64`` (``apogee._util.bytes_be``,
inlined C compiled and ``struct`` interpreted) and the table pointers (C
pointers compiled, memoryviews interpreted) are the only places where the
two differ.
"""

from __future__ import annotations

import cython

from apogee.errors import ProtocolError

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import (
        copy_bytes,
        find_byte,
        get16,
        get32,
        get64,
        same_at,
    )
    from cython.cimports.cpython.buffer import (
        PyBUF_SIMPLE,
        PyBUF_WRITABLE,
        PyBuffer_Release,
        PyObject_GetBuffer,
    )
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.libc.string import memcmp
else:
    from apogee._util.bytes_be import copy_bytes, find_byte, get16, get32, get64, same_at

#: The fixed fields of a record with IPv4 hosts, up to BODYLEN: the least a record has.
MIN_RECORD = 88
_MIN = cython.declare(cython.Py_ssize_t, MIN_RECORD)

#: The columns of the row table, in order (see the module docstring).
ROW_FIELDS = (
    "queue_offset", "born", "stored", "reconsumes", "sys_flag",
    "body_at", "body_len", "host_at", "host_len", "phys_at",
    "tags_at", "tags_len", "keys_at", "keys_len", "uniq_at", "uniq_len",
    "props_at", "props_len", "entries",
)  # fmt: skip
ROW_WIDTH = len(ROW_FIELDS)
#: The columns of the entry table, in order.
ENTRY_FIELDS = ("name_at", "name_len", "value_at", "value_len")
ENTRY_WIDTH = len(ENTRY_FIELDS)

# the same positions for the C code (a module constant here is a Python object)
_W = cython.declare(cython.Py_ssize_t, 19)
_QUEUE_OFFSET = cython.declare(cython.Py_ssize_t, 0)
_BORN = cython.declare(cython.Py_ssize_t, 1)
_STORED = cython.declare(cython.Py_ssize_t, 2)
_RECONSUMES = cython.declare(cython.Py_ssize_t, 3)
_SYS_FLAG = cython.declare(cython.Py_ssize_t, 4)
_BODY_AT = cython.declare(cython.Py_ssize_t, 5)
_BODY_LEN = cython.declare(cython.Py_ssize_t, 6)
_HOST_AT = cython.declare(cython.Py_ssize_t, 7)
_HOST_LEN = cython.declare(cython.Py_ssize_t, 8)
_PHYS_AT = cython.declare(cython.Py_ssize_t, 9)
_TAGS_AT = cython.declare(cython.Py_ssize_t, 10)
_KEYS_AT = cython.declare(cython.Py_ssize_t, 12)
_UNIQ_AT = cython.declare(cython.Py_ssize_t, 14)
_PROPS_AT = cython.declare(cython.Py_ssize_t, 16)
_PROPS_LEN = cython.declare(cython.Py_ssize_t, 17)
_ENTRIES = cython.declare(cython.Py_ssize_t, 18)
_EW = cython.declare(cython.Py_ssize_t, 4)

_QUEUE_OFFSET_AT = cython.declare(cython.Py_ssize_t, 20)
_MAGIC_V2 = cython.declare(cython.int, -626843477)  # 0xDAA320AB as a Java int
_BORN_V6 = cython.declare(cython.int, 0x10)
_STORE_V6 = cython.declare(cython.int, 0x20)

#: what ``scan_records`` returns: (rows, row count, entries, entry count,
#: dropped entries, byte after the last record, queue offset after it or -1)
Scanned = tuple[bytearray, int, bytearray, int, int, int, int]


def scan_records(body: bytes, end_offset: int) -> Scanned:
    """The records of ``body`` with queue offsets below ``end_offset``, as tables.

    Returns the row and entry tables (native int64, see the module
    docstring) with their row counts, how many entries were dropped, the
    byte after the last record and the queue offset after it (-1 when there
    is none).

    Raises:
        ProtocolError: a record is cut short, or a length in it points past
            its end (the message names the record's byte). Records at or
            past ``end_offset`` are not looked into, past their size.
    """
    p: cython.p_uchar = body
    size: cython.Py_ssize_t = len(body)
    pos: cython.Py_ssize_t = 0
    n: cython.Py_ssize_t = 0
    total: cython.Py_ssize_t
    qoff: cython.longlong
    end: cython.longlong = min(end_offset, 0x7FFFFFFFFFFFFFFF)
    next_offset: cython.longlong = -1
    while pos < size:
        if size - pos < _MIN:
            raise ProtocolError(f"record at byte {pos} of a pull body is cut short")
        total = get32(p, pos)
        if total <= 0 or total > size - pos:
            raise ProtocolError(f"record at byte {pos} of a pull body is cut short")
        qoff = get64(p, pos + _QUEUE_OFFSET_AT)
        if qoff >= end:
            break
        next_offset = qoff + 1
        n += 1
        pos += total
    rows = bytearray(n * _W * 8)
    capacity: cython.Py_ssize_t = _fill_rows(p, _table(rows), n)
    entries = bytearray(capacity * _EW * 8)
    counts: tuple[int, int] = _fill_entries(p, _table(rows), n, _table(entries))
    return rows, n, entries, counts[0], counts[1], pos, next_offset


@cython.cfunc
def _table(table: bytearray) -> cython.p_longlong:
    """The int64 cells of ``table`` (a memoryview of them, interpreted)."""
    if cython.compiled:
        return cython.cast(cython.p_longlong, PyByteArray_AS_STRING(table))
    return memoryview(table).cast("q")


@cython.cfunc
def _bad(pos: cython.Py_ssize_t, problem: str) -> ProtocolError:
    return ProtocolError(f"record at byte {pos} of a pull body: {problem}")


@cython.cfunc
@cython.exceptval(-1)
def _fill_rows(
    p: cython.p_uchar, rows: cython.p_longlong, n: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    """Check and note the fields of the first ``n`` records (their sizes are checked).

    Returns how many map entries their property strings can hold at most: a
    pair takes 3 bytes and a separator, so ``(length + 1) // 4``.
    """
    pos: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t
    r: cython.Py_ssize_t
    capacity: cython.Py_ssize_t = 0
    for i in range(n):
        rec_end: cython.Py_ssize_t = pos + get32(p, pos)
        sys_flag: cython.int = get32(p, pos + 36)
        stored_at: cython.Py_ssize_t = pos + (68 if sys_flag & _BORN_V6 else 56)
        host_at: cython.Py_ssize_t = stored_at + 8
        host_len: cython.Py_ssize_t = 20 if sys_flag & _STORE_V6 else 8
        body_at: cython.Py_ssize_t = host_at + host_len + 16
        if body_at > rec_end:
            raise _bad(pos, "its fixed fields overrun its size")
        body_len: cython.Py_ssize_t = get32(p, body_at - 4)
        topic_at: cython.Py_ssize_t = body_at + body_len
        if body_len < 0 or body_len > rec_end - body_at - 4:
            raise _bad(pos, f"body length {body_len} past its end")
        props_at: cython.Py_ssize_t
        if get32(p, pos + 4) == _MAGIC_V2:
            props_at = topic_at + 4 + ((p[topic_at] << 8) | p[topic_at + 1])
        else:
            props_at = topic_at + 3 + p[topic_at]
        if props_at > rec_end:
            raise _bad(pos, "topic length past its end")
        props_len: cython.Py_ssize_t = get16(p, props_at - 2)
        if props_len < 0 or props_len > rec_end - props_at:
            raise _bad(pos, f"properties length {props_len} past its end")
        r = i * _W
        rows[r + _QUEUE_OFFSET] = get64(p, pos + _QUEUE_OFFSET_AT)
        rows[r + _BORN] = get64(p, pos + 40)
        rows[r + _STORED] = get64(p, stored_at)
        rows[r + _RECONSUMES] = get32(p, host_at + host_len)
        rows[r + _SYS_FLAG] = sys_flag
        rows[r + _BODY_AT] = body_at
        rows[r + _BODY_LEN] = body_len
        rows[r + _HOST_AT] = host_at
        rows[r + _HOST_LEN] = host_len
        rows[r + _PHYS_AT] = pos + 28
        rows[r + _TAGS_AT] = 0
        rows[r + _TAGS_AT + 1] = -1
        rows[r + _KEYS_AT] = 0
        rows[r + _KEYS_AT + 1] = -1
        rows[r + _UNIQ_AT] = 0
        rows[r + _UNIQ_AT + 1] = -1
        rows[r + _PROPS_AT] = props_at
        rows[r + _PROPS_LEN] = props_len
        capacity += (props_len + 1) // 4
        pos = rec_end
    return capacity


@cython.cfunc
def _fill_entries(
    p: cython.p_uchar, rows: cython.p_longlong, n: cython.Py_ssize_t, out: cython.p_longlong
) -> tuple[int, int]:
    """Split the property strings of the ``n`` rows: TAGS, KEYS and UNIQ_KEY into
    their row cells, every other pair into ``out``. Returns (entries, dropped)."""
    m: cython.Py_ssize_t = 0
    dropped: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    r: cython.Py_ssize_t
    e: cython.Py_ssize_t
    for i in range(n):
        r = i * _W
        start: cython.Py_ssize_t = rows[r + _PROPS_AT]
        stop: cython.Py_ssize_t = start + rows[r + _PROPS_LEN]
        first: cython.Py_ssize_t = m
        while start < stop:
            piece_end: cython.Py_ssize_t = find_byte(p, start, stop, 0x02)
            if piece_end < 0:
                piece_end = stop
            cut: cython.Py_ssize_t = find_byte(p, start, piece_end, 0x01)
            if cut < 0:
                cut = piece_end
            name_len: cython.Py_ssize_t = cut - start
            if name_len > 0 and piece_end > cut + 1:  # a name and a value
                slot: cython.Py_ssize_t = _taken(p, start, name_len)
                if slot >= 0:
                    rows[r + slot] = cut + 1
                    rows[r + slot + 1] = piece_end - cut - 1
                else:
                    for j in range(first, m):
                        e = j * _EW
                        if out[e + 1] == name_len and _same(p, out[e], start, name_len):
                            out[e + 1] = -1
                            out[e + 3] = -1
                            dropped += 1
                            break  # each earlier namesake was dropped when it came
                    e = m * _EW
                    out[e] = start
                    out[e + 1] = name_len
                    out[e + 2] = cut + 1
                    out[e + 3] = piece_end - cut - 1
                    m += 1
            start = piece_end + 1
        rows[r + _ENTRIES] = m - first
    return m, dropped


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _taken(p: cython.p_uchar, at: cython.Py_ssize_t, n: cython.Py_ssize_t) -> cython.Py_ssize_t:
    """The row cell of a pair named TAGS, KEYS or UNIQ_KEY, or -1 for a map entry."""
    if n == 4 and same_at(p, at, b"TAGS", 4):
        return _TAGS_AT
    if n == 4 and same_at(p, at, b"KEYS", 4):
        return _KEYS_AT
    if n == 8 and same_at(p, at, b"UNIQ_KEY", 8):
        return _UNIQ_AT
    return -1


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _same(
    p: cython.p_uchar, a: cython.Py_ssize_t, b: cython.Py_ssize_t, n: cython.Py_ssize_t
) -> cython.bint:
    """Whether ``p[a:a + n]`` equals ``p[b:b + n]``."""
    same: bool
    if cython.compiled:
        same = memcmp(p + a, p + b, n) == 0
        return same
    same = p[a : a + n] == p[b : b + n]
    return same


def copy_fields(  # noqa: PLR0917  # one C call with everything it reads
    src: bytes, table: object, width: int, column: int, out: object, at: int
) -> int:
    """Copy the runs a table names into the writable buffer ``out``, back to back from
    byte ``at``; returns the byte after the last.

    ``table`` is a buffer of native int64 rows of ``width`` cells; each row's
    cells ``column`` and ``column + 1`` are a run's start in ``src`` and its
    length. A negative length is no value (nothing copied).

    Raises:
        ValueError: a run lies outside ``src`` or past the end of ``out``
            (nothing of that run is written), or the table is not whole rows.
    """
    if width <= column + 1 or column < 0:
        raise ValueError(f"copy_fields: column {column} and the next are not in a row of {width}")
    size: cython.Py_ssize_t = len(src)
    if cython.compiled:
        cells = cython.declare(cython.Py_buffer)
        buf = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(table, cython.address(cells), PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(out, cython.address(buf), PyBUF_WRITABLE)
            try:
                return _copy(
                    src, size, cython.cast(cython.p_longlong, cells.buf), cells.len // 8,
                    width, column, cython.cast(cython.p_uchar, buf.buf), buf.len, at,
                )  # fmt: skip
            finally:
                PyBuffer_Release(cython.address(buf))
        finally:
            PyBuffer_Release(cython.address(cells))
    view = memoryview(out).cast("B")  # type: ignore[arg-type]
    values = memoryview(table).cast("B").cast("q")  # type: ignore[arg-type]
    return _copy(src, size, values, len(values), width, column, view, len(view), at)


@cython.cfunc
@cython.exceptval(-1)
def _copy(  # noqa: PLR0917  # one C call with everything it reads
    src: cython.p_uchar,
    size: cython.Py_ssize_t,
    cells: cython.p_longlong,
    count: cython.Py_ssize_t,
    width: cython.Py_ssize_t,
    column: cython.Py_ssize_t,
    out: cython.p_uchar,
    room: cython.Py_ssize_t,
    at: cython.Py_ssize_t,
) -> cython.Py_ssize_t:
    i: cython.Py_ssize_t
    s: cython.longlong
    n: cython.longlong
    if at < 0:
        raise ValueError(f"copy_fields cannot write at byte {at}")
    if count % width:
        raise ValueError(f"copy_fields: {count} cells are not whole rows of {width}")
    for i in range(0, count, width):
        s = cells[i + column]
        n = cells[i + column + 1]
        if n < 0:
            continue
        if s < 0 or s > size - n:
            raise ValueError(f"row {i // width} ({s}, {n}) lies outside a source of {size} bytes")
        if n > room - at:
            raise ValueError(f"row {i // width} ({n} bytes at {at}) overflows an output of {room}")
        copy_bytes(out, at, src, s, n)
        at += n
    return at
