"""Work repeated on the event loop: one callable every N seconds.

Owns: PeriodicTask, used by the broker (offset persistence, client expiry,
store cleaning) and by client instances (route refresh, heartbeats, offset
persistence).

Invariants: a failing round is logged and the task keeps its schedule;
``stop`` cancels a round in progress and waits for it to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Work = Callable[[], object] | Callable[[], Awaitable[object]]


class PeriodicTask:
    """Runs ``work`` every ``interval_s`` (first after ``first_delay_s``)."""

    def __init__(
        self, name: str, interval_s: float, work: Work, *, first_delay_s: float | None = None
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self.first_delay_s = interval_s if first_delay_s is None else first_delay_s
        self._work = work
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def _run(self) -> None:
        await asyncio.sleep(self.first_delay_s)
        while True:
            try:
                result = self._work()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("%s failed", self.name)
            self.rounds += 1
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
