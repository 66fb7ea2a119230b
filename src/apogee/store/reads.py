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
is sent without copying: one view per run of records that lie back to back
in one segment (a batch sent to one queue), which an answer writes as few
buffers, and each record's size, from which ``GetResult.messages`` cuts one
view per record only when something asks for them (a filter, an admin
read). The loop over the units is ``apogee.store.read_scan.scan``
(compiled).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from apogee.store.commitlog import CommitLog
from apogee.store.config import BrokerRole, StoreConfig
from apogee.store.consume_queue import CQ_UNIT_SIZE, ConsumeQueue
from apogee.store.read_scan import scan
from apogee.store.results import GetResult, GetStatus


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
    window = units[:scan_bytes]
    try:
        result = scan(
            window, offset, commit_log.queue.locate, commit_log.queue.segment_size,
            commit_log.max_offset, max_count, limits.memory_bytes,
            (limits.in_memory_bytes, limits.in_memory_count),
            (limits.on_disk_bytes, limits.on_disk_count),
            max_bytes if max_bytes is not None else 1 << 62, tag_filter,
        )  # fmt: skip
    finally:
        window.release()
        units.release()
    result.min_offset, result.max_offset = min_off, max_off
    return result
