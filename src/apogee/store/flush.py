"""Background services: flushing, group commit, preallocation, dispatch.

Owns: a small thread base class and the store's services (RocketMQ
FlushRealTimeService, GroupCommitService and the thread of its sync loop,
FlushConsumeQueueService, AllocateMappedFileService, ReputMessageService).
Each is started and stopped by its owner; the work of one round is a plain
method, so tests can run a round on their own thread.

Group commit: two threads. The sync loop (``apogee.store.group_sync``) makes
the log durable as far as it is asked, round after round, without waiting
for anyone; its owner asks it as appended bytes reach the file (a sync must
not run ahead of them). ``request(end_offset)`` returns a
``concurrent.futures.Future`` shared by every request until the completion
thread's next round; that thread wakes when a sync ends (or every 10 ms) and
completes each generation the syncs cover with PUT_OK, and one not covered
by its deadline (syncFlushTimeout after it opened) with FLUSH_DISK_TIMEOUT.
Once the sync loop has failed (an fdatasync error: it never syncs again),
every generation it did not cover is completed with FLUSH_DISK_TIMEOUT at
once, later requests too, and ``on_failed`` is told the errno, once.
Futures are completed there, never on the caller's thread; an asyncio caller
awaits ``asyncio.wrap_future(fut)`` (and should wrap each distinct future
once).

Why two threads: completing futures needs the GIL, which a busy event loop
lends only when idle; a sync must not wait for that. So syncs overlap the
writer's appends, and a sync covers whatever was appended while the previous
one ran.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from apogee._util.clock import Clock
from apogee.store.group_sync import Syncer
from apogee.store.results import PutStatus

log = logging.getLogger(__name__)


class ServiceThread:
    """A daemon thread that runs ``run_once`` every ``interval_s`` or when woken."""

    name = "service"

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.failures = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopped.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stopped.set()
        self._wake.set()
        thread.join(timeout_s)
        self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def wakeup(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def _wait(self) -> None:
        """Until there is work, or ``interval_s`` at most."""
        self._wake.wait(self.interval_s)
        self._wake.clear()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wait()
            if self._stopped.is_set():
                break
            try:
                self.run_once()
                self.rounds += 1
            except Exception:  # a service must outlive one bad round
                self.failures += 1
                log.exception("%s round failed", self.name)

    def run_once(self) -> None:
        raise NotImplementedError


class CommitLogFlushService(ServiceThread):
    """ASYNC_FLUSH: flush when enough pages are dirty, fully every few seconds."""

    name = "apogee-flush-commitlog"

    def __init__(
        self,
        flush: Callable[[int], int],
        on_flushed: Callable[[], None],
        clock: Clock,
        *,
        interval_ms: int = 500,
        least_pages: int = 4,
        thorough_interval_ms: int = 10_000,
    ) -> None:
        super().__init__(interval_ms / 1000)
        self._flush = flush
        self._on_flushed = on_flushed
        self._clock = clock
        self._least_pages = least_pages
        self._thorough_s = thorough_interval_ms / 1000
        self._last_thorough = clock.monotonic()

    def run_once(self) -> None:
        now = self._clock.monotonic()
        least = self._least_pages
        if now - self._last_thorough >= self._thorough_s:
            least = 0
            self._last_thorough = now
        self._flush(least)
        self._on_flushed()


@dataclass(slots=True)
class _Generation:
    deadline: float
    max_end: int = 0
    future: Future[PutStatus] = field(default_factory=Future)


def _done(status: PutStatus) -> Future[PutStatus]:
    fut: Future[PutStatus] = Future()
    fut.set_result(status)
    return fut


_NEVER = 1 << 63  # past every log offset


def _answer(done: list[tuple[_Generation, PutStatus]]) -> None:
    # Outside every lock: a waiter's callback may put and request again.
    for g, status in done:
        g.future.set_result(status)


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: a sync loop makes appends durable; this thread answers their waiters."""

    name = "apogee-group-commit"

    def __init__(
        self,
        on_synced: Callable[[int], None],
        clock: Clock,
        *,
        timeout_ms: int = 5000,
        on_failed: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(0.010)  # deadlines are checked at least this often
        self.sync: Syncer | None = None
        self._on_synced = on_synced
        self._on_failed = on_failed
        self._failed = False
        #: where bytes that will never reach the file begin (a refused write)
        self._refused_from = _NEVER
        self._timed_out = _done(PutStatus.FLUSH_DISK_TIMEOUT)
        self._clock = clock
        self._timeout_s = timeout_ms / 1000
        self._lock = threading.Lock()
        self._current: _Generation | None = None
        self._pending: list[_Generation] = []
        self._ok = _done(PutStatus.PUT_OK)
        self._synced = 0  # as far as waiters were answered
        self._sync_thread: threading.Thread | None = None
        self._error = 0
        self._round_lock = threading.Lock()  # one completion round at a time
        #: whether ``start`` runs the completion thread; an owner with an event
        #: loop clears it and calls ``run_once`` when ``fileno()`` turns readable
        #: (and every few milliseconds, for the deadlines): no thread hop
        self.completion_thread = True

    def attach(self, sync: Syncer, *, completion_thread: bool = True) -> None:
        """Use ``sync`` (its files registered, ``synced`` at the log's flushed end)."""
        self.sync = sync
        self._synced = max(self._synced, sync.synced)
        self.completion_thread = completion_thread

    def fileno(self) -> int:
        """Readable after each sync round (see ``completion_thread``)."""
        if self.sync is None:
            raise RuntimeError("no sync loop attached")
        return self.sync.fileno()

    @property
    def syncs(self) -> int:
        return self.sync.syncs if self.sync is not None else 0

    @property
    def sync_seconds(self) -> float:
        """Time spent in fdatasync, for the figures."""
        return self.sync.sync_seconds if self.sync is not None else 0.0

    def start(self) -> None:
        if self.sync is None:
            raise RuntimeError("attach a sync loop before starting the group commit")
        if self._sync_thread is None:
            self._sync_thread = threading.Thread(
                target=self.sync.run, name="apogee-sync-commitlog", daemon=True
            )
            self._sync_thread.start()
        if self.completion_thread:
            super().start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopped.set()
        if self.sync is not None:
            self.sync.stop()
        if self._sync_thread is not None:
            self._sync_thread.join(timeout_s)
            self._sync_thread = None
        super().stop(timeout_s)

    def request(self, end_offset: int) -> Future[PutStatus]:
        """A future that completes when a sync covers ``end_offset``."""
        if end_offset <= self._synced:
            return self._ok
        if self._failed or end_offset > self._refused_from:
            return self._timed_out  # nothing will ever vouch for these bytes
        with self._lock:
            gen = self._current
            if gen is None:
                gen = self._current = _Generation(self._clock.monotonic() + self._timeout_s)
            if end_offset > gen.max_end:  # noqa: PLR1730 - no max() call per request
                gen.max_end = end_offset
        return gen.future

    def waiting(self) -> int:
        """Generations not yet completed."""
        with self._lock:
            return len(self._pending) + (self._current is not None)

    def _wait(self) -> None:
        sync = self.sync
        assert sync is not None  # start() checked
        sync.wait(self._synced, self.interval_s)  # without the GIL

    def run_once(self) -> None:
        """Answer the waiters the syncs so far cover, and those past their deadline."""
        sync = self.sync
        if sync is None:
            return
        sync.ack()
        with self._round_lock:
            synced = sync.synced
            if synced > self._synced:
                self._synced = synced
                self._on_synced(synced)
            error = sync.error
            if error != self._error:
                self._error = error
                if error:
                    log.error("commit-log sync failed: %s", os.strerror(error))
            failed = sync.failed
            if failed and not self._failed:
                self._failed = True
                if self._on_failed is not None:
                    self._on_failed(error)
            done = self._take_done(self._synced)
        _answer(done)

    def _take_done(self, flushed: int) -> list[tuple[_Generation, PutStatus]]:
        """Remove and return the generations ``flushed`` covers or whose time is up."""
        with self._lock:
            gen, self._current = self._current, None
        if gen is not None:
            self._pending.append(gen)
        if not self._pending:
            return []
        now = self._clock.monotonic()
        done: list[tuple[_Generation, PutStatus]] = []
        still: list[_Generation] = []
        for g in self._pending:
            if flushed >= g.max_end:
                done.append((g, PutStatus.PUT_OK))
            elif now >= g.deadline or self._failed or g.max_end > self._refused_from:
                done.append((g, PutStatus.FLUSH_DISK_TIMEOUT))
            else:
                still.append(g)
        self._pending = still
        return done

    def refuse_past(self, offset: int) -> None:
        """No byte from ``offset`` on will reach the file (the file system refused
        their write): answer FLUSH_DISK_TIMEOUT now to the waiters for any of them,
        and at once to later requests; bytes before it are synced as before."""
        with self._round_lock:
            self._refused_from = min(self._refused_from, offset)
            done = self._take_done(self._synced)
        _answer(done)

    def settle(self, flushed: int, status: PutStatus = PutStatus.FLUSH_DISK_TIMEOUT) -> None:
        """Answer every waiter once the services stopped: PUT_OK up to ``flushed``
        (the store's final flush), ``status`` for the rest."""
        with self._round_lock:
            self._synced = max(self._synced, flushed)
            done = self._take_done(self._synced)
        _answer(done)
        self.fail_all(status)

    def fail_all(self, status: PutStatus = PutStatus.FLUSH_DISK_TIMEOUT) -> None:
        """Complete every open generation (the store is closing)."""
        with self._lock:
            gens = [*self._pending, *([self._current] if self._current else [])]
            self._pending, self._current = [], None
        for g in gens:
            if not g.future.done():
                g.future.set_result(status)


class ConsumeQueueFlushService(ServiceThread):
    """Flush consume queues (and the index) and then the checkpoint, every second."""

    name = "apogee-flush-consumequeue"

    def __init__(self, flush_round: Callable[[bool], None], clock: Clock, *, interval_ms: int,
                 thorough_interval_ms: int) -> None:  # fmt: skip
        super().__init__(interval_ms / 1000)
        self._flush_round = flush_round
        self._clock = clock
        self._thorough_s = thorough_interval_ms / 1000
        self._last_thorough = clock.monotonic()

    def run_once(self) -> None:
        now = self._clock.monotonic()
        thorough = now - self._last_thorough >= self._thorough_s
        if thorough:
            self._last_thorough = now
        self._flush_round(thorough)


class CallService(ServiceThread):
    """Runs one callable per round: preallocation, dispatch, cleaning."""

    def __init__(self, name: str, work: Callable[[], object], interval_s: float) -> None:
        super().__init__(interval_s)
        self.name = name
        self._work = work

    def run_once(self) -> None:
        self._work()
