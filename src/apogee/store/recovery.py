"""Bringing a store back to a consistent state at open.

Owns: the recovery procedure (RocketMQ recoverNormally / recoverAbnormally):
find where the commit log's valid records end, set aside and truncate what
follows, re-dispatch records the consume queues and dispatchers may lack,
truncate consume-queue units past the log's end, and rebuild the topic-queue
table.

Rules:
- after a clean exit (no abort file) the scan starts at the 3rd-last
  commit-log file, and records from the consume queues' end on are
  re-dispatched;
- after a crash it starts at the newest file whose first record was stored
  before the checkpoint's ``min_timestamp`` and re-dispatches every record
  from there (dispatching is idempotent);
- either way the scan starts no later than the consume queues' end;
- every record is validated (magic, size, layout, physical offset, CRC when
  configured); the first bad one ends the log. Its bytes, and any later
  non-empty file, are copied to ``<root>/torn/`` before being dropped, so an
  operator can look at what was lost (on a full disk they are dropped with
  an error logged: the store must still open);
- dispatching stops at the first record with no room on disk for its
  consume-queue or index file (``dispatch_stopped_at``): the scan still
  validates the rest and counts their queue offsets into the topic-queue
  table, and the store dispatches them once there is room.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from apogee.errors import DiskFullError
from apogee.model.message import TRANSACTION_TYPE_MASK
from apogee.model.message_codec import (
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    RecordKind,
    check_record,
    store_timestamp_at,
)
from apogee.store.checkpoint import Checkpoint
from apogee.store.commitlog import CommitLog
from apogee.store.consume_queue import ConsumeQueueTable
from apogee.store.dispatch import (
    E_CONSUME_QUEUE_OFFSET,
    E_QUEUE_ID,
    E_SYS_FLAG,
    E_TOPIC,
    NOT_QUEUED,
    entry_from_meta,
)
from apogee.store.reput import Reput
from apogee.store.segment import Segment, segment_name

log = logging.getLogger(__name__)
#: ``progress(bytes scanned, bytes to scan)``, called every PROGRESS_STEP bytes of the scan
RecoveryProgress = Callable[[int, int], None]
PROGRESS_STEP = 8 << 20


@dataclass(slots=True)
class RecoveryReport:
    last_exit_ok: bool
    scan_from: int = 0
    dispatch_from: int = 0
    valid_end: int = 0
    records_scanned: int = 0
    records_dispatched: int = 0
    files_scanned: int = 0
    stop_reason: str = ""
    torn_bytes: int = 0
    torn_files: list[Path] = field(default_factory=list)
    #: where dispatching stopped for want of disk space (None: it did not)
    dispatch_stopped_at: int | None = None
    dispatch_problem: str = ""
    #: next queue offsets of the records scanned but not dispatched
    undispatched_queues: dict[tuple[str, int], int] = field(default_factory=dict)


def recover(
    commit_log: CommitLog,
    queues: ConsumeQueueTable,
    reput: Reput,
    checkpoint: Checkpoint,
    *,
    last_exit_ok: bool,
    index_safe: bool,
    torn_dir: Path,
    now_ms: int,
    progress: RecoveryProgress | None = None,
) -> RecoveryReport:
    """Run recovery over freshly loaded files; see the module rules."""
    report = RecoveryReport(last_exit_ok)
    for cq in queues.queues.values():
        cq.recover()
    segs = commit_log.queue.segments
    if not segs:
        queues.destroy_all()
        reput.reput_from = 0
        return report
    if last_exit_ok:
        scan_from = segs[max(0, len(segs) - 3)].start
    else:
        floor = checkpoint.min_timestamp_index() if index_safe else checkpoint.min_timestamp()
        scan_from = _abnormal_start(segs, floor)
    cq_end = queues.max_physic_end()
    dispatch_from = max(cq_end, commit_log.min_offset) if last_exit_ok else scan_from
    if cq_end < 0:
        dispatch_from = commit_log.min_offset
    scan_from = min(scan_from, _segment_start(segs, dispatch_from))
    report.scan_from, report.dispatch_from = scan_from, dispatch_from

    end = _scan(commit_log, reput, scan_from, dispatch_from, report, progress)
    _set_aside_tail(
        commit_log, end, last_exit_ok=last_exit_ok, torn_dir=torn_dir, now_ms=now_ms, report=report
    )
    report.valid_end = end
    for cq in queues.queues.values():
        cq.truncate_to_commit_log(end)
        cq.correct_min_offset(commit_log.min_offset)
    stopped = report.dispatch_stopped_at
    reput.reput_from = end if stopped is None else min(stopped, end)
    commit_log.handoff.clear()
    table = {key: cq.max_offset for key, cq in queues.queues.items() if cq.max_offset > 0}
    for key, next_offset in report.undispatched_queues.items():
        table[key] = max(table.get(key, 0), next_offset)
    commit_log.topic_queue_table = table
    if report.records_dispatched:
        commit_log.last_store_timestamp = max(
            commit_log.last_store_timestamp, reput.last_store_timestamp
        )
    return report


def _segment_start(segs: list[Segment], offset: int) -> int:
    for seg in segs:
        if seg.start <= offset < seg.end:
            return seg.start
    return segs[0].start if offset < segs[0].start else segs[-1].start


def _abnormal_start(segs: list[Segment], floor: int) -> int:
    """Newest file whose first record was stored at or before ``floor``."""
    for seg in reversed(segs):
        magic = int.from_bytes(seg.view[4:8], "big", signed=True)
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
            continue
        stored = store_timestamp_at(seg.view, 0)
        if stored != 0 and stored <= floor:
            return seg.start
    return segs[0].start


def _scan(  # noqa: PLR0917
    commit_log: CommitLog,
    reput: Reput,
    scan_from: int,
    dispatch_from: int,
    report: RecoveryReport,
    progress: RecoveryProgress | None = None,
) -> int:
    """Validate records from ``scan_from``; dispatch those at or after ``dispatch_from``."""
    config = commit_log.config
    check_crc = config.check_crc_on_recover
    delays = config.delay_levels_ms
    segs = commit_log.queue.segments
    index = next(i for i, s in enumerate(segs) if s.start <= scan_from < s.end)
    report.files_scanned = 1
    total = segs[-1].end - scan_from
    next_report = scan_from + PROGRESS_STEP if progress is not None else 1 << 62
    pos = scan_from
    while True:
        seg = segs[index]
        if pos >= next_report:
            assert progress is not None
            progress(pos - scan_from, total)
            next_report = pos + PROGRESS_STEP
        checked = check_record(seg.view, pos - seg.start, seg.size, check_crc)
        if checked.kind is RecordKind.BLANK:
            if index + 1 >= len(segs):
                report.stop_reason = "blank end record of the last file"
                return pos
            index += 1
            report.files_scanned += 1
            pos = segs[index].start
            continue
        meta = checked.meta
        if meta is None:
            report.stop_reason = checked.problem
            return pos
        if meta.physical_offset != pos:
            report.stop_reason = f"record claims offset {meta.physical_offset}"
            return pos
        report.records_scanned += 1
        if pos >= dispatch_from:
            entry = entry_from_meta(meta, delays)
            if report.dispatch_stopped_at is None:
                try:
                    reput.apply(entry)
                    report.records_dispatched += 1
                except DiskFullError as exc:
                    report.dispatch_stopped_at, report.dispatch_problem = pos, str(exc)
            if (
                report.dispatch_stopped_at is not None
                and (entry[E_SYS_FLAG] & TRANSACTION_TYPE_MASK) not in NOT_QUEUED
            ):
                key = (entry[E_TOPIC], entry[E_QUEUE_ID])
                table = report.undispatched_queues
                table[key] = max(table.get(key, 0), entry[E_CONSUME_QUEUE_OFFSET] + 1)
        pos += meta.size


def _set_aside_tail(
    commit_log: CommitLog,
    end: int,
    *,
    last_exit_ok: bool,
    torn_dir: Path,
    now_ms: int,
    report: RecoveryReport,
) -> None:
    """Copy bytes past the valid end to ``torn_dir``, then truncate the log there."""
    queue = commit_log.queue
    seg = queue.locate(end) or queue.segments[-1]
    pos = end - seg.start
    head = bytes(seg.view[pos : pos + 8]) if pos < seg.size else b""
    clean = last_exit_ok and not any(head)
    if not clean and pos < seg.size:
        tail_end = seg.nonzero_end(pos)
        if tail_end > pos:
            path = torn_dir / f"{segment_name(end)}-{now_ms}.bin"
            try:
                torn_dir.mkdir(parents=True, exist_ok=True)
                path.write_bytes(seg.view[pos:tail_end])
            except OSError as exc:
                # A full disk must not keep the store from opening: the
                # bytes are no valid record; saving them is only a courtesy.
                log.error("cannot set aside %d torn bytes at offset %d to %s (%s); "
                          "they are dropped", tail_end - pos, end, path, exc.strerror)  # fmt: skip
                with contextlib.suppress(OSError):
                    path.unlink()
            else:
                report.torn_files.append(path)
            report.torn_bytes += tail_end - pos
    for later in [s for s in queue.segments if s.start > seg.start]:
        if later.view[:4096] != bytes(4096):
            torn_dir.mkdir(parents=True, exist_ok=True)
            dest = torn_dir / f"{later.name}-{now_ms}.segment"
            queue.detach(later)
            os.replace(later.path, dest)
            report.torn_files.append(dest)
            report.torn_bytes += later.size
    queue.truncate(end, zero=not clean)
    queue.flushed_offset = end
