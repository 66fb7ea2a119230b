# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The walk over consume-queue units that one read of a queue makes.

Owns: :func:`scan`, the per-unit loop of ``apogee.store.reads.get_messages``
(RocketMQ DefaultMessageStore.getMessage's loop): the batch limits, tag-code
filtering, the records as runs of views of the mapped commit log and their
sizes (the rules are in ``reads``' docstring). It runs once per message a
consumer pulls, so it is compiled by Cython when a C compiler is at hand (the
first line): the units are read through a pointer and the limits are C
integers; per record only its size and queue offset become Python objects
(a view per record is made later, if ever: ``GetResult.messages``). The same
source runs interpreted otherwise, reading the units with ``struct``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection
from typing import Any

import cython

from apogee.store.consume_queue import BLANK_UNIT_SIZE, CQ_UNIT_SIZE
from apogee.store.results import GetResult, GetStatus

if cython.compiled:
    from cython.cimports.apogee._util.bytes_be import get32, get64
    from cython.cimports.cpython.buffer import PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer

_UNITS = struct.Struct(">qiq").iter_unpack
_BLANK = cython.declare(cython.int, BLANK_UNIT_SIZE)
_UNIT_SIZE = cython.declare(cython.Py_ssize_t, CQ_UNIT_SIZE)


def scan(  # noqa: PLR0917  # the read's calling convention
    units: memoryview,
    offset: int,
    locate: Callable[[int], Any],
    seg_size: int,
    clog_max: int,
    max_count: int,
    memory_bytes: int,
    in_memory: tuple[int, int],
    on_disk: tuple[int, int],
    byte_cap: int,
    tag_filter: Collection[int] | None,
) -> GetResult:
    """Read the records the units from logical ``offset`` point at.

    ``locate`` finds the commit-log segment of a physical offset (None when
    gone); ``in_memory`` and ``on_disk`` are (bytes, count) limits, the
    latter for records further than ``memory_bytes`` behind ``clog_max``.
    The result's min and max offsets are left 0 for the caller.
    """
    if cython.compiled:
        buf = cython.declare(cython.Py_buffer)
        PyObject_GetBuffer(units, cython.address(buf), PyBUF_SIMPLE)
        try:
            return _scan(
                cython.cast(cython.p_uchar, buf.buf), buf.len // _UNIT_SIZE, units, offset,
                locate, seg_size, clog_max, max_count, memory_bytes, in_memory, on_disk,
                byte_cap, tag_filter,
            )  # fmt: skip
        finally:
            PyBuffer_Release(cython.address(buf))
    return _scan(
        None, len(units) // _UNIT_SIZE, units, offset, locate, seg_size, clog_max, max_count,
        memory_bytes, in_memory, on_disk, byte_cap, tag_filter,
    )  # fmt: skip


# One loop on the hottest read path: helpers would cost a call per message.
@cython.cfunc
def _scan(  # noqa: PLR0915, PLR0917
    p: cython.p_uchar,
    n_units: cython.Py_ssize_t,
    units: memoryview,
    offset: cython.longlong,
    locate: Callable[[int], Any],
    seg_size: cython.longlong,
    clog_max: cython.longlong,
    max_count: cython.Py_ssize_t,
    memory_bytes: cython.longlong,
    in_memory: tuple[int, int],
    on_disk: tuple[int, int],
    byte_cap: cython.longlong,
    tag_filter: Collection[int] | None,
) -> GetResult:
    in_bytes: cython.longlong = in_memory[0]
    in_count: cython.Py_ssize_t = in_memory[1]
    disk_bytes: cython.longlong = on_disk[0]
    disk_count: cython.Py_ssize_t = on_disk[1]
    filtering: cython.bint = bool(tag_filter)
    sizes: list[int] = []
    qoffs: list[int] = []
    runs: list[memoryview] = []
    status = GetStatus.NO_MATCHED_MESSAGE
    total: cython.longlong = 0
    count: cython.Py_ssize_t = 0
    skip_below: cython.longlong = -1
    last_phys: cython.longlong = 0
    seg_start: cython.longlong = -1  # readable range of the cached segment
    seg_limit: cython.longlong = -1
    seg_view: Any = None
    run_view: Any = None  # the segment view of the open run
    run_start: cython.longlong = -1
    run_end: cython.longlong = -1
    scanned: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t
    phys: cython.longlong
    size: cython.longlong
    code: cython.longlong
    pos: cython.longlong
    # a local: the test per unit costs a global lookup interpreted, nothing compiled
    compiled: cython.bint = cython.compiled
    unpacked = None if compiled else _UNITS(units)
    for i in range(n_units):
        if compiled:
            phys = get64(p, i * _UNIT_SIZE)
            size = get32(p, i * _UNIT_SIZE + 8)
            code = get64(p, i * _UNIT_SIZE + 12)
        else:
            phys, size, code = next(unpacked)  # type: ignore[arg-type]
        last_phys = phys
        if phys < skip_below:
            scanned += 1
            continue
        if total:
            if count >= max_count or total + size > byte_cap:
                break
            if clog_max - phys > memory_bytes:
                if total + size > disk_bytes or count >= disk_count:
                    break
            elif total + size > in_bytes or count >= in_count:
                break
        scanned += 1
        if filtering and code not in tag_filter:  # type: ignore[operator]
            if not total:
                status = GetStatus.NO_MATCHED_MESSAGE
            continue
        if size == _BLANK and phys == 0:
            continue
        if not (seg_start <= phys and phys + size <= seg_limit):
            seg = locate(phys)
            if seg is None or phys + size > seg.start + seg.wrote:
                if not total:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                skip_below = phys - phys % seg_size + seg_size
                continue
            try:
                # a view of our own: the segment may release its view while ours is in use
                seg_view = seg.view[:]
            except ValueError:  # segment unmapped meanwhile
                seg_start = seg_limit = -1
                if not total:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                continue
            seg_start = seg.start
            seg_limit = seg_start + seg.wrote
        pos = phys - seg_start
        if pos == run_end and seg_view is run_view:
            run_end = pos + size
        else:
            if run_view is not None:
                runs.append(run_view[run_start:run_end])
            run_view = seg_view
            run_start = pos
            run_end = pos + size
        sizes.append(size)
        qoffs.append(offset + scanned - 1)
        count += 1
        total += size
        status = GetStatus.FOUND
    if run_view is not None:
        runs.append(run_view[run_start:run_end])
    return GetResult(
        status,
        offset + scanned,
        0,
        0,
        queue_offsets=qoffs,
        total_bytes=total,
        suggest_pulling_from_slave=clog_max - last_phys > memory_bytes,
        runs=runs if count else None,
        sizes=sizes,
    )
