"""JSON bodies: standard output, fastjson's bare keys on input, both heartbeat forms."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from apogee.errors import ProtocolError
from apogee.model.client import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    ProducerData,
)
from apogee.model.route import BrokerData, ClusterInfo, DataVersion, QueueData, TopicRouteData
from apogee.model.subscription import SubscriptionData
from apogee.model.topic import TopicConfig
from apogee.protocol import bodies, tolerant_json

ROUTE = TopicRouteData(
    queue_datas=(QueueData("broker-a", 4, 4, 6, 0), QueueData("broker-b", 8, 8, 4, 0)),
    broker_datas=(
        BrokerData("DefaultCluster", "broker-a", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"}),
        BrokerData("DefaultCluster", "broker-b", {0: "10.0.0.3:10911"}),
    ),
)


def test_route_json_is_standard_with_quoted_sorted_keys() -> None:
    raw = bodies.encode_topic_route(ROUTE)
    obj = json.loads(raw)  # a strict parser accepts it
    assert list(obj) == sorted(obj)
    assert obj["brokerDatas"][0] == {
        "brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"},
        "brokerName": "broker-a",
        "cluster": "DefaultCluster",
    }
    assert list(obj["brokerDatas"][0]["brokerAddrs"]) == ["0", "1"]
    assert obj["queueDatas"][1] == {
        "brokerName": "broker-b",
        "perm": 4,
        "readQueueNums": 8,
        "topicSysFlag": 0,
        "writeQueueNums": 8,
    }
    assert obj["filterServerTable"] == {}
    assert "orderTopicConf" not in obj
    assert bodies.decode_topic_route(raw) == ROUTE


def test_route_with_bare_integer_keys_parses() -> None:
    # fastjson's default encoder, as a Java name server sends it to old clients
    raw = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"},{"brokerAddrs":{0:"10.0.0.3:10911"},'
        b'"brokerName":"broker-b","cluster":"DefaultCluster"}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        b'"writeQueueNums":4},{"brokerName":"broker-b","perm":4,"readQueueNums":8,'
        b'"topicSysFlag":0,"writeQueueNums":8}]}'
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    assert bodies.decode_topic_route(raw) == ROUTE


def test_route_with_order_conf_and_5x_fields() -> None:
    raw = (
        b'{"orderTopicConf":"broker-a:4","queueDatas":[],"brokerDatas":[{"brokerAddrs":{},'
        b'"brokerName":"b","cluster":"c","enableActingMaster":false,"zoneName":"z"}],'
        b'"topicQueueMappingByBroker":{}}'
    )
    route = bodies.decode_topic_route(raw)
    assert route.order_topic_conf == "broker-a:4"
    assert json.loads(bodies.encode_topic_route(route))["orderTopicConf"] == "broker-a:4"


def test_object_map_keys_parse() -> None:
    raw = (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5,'
        b' {"topic":"t","queueId":1,"brokerName":"b"} : 7}}'
    )
    assert bodies.decode_mq_offset_table(raw) == {
        MessageQueue("t", "b", 0): 5,
        MessageQueue("t", "b", 1): 7,
    }


def test_tolerant_reader_edge_cases() -> None:
    assert tolerant_json.loads(b'{1:[true,false,null],-2:{"a":"\\u00e9\\n"},3.5:1e3}') == {
        "1": [True, False, None],
        "-2": {"a": "é\n"},
        "3.5": 1000.0,
    }
    for bad in (b"{1:}", b"{1 2}", b'{"a":1', b"[1,]", b"{x:1}", b"[1] 2", b"", b"\xff"):
        with pytest.raises(ProtocolError):
            tolerant_json.loads(bad)
    with pytest.raises(ProtocolError):
        tolerant_json.loads(b"{1:" * 300 + b"1" + b"}" * 300)


def test_cluster_info_round_trip_and_bare_keys() -> None:
    info = ClusterInfo(
        broker_addr_table={"broker-a": BrokerData("c1", "broker-a", {0: "h:1"})},
        cluster_addr_table={"c1": ["broker-a"]},
    )
    raw = bodies.encode_cluster_info(info)
    assert json.loads(raw)["clusterAddrTable"] == {"c1": ["broker-a"]}
    assert bodies.decode_cluster_info(raw) == info
    bare = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"h:1"},"brokerName":"broker-a",'
        b'"cluster":"c1"}},"clusterAddrTable":{"c1":["broker-a"]}}'
    )
    assert bodies.decode_cluster_info(bare) == info


def test_small_bodies_round_trip() -> None:
    assert json.loads(bodies.encode_topic_list(["b", "a"])) == {"topicList": ["a", "b"]}
    assert bodies.decode_topic_list(bodies.encode_topic_list(["x", "y"], "h:1")) == ["x", "y"]
    assert bodies.decode_kv_table(bodies.encode_kv_table({"k": "v"})) == {"k": "v"}
    assert json.loads(bodies.encode_kv_table({"k": "v"})) == {"table": {"k": "v"}}
    version = DataVersion(timestamp=1_700_000_000_000, counter=3, state_version=0)
    assert json.loads(bodies.encode_data_version(version)) == {
        "counter": 3,
        "stateVersion": 0,
        "timestamp": 1_700_000_000_000,
    }
    assert bodies.decode_data_version(b'{"counter":3,"timestamp":1700000000000}') == version
    ids = bodies.encode_consumer_id_list(["c1", "c2"])
    assert json.loads(ids) == {"consumerIdList": ["c1", "c2"]}
    assert bodies.decode_consumer_id_list(ids) == ["c1", "c2"]


TOPICS = {
    "T1": TopicConfig("T1", 4, 4, 6),
    "T2": TopicConfig("T2", 8, 2, 7, "MULTI_TAG"),
}
REG = bodies.RegisterBrokerBody(
    bodies.TopicConfigWrapper(TOPICS, DataVersion(1_700_000_000_000, 3, 0)), ("fs:1",)
)


def test_register_broker_body_plain_round_trip_and_shape() -> None:
    raw = bodies.encode_register_broker_body(REG)
    obj = json.loads(raw)
    assert obj["filterServerList"] == ["fs:1"]
    wrapper = obj["topicConfigSerializeWrapper"]
    assert wrapper["dataVersion"] == {"counter": 3, "stateVersion": 0, "timestamp": 1700000000000}
    assert wrapper["topicConfigTable"]["T1"] == {
        "order": False,
        "perm": 6,
        "readQueueNums": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "T1",
        "topicSysFlag": 0,
        "writeQueueNums": 4,
    }
    assert bodies.decode_register_broker_body(raw) == REG


def test_register_broker_body_compressed_round_trip() -> None:
    raw = bodies.encode_register_broker_body(REG, compressed=True)
    assert bodies.decode_register_broker_body(raw, compressed=True) == REG


def _len_prefixed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_register_broker_body_compressed_golden_layout() -> None:
    # §3.4 built by hand, including a 5.x topic line with attributes and trailing 5.x data
    inner = (
        _len_prefixed(b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}')
        + struct.pack(">i", 2)
        + _len_prefixed(b"T1 4 4 6 SINGLE_TAG")
        + _len_prefixed(b'T2 8 2 7 MULTI_TAG {"+message.type":"NORMAL"}')
        + _len_prefixed(b'["fs:1"]')
        + struct.pack(">i", 0)
    )
    body = bodies.decode_register_broker_body(zlib.compress(inner, 9), compressed=True)
    assert body == REG
    ours = zlib.decompress(bodies.encode_register_broker_body(REG, compressed=True))
    assert ours == (
        _len_prefixed(b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}')
        + struct.pack(">i", 2)
        + _len_prefixed(b"T1 4 4 6 SINGLE_TAG")
        + _len_prefixed(b"T2 8 2 7 MULTI_TAG")  # the 4.x form, read by 4.x and 5.x alike
        + _len_prefixed(b'["fs:1"]')
    )


def test_register_broker_body_compressed_garbage() -> None:
    with pytest.raises(ProtocolError):
        bodies.decode_register_broker_body(b"not zlib", compressed=True)
    with pytest.raises(ProtocolError):
        bodies.decode_register_broker_body(zlib.compress(struct.pack(">i", 99)), compressed=True)


JAVA_HEARTBEAT = b"""{"clientID":"10.0.0.5@12345#987654321",
 "consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",
   "groupName":"cg1","messageModel":"CLUSTERING","unitMode":false,
   "subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG",
      "subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T1"},
     {"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",
      "subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%cg1"}]}],
 "producerDataSet":[{"groupName":"pg1"},{"groupName":"CLIENT_INNER_PRODUCER"}]}"""

CPP_HEARTBEAT = b"""{"clientID":"10.0.0.6@777","consumerDataSet":[{"consumeFromWhere":4,
 "consumeType":1,"groupName":"cg1","messageModel":0,"subscriptionDataSet":[
 {"codeSet":[2598919],"subString":"TagA","subVersion":"1700000000000","tagsSet":["TagA"],
  "topic":"T1"},{"subString":"*","subVersion":"1700000000001","topic":"%RETRY%cg1"}]}],
 "producerDataSet":[{"groupName":"pg1"}]}"""


def test_java_heartbeat() -> None:
    hb = bodies.decode_heartbeat(JAVA_HEARTBEAT)
    assert hb.client_id == "10.0.0.5@12345#987654321"
    assert [p.group_name for p in hb.producers] == ["pg1", "CLIENT_INNER_PRODUCER"]
    (consumer,) = hb.consumers
    assert consumer.consume_type == ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model == MessageModel.CLUSTERING
    assert consumer.consume_from_where == ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    first, retry = consumer.subscriptions
    assert first == SubscriptionData("T1", "TagA", ("TagA",), (2598919,), 1_700_000_000_000)
    assert retry.is_all and retry.sub_version == 1_700_000_000_001
    assert bodies.decode_heartbeat(bodies.encode_heartbeat(hb)) == hb
    assert json.loads(bodies.encode_heartbeat(hb)) == json.loads(JAVA_HEARTBEAT)


def test_cpp_heartbeat_ordinals_string_versions_missing_fields() -> None:
    hb = bodies.decode_heartbeat(CPP_HEARTBEAT)
    (consumer,) = hb.consumers
    assert consumer.consume_type == ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model == MessageModel.BROADCASTING
    assert consumer.consume_from_where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert consumer.unit_mode is False
    first, retry = consumer.subscriptions
    assert first.sub_version == 1_700_000_000_000 and first.expression_type == "TAG"
    assert first.code_set == (2598919,)
    assert retry.tags_set == () and retry.code_set == () and retry.sub_string == "*"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"consumerDataSet":[]}',  # no clientID
        b'{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":"SIDEWAYS"}]}',
        b'{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":9}]}',
        b'{"clientID":"c","consumerDataSet":{}}',
        b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":'
        b'[{"topic":"t","subVersion":"soon"}]}]}',
        b"[]",
    ],
)
def test_bad_heartbeat_names_the_problem(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        bodies.decode_heartbeat(raw)


def test_heartbeat_encode_uses_java_names() -> None:
    hb = HeartbeatData(
        "cid",
        (ProducerData("pg"),),
        (
            ConsumerData(
                "cg",
                ConsumeType.CONSUME_ACTIVELY,
                MessageModel.BROADCASTING,
                ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
                (SubscriptionData.build("T", "a || b", sub_version=5),),
            ),
        ),
    )
    obj = json.loads(bodies.encode_heartbeat(hb))
    c = obj["consumerDataSet"][0]
    assert c["consumeType"] == "CONSUME_ACTIVELY"
    assert c["messageModel"] == "BROADCASTING"
    assert c["consumeFromWhere"] == "CONSUME_FROM_TIMESTAMP"
    assert c["subscriptionDataSet"][0]["tagsSet"] == ["a", "b"]


def test_lock_batch_bodies() -> None:
    mqs = (MessageQueue("t", "b", 1), MessageQueue("t", "b", 0))
    req = bodies.LockBatchRequestBody("cg", "cid", mqs, only_this_broker=True)
    raw = bodies.encode_lock_batch_request(req)
    assert json.loads(raw) == {
        "clientId": "cid",
        "consumerGroup": "cg",
        "mqSet": [
            {"brokerName": "b", "queueId": 0, "topic": "t"},
            {"brokerName": "b", "queueId": 1, "topic": "t"},
        ],
        "onlyThisBroker": True,
    }
    back = bodies.decode_lock_batch_request(raw)
    assert sorted(back.mq_set) == sorted(mqs) and back.only_this_broker
    resp = bodies.encode_lock_batch_response(mqs)
    assert set(bodies.decode_lock_batch_response(resp)) == set(mqs)
    assert "lockOKMQSet" in json.loads(resp)


def test_java_check_client_body() -> None:
    raw = (
        b'{"clientId":"10.0.0.7@4242","group":"cg","subscriptionData":{"classFilterMode":false,'
        b'"codeSet":[],"expressionType":"SQL92","subString":"a > 1 AND b = \'x\'",'
        b'"subVersion":1700000000000,"tagsSet":[],"topic":"T1"}}'
    )
    body = bodies.decode_check_client_body(raw)
    assert (body.client_id, body.group) == ("10.0.0.7@4242", "cg")
    assert body.subscription == SubscriptionData(
        "T1", "a > 1 AND b = 'x'", sub_version=1700000000000, expression_type="SQL92"
    )
    again = bodies.decode_check_client_body(
        bodies.encode_check_client_body(body.client_id, body.group, body.subscription)
    )
    assert again == body
    assert bodies.decode_check_client_body(b'{"clientId":"c","group":"g"}').subscription is None
    with pytest.raises(ProtocolError):
        bodies.decode_check_client_body(b'{"subscriptionData":[1]}')
