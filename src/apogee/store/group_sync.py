"""The SYNC_FLUSH sync loop: make the commit log durable as far as appends ask.

Owns: ``GroupSyncPython``, the specification of the compiled
``apogee._groupsync.GroupSync`` (hand-written C, ``_groupsync.c``), and
``GroupSync``, whichever of the two this installation runs.

The loop keeps two offsets and a list of files::

    requested   end offset some append asked to be made durable (grows)
    synced      end offset the last good round made durable (grows)
    fileno()    an eventfd written after every round and at ``stop``: an
                event loop watching it answers waiters on its own thread
                (then ``ack`` it), with no thread hop in between
    files       [start, start + size) and a duplicate of the descriptor of
                each commit-log file; a file wholly below ``synced`` is closed

One round (``run`` loops them until ``stop``): take ``target = requested``,
fdatasync every file overlapping ``[synced, target)`` in offset order, then
``synced = target`` and wake every ``wait``. A range no file covers (a file
not registered yet) fails the round with ENOENT in ``error``, since nothing
vouches for it, and is retried within 10 ms. A round whose fdatasync fails is
never retried: after a failed fsync Linux may have dropped the dirty pages
(and cleared the error), so a later success would prove nothing. The loop
sets ``failed``, keeps the errno in ``error`` and makes no more rounds;
``synced`` stays where it was for good. ``request`` is cheap enough for the
writer's hot path: it only raises ``requested`` and wakes the loop.

The compiled twin runs the whole loop with the GIL released, so a sync starts
the moment an append asks and the next starts as soon as one returns, while
the writer keeps appending. This one needs the GIL between rounds, so under a
busy writer its rounds start late and cover more; results are the same.

The log must not be truncated below ``synced`` while a loop runs (recovery
truncates before the store starts).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

from apogee._util.native import groupsync


class Syncer(Protocol):
    """What the group commit needs of a sync loop (both twins)."""

    @property
    def synced(self) -> int: ...
    @property
    def requested(self) -> int: ...
    @property
    def syncs(self) -> int: ...
    @property
    def sync_seconds(self) -> float: ...
    @property
    def error(self) -> int: ...
    @property
    def running(self) -> bool: ...
    @property
    def failed(self) -> bool: ...
    @property
    def files(self) -> int: ...
    def add_file(self, start: int, size: int, fd: int, /) -> None: ...
    def request(self, end: int, /) -> None: ...
    def run(self) -> None: ...
    def wait(self, seen: int, timeout_s: float, /) -> int: ...
    def stop(self) -> None: ...
    def fileno(self) -> int: ...
    def ack(self) -> None: ...


class _File:
    __slots__ = ("dead", "end", "fd", "start")

    def __init__(self, start: int, end: int, fd: int) -> None:
        self.start = start
        self.end = end
        self.fd = fd
        self.dead = False


class GroupSyncPython:
    """The sync loop in Python; see the module docstring."""

    def __init__(self, synced: int = 0) -> None:
        if synced < 0:
            raise ValueError("synced must not be negative")
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._requested = self._synced = synced
        self._stopped = False
        self._running = False
        self._in_round = False
        self._error = 0
        self._failed = False
        self._syncs = 0
        self._sync_seconds = 0.0
        self._files: list[_File] = []
        self._notify = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    # -- figures -------------------------------------------------------------

    @property
    def synced(self) -> int:
        with self._lock:
            return self._synced

    @property
    def requested(self) -> int:
        with self._lock:
            return self._requested

    @property
    def syncs(self) -> int:
        with self._lock:
            return self._syncs

    @property
    def sync_seconds(self) -> float:
        with self._lock:
            return self._sync_seconds

    @property
    def error(self) -> int:
        with self._lock:
            return self._error

    @property
    def running(self) -> bool:
        with self._lock:
            return self._running

    @property
    def failed(self) -> bool:
        with self._lock:
            return self._failed

    @property
    def files(self) -> int:
        with self._lock:
            return sum(not f.dead for f in self._files)

    # -- the writer's side ---------------------------------------------------

    def add_file(self, start: int, size: int, fd: int, /) -> None:
        if start < 0 or size <= 0 or fd < 0:
            raise ValueError("start, size or fd out of range")
        own = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 0)
        with self._lock:
            for f in self._files:
                if f.start == start:
                    f.dead = True  # replaced (a file made again after a truncation)
            if not self._in_round:
                self._reap()
            at = len(self._files)
            while at > 0 and self._files[at - 1].start > start:
                at -= 1
            self._files.insert(at, _File(start, start + size, own))

    def request(self, end: int, /) -> None:
        with self._lock:
            if end > self._requested:
                self._requested = end
                self._wake.notify()

    # -- the loop ------------------------------------------------------------

    def run(self) -> None:
        with self._lock:
            if self._running:
                raise RuntimeError("the sync loop is already running")
            self._running = True
            try:
                while not self._stopped:
                    if self._failed or self._requested <= self._synced:
                        self._wake.wait()
                        continue
                    self._round()
            finally:
                self._running = False
                self._done.notify_all()

    def _round(self) -> None:
        """One round; called and returns with the lock held."""
        self._reap()
        begin, target = self._synced, self._requested
        fds = [f.fd for f in self._files if not f.dead and f.end > begin and f.start < target]
        err = 0 if fds else errno.ENOENT
        io_failed = False
        took = 0.0
        if fds:
            self._in_round = True
            self._lock.release()
            began = time.monotonic()
            try:
                for fd in fds:
                    os.fdatasync(fd)  # retries EINTR itself (PEP 475)
            except OSError as exc:
                err = exc.errno or errno.EIO
                io_failed = True
            finally:
                took = time.monotonic() - began
                self._lock.acquire()
                self._in_round = False
        if err:
            self._error = err
            self._failed = io_failed
            self._done.notify_all()
            self._signal()
            if not self._stopped and not self._failed:
                self._wake.wait(0.010)
            return
        self._synced = target
        self._error = 0
        self._syncs += 1
        self._sync_seconds += took
        self._done.notify_all()
        self._signal()

    def _signal(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full counter stays readable
            os.eventfd_write(self._notify, 1)

    def _reap(self) -> None:
        keep: list[_File] = []
        for f in self._files:
            if f.dead or f.end <= self._synced:
                os.close(f.fd)
            else:
                keep.append(f)
        self._files = keep

    def wait(self, seen: int, timeout_s: float, /) -> int:
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._lock:
            while self._synced <= seen and not self._stopped:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(left)
            return self._synced

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._wake.notify_all()
            self._done.notify_all()
            self._signal()

    def fileno(self) -> int:
        return self._notify

    def ack(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self._notify)

    def __del__(self) -> None:
        fds = [f.fd for f in getattr(self, "_files", ())]
        if hasattr(self, "_notify"):
            fds.append(self._notify)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


#: The sync loop this installation runs (the compiled twin when built),
#: called with the offset already durable.
GroupSync: Callable[[int], Syncer] = (
    groupsync.GroupSync if groupsync is not None else GroupSyncPython
)
