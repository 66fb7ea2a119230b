# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Where the records of a pull body start: the one sequential step of the source's decoding.

Owns: ``record_starts``, the walk from record to record by TOTALSIZE that
stops at the first record whose QUEUEOFFSET reaches the read's end. Every
other field is read for all records at once (``apogee.spark.records``); this
walk cannot be, since each record's position depends on the one before.

This module is compiled by Cython when a C compiler is at hand (the first
line); the same source runs interpreted otherwise (``APOGEE_PURE_PYTHON``),
with the same results. ``get32``/``get64`` (``apogee._util.bytes_be``,
inlined C compiled and ``struct`` interpreted) are the only places where the
two differ in how they read bytes.
"""

from __future__ import annotations

import cython

from apogee.errors import ProtocolError

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import get32, get64
else:
    from apogee._util.bytes_be import get32, get64

#: The fixed fields of a record with IPv4 hosts, up to BODYLEN: the least a record has.
MIN_RECORD = 88
_MIN = cython.declare(cython.Py_ssize_t, MIN_RECORD)
_QUEUE_OFFSET_AT = cython.declare(cython.Py_ssize_t, 20)


def record_starts(body: bytes, end_offset: int) -> tuple[list[int], int, int]:
    """The records of ``body`` with queue offsets below ``end_offset``.

    Returns the byte position of each, the byte after the last one, and the
    queue offset after it (-1 when there is none). Raises ``ProtocolError``
    for a record cut short, at the first one, whether or not past the end.
    """
    p: cython.p_uchar = body
    size: cython.Py_ssize_t = len(body)
    pos: cython.Py_ssize_t = 0
    total: cython.Py_ssize_t
    qoff: cython.longlong
    end: cython.longlong = min(end_offset, 0x7FFFFFFFFFFFFFFF)
    next_offset: cython.longlong = -1
    starts: list[int] = []
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
        starts.append(pos)
        pos += total
    return starts, pos, next_offset
