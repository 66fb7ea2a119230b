"""Queue locks for orderly consumption (RocketMQ RebalanceLockManager).

Owns: per consumer group, MessageQueue -> (client id, last renewal). Pure state, no I/O.

Rules:

* A lock lives ``max_live_ms`` (60 s, ``rocketmq.broker.rebalance.lockMaxLiveTime``)
  after its last renewal; the owner renews it by locking again (the C++
  client does every 20 s, the Java client every 20 s and considers its own
  lock gone after 30 s).
* A queue nobody holds, or whose lock expired, goes to whoever asks; a live
  lock of another client is refused.
* Only the owner unlocks; unlocking someone else's queue or a free one does
  nothing.
* A batch answers with the queues the caller holds afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from apogee._util.clock import Clock
from apogee.model.client import MessageQueue

log = logging.getLogger(__name__)

#: RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime default.
LOCK_MAX_LIVE_MS = 60_000


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    def __init__(self, clock: Clock, *, max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self._clock = clock
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update_ms > self.max_live_ms

    def try_lock_batch(
        self, group: str, queues: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """Lock or renew each queue for ``client_id``; the queues it now holds."""
        now = self._clock.now_ms()
        locks = self.table.setdefault(group, {})
        held: set[MessageQueue] = set()
        for mq in queues:
            entry = locks.get(mq)
            if entry is None:
                locks[mq] = LockEntry(client_id, now)
                held.add(mq)
                continue
            if entry.client_id == client_id or self._expired(entry, now):
                if entry.client_id != client_id:
                    log.info("group %s: lock of %s expired, %s takes it from %s",
                             group, mq, client_id, entry.client_id)  # fmt: skip
                entry.client_id = client_id
                entry.last_update_ms = now
                held.add(mq)
        return held

    def unlock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group)
        if locks is None:
            return
        for mq in queues:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
        if not locks:
            del self.table[group]

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        """The client holding a live lock on ``mq``, if any."""
        entry = self.table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, self._clock.now_ms()):
            return None
        return entry.client_id

    def held_by(self, group: str, client_id: str) -> set[MessageQueue]:
        """The queues of ``group`` ``client_id`` holds a live lock on."""
        now = self._clock.now_ms()
        return {
            mq
            for mq, entry in self.table.get(group, {}).items()
            if entry.client_id == client_id and not self._expired(entry, now)
        }
