"""The broker's background work as small start/stop objects on the event loop.

Owns: DispatchDriver (moves the store's dispatch cursor right after puts,
coalesced, so long-polled pulls wake within a loop turn) and ConfigFiles
(writes the managers' JSON files on a worker thread). PeriodicTask (one
callable every N seconds) lives in ``apogee._util.periodic``, shared with
the client.

Invariants: nothing here blocks the loop on the disk (file writes run in
``asyncio.to_thread``; one write per file at a time, newest content wins);
a failing round is logged and the task keeps its schedule; ``stop`` waits
for a round in progress.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from apogee._util.fileio import atomic_write
from apogee._util.periodic import PeriodicTask
from apogee.errors import ConfigError, ProtocolError

log = logging.getLogger(__name__)


class Completions(Protocol):
    """The store's SYNC_FLUSH group commit, as the loop drives it."""

    def fileno(self) -> int: ...
    def run_once(self) -> None: ...


class DispatchDriver:
    """Runs ``step(batch)`` soon after ``kick`` and keeps going while there is work.

    ``kick`` costs one attribute test when a run is already scheduled, so the
    send path calls it after every put. A safety tick also runs the step
    every ``tick_s``, for records that arrive without a put (replication).
    The step also writes a loop-driven store's pending SYNC_FLUSH appends.

    With ``completions`` (a SYNC_FLUSH store), it also answers the waiters of
    each sync round on the loop: the sync loop's eventfd wakes it, no thread
    hop between; the tick checks their deadlines. ``on_step`` is called after
    each step that dispatched records (a master streams them to its slaves).
    """

    def __init__(
        self,
        step: Callable[[int], int],
        *,
        batch: int = 1024,
        tick_s: float = 0.2,
        completions: Completions | None = None,
        on_step: Callable[[], None] | None = None,
    ) -> None:
        self._step = step
        self.on_step = on_step
        self._batch = batch
        self._scheduled = False
        self._stopped = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick = PeriodicTask("dispatch-tick", tick_s, self._on_tick)
        self._completions = completions

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        self._tick.start()
        if self._completions is not None:
            self._loop.add_reader(self._completions.fileno(), self._completions.run_once)

    def _on_tick(self) -> None:
        if self._completions is not None:
            self._completions.run_once()
        self.kick()

    def kick(self) -> None:
        if not self._scheduled and not self._stopped:
            self._scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._run)

    def _run(self) -> None:
        self._scheduled = False
        if self._stopped:
            return
        try:
            done = self._step(self._batch)
            if done and self.on_step is not None:
                self.on_step()
        except Exception:
            log.exception("dispatch step failed")
            return
        if done >= self._batch:
            self.kick()  # more to do: let other callbacks run in between

    def drain(self) -> None:
        """Dispatch everything appended so far, now."""
        while self._step(self._batch) >= self._batch:
            pass

    async def stop(self) -> None:
        self._stopped = True
        await self._tick.stop()
        if self._completions is not None and self._loop is not None:
            self._loop.remove_reader(self._completions.fileno())


class ConfigFiles:
    """Writes small JSON files atomically on a worker thread.

    A write that fails (a full disk) is logged once, its content kept, and
    written again by ``retry_unsaved`` (the broker calls it every few
    seconds) unless a newer save of the same file came first; a failed save
    never raises, so stopping the broker still closes the store.
    """

    def __init__(self, write: Callable[[Path, bytes], None] = atomic_write) -> None:
        self._write = write
        self._locks: dict[Path, asyncio.Lock] = {}
        self._latest: dict[Path, bytes] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self._unsaved: dict[Path, bytes] = {}

    @property
    def unsaved(self) -> list[Path]:
        """Files whose newest content could not be written yet."""
        return list(self._unsaved)

    async def save(self, path: Path, data: bytes) -> bool:
        """Write ``data`` to ``path``; a newer save of the same path supersedes it.

        Returns False when the write failed (kept for ``retry_unsaved``).
        """
        self._latest[path] = data
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            content = self._latest.pop(path, None)
            if content is None:
                return True  # a later save already wrote newer content
            try:
                await asyncio.to_thread(self._write, path, content)
            except OSError as exc:
                if path not in self._unsaved:
                    log.error("cannot write %s (%s); kept in memory, trying again later",
                              path, exc.strerror or exc)  # fmt: skip
                self._unsaved[path] = content
                return False
            if self._unsaved.pop(path, None) is not None:
                log.info("wrote %s after earlier failures", path)
            return True

    async def retry_unsaved(self) -> None:
        """Write again what failed before, unless a newer save is on its way."""
        for path, data in list(self._unsaved.items()):
            if path not in self._latest:
                await self.save(path, data)

    def save_soon(self, path: Path, data: bytes) -> None:
        """``save`` in the background (change listeners cannot await)."""
        task = asyncio.get_running_loop().create_task(self._save_quietly(path, data))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _save_quietly(self, path: Path, data: bytes) -> None:
        await self.save(path, data)

    @staticmethod
    def load(path: Path, apply: Callable[[bytes], None]) -> bool:
        """Apply ``path``'s content, or its ``.bak`` when the file is unreadable.

        Returns False when neither exists (a new broker).

        Raises:
            ConfigError: both exist and neither parses; names the file.
        """
        problem: ProtocolError | None = None
        for candidate in (path, path.with_name(path.name + ".bak")):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            try:
                apply(data)
            except ProtocolError as exc:
                log.warning("%s is unreadable: %s", candidate, exc)
                problem = exc
                continue
            return True
        if problem is not None:
            raise ConfigError(f"{path}: {problem}")
        return False

    async def flush(self) -> None:
        """Wait for every background save started so far."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
