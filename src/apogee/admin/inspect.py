"""``apogee admin store-verify``: check a store directory offline, read-only.

Owns: walking every commit-log record (magic, size, layout, physical offset,
CRC) and every consume-queue unit (it must point at a record of its size,
topic, queue, logical offset and tag code), counting what it saw and naming
the first inconsistency. Nothing is opened for writing: files are mapped
read-only, no lock or abort file is touched, so it is safe next to a
stopped broker and harmless next to a running one. The only admin module
allowed to import ``apogee.store``.

Segment sizes are taken from the files themselves (every file of a log has
the same size), so no broker.conf is needed. On a terminal a progress bar
follows the walk; the command ends with a summary table.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
import orjson

from apogee._util.progress import Progress, print_summary
from apogee.errors import StoreError
from apogee.model.message_codec import RecordKind, check_record
from apogee.store.config import DEFAULT_DELAY_LEVELS, parse_delay_levels
from apogee.store.consume_queue import BLANK_UNIT_SIZE, CQ_UNIT_SIZE
from apogee.store.dispatch import entry_from_meta
from apogee.store.segment import Segment, parse_segment_name
from apogee.store.segment_queue import SegmentQueue

_UNIT = struct.Struct(">qiq")
MAX_REPORTED = 20


@dataclass(slots=True)
class Inconsistency:
    where: str  # "commitlog" or "consumequeue/<topic>/<queueId>"
    file: str
    offset: int  # commit-log offset, or logical offset for a consume queue
    problem: str


@dataclass(slots=True)
class VerifyReport:
    store: str
    commit_log_files: int = 0
    records: int = 0
    record_bytes: int = 0
    blank_records: int = 0
    min_offset: int = 0
    max_offset: int = 0
    consume_queues: int = 0
    units: int = 0
    blank_units: int = 0
    expired_units: int = 0
    inconsistency_count: int = 0
    inconsistencies: list[Inconsistency] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.inconsistency_count == 0

    def add(self, item: Inconsistency) -> None:
        self.inconsistency_count += 1
        if len(self.inconsistencies) < MAX_REPORTED:
            self.inconsistencies.append(item)

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["consistent"] = self.ok
        return out


def _segment_size(directory: Path) -> int | None:
    files = sorted(p for p in directory.iterdir() if parse_segment_name(p.name) is not None)
    return files[0].stat().st_size if files else None


def _open_queue(directory: Path, report: VerifyReport, where: str) -> SegmentQueue | None:
    if not directory.is_dir():
        return None
    size = _segment_size(directory)
    if size is None or size == 0:
        return None
    queue = SegmentQueue(directory, size, readonly=True)
    try:
        queue.load()
    except StoreError as exc:
        report.add(Inconsistency(where, directory.name, 0, str(exc)))
        queue.close()
        return None
    return queue


#: ``progress(phase, done, total)``: phase "commitlog" (bytes) or "consumequeue" (queues)
VerifyProgress = Callable[[str, int, int], None]


def _no_progress(phase: str, done: int, total: int) -> None:
    return None


def verify_store(root: Path, progress: VerifyProgress = _no_progress) -> VerifyReport:
    """Check every record and unit of the store at ``root`` without changing it."""
    report = VerifyReport(str(root))
    log = _open_queue(root / "commitlog", report, "commitlog")
    try:
        end = _walk_commit_log(log, report, progress) if log is not None else 0
        progress("commitlog", 1, 1)  # walked to the end
        cq_root = root / "consumequeue"
        if cq_root.is_dir():
            qdirs = [
                q
                for topic_dir in sorted(p for p in cq_root.iterdir() if p.is_dir())
                for q in sorted(p for p in topic_dir.iterdir() if p.name.isdigit())
            ]
            for done, qdir in enumerate(qdirs):
                progress("consumequeue", done, len(qdirs))
                topic_dir = qdir.parent
                where = f"consumequeue/{topic_dir.name}/{qdir.name}"
                cq = _open_queue(qdir, report, where)
                if cq is None:
                    continue
                try:
                    report.consume_queues += 1
                    walk = _QueueWalk(log, end, topic_dir.name, int(qdir.name), where, report)
                    walk.run(cq)
                finally:
                    cq.close(delete_spare=False)
            progress("consumequeue", len(qdirs), len(qdirs))
    finally:
        if log is not None:
            log.close(delete_spare=False)
    return report


def _walk_commit_log(log: SegmentQueue, report: VerifyReport, progress: VerifyProgress) -> int:
    """Validate records file by file; return the end of the valid log."""
    segs = log.segments
    report.commit_log_files = len(segs)
    report.min_offset = log.min_offset
    total = segs[-1].end - segs[0].start if segs else 0
    for index, seg in enumerate(segs):
        progress("commitlog", seg.start - segs[0].start, total)
        pos = 0
        while True:
            checked = check_record(seg.view, pos, seg.size, check_crc=True)
            if checked.kind is RecordKind.BLANK:
                report.blank_records += 1
                break
            meta = checked.meta
            if meta is not None and meta.physical_offset != seg.start + pos:
                checked_problem = f"record says it is at {meta.physical_offset}"
                meta = None
            else:
                checked_problem = checked.problem
            if meta is None:
                if _all_zero_from(segs, index, pos):
                    report.max_offset = seg.start + pos  # the clean end of the log
                    return report.max_offset
                report.add(Inconsistency("commitlog", seg.name, seg.start + pos, checked_problem))
                report.max_offset = seg.start + pos
                return report.max_offset
            report.records += 1
            report.record_bytes += meta.size
            pos += meta.size
    report.max_offset = segs[-1].end if segs else 0
    return report.max_offset


def _all_zero_from(segs: list[Segment], index: int, pos: int) -> bool:
    """Nothing was written at or after ``pos`` of ``segs[index]`` (preallocated files included)."""
    if segs[index].nonzero_end(pos) > pos:
        return False
    return all(seg.nonzero_end(0) == 0 for seg in segs[index + 1 :])


@dataclass(slots=True)
class _QueueWalk:
    """Checks the units of one consume queue against the commit log."""

    log: SegmentQueue | None
    log_end: int
    topic: str
    queue_id: int
    where: str
    report: VerifyReport
    delays: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)

    def run(self, cq: SegmentQueue) -> None:
        report = self.report
        log_min = self.log.min_offset if self.log is not None else 0
        for seg in cq.segments:
            base = seg.start // CQ_UNIT_SIZE
            for i, (phys, size, code) in enumerate(_UNIT.iter_unpack(seg.view)):
                logical = base + i
                if phys == 0 and size == 0 and code == 0:
                    if seg.nonzero_end(i * CQ_UNIT_SIZE) > i * CQ_UNIT_SIZE:
                        problem = "empty unit before written ones"
                        report.add(Inconsistency(self.where, seg.name, logical, problem))
                    return
                if size == BLANK_UNIT_SIZE and phys == 0:
                    report.blank_units += 1
                    continue
                report.units += 1
                if 0 <= phys < log_min:
                    report.expired_units += 1
                    continue
                problem = self.check_unit(phys, size, code, logical)
                if problem:
                    report.add(Inconsistency(self.where, seg.name, logical, problem))

    def check_unit(self, phys: int, size: int, code: int, logical: int) -> str:
        if phys < 0 or size <= 0:
            return f"invalid unit ({phys}, {size})"
        if self.log is None or phys + size > self.log_end:
            return f"points at {phys}+{size}, past the end of the commit log ({self.log_end})"
        seg = self.log.locate(phys)
        if seg is None:
            return f"points at {phys}, which no commit-log file holds"
        checked = check_record(seg.view, phys - seg.start, seg.size, check_crc=False)
        meta = checked.meta
        if meta is None:
            return f"points at {phys}, where there is no record ({checked.problem or 'blank'})"
        if meta.size != size:
            return f"size {size} but the record at {phys} is {meta.size} bytes"
        if (meta.topic, meta.queue_id, meta.queue_offset) != (self.topic, self.queue_id, logical):
            return (f"record at {phys} belongs to {meta.topic}/{meta.queue_id} "
                    f"offset {meta.queue_offset}")  # fmt: skip
        expected_code = entry_from_meta(meta, self.delays)[4]
        if expected_code != code:
            return f"tag code {code} but the record's is {expected_code}"
        return ""


def _render(report: VerifyReport) -> str:
    """The summary table's rows, then the verdict on its own line(s)."""
    rows = [
        ("store", report.store),
        ("commit log", f"{report.commit_log_files} files, {report.records} records "
                       f"({report.record_bytes} bytes), {report.blank_records} blank end records, "
                       f"offsets {report.min_offset}..{report.max_offset}"),
        ("consume queues", f"{report.consume_queues} queues, {report.units} units "
                           f"({report.expired_units} pointing below the commit log), "
                           f"{report.blank_units} blank"),
    ]  # fmt: skip
    print_summary("store-verify", rows)
    if report.ok:
        return "result: consistent"
    first = report.inconsistencies[0]
    where = f"{first.where} file {first.file} offset {first.offset}"
    return (
        f"result: {report.inconsistency_count} inconsistencies; first:\n  {where}: {first.problem}"
    )


@click.command("store-verify")
@click.option(
    "--store",
    "store_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Store root directory (storePathRootDir).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def store_verify(store_dir: Path, as_json: bool) -> None:
    """Check every commit-log record and consume-queue unit, read-only.

    Exit code 0 when the store is consistent, 1 when it is not.
    """
    with (
        Progress("commit log", None, unit="MiB") as log_bar,
        Progress("consume queues", None) as cq_bar,
    ):

        def progress(phase: str, done: int, total: int) -> None:
            if phase == "commitlog":
                log_bar.update(done / (1 << 20), total / (1 << 20))
            else:
                cq_bar.update(done, total)

        report = verify_store(store_dir, progress)
    if as_json:
        click.echo(orjson.dumps(report.to_json()).decode())
    else:
        click.echo(_render(report))
    raise SystemExit(0 if report.ok else 1)
