"""What the dashboard remembers between page views: figures sampled over time.

Owns: ``History`` (per broker, put and get TPS; per consumer group, the lag
of each queue and in all) and ``Sampler``, the task that fills it every
``interval_s`` through the admin client. Each series keeps its last
``MAX_POINTS`` samples; a group not seen for that long is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient
from apogee.errors import ApogeeError

log = logging.getLogger(__name__)

MAX_POINTS = 360  # an hour at the default 10 s


@dataclass(slots=True)
class Series:
    """Samples of one figure: (unix seconds, value)."""

    points: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))

    def add(self, at: float, value: float) -> None:
        self.points.append((at, value))


@dataclass(slots=True)
class History:
    put_tps: dict[str, Series] = field(default_factory=dict)  # broker address -> series
    get_tps: dict[str, Series] = field(default_factory=dict)
    lag: dict[str, Series] = field(default_factory=dict)  # group -> total lag
    queue_lag: dict[str, dict[str, Series]] = field(default_factory=dict)  # group -> queue -> lag

    def series(self, table: dict[str, Series], key: str) -> Series:
        found = table.get(key)
        if found is None:
            found = table[key] = Series()
        return found


def _first(text: str | None) -> float:
    try:
        return float((text or "0").split(" ")[0])
    except ValueError:
        return 0.0


class Sampler:
    """Samples the cluster every ``interval_s`` into ``history`` until cancelled."""

    def __init__(
        self,
        admin: AdminClient,
        history: History,
        interval_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._admin = admin
        self._history = history
        self._interval_s = interval_s
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="dashboard-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                await self.sample_once()
            except ApogeeError as exc:  # the cluster may be away for a while
                log.warning("cannot sample the cluster: %s", exc)
            except Exception:
                log.exception("sampling failed")
            await asyncio.sleep(self._interval_s)

    async def sample_once(self) -> None:
        h, now = self._history, self._clock()
        for broker in await self._admin.cluster_list():
            h.series(h.put_tps, broker.addr).add(now, _first(broker.runtime.get("putTps")))
            h.series(h.get_tps, broker.addr).add(
                now, _first(broker.runtime.get("getTransferedTps"))
            )
        for group in await ops.all_groups(self._admin):
            try:
                stats = await ops.group_progress(self._admin, group)
            except ApogeeError:
                continue  # the cluster is busy or away: next time
            if not stats.offset_table:
                continue  # nothing consumed yet
            h.series(h.lag, group).add(now, stats.total_diff())
            queues = h.queue_lag.setdefault(group, {})
            for mq, wrapper in stats.offset_table.items():
                key = f"{mq.topic} {mq.broker_name}:{mq.queue_id}"
                h.series(queues, key).add(now, wrapper.diff)
