"""File retention: which commit-log files to delete, and when the disk is full.

Owns: the pure decisions of RocketMQ's CleanCommitLogService (is it the
deleteWhen hour; how full is the disk; which files have expired) and the
Cleaner step that applies them to the commit log, the consume queues and
the extra dispatchers' files. "Now", the hour of day and disk usage are
passed in, so no test waits or fills a disk.

Rules (defaults): a file expires ``fileReservedTime`` (72 h) after its last
write; expired files are deleted at a ``deleteWhen`` hour ("04"), or at once
when disk usage passes ``diskMaxUsedSpaceRatio`` (75 %) or a manual delete
was asked for; above ``diskSpaceCleanForciblyRatio`` (85 %) even unexpired
files go; above ``diskSpaceWarningLevelRatio`` (90 %) the disk is marked full
and puts are refused until usage drops. At most 10 files per pass; the
newest file is never deleted.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from apogee.model.message_codec import store_timestamp_at
from apogee.store.commitlog import CommitLog
from apogee.store.config import StoreConfig
from apogee.store.consume_queue import ConsumeQueueTable
from apogee.store.segment import Segment

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10
MANUAL_DELETE_TIMES = 20

#: ratio (0..1) of the disk holding a path that is in use; negative if unknown
DiskUsage = Callable[[Path], float]


def system_disk_usage(path: Path) -> float:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return usage.used / usage.total if usage.total else -1.0


def is_time_to_delete(delete_when: str, hour: int) -> bool:
    """``delete_when`` is a ';'-separated list of hours of day."""
    return any(int(h) == hour for h in delete_when.split(";") if h.strip().isdigit())


@dataclass(frozen=True, slots=True)
class DiskState:
    space_to_delete: bool  # usage above diskMaxUsedSpaceRatio (or unknown)
    clean_immediately: bool  # usage above diskSpaceCleanForciblyRatio
    disk_full: bool  # usage above diskSpaceWarningLevelRatio


def disk_state(ratios: Sequence[float], config: StoreConfig) -> DiskState:
    """Combine the usage of the commit-log and consume-queue disks."""
    max_used = config.disk_max_used_space_ratio_percent / 100
    forcibly = config.disk_space_clean_forcibly_ratio_percent / 100
    warning = config.disk_space_warning_level_ratio_percent / 100
    return DiskState(
        space_to_delete=any(r < 0 or r > max_used for r in ratios),
        clean_immediately=any(r > forcibly for r in ratios),
        disk_full=any(r > warning for r in ratios),
    )


def expired_count(
    last_write_ms: Sequence[int],
    now_ms: int,
    reserved_ms: int,
    *,
    clean_at_once: bool,
    max_files: int = DELETE_FILES_BATCH_MAX,
) -> int:
    """How many of the oldest files may go (they are in age order; stop at the first keeper)."""
    count = 0
    for written in last_write_ms[:max_files]:
        if not clean_at_once and now_ms < written + reserved_ms:
            break
        count += 1
    return count


@dataclass(slots=True)
class CleanReport:
    deleted_commit_log_files: int = 0
    deleted_consume_queue_files: int = 0
    min_offset: int = 0
    disk_full: bool = False
    reason: str = ""
    #: commit-log files deleted before their reserved time was over (forced cleaning)
    forced_files: int = 0
    #: (topic, queue id, first offset lost, first offset kept) of every queue that
    #: lost messages to forced cleaning
    forced_losses: list[tuple[str, int, int, int]] = field(default_factory=list)


class Cleaner:
    """Applies the retention rules to the store's files, one step at a time."""

    def __init__(self, config: StoreConfig, disk_usage: DiskUsage = system_disk_usage) -> None:
        self.config = config
        self.disk_usage = disk_usage
        self.disk_full = False
        self.manual_delete_times = 0

    def request_manual_delete(self) -> None:
        """TRIGGER_DELETE_FILES: delete expired files on the next passes, whatever the hour."""
        self.manual_delete_times = MANUAL_DELETE_TIMES

    def step(
        self,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        below_hooks: Sequence[Callable[[int], None]],
        *,
        now_ms: int,
        hour: int,
    ) -> CleanReport:
        """One cleaning pass; ``below_hooks`` get the new commit-log minimum."""
        config = self.config
        ratios = [
            self.disk_usage(config.commit_log_dir),
            self.disk_usage(config.consume_queue_dir),
        ]
        state = disk_state(ratios, config)
        self.disk_full = state.disk_full
        report = CleanReport(disk_full=state.disk_full, min_offset=commit_log.min_offset)
        manual = self.manual_delete_times > 0
        if manual:
            self.manual_delete_times -= 1
        timeup = is_time_to_delete(config.delete_when, hour)
        if not (timeup or state.space_to_delete or manual):
            return report
        report.reason = "time" if timeup else "space" if state.space_to_delete else "manual"
        at_once = config.clean_file_forcibly_enable and state.clean_immediately
        segs = commit_log.queue.segments
        times = [_last_write_ms(segs[i + 1], segs[i]) for i in range(len(segs) - 1)]
        reserved_ms = config.file_reserved_time_hours * 3_600_000
        count = expired_count(times, now_ms, reserved_ms, clean_at_once=at_once)
        old_min = commit_log.min_offset
        if count:
            commit_log.queue.delete_first(count)
        report.deleted_commit_log_files = count
        report.forced_files = sum(now_ms < t + reserved_ms for t in times[:count])
        new_min = commit_log.min_offset
        report.min_offset = new_min
        for (topic, queue_id), cq in list(queues.queues.items()):
            before = cq.min_offset
            report.deleted_consume_queue_files += cq.delete_expired(new_min)
            if report.forced_files and cq.min_offset > before:
                report.forced_losses.append((topic, queue_id, before, cq.min_offset))
        if report.forced_files:
            _log_forced(report, old_min, new_min, config.file_reserved_time_hours)
        for hook in below_hooks:
            hook(new_min)
        commit_log.queue.reap()
        queues.reap()
        return report


def _log_forced(report: CleanReport, old_min: int, new_min: int, reserved_hours: int) -> None:
    """One WARNING per forced deletion: messages went before their time was up."""
    lost = sum(kept - first for _, _, first, kept in report.forced_losses)
    shown = ", ".join(
        f"{topic}/{queue_id} [{first}, {kept})"
        for topic, queue_id, first, kept in report.forced_losses[:20]
    )
    more = len(report.forced_losses) - 20
    log.warning(
        "disk space: %d commit-log file(s) deleted before their %d h were up "
        "(cleanFileForciblyEnable): offsets [%d, %d), %d message(s) in %d queue(s) lost: %s%s",
        report.forced_files, reserved_hours, old_min, new_min, lost,
        len(report.forced_losses), shown or "none queued", f" and {more} more" if more > 0 else "",
    )  # fmt: skip


def _last_write_ms(following: Segment, seg: Segment) -> int:
    """When ``seg`` was last written: the store time of the next file's first record.

    Every record of a file is older than the next file's first one, and store
    times come from the store's own clock, so this needs no file mtime. Falls
    back to the file's mtime when that record cannot be read.
    """
    try:
        stored = store_timestamp_at(following.view, 0)
    except ValueError:
        stored = 0
    if stored > 0:
        return stored
    try:
        return int(os.stat(seg.path).st_mtime * 1000)
    except OSError:
        return 0
