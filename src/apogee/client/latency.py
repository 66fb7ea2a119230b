"""Send latency fault tolerance: which brokers a producer avoids for a while, and how long.

Owns: the latency -> not-available table of RocketMQ 4.x (MQFaultStrategy) and
LatencyFaultTable (LatencyFaultToleranceImpl), one item per broker name. Pure:
the caller passes the time (monotonic milliseconds) to every call.

After each send attempt the producer reports how long it took; a failed
attempt counts as 30 s. The broker is then not available for the duration of
the largest row whose latency the attempt reached::

    latency >=   50 ms     100 ms    550 ms   1 s    2 s     3 s     15 s
    avoided     0          0         30 s     60 s   120 s   180 s   600 s

so a broker that failed is avoided for ten minutes, unless a later attempt
that was forced onto it (every broker avoided) succeeds quickly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: Latency thresholds (ms) and how long a broker is avoided once reached (ms).
LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)
NOT_AVAILABLE_MS: tuple[int, ...] = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
#: The latency a failed attempt is scored with.
ISOLATION_LATENCY_MS = 30_000


def not_available_ms(latency_ms: float) -> int:
    """How long a broker whose send took ``latency_ms`` is avoided."""
    for i in range(len(LATENCY_MAX_MS) - 1, -1, -1):
        if latency_ms >= LATENCY_MAX_MS[i]:
            return NOT_AVAILABLE_MS[i]
    return 0


@dataclass(slots=True)
class FaultItem:
    """One broker's last latency and the moment it becomes available again."""

    broker_name: str
    latency_ms: float
    available_at_ms: float

    def is_available(self, now_ms: float) -> bool:
        return now_ms >= self.available_at_ms


class LatencyFaultTable:
    """Per broker name: the latency of its last send and until when it is avoided."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._items: dict[str, FaultItem] = {}
        self._rng = rng or random.Random()
        self._worst = 0

    def update(self, broker_name: str, latency_ms: float, now_ms: float, *, failed: bool) -> None:
        """Record a send attempt to ``broker_name`` that took ``latency_ms``."""
        scored = ISOLATION_LATENCY_MS if failed else latency_ms
        available_at = now_ms + not_available_ms(scored)
        item = self._items.get(broker_name)
        if item is None:
            self._items[broker_name] = FaultItem(broker_name, scored, available_at)
        else:
            item.latency_ms = scored
            item.available_at_ms = available_at

    def is_available(self, broker_name: str, now_ms: float) -> bool:
        item = self._items.get(broker_name)
        return item is None or now_ms >= item.available_at_ms

    def unavailable_for_ms(self, broker_name: str, now_ms: float) -> float:
        """How much longer ``broker_name`` is avoided; 0 when it is available."""
        item = self._items.get(broker_name)
        return 0.0 if item is None else max(0.0, item.available_at_ms - now_ms)

    def remove(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)

    def items(self) -> list[FaultItem]:
        return list(self._items.values())

    def pick_one_at_least(self, now_ms: float, among: set[str] | None = None) -> str | None:
        """A broker to try when every one is avoided: among the better half, in turn.

        Better means available first, then lower latency, then available
        sooner (RocketMQ's order); ``among`` limits the choice to some brokers.
        """
        items = [i for i in self._items.values() if among is None or i.broker_name in among]
        if not items:
            return None
        self._rng.shuffle(items)
        items.sort(key=lambda i: (not i.is_available(now_ms), i.latency_ms, i.available_at_ms))
        half = len(items) // 2
        if half <= 0:
            return items[0].broker_name
        self._worst += 1
        return items[self._worst % half].broker_name
