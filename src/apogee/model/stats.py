"""Figures a broker reports about topics, consumer groups and their clients.

Owns: TopicOffset / TopicStatsTable (GET_TOPIC_STATS_INFO), OffsetWrapper /
ConsumeStats (GET_CONSUME_STATS), Connection / ConsumerConnection
(GET_CONSUMER_CONNECTION_LIST).

Pure value types named after RocketMQ's classes of the same names; the JSON
shapes live in ``apogee.protocol.admin_bodies``. Offsets are logical queue
offsets; timestamps are milliseconds since the epoch, 0 when unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apogee.codes import LanguageCode
from apogee.model.client import ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue
from apogee.model.subscription import SubscriptionData


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue of a topic: the offsets it holds and when it last grew."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def merged(self, other: TopicStatsTable) -> TopicStatsTable:
        """Both tables' queues; ``other`` wins where a queue is in both."""
        return TopicStatsTable({**self.offset_table, **other.offset_table})


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """One queue as a consumer group sees it."""

    broker_offset: int = 0  # the queue's max offset (next offset to be written)
    consumer_offset: int = 0  # the group's committed offset
    last_timestamp: int = 0  # store time of the last consumed message

    @property
    def diff(self) -> int:
        """Messages not yet consumed (RocketMQ's "Diff" column)."""
        return self.broker_offset - self.consumer_offset


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def total_diff(self) -> int:
        return sum(w.diff for w in self.offset_table.values())

    def merged(self, other: ConsumeStats) -> ConsumeStats:
        """Both brokers' queues, TPS added up (as mqadmin sums across brokers)."""
        return ConsumeStats(
            {**self.offset_table, **other.offset_table}, self.consume_tps + other.consume_tps
        )


@dataclass(frozen=True, slots=True)
class Connection:
    """One live client of a group, as the broker saw its connection."""

    client_id: str
    client_addr: str
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """The live consumers of a group and what they subscribe to.

    The enum fields are None when the broker knows no consumer of the group.
    """

    connections: tuple[Connection, ...] = ()
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None

    def min_version(self) -> int:
        """Oldest client version among the connections (0 when there are none)."""
        return min((c.version for c in self.connections), default=0)


@dataclass(frozen=True, slots=True)
class HAConnectionInfo:
    """One slave connection as its master sees it (RocketMQ HAConnectionRuntimeInfo)."""

    addr: str
    slave_ack_offset: int
    diff: int  # bytes the slave has not acknowledged
    in_sync: bool  # within haMaxGapNotInSync
    transferred_byte_in_second: int
    transfer_from_where: int  # where the next transfer starts
    lag_ms: int = 0  # Apogee: how long the oldest unacknowledged byte has waited


@dataclass(frozen=True, slots=True)
class HAClientInfo:
    """A slave's connection to its master (RocketMQ HAClientRuntimeInfo)."""

    master_addr: str = ""
    transferred_byte_in_second: int = 0
    max_offset: int = 0
    last_read_timestamp: int = 0
    last_write_timestamp: int = 0
    master_flush_offset: int = 0
    activated: bool = False


@dataclass(frozen=True, slots=True)
class HARuntimeInfo:
    """GET_BROKER_HA_STATUS: a master's slaves, or a slave's master."""

    master: bool
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: tuple[HAConnectionInfo, ...] = ()
    ha_client_runtime_info: HAClientInfo = HAClientInfo()
