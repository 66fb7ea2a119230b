"""The message index: a directory of IndexFiles answering "which records carry key K".

Owns: the ``<root>/index`` directory — which keys of a record are indexed,
rolling to a new file when one is full, queries across files, the
checkpoint timestamp it can vouch for, recovery after a crash and deletion
of files the commit log no longer covers.

Rules (RocketMQ's IndexService):

* Each record is indexed under ``topic#UNIQ_KEY`` and ``topic#token`` for
  every non-empty space-separated token of KEYS. ROLLBACK transaction
  records are not indexed.
* A record at or below the newest file's endPhyOffset was indexed already
  and is skipped, so re-dispatching the log after a restart adds nothing.
* Files are named by creation time ``yyyyMMddHHmmssSSS`` (local time). Names
  sort in creation order: if the clock would repeat or go back, a new name
  is the previous one plus one.
* Checkpoint: only a full (sealed) file never changes again, so ``flush``
  syncs sealed files and vouches for the newest one's endTimestamp; the
  writable file is synced by ``close``. After an abnormal exit ``load``
  drops every file that ends after the checkpoint, and the store
  re-dispatches the commit log from there.

Threads: one writer (``dispatch``, ``dispatch_entries``) and any number of
readers (``query``).
``_lock`` guards the file list and every access to mapped bytes. ``flush``
syncs to disk outside ``_lock`` so the writer is not stalled by the disk;
``_flush_lock`` keeps files from being unmapped under a running flush. Lock
order: ``_flush_lock`` before ``_lock``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee.errors import DiskFullError, StoreError
from apogee.model.message import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK
from apogee.store import kernels
from apogee.store.dispatch import DispatchEntry, DispatchRequest
from apogee.store.index_file import (
    DEFAULT_HASH_SLOT_NUM,
    DEFAULT_INDEX_NUM,
    TMP_SUFFIX,
    IndexFile,
    IndexWork,
    index_key_hash,
)

MAX_MSGS_NUM_BATCH = 64  # RocketMQ's maxMsgsNumBatch: the most offsets one query returns
KEY_SEPARATOR = " "
_NAME = re.compile(r"\d{17}")


@dataclass(frozen=True, slots=True)
class IndexQueryResult:
    """Offsets found for a key, and how far the index had got when asked.

    ``phy_offsets`` are distinct and ascending. They may include records of
    other keys with the same hash: the caller compares the stored keys.
    """

    phy_offsets: tuple[int, ...]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


def index_keys(request: DispatchRequest) -> list[str]:
    """The index keys of one record, ``topic#key``, without duplicates."""
    return record_keys(request.topic, request.keys, request.uniq_key)


def record_keys(topic: str, keys: str | None, uniq: str | None) -> list[str]:
    """``topic#UNIQ_KEY`` and ``topic#token`` for each token of KEYS, without duplicates."""
    prefix = topic + "#"
    out = [prefix + uniq] if uniq else []
    if keys:
        for token in keys.split(KEY_SEPARATOR):
            if token:
                key = prefix + token
                if key not in out:  # a handful of keys: a list beats a set here
                    out.append(key)
    return out


#: (offset, store time, key hashes) of the dispatch entries that have keys to
#: index, in order, ROLLBACK records left out: ``apogee.store.kernels.index_work``.
index_work: Callable[[Sequence[DispatchEntry]], IndexWork] = kernels.index_work  # type: ignore[assignment]


def file_name_for(now_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` of ``now_ms`` in local time, as RocketMQ names index files."""
    moment = datetime.fromtimestamp(now_ms // 1000)
    return f"{moment:%Y%m%d%H%M%S}{now_ms % 1000:03d}"


class IndexService:
    """All index files of one store; implements the ``Dispatcher`` protocol."""

    def __init__(
        self,
        index_dir: Path,
        *,
        max_hash_slot_num: int = DEFAULT_HASH_SLOT_NUM,
        max_index_num: int = DEFAULT_INDEX_NUM,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._dir = index_dir
        self._slots = max_hash_slot_num
        self._entries = max_index_num
        self._clock = clock
        self._files: list[IndexFile] = []  # oldest first
        self._open = False
        self._durable_ts = 0
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._backlog: IndexWork = []  # records a full disk kept out of the index
        self._backlog_key = 0  # the first backlog record's next key

    # -- lifecycle -------------------------------------------------------------

    def load(self, last_exit_ok: bool, checkpoint_index_timestamp_ms: int) -> None:
        """Open the directory's files, oldest first.

        After an abnormal exit, files whose endTimestamp is newer than the
        checkpoint's indexMsgTimestamp are deleted; the store then
        re-dispatches the commit log from the checkpoint.
        """
        with self._flush_lock, self._lock:
            if self._open:
                raise StoreError(f"index {self._dir} is already loaded")
            self._dir.mkdir(parents=True, exist_ok=True)
            for leftover in self._dir.glob("*" + TMP_SUFFIX):
                leftover.unlink()
            files: list[IndexFile] = []
            try:
                for path in sorted(p for p in self._dir.iterdir() if _NAME.fullmatch(p.name)):
                    f = IndexFile.open(path, hash_slot_num=self._slots, index_num=self._entries)
                    if not last_exit_ok and f.end_timestamp > checkpoint_index_timestamp_ms:
                        f.destroy()
                        continue
                    files.append(f)
            except BaseException:
                for f in files:
                    f.close()
                raise
            self._files = files
            sealed = (f.end_timestamp for f in files if f.is_full)
            self._durable_ts = max(checkpoint_index_timestamp_ms, *sealed, 0)
            self._open = True

    def close(self) -> None:
        """Flush and unmap every file; the service must be loaded again to be used."""
        with self._flush_lock, self._lock:
            for f in self._files:
                f.close()
            self._files = []
            self._open = False

    def destroy(self) -> None:
        """Delete every index file (the commit log they pointed into is gone)."""
        with self._flush_lock, self._lock:
            self._require_open()
            for f in self._files:
                f.destroy()
            self._files = []

    # -- writing -----------------------------------------------------------------

    def dispatch(self, request: DispatchRequest) -> None:
        """Index one record; records already indexed are skipped."""
        if request.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        keys = index_keys(request)
        if keys:
            hashes = [index_key_hash(key) for key in keys]  # outside the lock readers wait on
            self._put([(request.commit_log_offset, request.store_timestamp, hashes)])

    def dispatch_entries(self, entries: Sequence[DispatchEntry]) -> None:
        """Index many records, in log order, under one lock (see ``dispatch``)."""
        work = index_work(entries)  # hashed outside the lock readers wait on
        if work:
            self._put(work)

    def _put(self, work: IndexWork) -> None:
        with self._lock:
            if not self._open:  # _require_open inlined: every dispatch step comes here
                self._require_open()
            key = 0
            if self._backlog:  # what a full disk held back goes first, in log order
                work = [*self._backlog, *work]
                key, self._backlog = self._backlog_key, []
            rec = 0
            try:
                current = self._files[-1] if self._files else self._roll()
                rec, key = current.put_work(work, 0, key)
                while rec < len(work):  # the file is full
                    rec, key = self._roll().put_work(work, rec, key)
            except DiskFullError:
                # No room for the next file: keep the rest for a later put
                # (or ``retry``) instead of losing it; the store stops taking
                # writes meanwhile, so this stays as small as the last step.
                self._backlog, self._backlog_key = work[rec:], key
                raise

    @property
    def backlog(self) -> int:
        """Records waiting for room on disk to be indexed."""
        return len(self._backlog)

    def retry(self) -> bool:
        """Index what a full disk held back; True when nothing waits any more.

        Raises:
            DiskFullError: still no room for a new file.
        """
        if self._backlog:
            self._put([])
        return not self._backlog

    def flush(self) -> int:
        """Force the sealed files to disk; return the indexMsgTimestamp to checkpoint.

        That is the endTimestamp of the newest sealed file flushed so far
        (never less than the checkpoint ``load`` was given): every record
        stored up to then is durably indexed. The writable file is left to
        ``close`` (or to the first flush after it fills up): it vouches for
        nothing, since after a crash it is dropped and rebuilt from the commit
        log, and syncing it every round rewrote its randomly dirtied slot
        pages each time (RocketMQ's IndexService also flushes a file only once
        it is full).
        """
        with self._flush_lock:
            with self._lock:
                if not self._open:
                    return self._durable_ts
                sealed_files = [f for f in self._files if f.is_full]
            for f in sealed_files:
                f.flush()  # a no-op for files already flushed since they filled up
            sealed = max((f.end_timestamp for f in sealed_files), default=0)
            self._durable_ts = max(self._durable_ts, sealed)
            return self._durable_ts

    def delete_files_below(self, min_phy_offset: int) -> None:
        """Delete the oldest files whose endPhyOffset is below the commit log's minimum.

        Stops at the first file still needed; the newest file is never deleted.
        """
        with self._flush_lock:
            with self._lock:
                self._require_open()
                doomed = 0
                for f in self._files[:-1]:
                    if f.end_phy_offset >= min_phy_offset:
                        break
                    doomed += 1
                expired, self._files = self._files[:doomed], self._files[doomed:]
            # No reader can reach them any more: unlink without stalling dispatch.
            for f in expired:
                f.destroy()

    # -- reading -----------------------------------------------------------------

    def query(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> IndexQueryResult:
        """Commit-log offsets of records indexed under ``topic#key`` stored in [begin_ts, end_ts].

        Walks files newest to oldest and keeps the newest ``max_num`` matches
        (at most ``MAX_MSGS_NUM_BATCH``).
        """
        max_num = min(max_num, MAX_MSGS_NUM_BATCH)
        key_hash = index_key_hash(f"{topic}#{key}")
        found: list[int] = []
        with self._lock:
            self._require_open()
            if not self._files:
                return IndexQueryResult((), 0, 0)
            newest = self._files[-1]
            for f in reversed(self._files):
                if len(found) >= max_num:
                    break
                if f.is_time_matched(begin_ts, end_ts):
                    f.select_by_hash(key_hash, max_num, begin_ts, end_ts, found)
                if f.begin_timestamp < begin_ts:
                    break  # older files end before this one begins
            last_ts, last_phy = newest.end_timestamp, newest.end_phy_offset
        # A record split across two files by a crash can be found in both.
        return IndexQueryResult(tuple(sorted(set(found))), last_ts, last_phy)

    # -- internals -----------------------------------------------------------------

    def _require_open(self) -> None:
        if not self._open:
            raise StoreError(f"index {self._dir} is not loaded")

    def _roll(self) -> IndexFile:
        """Create the next file, continuing from the current one's end. Needs ``_lock``."""
        previous = self._files[-1] if self._files else None
        f = IndexFile.create(
            self._dir / self._next_name(previous),
            hash_slot_num=self._slots,
            index_num=self._entries,
            end_phy_offset=previous.end_phy_offset if previous else 0,
            end_timestamp=previous.end_timestamp if previous else 0,
        )
        self._files.append(f)
        return f

    def _next_name(self, previous: IndexFile | None) -> str:
        name = file_name_for(self._clock.now_ms())
        if previous is not None and name <= previous.name:
            name = _successor(previous.name)
        while (self._dir / name).exists():
            name = _successor(name)
        return name


def _successor(name: str) -> str:
    return f"{int(name) + 1:017d}"
