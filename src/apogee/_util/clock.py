"""Time sources: wall-clock milliseconds and monotonic seconds.

Owns: the Clock protocol, the system clock and a settable FakeClock for tests
of time-driven rules (expiry scans, lock leases).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time in milliseconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds, for intervals."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to (``advance``)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._ms = start_ms
        self._mono = 0.0

    def now_ms(self) -> int:
        return self._ms

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._ms += int(seconds * 1000)
        self._mono += seconds


SYSTEM_CLOCK = SystemClock()
