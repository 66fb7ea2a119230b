"""BrokerConfig from a broker.conf: RocketMQ keys, store keys, ignored keys, unknown keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.broker.config import (
    BrokerConfig,
    broker_config_from_properties,
    config_properties,
    load_broker_config,
)
from apogee.errors import ConfigError
from apogee.store.config import BrokerRole, FlushDiskType

OPERATOR_CONF = """\
# a typical broker.conf from a RocketMQ installation
brokerClusterName = DefaultCluster
brokerName = broker-b
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = SYNC_FLUSH
namesrvAddr=10.0.0.1:9876;10.0.0.2:9876
listenPort=10921
brokerIP1=10.0.0.5
storePathRootDir={root}
storePathCommitLog={root}/commitlog
autoCreateTopicEnable=false
sendMessageThreadPoolNums=16
useReentrantLockWhenPutMessage=true
maxMessageSize=65536
longPollingEnable=false
"""


def test_an_operators_broker_conf_loads(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(OPERATOR_CONF.format(root=tmp_path / "store"))

    config = load_broker_config(conf)

    assert config.broker_name == "broker-b"
    assert config.namesrv_addrs == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert config.listen_port == 10921
    assert config.broker_ip() == "10.0.0.5"
    assert not config.auto_create_topic_enable
    assert not config.long_polling_enable
    assert config.store.store_path_root_dir == tmp_path / "store"
    assert config.store.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.store.file_reserved_time_hours == 48
    assert config.store.max_message_size_bytes == 65536
    assert config.store.broker_role is BrokerRole.ASYNC_MASTER


def test_unknown_keys_are_named(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\nbrokerNmae=typo\n")
    with pytest.raises(ConfigError, match=r"'brokerNmae' in .*broker\.conf"):
        load_broker_config(conf)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listenPort": "port"}, "listenPort"),
        ({"brokerPermission": "9"}, "brokerPermission"),
        ({"brokerId": "1"}, "brokerId 0"),
        ({"brokerRole": "SLAVE"}, "brokerId > 0"),
        ({"flushDiskType": "SOMETIMES"}, "flushDiskType"),
        ({"secretKey": "12345678"}, "accessKey and secretKey go together"),
        ({"tls.server.mode": "enforcing"}, "tls.server.certPath"),
        ({"storePathCommitLog": "/elsewhere/commitlog"}, "storePathCommitLog"),
        ({"transactionCheckInterval": "0"}, "transactionCheckInterval"),
        ({"transactionTimeOut": "-1"}, "transactionTimeOut"),
        ({"transactionCheckMax": "0"}, "transactionCheckMax"),
        ({"cleanResourceInterval": "0"}, "cleanResourceInterval"),
    ],
)
def test_bad_values_are_named(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        broker_config_from_properties({"storePathRootDir": "/tmp/s", **props})


def test_command_line_overrides_win(tmp_path: Path) -> None:
    config = broker_config_from_properties(
        {"listenPort": "10921", "storePathRootDir": "/x"},
        listen_port=0,
        store_overrides={"store_path_root_dir": tmp_path},
    )
    assert config.listen_port == 0
    assert config.store.store_path_root_dir == tmp_path


def test_defaults_are_rocketmqs() -> None:
    config = BrokerConfig()
    assert (config.listen_port, config.default_topic_queue_nums, config.broker_permission) == (
        10911,
        8,
        6,
    )
    assert config.register_period_s == 30
    assert config.long_polling_enable and config.auto_create_topic_enable
    tx = (
        config.transaction_check_interval_ms,
        config.transaction_timeout_ms,
        config.transaction_check_max,
        config.reject_transaction_message,
    )
    assert tx == (60_000, 6000, 15, False)


def test_transaction_keys_are_rocketmqs() -> None:
    config = broker_config_from_properties(
        {
            "transactionCheckInterval": "30000",
            "transactionTimeOut": "3000",
            "transactionCheckMax": "5",
            "rejectTransactionMessage": "true",
        }
    )
    assert config.transaction_check_interval_ms == 30_000
    assert config.transaction_timeout_ms == 3000
    assert config.transaction_check_max == 5
    assert config.reject_transaction_message


def test_the_retention_pass_interval_is_rocketmqs_clean_resource_interval() -> None:
    assert BrokerConfig().store.clean_resource_interval_ms == 10_000
    config = broker_config_from_properties({"cleanResourceInterval": "1000"})
    assert config.store.clean_resource_interval_ms == 1000


def test_register_period_is_clamped_to_10_to_60_seconds() -> None:
    fast = broker_config_from_properties({"registerNameServerPeriod": "1000"})
    slow = broker_config_from_properties({"registerNameServerPeriod": "600000"})
    assert (fast.register_period_s, slow.register_period_s) == (10, 60)


def test_broker_ip_comes_from_the_bind_address_when_specific() -> None:
    assert BrokerConfig(bind_address="127.0.0.1").broker_ip() == "127.0.0.1"


def test_property_filter_keys_bind_and_default_off() -> None:
    default = broker_config_from_properties({"storePathRootDir": "/x"})
    assert not default.enable_property_filter and not default.filter_support_retry
    config = broker_config_from_properties(
        {"storePathRootDir": "/x", "enablePropertyFilter": "true", "filterSupportRetry": "true"}
    )
    assert config.enable_property_filter and config.filter_support_retry
    assert config_properties(config)["enablePropertyFilter"] == "true"
    with pytest.raises(ConfigError, match="enablePropertyFilter"):
        broker_config_from_properties({"storePathRootDir": "/x", "enablePropertyFilter": "maybe"})


def test_access_control_and_tls_keys() -> None:
    config = broker_config_from_properties(
        {
            "storePathRootDir": "/tmp/s",
            "aclEnable": "true",
            "rocketmq.acl.plain.file": "/etc/rocketmq/plain_acl.yml",
            "accessKey": "brokerid1",
            "secretKey": "broker-secret",
            "tls.server.mode": "permissive",
            "tls.server.certPath": "/c.pem",
            "tls.server.keyPath": "/c.key",
            "tls.server.keyPassword": "key-password",
            "tls.enable": "true",
        }
    )
    assert config.acl_enable and config.plain_acl_file == "/etc/rocketmq/plain_acl.yml"
    assert config.credentials is not None and config.credentials.access_key == "brokerid1"
    assert config.tls.server_mode == "permissive" and config.tls.client_enable
    listed = config_properties(config)
    assert listed["aclEnable"] == "true" and listed["tls.server.mode"] == "permissive"
    assert listed["accessKey"] == "brokerid1"
    # what GET_BROKER_CONFIG answers never holds a secret
    assert "broker-secret" not in listed.values() and "key-password" not in listed.values()
    assert BrokerConfig().credentials is None


def test_replication_defaults_are_rocketmqs() -> None:
    """What docs/ha.md's settings table promises when broker.conf says nothing."""
    config = broker_config_from_properties({})
    assert config.store.broker_role is BrokerRole.ASYNC_MASTER and config.broker_id == 0
    assert config.ha_port == 10912  # listenPort 10911 + 1
    assert config.ha_master_address == ""  # learned from the name servers
    assert config.ha_send_heartbeat_interval_ms == 5000
    assert config.ha_housekeeping_interval_ms == 20_000
    assert config.ha_transfer_batch_size == 32 * 1024
    assert config.ha_max_gap_not_in_sync == 256 << 20
    assert config.store.sync_flush_timeout_ms == 5000
    assert not config.slave_read_enable
    assert config.store.access_message_in_memory_max_ratio_percent == 40
    assert config.slave_sync_interval_ms == 10_000  # metadata copied every 10 s


def test_replication_keys_and_the_ha_port() -> None:
    config = broker_config_from_properties({"listenPort": "10921"})
    assert config.ha_port == 10922  # listenPort + 1
    assert broker_config_from_properties({"listenPort": "0"}).ha_port == 0  # any free port
    config = broker_config_from_properties(
        {
            "brokerRole": "SLAVE",
            "brokerId": "2",
            "haListenPort": "20000",
            "haMasterAddress": "10.0.0.1:10912",
            "haSendHeartbeatInterval": "1000",
            "haHousekeepingInterval": "4000",
            "haTransferBatchSize": "65536",
            "haSlaveFallbehindMax": "1024",
            "slaveReadEnable": "true",
            "accessMessageInMemoryMaxRatio": "30",
        }
    )
    assert config.ha_port == 20000
    assert config.ha_master_address == "10.0.0.1:10912"
    assert config.ha_send_heartbeat_interval_ms == 1000
    assert config.ha_housekeeping_interval_ms == 4000
    assert config.ha_transfer_batch_size == 65536
    assert config.ha_max_gap_not_in_sync == 1024  # the 4.x name of haMaxGapNotInSync
    assert config.slave_read_enable
    # a slave counts data as cold 10 points earlier (RocketMQ's BrokerStartup)
    assert config.store.access_message_in_memory_max_ratio_percent == 20
    assert broker_config_from_properties({"haMaxGapNotInSync": "7"}).ha_max_gap_not_in_sync == 7


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"haListenPort": "70000"}, "haListenPort"),
        ({"haSendHeartbeatInterval": "0"}, "haSendHeartbeatInterval"),
        ({"haTransferBatchSize": "-1"}, "haTransferBatchSize"),
        ({"haHousekeepingInterval": "x"}, "haHousekeepingInterval"),
    ],
)
def test_bad_replication_values_are_named(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        broker_config_from_properties(props)
