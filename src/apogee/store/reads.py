"""Reading a consume queue: the store side of PULL_MESSAGE.

Owns: ``get_messages`` (RocketMQ DefaultMessageStore.getMessage): the status
table, nextBeginOffset rules, the in-memory/on-disk batch limits, tag-code
filtering and the suggest-slave flag.

Statuses and nextBeginOffset (offsets are logical; corrections are skipped
on a slave unless offsetCheckInSlave):

    no consume queue          NO_MATCHED_LOGIC_QUEUE  0
    queue max == 0            NO_MESSAGE_IN_QUEUE     0
    offset < min              OFFSET_TOO_SMALL        min
    offset == max             OFFSET_OVERFLOW_ONE     offset
    offset > max              OFFSET_OVERFLOW_BADLY   max
    unit file missing         OFFSET_FOUND_NULL       start of the next unit file
    otherwise                 FOUND / NO_MATCHED_MESSAGE / MESSAGE_WAS_REMOVING,
                              offset + units scanned

The records are returned as views of the mapped commit log, so a pull body
is sent without copying; records that lie back to back in one segment (a
batch sent to one queue) are also returned as one view per run
(``GetResult.runs``), which an answer writes as fewer buffers.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass

from apogee.store.commitlog import CommitLog
from apogee.store.config import BrokerRole, StoreConfig
from apogee.store.consume_queue import BLANK_UNIT_SIZE, CQ_UNIT_SIZE, ConsumeQueue
from apogee.store.results import GetResult, GetStatus

_UNIT_ITER = struct.Struct(">qiq").iter_unpack


@dataclass(frozen=True, slots=True)
class ReadLimits:
    memory_bytes: int  # commit-log distance beyond which data counts as on disk
    in_memory_bytes: int
    in_memory_count: int
    on_disk_bytes: int
    on_disk_count: int
    correct_offsets: bool

    @classmethod
    def from_config(cls, config: StoreConfig) -> ReadLimits:
        return cls(
            memory_bytes=config.memory_bytes
            * config.access_message_in_memory_max_ratio_percent
            // 100,
            in_memory_bytes=config.max_transfer_bytes_on_message_in_memory,
            in_memory_count=config.max_transfer_count_on_message_in_memory,
            on_disk_bytes=config.max_transfer_bytes_on_message_in_disk,
            on_disk_count=config.max_transfer_count_on_message_in_disk,
            correct_offsets=config.broker_role is not BrokerRole.SLAVE
            or config.offset_check_in_slave,
        )


def get_messages(
    commit_log: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    limits: ReadLimits,
    *,
    max_bytes: int | None = None,
    tag_filter: Collection[int] | None = None,
) -> GetResult:
    """Read up to ``max_count`` records of one queue from logical ``offset``."""

    def corrected(new: int) -> int:
        return new if limits.correct_offsets else offset

    if cq is None:
        return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, corrected(0), 0, 0)
    min_off = cq.min_offset
    max_off = cq.max_offset
    if max_off == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, corrected(0), min_off, max_off)
    if offset < min_off:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, corrected(min_off), min_off, max_off)
    if offset == max_off:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
    if offset > max_off:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, corrected(max_off), min_off, max_off)
    units = cq.units_from(offset)
    if units is None:
        file_units = cq.queue.segment_size // CQ_UNIT_SIZE
        next_file = (offset // file_units + 1) * file_units
        return GetResult(GetStatus.OFFSET_FOUND_NULL, corrected(next_file), min_off, max_off)
    scan_bytes = max(16000, max_count * CQ_UNIT_SIZE)
    scan_bytes -= scan_bytes % CQ_UNIT_SIZE
    try:
        result = _scan(
            commit_log, units[:scan_bytes], offset,
            max_count=max_count, limits=limits, max_bytes=max_bytes, tag_filter=tag_filter,
        )  # fmt: skip
    finally:
        units.release()
    result.min_offset, result.max_offset = min_off, max_off
    return result


# One loop on the hottest read path: helpers would cost a call per message.
def _scan(  # noqa: PLR0915
    commit_log: CommitLog,
    units: memoryview,
    offset: int,
    *,
    max_count: int,
    limits: ReadLimits,
    max_bytes: int | None,
    tag_filter: Collection[int] | None,
) -> GetResult:
    clog_max = commit_log.max_offset
    memory = limits.memory_bytes
    seg_size = commit_log.queue.segment_size
    locate = commit_log.queue.locate
    messages: list[memoryview] = []
    qoffs: list[int] = []
    status = GetStatus.NO_MATCHED_MESSAGE
    total = 0
    skip_below = -1
    last_phys = 0
    seg_start = seg_limit = -1  # readable range of the cached segment
    seg_view: memoryview | None = None
    byte_cap = max_bytes if max_bytes is not None else 1 << 62
    scanned = 0
    runs: list[memoryview] = []
    run_view: memoryview | None = None  # the segment view of the open run
    run_start = run_end = -1
    for phys, size, code in _UNIT_ITER(units):
        last_phys = phys
        if phys < skip_below:
            scanned += 1
            continue
        if total:
            count = len(messages)
            if count >= max_count or total + size > byte_cap:
                break
            if clog_max - phys > memory:
                if total + size > limits.on_disk_bytes or count >= limits.on_disk_count:
                    break
            elif total + size > limits.in_memory_bytes or count >= limits.in_memory_count:
                break
        scanned += 1
        if tag_filter and code not in tag_filter:
            if not total:
                status = GetStatus.NO_MATCHED_MESSAGE
            continue
        if size == BLANK_UNIT_SIZE and phys == 0:
            continue
        if not (seg_start <= phys and phys + size <= seg_limit):
            seg = locate(phys)
            if seg is None or phys + size > seg.start + seg.wrote:
                if not total:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                skip_below = phys - phys % seg_size + seg_size
                continue
            seg_start, seg_limit, seg_view = seg.start, seg.start + seg.wrote, seg.view
        pos = phys - seg_start
        try:
            messages.append(seg_view[pos : pos + size])  # type: ignore[index]
        except ValueError:  # segment unmapped meanwhile
            seg_start = seg_limit = -1
            if not total:
                status = GetStatus.MESSAGE_WAS_REMOVING
            continue
        if pos == run_end and seg_view is run_view:
            run_end = pos + size
        else:
            if run_view is not None:
                runs.append(run_view[run_start:run_end])
            run_view, run_start, run_end = seg_view, pos, pos + size
        qoffs.append(offset + scanned - 1)
        total += size
        status = GetStatus.FOUND
    if run_view is not None:
        # the record views above pin the segment's view: it cannot be released here
        runs.append(run_view[run_start:run_end])
    return GetResult(
        status,
        offset + scanned,
        0,
        0,
        messages,
        qoffs,
        total,
        clog_max - last_phys > memory,
        runs if messages else None,
    )
