"""Broker figures for GET_BROKER_RUNTIME_INFO and GET_CONSUME_STATS.

Owns: BrokerStats (the store's put/get counters sampled once a second, for
TPS over 10 s, 1 min and 10 min as RocketMQ's StoreStatsService reports
them; message totals at the start of today and yesterday, as BrokerStats
records them at midnight; per group and topic, messages pulled, for a
group's consume TPS) and ``runtime_table``, the KV table mqadmin
brokerStatus, clusterList and the Dashboard read.

Cost: one counter update per pull that found messages, one sample (a few
dict reads) per second, and the table built only when asked. TPS strings
are three numbers separated by spaces; before a window has filled, the
figure covers the time there is.
"""

from __future__ import annotations

import shutil
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from apogee._util.clock import Clock
from apogee.broker.traffic import Traffic, TrafficHistory
from apogee.codes import CURRENT_VERSION
from apogee.model.message_codec import store_timestamp_at
from apogee.model.topic import SCHEDULE_TOPIC
from apogee.store.interface import MessageStore

TPS_WINDOWS_S = (10, 60, 600)
MIN_RECORD_SIZE = 91  # the smallest record (IPv4 hosts, empty body, topic and properties)


@dataclass(frozen=True, slots=True)
class Sample:
    at_s: float  # monotonic
    put: int
    get_found: int
    get_miss: int
    get_transferred: int


class BrokerStats:
    def __init__(self, store: MessageStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.boot_ms = clock.now_ms()
        self._samples: deque[Sample] = deque(maxlen=TPS_WINDOWS_S[-1] + 1)
        self.traffic = Traffic()
        self.history = TrafficHistory(self.traffic)
        self._group_gets = self.traffic.out_msgs  # (group, topic) -> messages pulled
        self._group_samples: deque[tuple[float, dict[tuple[str, str], int]]] = deque(maxlen=61)
        self._day = self._today()
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        self.sample()

    def _today(self) -> int:
        return time.localtime(self._clock.now_ms() / 1000).tm_yday

    def uptime_ms(self) -> int:
        return self._clock.now_ms() - self.boot_ms

    def count_group_get(self, group: str, topic: str, messages: int, total_bytes: int = 0) -> None:
        self.traffic.pulled(group, topic, messages, total_bytes)

    def sample(self) -> None:
        """Take one sample (every second, from the broker's periodic task)."""
        figures = self._store.runtime_stats()
        now = self._clock.monotonic()
        current = Sample(
            now,
            figures.get("put_ok", 0),
            figures.get("get_found", 0),
            figures.get("get_miss", 0),
            figures.get("get_transferred_msgs", 0),
        )
        self._samples.append(current)
        self.history.sample(now)
        self._group_samples.append((now, dict(self._group_gets)))
        day = self._today()
        if day != self._day:
            self._day = day
            self.put_yesterday_morning = self.put_today_morning
            self.get_yesterday_morning = self.get_today_morning
            self.put_today_morning = current.put
            self.get_today_morning = current.get_transferred

    @property
    def latest(self) -> Sample:
        return self._samples[-1]

    def tps(self, counter: str, window_s: int) -> float:
        """Per-second rate of ``counter`` over the last ``window_s`` seconds."""
        samples = self._samples
        last = samples[-1]
        first = samples[max(0, len(samples) - 1 - window_s)]
        elapsed = last.at_s - first.at_s
        if elapsed <= 0:
            return 0.0
        grown: int = getattr(last, counter) - getattr(first, counter)
        return grown / elapsed

    def tps_text(self, *counters: str) -> str:
        return " ".join(_number(sum(self.tps(c, w) for c in counters)) for w in TPS_WINDOWS_S)

    def group_get_tps(self, group: str, topic: str) -> float:
        """Messages per second ``group`` pulled from ``topic`` over the last minute."""
        if len(self._group_samples) < 2:
            return 0.0
        (t0, first), (t1, last) = self._group_samples[0], self._group_samples[-1]
        if t1 <= t0:
            return 0.0
        key = (group, topic)
        return (last.get(key, 0) - first.get(key, 0)) / (t1 - t0)


def _number(value: float) -> str:
    return str(round(value, 2))


def human_bytes(count: int) -> str:
    """MixAll.humanReadableByteCount(bytes, si=false): "512 B", "1.5 KiB"."""
    if count < 1024:
        return f"{count} B"
    exp = 0
    value = float(count)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"


def _used_ratio(path: Path) -> float:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return (usage.total - usage.free) / usage.total if usage.total else -1.0


def _runtime(elapsed_ms: int) -> str:
    seconds = max(elapsed_ms, 0) // 1000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


def version_desc(version: int) -> str:
    """MQVersion.getVersionDesc for the versions Apogee announces."""
    return CURRENT_VERSION.name if version == CURRENT_VERSION else str(version)


def earliest_message_time(store: MessageStore) -> int:
    """Store time of the oldest record in the commit log; -1 when it is empty."""
    view = store.read_message(store.commit_log_min_offset())
    if view is None:
        return -1
    try:
        return store_timestamp_at(view, 0) if len(view) >= MIN_RECORD_SIZE else -1
    finally:
        view.release()


def runtime_table(
    stats: BrokerStats,
    store: MessageStore,
    *,
    store_dir: Path,
    delay_offsets: Mapping[int, int],
    role: str = "ASYNC_MASTER",
) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table (keys as RocketMQ 4.x names them, and
    ``brokerRole``, which Apogee adds for clusterList)."""
    figures = store.runtime_stats()
    put, got = figures.get("put_ok", 0), figures.get("get_transferred_msgs", 0)
    min_offset = store.commit_log_min_offset()
    max_offset = store.commit_log_max_offset()
    flushed = figures.get("commit_log_flushed_offset", max_offset)
    ratio = _used_ratio(store_dir)
    cq_dir = store_dir / "consumequeue"
    table = {
        "brokerVersionDesc": version_desc(CURRENT_VERSION),
        "brokerVersion": str(int(CURRENT_VERSION)),
        "brokerRole": role,
        "bootTimestamp": str(stats.boot_ms),
        "runtime": _runtime(stats.uptime_ms()),
        "msgPutTotalTodayNow": str(put),
        "msgPutTotalTodayMorning": str(stats.put_today_morning),
        "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
        "msgGetTotalTodayNow": str(got),
        "msgGetTotalTodayMorning": str(stats.get_today_morning),
        "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
        "putMessageTimesTotal": str(max(put, 1)),
        "putMessageFailedTimes": str(figures.get("put_failed", 0)),
        "putTps": stats.tps_text("put"),
        "getFoundTps": stats.tps_text("get_found"),
        "getMissTps": stats.tps_text("get_miss"),
        "getTotalTps": stats.tps_text("get_found", "get_miss"),
        "getTransferedTps": stats.tps_text("get_transferred"),
        "dispatchBehindBytes": str(figures.get("dispatch_behind_bytes", 0)),
        "pageCacheLockTimeMills": str(figures.get("put_lock_held_ms", 0)),
        "earliestMessageTimeStamp": str(earliest_message_time(store)),
        "commitLogMinOffset": str(min_offset),
        "commitLogMaxOffset": str(max_offset),
        "commitLogDiskRatio": str(ratio),
        f"commitLogDiskRatio_{store_dir / 'commitlog'}": str(ratio),
        "consumeQueueDiskRatio": str(_used_ratio(cq_dir if cq_dir.exists() else store_dir)),
        "remainHowManyDataToFlush": human_bytes(max(max_offset - flushed, 0)),
        "startAcceptSendRequestTimeStamp": "0",
        # Requests are served on one event loop, never queued in thread pools.
        "sendThreadPoolQueueSize": "0",
        "pullThreadPoolQueueSize": "0",
        "queryThreadPoolQueueSize": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueHeadWaitTimeMills": "0",
    }
    try:
        usage = shutil.disk_usage(store_dir)
        table["commitLogDirCapacity"] = (
            f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
        )
    except OSError:
        pass
    for level, offset in sorted(delay_offsets.items()):
        high = max(store.max_offset_in_queue(SCHEDULE_TOPIC, level - 1), 0)
        table[f"scheduleMessageOffset_{level}"] = f"{offset},{high}"
    return table
