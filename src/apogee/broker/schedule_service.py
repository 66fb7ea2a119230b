"""Delayed delivery: moves due messages from SCHEDULE_TOPIC_XXXX back to their topics.

Owns: DelayOffsetTable (per delay level, the next SCHEDULE_TOPIC_XXXX queue
offset to deliver, and the JSON of ``config/delayOffset.json``) and
ScheduleMessageService (RocketMQ 4.x ScheduleMessageService).

Level ``n`` reads queue ``n - 1``. The consume-queue tag code of each unit
is its delivery time (store time + the level's delay, computed by the store
when the message was written), so a message is judged due without reading
it; a delivery time further ahead than one full delay is taken as due now
(the clock went back). A due message is put to REAL_TOPIC / REAL_QID with
every property kept except DELAY, WAIT=false, reconsumeTimes, flag,
sysFlag, born time and host unchanged; the store recomputes its tag code.
The level's offset then moves past it. A record that cannot be read or
names no destination is skipped (logged); a put the store refuses stops the
level until it is retried.

Timing: the first round 1 s after start; a level with nothing due is polled
again after 100 ms; after a failed put or an error, after 10 s; a level with
a backlog keeps going, ``batch`` messages per turn of the event loop. All
work happens on the event loop (the store is single-writer; each put is an
in-memory append). Offsets are persisted every 10 s and at stop, so a
restart redelivers at most what was delivered since the last save
(at-least-once), and loses nothing.

File shape (RocketMQ writes bare integer keys; we write quoted ones and read
both)::

    {"offsetTable": {"1": 0, "2": 15, ...}}
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from apogee._util.clock import Clock
from apogee.errors import ProtocolError
from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExt,
    StoreMessage,
    properties_to_string,
)
from apogee.model.topic import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from apogee.protocol import tolerant_json
from apogee.store.interface import MessageStore

log = logging.getLogger(__name__)


class DelayOffsetTable:
    """Delay level -> next queue offset of SCHEDULE_TOPIC_XXXX to deliver."""

    def __init__(self, levels: int) -> None:
        self.levels = levels
        self.table: dict[int, int] = dict.fromkeys(range(1, levels + 1), 0)
        self.dirty = False

    def get(self, level: int) -> int:
        return self.table.get(level, 0)

    def set(self, level: int, offset: int) -> None:
        if self.table.get(level) != offset:
            self.table[level] = offset
            self.dirty = True

    def encode(self, *, mark_clean: bool = True) -> bytes:
        if mark_clean:
            self.dirty = False
        return orjson.dumps({"offsetTable": {str(k): v for k, v in sorted(self.table.items())}})

    def load(self, data: bytes | None) -> None:
        """Read a persisted table; ProtocolError naming what is wrong with it."""
        if not data:
            return
        obj = tolerant_json.loads(data)
        raw = obj.get("offsetTable", {}) if isinstance(obj, dict) else None
        if not isinstance(raw, dict):
            raise ProtocolError("delayOffset.json: offsetTable is not an object")
        for key, value in raw.items():
            try:
                level, offset = int(key), int(value)
            except (TypeError, ValueError):
                raise ProtocolError(f"delayOffset.json: bad entry {key!r}: {value!r}") from None
            if isinstance(value, bool) or offset < 0:
                raise ProtocolError(f"delayOffset.json: bad offset of level {key}: {value!r}")
            self.table[level] = offset
        self.dirty = False


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    delay_levels_ms: tuple[int, ...]
    first_delay_s: float = 1.0
    idle_poll_s: float = 0.1
    failure_backoff_s: float = 10.0
    batch: int = 64  # deliveries per level per loop turn


class ScheduleMessageService:
    def __init__(
        self,
        store: MessageStore,
        offsets: DelayOffsetTable,
        settings: ScheduleSettings,
        clock: Clock,
        *,
        on_stored: Callable[[], None],
    ) -> None:
        self._store = store
        self._offsets = offsets
        self._settings = settings
        self._clock = clock
        self._on_stored = on_stored
        self._task: asyncio.Task[None] | None = None
        self.delivered = 0
        self.skipped = 0

    @property
    def levels(self) -> int:
        return len(self._settings.delay_levels_ms)

    # -- lifecycle -------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self.correct_offsets()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="schedule")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def correct_offsets(self) -> None:
        """Bring persisted offsets into each queue's [min, max] (files may have aged out)."""
        for level in range(1, self.levels + 1):
            low = self._store.min_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            if low < 0:
                continue
            high = self._store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            offset = self._offsets.get(level)
            fixed = min(max(offset, low), high)
            if fixed != offset:
                log.warning("delay level %d: offset %d corrected to %d", level, offset, fixed)
                self._offsets.set(level, fixed)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(self._settings.first_delay_s)
        due = [loop.time()] * self.levels
        while True:
            now = loop.time()
            for i in range(self.levels):
                if due[i] <= now:
                    due[i] = now + self._round(i + 1)
            await asyncio.sleep(max(0.0, min(due) - loop.time()))

    def _round(self, level: int) -> float:
        try:
            return self.deliver_level(level)
        except Exception:
            log.exception("delay level %d: delivery failed", level)
            return self._settings.failure_backoff_s

    # -- one round ---------------------------------------------------------------

    def deliver_level(self, level: int) -> float:
        """Deliver what is due on one level; seconds until this level's next round."""
        settings = self._settings
        queue_id = level - 1
        delay_ms = settings.delay_levels_ms[queue_id]
        offset = self._offsets.get(level)
        end = self._store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id)
        for _ in range(settings.batch):
            if offset >= end:
                return settings.idle_poll_s
            unit = self._store.queue_unit(SCHEDULE_TOPIC, queue_id, offset)
            if unit is None:
                return self._lost_unit(level, offset)
            now = self._clock.now_ms()
            deliver_at = unit.tag_code if unit.tag_code <= now + delay_ms else now
            if deliver_at > now:
                return settings.idle_poll_s
            if not self._deliver(level, offset, unit.commit_log_offset):
                return settings.failure_backoff_s
            offset += 1
            self._offsets.set(level, offset)
        return 0.0  # a backlog: come back on the next turn of the loop

    def _lost_unit(self, level: int, offset: int) -> float:
        low = self._store.min_offset_in_queue(SCHEDULE_TOPIC, level - 1)
        if low > offset:  # the unit's file aged out: carry on from what is left
            log.warning(
                "delay level %d: offset %d below the queue's minimum %d", level, offset, low
            )
            self._offsets.set(level, low)
            return 0.0
        return self._settings.idle_poll_s

    def _deliver(self, level: int, offset: int, commit_log_offset: int) -> bool:
        """Put the message at ``commit_log_offset`` to its topic; False if the store refused."""
        msg = self._store.look_message(commit_log_offset)
        target = _destination(msg) if msg is not None else None
        if msg is None or target is None:
            log.error("delay level %d: skipping unusable record at queue offset %d (log %d)",
                      level, offset, commit_log_offset)  # fmt: skip
            self.skipped += 1
            return True
        result = self._store.put(timeup_message(msg, *target))
        if not result.status.is_stored:
            log.warning("delay level %d: the store refused delivery of %d: %s %s",
                        level, offset, result.status.value, result.reason)  # fmt: skip
            return False
        self._on_stored()
        self.delivered += 1
        return True


def _destination(msg: MessageExt) -> tuple[str, int] | None:
    topic = msg.properties.get(PROPERTY_REAL_TOPIC)
    queue_text = msg.properties.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic or not queue_text.isdigit() or topic == TRANS_HALF_TOPIC:
        return None
    return topic, int(queue_text)


def timeup_message(msg: MessageExt, topic: str, queue_id: int) -> StoreMessage:
    """The record a due delayed message becomes in its real topic."""
    props = dict(msg.properties)
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return StoreMessage(
        topic=topic,
        queue_id=queue_id,
        body=msg.body,
        properties=properties_to_string(props),
        flag=msg.flag,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_host=msg.store_host,
        reconsume_times=msg.reconsume_times,
    )
