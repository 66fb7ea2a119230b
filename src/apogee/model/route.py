"""Route data a name server hands out: which brokers serve which topic queues.

Owns: permission bits, QueueData, BrokerData, TopicRouteData, ClusterInfo and
DataVersion as plain value types. JSON shapes live in ``protocol.bodies``.

Permission bits (RocketMQ PermName)::

    bit 3  PRIORITY  8
    bit 2  READ      4
    bit 1  WRITE     2
    bit 0  INHERIT   1     (a topic config others may be auto-created from)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
PERM_RW = PERM_READ | PERM_WRITE

MASTER_ID = 0


def perm_is_valid(perm: int) -> bool:
    return 0 <= perm < 8


def perm_to_string(perm: int) -> str:
    """RocketMQ's "RWX" rendering: '-' for a missing bit, X stands for inherit."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


def readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's share of a topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def with_perm(self, perm: int) -> QueueData:
        return replace(self, perm=perm)


@dataclass(frozen=True, slots=True)
class BrokerData:
    """A broker group: its cluster and addresses by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """Answer to GET_ROUTEINFO_BY_TOPIC."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Answer to GET_BROKER_CLUSTER_INFO."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class DataVersion:
    """Version stamp of a broker's topic configuration.

    ``next(now_ms)`` moves timestamp to now and bumps the counter, as
    RocketMQ's ``DataVersion.nextVersion`` does; equality compares all fields.
    """

    timestamp: int = 0
    counter: int = 0
    state_version: int = 0

    def next(self, now_ms: int) -> DataVersion:
        return replace(self, timestamp=now_ms, counter=self.counter + 1)
