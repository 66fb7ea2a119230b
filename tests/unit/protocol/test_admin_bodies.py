"""Admin bodies: strict JSON out, fastjson's object map keys in, RocketMQ defaults."""

from __future__ import annotations

import json

import pytest

from apogee.codes import LanguageCode
from apogee.errors import ProtocolError
from apogee.model.client import ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.stats import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    HAClientInfo,
    HAConnectionInfo,
    HARuntimeInfo,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from apogee.model.subscription import SubscriptionData
from apogee.protocol import admin_bodies, bodies

MQ_A0 = MessageQueue("T", "broker-a", 0)
MQ_B1 = MessageQueue("T", "broker-b", 1)
MQ_A0_KEY = '{"brokerName":"broker-a","queueId":0,"topic":"T"}'


def test_topic_stats_strict_json_with_queue_text_keys() -> None:
    table = TopicStatsTable({MQ_B1: TopicOffset(3, 9, 1700), MQ_A0: TopicOffset(0, 5, 1600)})
    raw = admin_bodies.encode_topic_stats_table(table)
    obj = json.loads(raw)  # a strict parser accepts it
    keys = list(obj["offsetTable"])
    assert keys[0] == MQ_A0_KEY  # queues in Java's compareTo order
    assert json.loads(keys[1]) == {"brokerName": "broker-b", "queueId": 1, "topic": "T"}
    assert obj["offsetTable"][MQ_A0_KEY] == {
        "lastUpdateTimestamp": 1600,
        "maxOffset": 5,
        "minOffset": 0,
    }
    assert admin_bodies.decode_topic_stats_table(raw) == table


def test_topic_stats_from_fastjson_object_keys() -> None:
    # what a Java broker sends: MessageQueue objects as bare map keys, 5.x extra field
    raw = (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
        b'{"lastUpdateTimestamp":1600,"maxOffset":5,"minOffset":0},'
        b'{"brokerName":"broker-b","queueId":1,"topic":"T"}:'
        b'{"lastUpdateTimestamp":0,"maxOffset":"9","minOffset":3}},"topicPutTps":0.0}'
    )
    table = admin_bodies.decode_topic_stats_table(raw)
    assert table.offset_table == {MQ_A0: TopicOffset(0, 5, 1600), MQ_B1: TopicOffset(3, 9, 0)}


def test_consume_stats_round_trip_and_java_form() -> None:
    stats = ConsumeStats({MQ_A0: OffsetWrapper(10, 7, 1700), MQ_B1: OffsetWrapper(4, 4, 0)}, 2.5)
    raw = admin_bodies.encode_consume_stats(stats)
    obj = json.loads(raw)
    assert obj["consumeTps"] == 2.5
    assert obj["offsetTable"][MQ_A0_KEY] == {
        "brokerOffset": 10,
        "consumerOffset": 7,
        "lastTimestamp": 1700,
    }
    back = admin_bodies.decode_consume_stats(raw)
    assert back == stats
    assert back.total_diff() == 3
    java = (
        b'{"consumeTps":0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
        b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700,"pullOffset":8}}}'
    )
    assert admin_bodies.decode_consume_stats(java).offset_table == {
        MQ_A0: OffsetWrapper(10, 7, 1700)
    }


def test_consume_stats_merge_adds_tps() -> None:
    a = ConsumeStats({MQ_A0: OffsetWrapper(1, 0, 0)}, 1.0)
    b = ConsumeStats({MQ_B1: OffsetWrapper(5, 2, 0)}, 2.0)
    merged = a.merged(b)
    assert merged.consume_tps == 3.0
    assert merged.total_diff() == 4


def test_consumer_connection_round_trip() -> None:
    cc = ConsumerConnection(
        connections=(
            Connection("b@2", "127.0.0.1:5002", LanguageCode.CPP, 63),
            Connection("a@1", "127.0.0.1:5001", LanguageCode.JAVA, 401),
        ),
        subscription_table={"T": SubscriptionData.build("T", "TagA || TagB", sub_version=5)},
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    raw = admin_bodies.encode_consumer_connection(cc)
    obj = json.loads(raw)
    assert obj["connectionSet"][0] == {
        "clientAddr": "127.0.0.1:5001",
        "clientId": "a@1",
        "language": "JAVA",
        "version": 401,
    }
    assert obj["consumeType"] == "CONSUME_PASSIVELY"
    assert obj["subscriptionTable"]["T"]["tagsSet"] == ["TagA", "TagB"]
    back = admin_bodies.decode_consumer_connection(raw)
    assert set(back.connections) == set(cc.connections)
    assert back.subscription_table == cc.subscription_table
    assert back.min_version() == 63
    assert (back.consume_type, back.message_model, back.consume_from_where) == (
        cc.consume_type,
        cc.message_model,
        cc.consume_from_where,
    )


def test_consumer_connection_without_consumers_has_no_enums() -> None:
    raw = admin_bodies.encode_consumer_connection(ConsumerConnection())
    assert json.loads(raw) == {"connectionSet": [], "subscriptionTable": {}}
    back = admin_bodies.decode_consumer_connection(raw)
    assert back == ConsumerConnection()
    assert back.min_version() == 0


def test_subscription_group_defaults_and_full_round_trip() -> None:
    # a 4.x body carries only the 4.x fields: the rest take RocketMQ's defaults
    group = admin_bodies.decode_subscription_group(b'{"groupName":"G"}')
    assert group == SubscriptionGroupConfig("G")
    assert (group.retry_queue_nums, group.retry_max_times, group.consume_timeout_minute) == (
        1,
        16,
        15,
    )
    assert group.consume_enable and group.consume_from_min_enable and group.consume_broadcast_enable
    custom = SubscriptionGroupConfig(
        "G",
        consume_enable=False,
        consume_broadcast_enable=False,
        retry_max_times=3,
        broker_id=1,
        which_broker_when_consume_slowly=2,
        consume_message_orderly=True,
        attributes={"k": "v"},
    )
    raw = admin_bodies.encode_subscription_group(custom)
    obj = json.loads(raw)
    assert list(obj) == sorted(obj)
    assert obj["consumeEnable"] is False
    assert obj["whichBrokerWhenConsumeSlowly"] == 2
    assert admin_bodies.decode_subscription_group(raw) == custom


def test_subscription_group_5x_extras_are_ignored() -> None:
    raw = (
        b'{"groupName":"G","groupRetryPolicy":{"type":"CUSTOMIZED"},'
        b'"subscriptionDataSet":[{"topic":"T"}],"retryMaxTimes":"5"}'
    )
    assert admin_bodies.decode_subscription_group(raw).retry_max_times == 5


@pytest.mark.parametrize(
    ("decode", "raw"),
    [
        (admin_bodies.decode_topic_stats_table, b'{"offsetTable":{"not a queue":{}}}'),
        (admin_bodies.decode_topic_stats_table, b'{"offsetTable":[]}'),
        (admin_bodies.decode_consume_stats, b'{"consumeTps":"fast","offsetTable":{}}'),
        (admin_bodies.decode_consumer_connection, b'{"connectionSet":[{"clientAddr":"x"}]}'),
        (admin_bodies.decode_consumer_connection, b'{"consumeType":"SOMETIMES"}'),
        (admin_bodies.decode_subscription_group, b'{"consumeEnable":true}'),
        (admin_bodies.decode_subscription_group, b"[1]"),
    ],
)
def test_malformed_admin_bodies_name_the_problem(decode: object, raw: bytes) -> None:
    assert callable(decode)
    with pytest.raises(ProtocolError):
        decode(raw)


def test_broker_group_file_keeps_5x_fields() -> None:
    # the broker persists groups with the same mapping (subscriptionGroup.json)
    group = SubscriptionGroupConfig("G", consume_message_orderly=True, consume_timeout_minute=5)
    wrapper = bodies.SubscriptionGroupWrapper({"G": group})
    back = bodies.decode_subscription_group_wrapper(
        bodies.encode_subscription_group_wrapper(wrapper)
    )
    assert back.subscription_group_table == {"G": group}


def test_ha_runtime_info_round_trip_and_java_field_names() -> None:
    master = HARuntimeInfo(
        master=True,
        master_commit_log_max_offset=4096,
        in_sync_slave_nums=1,
        ha_connection_info=(HAConnectionInfo("10.0.0.2:51000", 4000, 96, True, 1024, 4096, 12),),
    )
    raw = admin_bodies.encode_ha_runtime_info(master)
    obj = json.loads(raw)
    assert obj["haConnectionInfo"][0] == {
        "addr": "10.0.0.2:51000",
        "slaveAckOffset": 4000,
        "diff": 96,
        "inSync": True,
        "transferredByteInSecond": 1024,
        "transferFromWhere": 4096,
        "lagMillis": 12,
    }
    assert admin_bodies.decode_ha_runtime_info(raw) == master
    slave = HARuntimeInfo(
        False, ha_client_runtime_info=HAClientInfo("10.0.0.1:10912", 5, 77, 1, 2, 0, True)
    )
    assert admin_bodies.decode_ha_runtime_info(admin_bodies.encode_ha_runtime_info(slave)) == slave
    # a Java broker's answer (fastjson names the boolean getters without "is")
    java = b'{"haClientRuntimeInfo":{"activated":false,"masterAddr":"a:1"},"master":false}'
    assert admin_bodies.decode_ha_runtime_info(java).ha_client_runtime_info.master_addr == "a:1"
    with pytest.raises(ProtocolError, match="master"):
        admin_bodies.decode_ha_runtime_info(b'{"master":"maybe"}')
