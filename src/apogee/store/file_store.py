"""FileMessageStore: the commit log, consume queues and their services, composed.

Owns: opening a store directory (lock, load, recover, abort file), the
put/get/query surface of ``interface.MessageStore`` and the services the
broker starts and stops. Business logic lives in the parts: commitlog,
consume_queue, reput, reads, recovery, retention, flush.

Lifecycle: ``open`` -> ``start`` (services) -> puts/gets -> ``close`` (stop
services, dispatch and flush everything, remove the abort file). A store
that was not closed leaves its abort file behind, and the next ``open``
recovers abnormally.

Health: reads always go on; writes are refused (SERVICE_NOT_AVAILABLE, the
reason in the remark) while

* the disk is full: a store file could not be made (``DiskFullError``,
  ENOSPC) — the commit log's next file, a consume-queue file or an index
  file — or the abort file could not be written at open. Every mapped file
  is reserved in full when made, so a full disk shows there and never as a
  fault inside a mapping. Consume-queue and index work that found no room
  waits and is retried; at most once a second the store checks whether
  there is room again (the abort file, the index backlog, the commit log's
  next file, the stalled dispatch) and then takes writes again;
* a sync failed (SYNC_FLUSH's sync loop or ASYNC_FLUSH's flush): until
  restart, since after a failed fsync the kernel may have dropped the
  pages and nothing written since can be vouched for.

A slave takes no puts; the bytes its master streams (``append_data``) are
refused in the same cases, with a StoreError, and it may drop a tail its
master no longer has (``truncate_log``; see ``apogee.store.replication``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from typing import Any

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee._util.fileio import fsync_dir
from apogee.errors import (
    DiskFullError,
    ProtocolError,
    StoreError,
    StoreInUseError,
    StoreWriteError,
)
from apogee.model.message import MessageExt, StoreBatch, StoreMessage
from apogee.model.message_codec import decode_record
from apogee.store import group_sync, replication
from apogee.store.checkpoint import Checkpoint
from apogee.store.commitlog import CommitLog
from apogee.store.config import BrokerRole, FlushDiskType, StoreConfig
from apogee.store.consume_queue import ConsumeQueueTable
from apogee.store.dispatch import Dispatcher
from apogee.store.flush import (
    CallService,
    CommitLogFlushService,
    ConsumeQueueFlushService,
    GroupCommitService,
    ServiceThread,
)
from apogee.store.group_sync import Syncer
from apogee.store.interface import ArrivalListener, IndexHook
from apogee.store.reads import ReadLimits, get_messages
from apogee.store.recovery import RecoveryProgress, RecoveryReport, recover
from apogee.store.reput import Reput
from apogee.store.results import (
    GetResult,
    GetStatus,
    PutResult,
    PutStatus,
    QueryMessageResult,
    QueueUnit,
)
from apogee.store.retention import Cleaner, CleanReport, DiskUsage, system_disk_usage

_PUT_OK = PutStatus.PUT_OK  # an Enum class attribute costs a metaclass look-up
_ROOM_CHECK_S = 1.0  # how often a full store looks for room again
log = logging.getLogger(__name__)


class FileMessageStore:
    """A RocketMQ-format message store in one directory."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        dispatchers: Sequence[Dispatcher] = (),
        index: IndexHook | None = None,
        arrival: ArrivalListener | None = None,
        disk_usage: DiskUsage = system_disk_usage,
        recovery_progress: RecoveryProgress | None = None,
    ) -> None:
        self.config = config
        self._recovery_progress = recovery_progress
        self.clock = clock
        self.index = index
        root = config.store_path_root_dir
        root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock_store(root)
        self.commit_log = CommitLog(config, clock)
        self.queues = ConsumeQueueTable(
            config.consume_queue_dir, config.mapped_file_size_consume_queue_bytes
        )
        extra = [*dispatchers, *([index] if index is not None else [])]
        self.reput = Reput(self.commit_log, self.queues, extra, arrival)
        self.checkpoint = Checkpoint(config.checkpoint_path)
        self.cleaner = Cleaner(config, disk_usage)
        self.limits = ReadLimits.from_config(config)
        self.recovery: RecoveryReport | None = None
        self.closed = False
        self.stats = {
            "put_failed": 0, "get_found": 0, "get_miss": 0, "get_transferred_msgs": 0,
            "forced_deleted_files": 0, "forced_deleted_messages": 0,
        }  # fmt: skip
        self._writable = config.broker_role is not BrokerRole.SLAVE
        #: why the disk refused a file ("" when it did not): writes wait for room
        self.disk_full_reason = ""
        #: why syncing failed ("" when it did not): writes are refused until restart
        self.fault = ""
        self._next_room_check = 0.0
        self._abort_written = False
        self.commit_log.on_disk_full = self.mark_disk_full
        self.commit_log.on_write_failed = self._write_refused
        self.group_commit: GroupCommitService | None = None
        self.services: list[ServiceThread] = self._make_services()
        self._dispatcher: CallService | None = None
        self._wake_dispatch: Callable[[], None] | None = None

    @classmethod
    def open(cls, config: StoreConfig, **kwargs: Any) -> FileMessageStore:
        """Lock, load and recover the store at ``config.store_path_root_dir``.

        Keyword arguments are those of the constructor.
        """
        store = cls(config, **kwargs)
        try:
            store._load()
        except BaseException:
            store._release()
            raise
        return store

    def _load(self) -> None:
        config = self.config
        started = time.monotonic()
        last_exit_ok = not config.abort_path.exists()
        self.commit_log.load()
        self.queues.load()
        if self.index is not None:
            self.index.load(last_exit_ok, self.checkpoint.index_msg_timestamp)
        self.recovery = recover(
            self.commit_log,
            self.queues,
            self.reput,
            self.checkpoint,
            last_exit_ok=last_exit_ok,
            index_safe=config.message_index_safe and self.index is not None,
            torn_dir=config.torn_dir,
            now_ms=self.clock.now_ms(),
            progress=self._recovery_progress,
        )
        _log_recovery(config, self.recovery, len(self.commit_log.queue.segments),
                      time.monotonic() - started)  # fmt: skip
        if self.recovery.dispatch_stopped_at is not None:
            self.mark_disk_full(self.recovery.dispatch_problem)
        self._write_abort_file()

    def _write_abort_file(self) -> bool:
        """Mark the store open (a crash leaves the file); False when the disk is full."""
        config = self.config
        try:
            config.abort_path.write_text(str(os.getpid()))
            fsync_dir(config.store_path_root_dir)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            with contextlib.suppress(OSError):
                config.abort_path.unlink()
            self.mark_disk_full(f"no room for the abort file: {exc.strerror}")
            return False
        self._abort_written = True
        return True

    # -- services ----------------------------------------------------------

    def _make_services(self) -> list[ServiceThread]:
        config = self.config
        queue = self.commit_log.queue
        flusher: ServiceThread
        if config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            flusher = self.group_commit = GroupCommitService(
                self._synced, self.clock, timeout_ms=config.sync_flush_timeout_ms,
                on_failed=lambda err: self.mark_fault(f"commit-log fsync failed: "
                                                      f"{os.strerror(err)}"),
            )  # fmt: skip
        else:
            flusher = CommitLogFlushService(
                self._flush_commit_log, self._physic_flushed, self.clock,
                interval_ms=config.flush_interval_commit_log_ms,
                least_pages=config.flush_commit_log_least_pages,
                thorough_interval_ms=config.flush_commit_log_thorough_interval_ms,
            )  # fmt: skip
        cq_flusher = ConsumeQueueFlushService(
            self._flush_logics, self.clock,
            interval_ms=config.flush_interval_consume_queue_ms,
            thorough_interval_ms=config.flush_consume_queue_thorough_interval_ms,
        )  # fmt: skip
        allocator = CallService("apogee-allocate", self.allocate, 1.0)
        queue.on_roll = allocator.wakeup
        if self.commit_log.prefault_window:
            self.commit_log.on_prefault_due = allocator.wakeup
        return [flusher, cq_flusher, allocator]

    def allocate(self) -> None:
        """The allocation thread's round: the next commit-log file, pages mapped ahead.

        Pages are populated ahead only while most bytes are small single records,
        which go through the mapping (``CommitLog.prefault_wanted``): batches,
        written by ``pwrite``, would pay for each populated page twice, its
        zeroing and a TLB shootdown when a flush cleans it.
        """
        log = self.commit_log
        window = log.prefault_window if log.prefault_wanted() else 0
        if window:
            log.queue.prefault_ahead(window)
        # No room: the roll that needs the file says so and refuses the write.
        with contextlib.suppress(DiskFullError):
            log.queue.prepare_next(window)

    def start(self, *, dispatch_thread: bool = False, loop_driven: bool = False) -> None:
        """Start flushing and preallocation threads.

        Dispatch is the broker's to drive with ``dispatch_step``, unless
        ``dispatch_thread`` asks for a thread that drains it, woken by puts.

        ``loop_driven`` is for an owner with an event loop that calls
        ``dispatch_step`` (or ``commit``) in the same loop turn as its puts.
        Then SYNC_FLUSH appends are written to the file once per turn rather
        than once per message, and the owner answers SYNC_FLUSH waiters
        itself: ``group_commit.run_once`` when ``group_commit.fileno()`` turns
        readable, and every few milliseconds (deadlines). Otherwise a thread
        of the store answers them.
        """
        if self.group_commit is not None and self.group_commit.sync is None:
            self.group_commit.attach(self._sync_loop(), completion_thread=not loop_driven)
            self.commit_log.defer_commit = loop_driven
        if dispatch_thread and self._dispatcher is None:
            self._dispatcher = CallService("apogee-reput", self._drain, 0.001)
            self.services.append(self._dispatcher)
            self._wake_dispatch = self._dispatcher.wakeup
        for service in self.services:
            service.start()

    def _drain(self) -> None:
        while self.reput.step(4096):
            pass

    def set_arrival_listener(self, listener: ArrivalListener | None) -> None:
        """Who hears about each message entering a consume queue (long polling)."""
        self.reput.arrival = listener

    def _sync_loop(self) -> Syncer:
        """A sync loop over the commit log's files, told of each new one."""
        queue = self.commit_log.queue
        sync = group_sync.GroupSync(queue.flushed_offset)
        for seg in queue.segments:
            sync.add_file(seg.start, seg.size, seg.fd)
        queue.on_new_segment = lambda seg: sync.add_file(seg.start, seg.size, seg.fd)
        # Asked for bytes once they are in the file, whoever waits for them.
        self.commit_log.on_committed = sync.request
        return sync

    def _synced(self, offset: int) -> None:
        self.commit_log.queue.mark_flushed(offset)
        self._physic_flushed()

    def _physic_flushed(self) -> None:
        self.checkpoint.advance(physic=self.commit_log.last_store_timestamp)

    def _flush_commit_log(self, least_pages: int) -> int:
        """ASYNC_FLUSH's flush; a failure stops writes (see the module docstring)."""
        queue = self.commit_log.queue
        if self.fault:
            return queue.flushed_offset
        try:
            return queue.flush(least_pages)
        except OSError as exc:
            self.mark_fault(f"commit-log flush failed: {exc}")
            return queue.flushed_offset

    def _flush_logics(self, thorough: bool) -> None:
        stamp = self.reput.last_store_timestamp  # read before: the flush covers it
        self.queues.flush(0 if thorough else self.config.flush_consume_queue_least_pages)
        index_stamp = self.index.flush() if self.index is not None else 0
        self.checkpoint.advance(logics=stamp, index=index_stamp)
        self.checkpoint.flush()

    # -- health --------------------------------------------------------------

    def mark_disk_full(self, reason: str) -> None:
        """Refuse writes until there is room again (checked by ``dispatch_step``)."""
        if not self.disk_full_reason:
            log.warning("store %s: the disk is full (%s); refusing writes, reads go on",
                        self.config.store_path_root_dir, reason)  # fmt: skip
            self._next_room_check = time.monotonic() + _ROOM_CHECK_S
        self.disk_full_reason = reason
        self._writable = False

    def mark_fault(self, reason: str) -> None:
        """Refuse writes until restart."""
        if not self.fault:
            log.error("store %s: %s; refusing writes until restart (acknowledged data up to "
                      "offset %d is durable)", self.config.store_path_root_dir, reason,
                      self.commit_log.queue.flushed_offset)  # fmt: skip
            self.fault = reason
        self._writable = False

    def _write_refused(self, reason: str) -> None:
        """The file system refused pending bytes: fault, and answer their sync waiters."""
        self.mark_fault(reason)
        if self.group_commit is not None:
            # the refused bytes stay pending: the files end where they begin
            self.group_commit.refuse_past(self.commit_log.readable_end)

    def _room_again(self) -> bool:
        """Whether the work a full disk held back can be done now (then it is done)."""
        self._next_room_check = time.monotonic() + _ROOM_CHECK_S
        try:
            if not self._abort_written and not self._write_abort_file():
                return False
            if self.index is not None and not self.index.retry():
                return False
            self.commit_log.queue.prepare_next(self.commit_log.prefault_window)
        except DiskFullError:
            return False
        return True

    def _disk_ok(self) -> None:
        reason, self.disk_full_reason = self.disk_full_reason, ""
        self._writable = not self._unwritable()
        log.info("store %s: room on disk again (was: %s)%s", self.config.store_path_root_dir,
                 reason, "; taking writes" if self._writable else "")  # fmt: skip

    # -- writes ------------------------------------------------------------

    def _unwritable(self, *, replica: bool = False) -> str:
        """Why writes are refused ("" when they are not); ``replica``: a master's bytes."""
        if self.closed:
            return "the store is shut down"
        if self.config.broker_role is BrokerRole.SLAVE and not replica:
            return "the store is a slave"
        if self.fault:
            return f"{self.fault}; the store refuses writes until restart"
        if self.disk_full_reason:
            return f"the disk is full ({self.disk_full_reason}); writes wait for free space"
        if self.cleaner.disk_full:
            return "the disk is full"
        return ""

    def commit(self) -> None:
        """Write pending SYNC_FLUSH appends to the file (see ``start(loop_driven=...)``)."""
        # After a refused write the store is faulted and the refused bytes stay
        # pending, out of sight: what lies before them is still dispatched and read.
        with contextlib.suppress(StoreWriteError):
            self.commit_log.commit()

    def on_pending_commit(self, schedule: Callable[[], None] | None) -> None:
        """Have ``schedule`` called when a loop-driven append leaves the first pending
        bytes of a turn, so the owner commits (or dispatches) soon after."""
        self.commit_log.on_pending = schedule

    def put(self, msg: StoreMessage) -> PutResult:
        if self._writable:
            try:
                result = self.commit_log.append(msg)
            except StoreWriteError as exc:
                return self._write_failed(exc)
            if result.status is _PUT_OK and self._wake_dispatch is None:
                return result  # _appended's usual case, inlined: every put comes here
            return self._appended(result)
        return self._refused()

    def put_derived(  # noqa: PLR0917  # the fields that change
        self,
        source: memoryview,
        topic: str,
        queue_id: int,
        transaction_type: int,
        prepared: int,
        properties: bytes,
    ) -> PutResult:
        """Append a copy of a stored record with another topic, queue, transaction
        type, prepared offset and properties (``CommitLog.append_derived``)."""
        if self._writable:
            try:
                return self._appended(
                    self.commit_log.append_derived(
                        source, topic, queue_id, transaction_type, prepared, properties
                    )
                )
            except StoreWriteError as exc:
                return self._write_failed(exc)
        return self._refused()

    def put_batch(self, batch: StoreBatch) -> PutResult:
        if self._writable:
            try:
                return self._appended(self.commit_log.append_batch(batch))
            except StoreWriteError as exc:
                return self._write_failed(exc)
        return self._refused()

    def _appended(self, result: PutResult) -> PutResult:
        """An append's result: a stored one wakes the dispatch, a refused one is counted."""
        if result.status is _PUT_OK:
            if self._wake_dispatch is not None:
                self._wake_dispatch()
        else:
            self.stats["put_failed"] += 1
        return result

    def _write_failed(self, exc: StoreWriteError) -> PutResult:
        """The answer to the put whose bytes the file system refused (the store is
        faulted by then: ``CommitLog.on_write_failed``)."""
        self.stats["put_failed"] += 1
        return PutResult(PutStatus.UNKNOWN_ERROR, reason=str(exc))

    def _refused(self) -> PutResult:
        """The answer to a put while the store takes no writes, counted as failed."""
        self.stats["put_failed"] += 1
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=self._unwritable())

    def flush_future(self, result: PutResult) -> Future[PutStatus]:
        """Completes PUT_OK once ``result``'s bytes are flushed (SYNC_FLUSH), else at once."""
        fut: Future[PutStatus]
        if self.group_commit is None or not result.status.is_stored:
            fut = Future()
            fut.set_result(result.status)
            return fut
        return self.group_commit.request(result.end_offset)

    def append_data(self, offset: int, data: bytes | memoryview) -> bool:
        """Raw commit-log bytes from a master (a slave's only way to write).

        Returns False when ``offset`` is not where the log ends.

        Raises:
            StoreError: the store refuses writes (shut down, a failed sync,
                a full disk: ``DiskFullError``); the reason is the message.
        """
        refusal = self._unwritable(replica=True)
        if refusal:
            raise (DiskFullError if self.disk_full_reason else StoreError)(refusal)
        try:
            done = self.commit_log.append_data(offset, data)
        except DiskFullError as exc:
            self.mark_disk_full(str(exc))
            raise
        if done and self._wake_dispatch is not None:
            self._wake_dispatch()
        return done

    def truncate_log(self, offset: int) -> int:
        """Drop the log from ``offset`` on, and what was built from it (a slave whose
        master lost those bytes; ``replication.truncate``); the bytes dropped."""
        return replication.truncate(self.commit_log, self.queues, self.reput, offset)

    def read_log(self, offset: int, size: int) -> memoryview | None:
        """``size`` commit-log bytes at ``offset`` in one file, or None."""
        return self.commit_log.read(offset, size)

    def record_start(self, offset: int) -> int:
        """Start of the commit-log record holding byte ``offset``."""
        hint = self.reput.last_record_start
        if hint >= self.reput.reput_from:  # dropped by a truncation since
            hint = -1
        return replication.record_start(self.commit_log, offset, hint)

    def replication_source(self) -> replication.ReplicationSource:
        """What a master streams to its slaves."""
        return replication.ReplicationSource(self.commit_log)

    # -- steps -------------------------------------------------------------

    def dispatch_step(self, max_records: int = 1024) -> int:
        if self.commit_log.pending_len:  # the usual mapped append leaves none
            self.commit()  # pending write-through bytes first: dispatch reads files
        room = (
            bool(self.disk_full_reason)
            and time.monotonic() >= self._next_room_check
            and self._room_again()
        )
        try:
            done = self.reput.step(max_records)
        except DiskFullError as exc:
            self.mark_disk_full(str(exc))  # the step stopped where the room ran out
            return 0
        if room:
            self._disk_ok()
        return done

    def dispatch_behind_bytes(self) -> int:
        return self.reput.behind_bytes()

    def clean_step(self) -> CleanReport:
        """One retention pass at the clock's time and local hour."""
        now = self.clock.now_ms()
        hook = [self.index.delete_files_below] if self.index is not None else []
        report = self.cleaner.step(
            self.commit_log, self.queues, hook, now_ms=now, hour=time.localtime(now / 1000).tm_hour
        )
        if report.forced_files:
            self.stats["forced_deleted_files"] += report.forced_files
            self.stats["forced_deleted_messages"] += sum(
                kept - first for _, _, first, kept in report.forced_losses
            )
        self._writable = not self._unwritable()
        return report

    def trigger_delete_files(self) -> None:
        self.cleaner.request_manual_delete()

    # -- reads -------------------------------------------------------------

    def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        *,
        max_bytes: int | None = None,
        tag_filter: Collection[int] | None = None,
        group: str | None = None,
    ) -> GetResult:
        """Read one queue from logical ``offset`` (``group`` is for statistics only)."""
        result = get_messages(
            self.commit_log, self.queues.get(topic, queue_id), offset, max_count, self.limits,
            max_bytes=max_bytes, tag_filter=tag_filter,
        )  # fmt: skip
        if result.status is GetStatus.FOUND:
            self.stats["get_found"] += 1
            self.stats["get_transferred_msgs"] += result.message_count
        else:
            self.stats["get_miss"] += 1
        return result

    def read_message(self, commit_log_offset: int, size: int | None = None) -> memoryview | None:
        """The raw record at a physical offset (VIEW_MESSAGE_BY_ID), or None."""
        if size is None:
            return self.commit_log.read_record(commit_log_offset)
        return self.commit_log.read(commit_log_offset, size)

    def look_message(self, commit_log_offset: int) -> MessageExt | None:
        view = self.read_message(commit_log_offset)
        if view is None:
            return None
        try:
            return decode_record(view)
        except ProtocolError:
            return None
        finally:
            view.release()

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult:
        """Records found through the index by key (QUERY_MESSAGE)."""
        if self.index is None:
            return QueryMessageResult([], 0, 0)
        found = self.index.query(topic, key, max_num, begin_ts, end_ts)
        views = [v for off in found.phy_offsets if (v := self._indexed_record(off)) is not None]
        return QueryMessageResult(
            views, found.index_last_update_timestamp, found.index_last_update_phy_offset
        )

    def _indexed_record(self, offset: int) -> memoryview | None:
        """The record an index entry points at, if still the one it was (see truncate)."""
        view = self.read_message(offset)
        return replication.claims_offset(view, offset)

    # -- offsets and times ---------------------------------------------------

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else -1

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(
            timestamp_ms, self.commit_log.store_timestamp, self.commit_log.min_offset
        )

    def message_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.queues.get(topic, queue_id)
        unit = cq.unit_at(offset) if cq is not None else None
        if unit is None:
            return -1
        return self.commit_log.store_timestamp(unit.commit_log_offset, unit.size)

    def queue_unit(self, topic: str, queue_id: int, offset: int) -> QueueUnit | None:
        """One consume-queue unit, or None.

        For SCHEDULE_TOPIC_XXXX the tag code is the delivery time, which is what
        the delayed-message service reads without touching the record itself.
        """
        cq = self.queues.get(topic, queue_id)
        return cq.unit_at(offset) if cq is not None and offset >= 0 else None

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return -1 if cq is None else self.message_store_time(topic, queue_id, cq.min_offset)

    def commit_log_min_offset(self) -> int:
        return self.commit_log.min_offset

    def commit_log_max_offset(self) -> int:
        return self.commit_log.max_offset

    # -- topics and figures ----------------------------------------------------

    def topics(self) -> dict[str, list[int]]:
        return self.queues.topics()

    def delete_topics(self, topics: Collection[str]) -> int:
        """Delete the consume queues of ``topics`` (their records age out of the log)."""
        removed = 0
        for topic in topics:
            removed += self.queues.delete_topic(topic)
            table = self.commit_log.topic_queue_table
            for key in [k for k in table if k[0] == topic]:
                del table[key]
        return removed

    def runtime_stats(self) -> dict[str, int]:
        return {
            **self.stats,
            "put_ok": self.commit_log.appended_msgs,
            "commit_log_min_offset": self.commit_log.min_offset,
            "commit_log_max_offset": self.commit_log.max_offset,
            "commit_log_flushed_offset": self.commit_log.queue.flushed_offset,
            "dispatch_behind_bytes": self.reput.behind_bytes(),
            "dispatched_records": self.reput.dispatched_count,
            "consume_queues": len(self.queues.queues),
            "disk_full": int(self.cleaner.disk_full),
            "put_lock_held_ms": self.commit_log.lock_held_ms(),
        }

    # -- shutdown ------------------------------------------------------------

    def close(self) -> None:
        """Stop services, dispatch and flush everything, and mark a clean exit."""
        if self.closed:
            return
        self.closed = True
        self._writable = False
        for service in self.services:
            service.stop()
        # Each step may fail on a full or failing disk; the store still closes,
        # and leaves its abort file so the next open recovers from the log.
        try:
            self.commit()
            while self.reput.step(4096):
                pass
        except (DiskFullError, OSError) as exc:
            log.warning("store %s: closing with records not dispatched: %s",
                        self.config.store_path_root_dir, exc)  # fmt: skip
        if not self.fault:
            try:
                self.commit_log.queue.flush(0)
            except OSError as exc:
                self.mark_fault(f"commit-log flush failed: {exc}")
        self._physic_flushed()
        if self.group_commit is not None:
            self.group_commit.settle(self.commit_log.queue.flushed_offset)
        try:
            self._flush_logics(True)
        except OSError as exc:
            self.mark_fault(f"consume-queue flush failed: {exc}")
        clean = not self.fault and self.reput.behind_bytes() == 0
        self._release()
        if clean:
            with contextlib.suppress(FileNotFoundError):
                self.config.abort_path.unlink()

    def _release(self) -> None:
        self.commit_log.close()
        self.queues.close()
        self.checkpoint.close()
        if self.index is not None:
            self.index.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> FileMessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _log_recovery(config: StoreConfig, report: RecoveryReport, files: int, took_s: float) -> None:
    if not files:
        log.info("store %s opened: empty", config.store_path_root_dir)
        return
    how = "after a clean shutdown" if report.last_exit_ok else "after a crash (abort file found)"
    torn = ""
    if report.torn_bytes:
        torn = f"; {report.torn_bytes} torn bytes set aside in {config.torn_dir}"
    log.info(
        "store %s opened in %.2f s %s: %d commit-log file(s), %d checked from offset %d, "
        "%d records checked, %d recovered into consume queues, valid end %d%s",
        config.store_path_root_dir, took_s, how, files, report.files_scanned,
        report.scan_from, report.records_scanned, report.records_dispatched, report.valid_end,
        torn,
    )  # fmt: skip


def _lock_store(root: os.PathLike[str]) -> int:
    """Hold ``<root>/lock`` exclusively so two processes never share a store.

    The holder writes its pid into the file, so a refused process can say who holds it.
    """
    fd = os.open(os.path.join(root, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        pid = int(text) if text.isdigit() else None
        holder = f" (pid {pid})" if pid is not None else ""
        raise StoreInUseError(
            f"store {root} is in use by another process{holder}", pid=pid
        ) from None
    with contextlib.suppress(OSError):  # only a courtesy to the next process
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
