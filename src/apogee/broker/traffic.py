"""Messages and bytes through the broker, per topic: what the metrics and statsAll read.

Owns: ``Traffic``, counters the send and pull handlers bump for every
stored put and every pull that found messages: messages and bytes in per
(topic, message type), the size histogram of what came in, messages and
bytes out per (consumer group, topic), and messages the broker moved to a
group's dead-letter queue per (consumer group, original topic). Counters only grow while the broker
runs (a restart starts them at zero, as Prometheus counters expect).

``TrafficHistory`` keeps totals of the last minute, hour and day for
VIEW_BROKER_STATS_DATA (mqadmin statsAll).

Cost on the send path: two dict updates and a bisect into six buckets.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

#: message size bucket bounds in bytes (RocketMQ 5: 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB)
SIZE_BUCKETS = (1024, 4096, 512 * 1024, 1 << 20, 2 << 20, 4 << 20)

#: RocketMQ 5's message_type label values
NORMAL, FIFO, DELAY, TRANSACTION = "normal", "fifo", "delay", "transaction"


class Traffic:
    def __init__(self) -> None:
        #: (topic, message type) -> messages / bytes stored
        self.in_msgs: dict[tuple[str, str], int] = {}
        self.in_bytes: dict[tuple[str, str], int] = {}
        #: (topic, message type) -> [count per size bucket..., above the last]
        self.sizes: dict[tuple[str, str], list[int]] = {}
        #: (consumer group, topic) -> messages / bytes pulled
        self.out_msgs: dict[tuple[str, str], int] = {}
        self.out_bytes: dict[tuple[str, str], int] = {}
        #: (consumer group, original topic) -> messages moved to the group's %DLQ% topic
        self.dead_lettered: dict[tuple[str, str], int] = {}

    def put(self, topic: str, kind: str, messages: int, body_bytes: int) -> None:
        """``messages`` stored in ``topic``, ``body_bytes`` of bodies in all."""
        key = (topic, kind)
        buckets = self.sizes.get(key)
        if buckets is None:  # the key's first message: its three entries start at 0
            buckets = self.sizes[key] = [0] * (len(SIZE_BUCKETS) + 1)
            self.in_msgs.setdefault(key, 0)
            self.in_bytes.setdefault(key, 0)
        self.in_msgs[key] += messages
        self.in_bytes[key] += body_bytes
        # a batch counts as messages of its average size
        per = body_bytes // messages if messages > 1 else body_bytes
        buckets[bisect_left(SIZE_BUCKETS, per)] += messages

    def pulled(self, group: str, topic: str, messages: int, total_bytes: int) -> None:
        key = (group, topic)
        self.out_msgs[key] = self.out_msgs.get(key, 0) + messages
        self.out_bytes[key] = self.out_bytes.get(key, 0) + total_bytes

    def dead_letter(self, group: str, topic: str) -> None:
        """One message of ``topic`` given up by ``group``: stored in its dead-letter queue."""
        key = (group, topic)
        self.dead_lettered[key] = self.dead_lettered.get(key, 0) + 1

    def topic_in(self, topic: str) -> int:
        """Messages stored in ``topic`` since start, every message type."""
        return sum(n for (t, _), n in self.in_msgs.items() if t == topic)


#: VIEW_BROKER_STATS_DATA's statsName values and what each counts
STATS_NAMES = ("TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE", "GROUP_GET_NUMS", "GROUP_GET_SIZE")


@dataclass(frozen=True, slots=True)
class _Snapshot:
    at_s: float  # monotonic
    # statsName -> statsKey ("topic" or "topic@group") -> total so far
    totals: dict[str, dict[str, int]]


def _totals(traffic: Traffic) -> dict[str, dict[str, int]]:
    put_nums: dict[str, int] = {}
    put_size: dict[str, int] = {}
    for (topic, _), n in traffic.in_msgs.items():
        put_nums[topic] = put_nums.get(topic, 0) + n
    for (topic, _), n in traffic.in_bytes.items():
        put_size[topic] = put_size.get(topic, 0) + n
    return {
        "TOPIC_PUT_NUMS": put_nums,
        "TOPIC_PUT_SIZE": put_size,
        "GROUP_GET_NUMS": {f"{t}@{g}": n for (g, t), n in traffic.out_msgs.items()},
        "GROUP_GET_SIZE": {f"{t}@{g}": n for (g, t), n in traffic.out_bytes.items()},
    }


class TrafficHistory:
    """Totals sampled each second, minute and hour: the last minute, hour and day of traffic.

    RocketMQ's BrokerStatsManager answers VIEW_BROKER_STATS_DATA (mqadmin
    statsAll) with a sum and a rate over each window; before a window has
    filled, the figures cover the time there is.
    """

    def __init__(self, traffic: Traffic) -> None:
        self._traffic = traffic
        self._seconds: deque[_Snapshot] = deque(maxlen=61)
        self._minutes: deque[_Snapshot] = deque(maxlen=61)
        self._hours: deque[_Snapshot] = deque(maxlen=25)

    def sample(self, now_s: float) -> None:
        snap = _Snapshot(now_s, _totals(self._traffic))
        self._seconds.append(snap)
        if not self._minutes or now_s - self._minutes[-1].at_s >= 60:
            self._minutes.append(snap)
        if not self._hours or now_s - self._hours[-1].at_s >= 3600:
            self._hours.append(snap)

    def knows(self, name: str, key: str) -> bool:
        """Whether anything was counted under ``name``/``key`` since the broker started."""
        return key in _totals(self._traffic).get(name, {})

    def window(self, name: str, key: str, ring: str, now_s: float) -> tuple[int, float]:
        """(sum, per second) of ``name``/``key`` over ``ring``: "minute", "hour" or "day"."""
        samples = {"minute": self._seconds, "hour": self._minutes, "day": self._hours}[ring]
        if not samples:
            return 0, 0.0
        current = _totals(self._traffic).get(name, {}).get(key, 0)
        first = samples[0]
        grown = current - first.totals.get(name, {}).get(key, 0)
        elapsed = now_s - first.at_s
        return grown, (grown / elapsed if elapsed > 0 else 0.0)
