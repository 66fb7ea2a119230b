# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The source's two steps per record: where records start, and copying their byte runs.

Owns: ``record_starts``, the walk from record to record by TOTALSIZE that
stops at the first record whose QUEUEOFFSET reaches the read's end. Every
other field is read for all records at once (``apogee.spark.records``); this
walk cannot be, since each record's position depends on the one before.
And ``copy_runs``, which copies the bodies (or property strings) of records
back to back into the data buffer of an Arrow column: one ``memcpy`` each,
the only copy a body makes in the Python worker.

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
    from cython.cimports.apogee._util.bytes_be import copy_bytes, get32, get64
    from cython.cimports.cpython.buffer import PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
else:
    from apogee._util.bytes_be import copy_bytes, get32, get64

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


def copy_runs(src: bytes, starts: list[int], lengths: list[int], out: object, at: int) -> int:
    """Copy ``src[s : s + n]`` for each start ``s`` and length ``n`` into the writable
    buffer ``out``, back to back from byte ``at``; returns the byte after the last.

    Raises ``ValueError`` for a run outside ``src`` or past the end of ``out``
    (nothing of that run is written).
    """
    if len(starts) != len(lengths):
        raise ValueError("copy_runs needs as many lengths as starts")
    size: cython.Py_ssize_t = len(src)
    if cython.compiled:
        buf = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(out, cython.address(buf), PyBUF_WRITABLE)
        try:
            end = _copy_runs(
                src, size, starts, lengths, cython.cast(cython.p_uchar, buf.buf), buf.len, at
            )
        finally:
            PyBuffer_Release(cython.address(buf))
    else:
        view = memoryview(out).cast("B")  # type: ignore[arg-type]
        end = _copy_runs(src, size, starts, lengths, view, len(view), at)
    return end


@cython.cfunc
def _copy_runs(  # noqa: PLR0917  # one C call with everything it reads
    src: cython.p_uchar,
    size: cython.Py_ssize_t,
    starts: list[int],
    lengths: list[int],
    out: cython.p_uchar,
    room: cython.Py_ssize_t,
    at: cython.Py_ssize_t,
) -> cython.Py_ssize_t:
    i: cython.Py_ssize_t
    s: cython.Py_ssize_t
    n: cython.Py_ssize_t
    if at < 0:
        raise ValueError(f"copy_runs cannot write at byte {at}")
    for i in range(len(starts)):
        s = starts[i]
        n = lengths[i]
        if s < 0 or n < 0 or s > size - n:
            raise ValueError(f"run {i} ({s}, {n}) lies outside a source of {size} bytes")
        if n > room - at:
            raise ValueError(f"run {i} ({n} bytes at {at}) overflows an output of {room} bytes")
        copy_bytes(out, at, src, s, n)
        at += n
    return at
