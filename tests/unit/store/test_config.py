from __future__ import annotations

from pathlib import Path

import pytest

from apogee.errors import ConfigError
from apogee.store.config import (
    STORE_PROPERTY_KEYS,
    BrokerRole,
    FlushDiskType,
    StoreConfig,
    parse_delay_levels,
)
from apogee.store.file_store import FileMessageStore
from apogee.store.interface import MessageStore
from apogee.testing.store import small_config


def test_defaults_are_rocketmq_s(tmp_path: Path) -> None:
    config = StoreConfig(tmp_path)
    assert config.mapped_file_size_commit_log_bytes == 1073741824
    assert config.mapped_file_size_consume_queue_bytes == 6_000_000
    assert config.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert config.delay_levels_ms[0] == 1000 and config.delay_levels_ms[-1] == 7_200_000
    assert len(config.delay_levels_ms) == 18


def test_from_properties_uses_rocketmq_key_names(tmp_path: Path) -> None:
    props = {
        "storePathRootDir": str(tmp_path),
        "flushDiskType": "SYNC_FLUSH",
        "brokerRole": "SLAVE",
        "mappedFileSizeCommitLog": "65536",
        "checkCRCOnRecover": "false",
        "deleteWhen": "04;16",
        "brokerName": "ignored-here",  # a broker key: left to the broker
    }
    config = StoreConfig.from_properties(props)
    assert config.store_path_root_dir == tmp_path
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.broker_role is BrokerRole.SLAVE
    assert config.mapped_file_size_commit_log_bytes == 65536
    assert not config.check_crc_on_recover
    assert "brokerName" not in STORE_PROPERTY_KEYS


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("flushDiskType", "SOMETIMES"),
        ("maxMessageSize", "big"),
        ("checkCRCOnRecover", "yes"),
        ("deleteWhen", "25"),
        ("messageDelayLevel", "1s 5x"),
        ("mappedFileSizeConsumeQueue", "30"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        StoreConfig.from_properties({"storePathRootDir": str(tmp_path), key: value})


def test_delay_levels() -> None:
    assert parse_delay_levels("1s 2m 3h 1d") == (1000, 120_000, 10_800_000, 86_400_000)


def test_file_store_is_a_message_store(tmp_path: Path) -> None:
    store: MessageStore = FileMessageStore.open(small_config(tmp_path))  # checked by mypy
    assert store.commit_log_max_offset() == 0
    store.close()
