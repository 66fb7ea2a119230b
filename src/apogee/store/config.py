"""Store configuration: one frozen dataclass with RocketMQ's defaults.

Owns: StoreConfig, the flush and role enums, the delay-level table and the
mapping from RocketMQ ``MessageStoreConfig`` key names (as they appear in
broker.conf) to fields.

Each field names its unit; the comment beside it gives the RocketMQ key.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any

from apogee._util.props import convert
from apogee.errors import ConfigError

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class FlushDiskType(Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``"1s 5s 1m"`` -> delays in ms; level i is element i-1.

    Raises:
        ConfigError: a token is not a number followed by s, m, h or d.
    """
    out: list[int] = []
    for token in text.split():
        unit = _UNIT_MS.get(token[-1:])
        if unit is None or not token[:-1].isdigit():
            raise ConfigError(f"messageDelayLevel: bad level {token!r}")
        out.append(int(token[:-1]) * unit)
    if not out:
        raise ConfigError("messageDelayLevel: no levels")
    return tuple(out)


def physical_memory_bytes() -> int:
    """Total RAM of this machine (for the cold-read / suggest-slave rule)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - non-POSIX
        return 8 << 30


@dataclass(frozen=True)
class StoreConfig:
    """Everything the message store needs to know; defaults are RocketMQ's."""

    store_path_root_dir: Path  # storePathRootDir
    # --- files
    mapped_file_size_commit_log_bytes: int = 1 << 30  # mappedFileSizeCommitLog
    mapped_file_size_consume_queue_bytes: int = 300_000 * 20  # mappedFileSizeConsumeQueue
    # --- messages
    max_message_size_bytes: int = 4 * 1024 * 1024  # maxMessageSize (body limit)
    message_delay_level: str = DEFAULT_DELAY_LEVELS  # messageDelayLevel
    # --- roles and flushing
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER  # brokerRole
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH  # flushDiskType
    flush_interval_commit_log_ms: int = 500  # flushIntervalCommitLog
    flush_commit_log_least_pages: int = 4  # flushCommitLogLeastPages
    flush_commit_log_thorough_interval_ms: int = 10_000  # flushCommitLogThoroughInterval
    flush_interval_consume_queue_ms: int = 1000  # flushIntervalConsumeQueue
    flush_consume_queue_least_pages: int = 2  # flushConsumeQueueLeastPages
    flush_consume_queue_thorough_interval_ms: int = 60_000  # flushConsumeQueueThoroughInterval
    sync_flush_timeout_ms: int = 5000  # syncFlushTimeout
    os_page_cache_busy_timeout_ms: int = 1000  # osPageCacheBusyTimeOutMills
    # --- recovery
    check_crc_on_recover: bool = True  # checkCRCOnRecover
    message_index_safe: bool = False  # messageIndexSafe
    # --- retention
    file_reserved_time_hours: int = 72  # fileReservedTime
    delete_when: str = "04"  # deleteWhen (hours of day, ';'-separated)
    disk_max_used_space_ratio_percent: int = 75  # diskMaxUsedSpaceRatio
    disk_space_clean_forcibly_ratio_percent: int = 85  # diskSpaceCleanForciblyRatio
    disk_space_warning_level_ratio_percent: int = 90  # diskSpaceWarningLevelRatio
    clean_file_forcibly_enable: bool = True  # cleanFileForciblyEnable
    clean_resource_interval_ms: int = 10_000  # cleanResourceInterval (one retention pass each)
    # --- reads
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024  # maxTransferBytesOnMessageInMemory
    max_transfer_count_on_message_in_memory: int = 32  # maxTransferCountOnMessageInMemory
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024  # maxTransferBytesOnMessageInDisk
    max_transfer_count_on_message_in_disk: int = 8  # maxTransferCountOnMessageInDisk
    access_message_in_memory_max_ratio_percent: int = 40  # accessMessageInMemoryMaxRatio
    offset_check_in_slave: bool = False  # offsetCheckInSlave
    # Apogee only: RAM assumed by the cold-read rule; None = this machine's.
    total_physical_memory_bytes: int | None = field(default=None)
    # Apogee only: commit-log bytes ahead of the writer whose pages a background
    # thread maps in advance (a page fault per 4 KiB costs the writer more); 0 = off.
    # The thread needs the GIL to start each round, which a busy writer lends it
    # only every few milliseconds: the window must outlast that at full speed.
    prefault_ahead_bytes: int = 32 << 20

    def __post_init__(self) -> None:
        if self.mapped_file_size_consume_queue_bytes % 20:
            raise ConfigError("mappedFileSizeConsumeQueue must be a multiple of 20")
        if self.mapped_file_size_commit_log_bytes < 4096:
            raise ConfigError("mappedFileSizeCommitLog must be at least 4096 bytes")
        if self.max_message_size_bytes <= 0:
            raise ConfigError("maxMessageSize must be positive")
        if self.clean_resource_interval_ms <= 0:
            raise ConfigError("cleanResourceInterval must be positive")
        parse_delay_levels(self.message_delay_level)
        for hour in self.delete_when.split(";"):
            if not hour.strip().isdigit() or not 0 <= int(hour) <= 23:
                raise ConfigError(f"deleteWhen: {hour!r} is not an hour of day")

    @cached_property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)

    @cached_property
    def memory_bytes(self) -> int:
        if self.total_physical_memory_bytes is not None:
            return self.total_physical_memory_bytes
        return physical_memory_bytes()

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_path_root_dir / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def torn_dir(self) -> Path:
        return self.store_path_root_dir / "torn"

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **overrides: Any) -> StoreConfig:
        """Build from broker.conf-style ``key=value`` pairs with RocketMQ key names.

        Keys this table does not know are left alone (the broker owns them);
        :data:`STORE_PROPERTY_KEYS` lists the known ones.

        Raises:
            ConfigError: a value cannot be converted; the message names the key.
        """
        kwargs: dict[str, Any] = {}
        hints = typing.get_type_hints(cls)
        for key, value in props.items():
            name = STORE_PROPERTY_KEYS.get(key)
            if name is None:
                continue
            kwargs[name] = convert(key, value, hints[name])
        kwargs.update(overrides)
        if "store_path_root_dir" not in kwargs:
            kwargs["store_path_root_dir"] = Path.home() / "store"
        return cls(**kwargs)


#: RocketMQ MessageStoreConfig key -> StoreConfig field.
STORE_PROPERTY_KEYS: dict[str, str] = {
    "storePathRootDir": "store_path_root_dir",
    "mappedFileSizeCommitLog": "mapped_file_size_commit_log_bytes",
    "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue_bytes",
    "maxMessageSize": "max_message_size_bytes",
    "messageDelayLevel": "message_delay_level",
    "brokerRole": "broker_role",
    "flushDiskType": "flush_disk_type",
    "flushIntervalCommitLog": "flush_interval_commit_log_ms",
    "flushCommitLogLeastPages": "flush_commit_log_least_pages",
    "flushCommitLogThoroughInterval": "flush_commit_log_thorough_interval_ms",
    "flushIntervalConsumeQueue": "flush_interval_consume_queue_ms",
    "flushConsumeQueueLeastPages": "flush_consume_queue_least_pages",
    "flushConsumeQueueThoroughInterval": "flush_consume_queue_thorough_interval_ms",
    "syncFlushTimeout": "sync_flush_timeout_ms",
    "osPageCacheBusyTimeOutMills": "os_page_cache_busy_timeout_ms",
    "checkCRCOnRecover": "check_crc_on_recover",
    "messageIndexSafe": "message_index_safe",
    "fileReservedTime": "file_reserved_time_hours",
    "deleteWhen": "delete_when",
    "diskMaxUsedSpaceRatio": "disk_max_used_space_ratio_percent",
    "diskSpaceCleanForciblyRatio": "disk_space_clean_forcibly_ratio_percent",
    "diskSpaceWarningLevelRatio": "disk_space_warning_level_ratio_percent",
    "cleanFileForciblyEnable": "clean_file_forcibly_enable",
    "cleanResourceInterval": "clean_resource_interval_ms",
    "maxTransferBytesOnMessageInMemory": "max_transfer_bytes_on_message_in_memory",
    "maxTransferCountOnMessageInMemory": "max_transfer_count_on_message_in_memory",
    "maxTransferBytesOnMessageInDisk": "max_transfer_bytes_on_message_in_disk",
    "maxTransferCountOnMessageInDisk": "max_transfer_count_on_message_in_disk",
    "accessMessageInMemoryMaxRatio": "access_message_in_memory_max_ratio_percent",
    "offsetCheckInSlave": "offset_check_in_slave",
}
