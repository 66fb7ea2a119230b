"""Keeping a flood of alike log records from filling the disk.

Owns: ``ThrottleFilter``, a logging filter that lets at most ``burst``
records of one kind through per ``window_s`` and counts the rest; the next
record of that kind let through after the window says how many were left out.
A kind is the logger, the level and the message template (``record.msg``
before its arguments are filled in), so one noisy peer's repeated refusals
count as one kind whatever values they carry.

One filter may sit on several handlers (stderr and a file): a record is
judged once, and every handler gets the same verdict.

Values in a record are not shortened here: exception messages are
(``apogee.errors``), and log calls that print a peer's bytes use ``%.300s``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


class ThrottleFilter(logging.Filter):
    """At most ``burst`` records of one kind per ``window_s``; see the module docstring."""

    def __init__(
        self,
        burst: int = 20,
        window_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        # kind -> [window start, records let through, records left out]
        self._kinds: dict[tuple[str, int, object], list[float]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        verdict: bool | None = getattr(record, "_apogee_throttle", None)
        if verdict is None:
            verdict = self._judge(record)
            record.__dict__["_apogee_throttle"] = verdict
        return verdict

    def _judge(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.msg)
        now = self._clock()
        with self._lock:
            state = self._kinds.get(key)
            if state is None or now - state[0] >= self.window_s:
                left_out = int(state[2]) if state is not None else 0
                if len(self._kinds) > 10_000:  # many kinds: forget the old windows
                    self._kinds.clear()
                self._kinds[key] = [now, 1, 0]
                if left_out:
                    record.msg = f"{record.msg} [{left_out} more like this were left out]"
                return True
            if state[1] < self.burst:
                state[1] += 1
                return True
            state[2] += 1
            return False


def install(handler: logging.Handler, **kwargs: float) -> ThrottleFilter:
    """Add a ThrottleFilter to ``handler`` (the process's log handlers)."""
    throttle = ThrottleFilter(**kwargs)  # type: ignore[arg-type]
    handler.addFilter(throttle)
    return throttle
