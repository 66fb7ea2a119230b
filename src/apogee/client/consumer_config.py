"""The settings of the consumers, with the Java client's defaults (seconds as floats).

Owns: :class:`ConsumerConfig` (what both consumers share), :class:`PushConsumerConfig`
(DefaultMQPushConsumer's settings) and :class:`LitePullConsumerConfig`
(DefaultLitePullConsumer's), each checked when built, and the readers of the
values users pass: :func:`consume_from` (``"last"`` / ``"first"`` /
``"timestamp"``), :func:`message_model`, :func:`allocate_strategy`,
:func:`timestamp_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from apogee.client.allocate import STRATEGIES, AllocateStrategy
from apogee.errors import ConfigError
from apogee.model.client import ConsumeFromWhere, MessageModel
from apogee.model.topic import validate_group

#: a push consumer gives up a suspended orderly queue's retries never, by default
ORDERLY_MAX_RECONSUME_TIMES = 2**31 - 1
#: a concurrent consumer's message goes to the dead-letter queue after this many retries
CONCURRENT_MAX_RECONSUME_TIMES = 16

_FROM = {
    "last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    "first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    "timestamp": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
}


def consume_from(value: str | ConsumeFromWhere) -> ConsumeFromWhere:
    """``"last"``, ``"first"``, ``"timestamp"`` or a ConsumeFromWhere member."""
    if isinstance(value, ConsumeFromWhere):
        return value
    found = _FROM.get(str(value).lower())
    if found is None:
        raise ConfigError(f"consume_from must be one of {', '.join(_FROM)}, got {value!r}")
    return found


def timestamp_ms(value: float | datetime | None) -> int | None:
    """Seconds since the epoch (``time.time()``) or a datetime, as milliseconds."""
    if value is None:
        return None
    seconds = value.timestamp() if isinstance(value, datetime) else float(value)
    return int(seconds * 1000)


def message_model(value: str | MessageModel) -> MessageModel:
    """``"clustering"``, ``"broadcasting"`` or a MessageModel member."""
    if isinstance(value, MessageModel):
        return value
    try:
        return MessageModel[str(value).upper()]
    except KeyError:
        raise ConfigError(
            f"message_model must be clustering or broadcasting, got {value!r}"
        ) from None


def allocate_strategy(value: str | AllocateStrategy) -> AllocateStrategy:
    """A strategy by RocketMQ name (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH) or a function."""
    if callable(value):
        return value
    found = STRATEGIES.get(str(value).upper())
    if found is None:
        raise ConfigError(f"allocate must be one of {', '.join(STRATEGIES)}, got {value!r}")
    return found


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """What push and lite pull consumers share."""

    group: str
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    #: where CONSUME_FROM_TIMESTAMP starts (ms since the epoch); None: 30 minutes before start
    consume_timestamp_ms: int | None = None
    allocate: AllocateStrategy = STRATEGIES["AVG"]
    pull_batch_size: int = 32  # pullBatchSize
    pull_threshold_for_queue: int = 1000  # messages held per queue before pulls pause
    pull_threshold_size_for_queue_mib: int = 100
    pull_suspend_s: float = 15.0  # how long a broker may hold a pull (long polling)
    rebalance_interval_s: float = 20.0
    #: BROADCASTING offsets file base dir; None: ~/.rocketmq_offsets
    offset_dir: Path | None = None

    def __post_init__(self) -> None:
        why = validate_group(self.group)
        if why is not None:
            raise ConfigError(f"group: {why}")
        if not 1 <= self.pull_batch_size <= 1024:
            raise ConfigError(f"pull_batch_size must be 1..1024, got {self.pull_batch_size!r}")
        for name in ("pull_threshold_for_queue", "pull_threshold_size_for_queue_mib"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("pull_suspend_s", "rebalance_interval_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class PushConsumerConfig(ConsumerConfig):
    """DefaultMQPushConsumer's settings."""

    orderly: bool = False
    consume_concurrency: int = 20  # consumeThreadMax: listener calls running at once
    consume_concurrently_max_span: int = 2000
    #: retries before the dead-letter queue; None: 16 (concurrent) or unlimited (orderly)
    max_reconsume_times: int | None = None
    #: delay level of a retry; 0 lets the broker pick 3 + reconsume times (10 s, 30 s, ...)
    retry_delay_level: int = 0
    suspend_time_s: float = 1.0  # an orderly queue waits this long before a retry
    lock_interval_s: float = 20.0  # orderly queues are locked again this often

    def __post_init__(self) -> None:
        super(PushConsumerConfig, self).__post_init__()  # slots dataclass
        if self.consume_concurrency < 1:
            raise ConfigError(f"consume_concurrency must be >= 1, got {self.consume_concurrency}")
        if self.consume_concurrently_max_span < 1:
            raise ConfigError(
                "consume_concurrently_max_span must be >= 1, "
                f"got {self.consume_concurrently_max_span}"
            )
        if self.max_reconsume_times is not None and self.max_reconsume_times < 0:
            raise ConfigError(f"max_reconsume_times must be >= 0, got {self.max_reconsume_times}")
        if not 0 <= self.retry_delay_level <= 18:
            raise ConfigError(f"retry_delay_level must be 0..18, got {self.retry_delay_level}")
        if not 0.01 <= self.suspend_time_s <= 30:
            raise ConfigError(f"suspend_time_s must be 0.01..30, got {self.suspend_time_s}")
        if self.lock_interval_s <= 0:
            raise ConfigError(f"lock_interval_s must be positive, got {self.lock_interval_s}")

    @property
    def reconsume_limit(self) -> int:
        if self.max_reconsume_times is not None:
            return self.max_reconsume_times
        return ORDERLY_MAX_RECONSUME_TIMES if self.orderly else CONCURRENT_MAX_RECONSUME_TIMES


@dataclass(frozen=True, slots=True)
class LitePullConsumerConfig(ConsumerConfig):
    """DefaultLitePullConsumer's settings."""

    auto_commit: bool = True
    auto_commit_interval_s: float = 5.0
    pull_threshold_for_all: int = 10_000  # messages held by the consumer before pulls pause

    def __post_init__(self) -> None:
        super(LitePullConsumerConfig, self).__post_init__()  # slots dataclass
        if self.auto_commit_interval_s <= 0:
            raise ConfigError(
                f"auto_commit_interval_s must be positive, got {self.auto_commit_interval_s}"
            )
        if self.pull_threshold_for_all < 1:
            raise ConfigError(
                f"pull_threshold_for_all must be >= 1, got {self.pull_threshold_for_all}"
            )
