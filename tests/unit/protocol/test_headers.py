"""Typed custom headers: exact wire names, required fields, parsing, send V1 == V2."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from apogee.codes import RequestCode
from apogee.errors import HeaderFieldError
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes

V1 = {
    "producerGroup": "pg",
    "topic": "T1",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "queueId": "2",
    "sysFlag": "0",
    "bornTimestamp": "1700000000000",
    "flag": "0",
    "properties": "TAGS\x01a\x02",
    "reconsumeTimes": "0",
    "unitMode": "false",
    "batch": "false",
    "maxReconsumeTimes": "16",
}
V2 = {
    "a": "pg",
    "b": "T1",
    "c": "TBW102",
    "d": "4",
    "e": "2",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "TAGS\x01a\x02",
    "j": "0",
    "k": "false",
    "l": "16",
    "m": "false",
}
V1_REQUIRED = [
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
]
V2_REQUIRED = list("abcdefgh")


def test_send_v1_and_v2_decode_to_the_same_value() -> None:
    one = h.decode_send_header(RequestCode.SEND_MESSAGE, V1)
    two = h.decode_send_header(RequestCode.SEND_MESSAGE_V2, V2)
    assert one == two
    assert one.default_topic_queue_nums == 4 and one.queue_id == 2
    assert one.born_timestamp == 1_700_000_000_000 and one.max_reconsume_times == 16
    assert one.properties == "TAGS\x01a\x02" and one.batch is False


def test_send_header_round_trips_both_forms() -> None:
    value = h.decode_send_header(RequestCode.SEND_MESSAGE_V2, V2)
    assert h.SendMessageRequestHeader.from_ext(value.to_ext()) == value
    assert h.SendMessageRequestHeader.from_ext_v2(value.to_ext_v2()) == value
    assert value.to_ext_v2() == {**V2, "k": "false", "m": "false"}


def test_send_batch_code_and_m_flag_mean_batch() -> None:
    assert h.decode_send_header(RequestCode.SEND_BATCH_MESSAGE, V2).batch is True
    assert h.decode_send_header(RequestCode.SEND_MESSAGE_V2, {**V2, "m": "true"}).batch is True


def test_send_header_through_a_cpp_json_frame() -> None:
    # C++ sends d, e, f, h, l as JSON numbers; they arrive as strings all the same.
    header = (
        b'{"code":310,"extFields":{"a":"pg","b":"T1","c":"TBW102","d":4,"e":2,"f":0,'
        b'"g":"1700000000000","h":0,"i":"TAGS\\u0001a\\u0002","j":"0","k":"false","l":16,'
        b'"m":"false","AccessKey":"","OnsChannel":"","Signature":""},"flag":0,'
        b'"language":"CPP","opaque":1,"remark":"","version":333}'
    )
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    (cmd,) = FrameDecoder().feed(frame)
    assert h.decode_send_header(cmd.code, cmd.ext_fields) == h.decode_send_header(
        RequestCode.SEND_MESSAGE, V1
    )


def test_send_v1_as_the_bundled_cpp_client_sends_it() -> None:
    # Captured from PyPI rocketmq 0.4.4 (librocketmq): code 10, version 63,
    # booleans written as "0"/"1", ACL fields always present.
    ext = {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "mFxMJ8aMLLBEa8iYJkPQGS2E+/0=",
        "batch": "0",
        "bornTimestamp": "1795322686437",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "flag": "0",
        "producerGroup": "interop_pg",
        "properties": "TAGS\x01TagA\x02WAIT\x01true\x02",
        "queueId": "2",
        "reconsumeTimes": "0",
        "sysFlag": "0",
        "topic": "InteropTopic",
        "unitMode": "0",
    }
    value = h.decode_send_header(RequestCode.SEND_MESSAGE, ext)
    assert (value.topic, value.queue_id, value.unit_mode, value.batch) == (
        "InteropTopic",
        2,
        False,
        False,
    )
    assert h.decode_send_header(RequestCode.SEND_MESSAGE, {**ext, "batch": "1"}).batch is True


@pytest.mark.parametrize("missing", V1_REQUIRED)
def test_send_v1_missing_required_field_is_named(missing: str) -> None:
    ext = {k: v for k, v in V1.items() if k != missing}
    with pytest.raises(HeaderFieldError) as err:
        h.decode_send_header(RequestCode.SEND_MESSAGE, ext)
    assert err.value.field == missing


@pytest.mark.parametrize("missing", V2_REQUIRED)
def test_send_v2_missing_required_field_is_named(missing: str) -> None:
    ext = {k: v for k, v in V2.items() if k != missing}
    with pytest.raises(HeaderFieldError) as err:
        h.decode_send_header(RequestCode.SEND_MESSAGE_V2, ext)
    assert err.value.field == missing


@pytest.mark.parametrize(("key", "value"), [("e", "two"), ("g", ""), ("k", "maybe"), ("l", "x")])
def test_send_v2_unparsable_field_is_named(key: str, value: str) -> None:
    with pytest.raises(HeaderFieldError) as err:
        h.decode_send_header(RequestCode.SEND_MESSAGE_V2, {**V2, key: value})
    assert err.value.field == key


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("d", str(2**31)),  # defaultTopicQueueNums: Java int
        ("e", str(-(2**31) - 1)),  # queueId
        ("f", str(2**31)),  # sysFlag
        ("g", str(2**63)),  # bornTimestamp: Java long
        ("h", str(2**31)),  # flag
        ("j", str(2**31)),  # reconsumeTimes
        ("l", str(-(2**40))),  # maxReconsumeTimes
    ],
)
def test_send_number_wider_than_its_java_field_is_named(key: str, value: str) -> None:
    with pytest.raises(HeaderFieldError) as err:
        h.decode_send_header(RequestCode.SEND_MESSAGE_V2, {**V2, key: value})
    assert err.value.field == key
    assert "does not fit" in str(err.value)


def test_send_numbers_at_the_edges_of_their_java_fields_are_accepted() -> None:
    edge = {**V2, "e": str(2**31 - 1), "f": str(-(2**31)), "g": str(2**63 - 1), "h": "-1"}
    value = h.decode_send_header(RequestCode.SEND_MESSAGE_V2, edge)
    assert (value.queue_id, value.sys_flag) == (2**31 - 1, -(2**31))
    assert (value.born_timestamp, value.flag) == (2**63 - 1, -1)


@pytest.mark.parametrize(
    ("key", "value"),
    [("queueOffset", str(10**100)), ("queueId", str(2**31)), ("maxMsgNums", str(2**32))],
)
def test_pull_number_wider_than_its_java_field_is_named(key: str, value: str) -> None:
    with pytest.raises(HeaderFieldError) as err:
        h.PullMessageRequestHeader.from_ext({**PULL, key: value})
    assert err.value.field == key


def test_declarative_numbers_must_fit_a_java_long() -> None:
    ext = {"topic": "T", "queueId": "0", "timestamp": str(2**64)}
    with pytest.raises(HeaderFieldError) as err:
        h.SearchOffsetRequestHeader.from_ext(ext)
    assert err.value.field == "timestamp"


def test_send_header_spellings_off_the_fast_path_decode_the_same() -> None:
    odd = {**V2, "e": " 2", "k": "TRUE", "m": "False", "j": "+0"}
    plain = {**V2, "k": "true"}
    assert h.decode_send_header(RequestCode.SEND_MESSAGE_V2, odd) == h.decode_send_header(
        RequestCode.SEND_MESSAGE_V2, plain
    )


def test_send_v2_optional_fields_default_and_acl_fields_ignored() -> None:
    ext = {k: V2[k] for k in V2_REQUIRED}
    ext.update({"AccessKey": "ak", "Signature": "sig", "OnsChannel": "ALIYUN", "bname": "b"})
    value = h.decode_send_header(RequestCode.SEND_MESSAGE_V2, ext)
    assert value.properties is None and value.reconsume_times is None
    assert value.unit_mode is False and value.batch is False and value.max_reconsume_times is None


PULL = {
    "consumerGroup": "cg",
    "topic": "T1",
    "queueId": "1",
    "queueOffset": "100",
    "maxMsgNums": "32",
    "sysFlag": "3",
    "commitOffset": "90",
    "suspendTimeoutMillis": "15000",
    "subscription": "*",
    "subVersion": "1700000000000",
    "expressionType": "TAG",
}


def test_pull_header_parses_and_round_trips() -> None:
    value = h.PullMessageRequestHeader.from_ext(PULL)
    assert (value.queue_id, value.queue_offset, value.max_msg_nums) == (1, 100, 32)
    assert value.sys_flag == 3 and value.commit_offset == 90
    assert value.suspend_timeout_millis == 15000 and value.sub_version == 1_700_000_000_000
    assert value.to_ext() == PULL
    resp = h.PullMessageResponseHeader(0, 132, 0, 500)
    assert h.PullMessageResponseHeader.from_ext(resp.to_ext()) == resp
    assert resp.to_ext()["nextBeginOffset"] == "132"


@pytest.mark.parametrize(
    "missing", [k for k in PULL if k not in ("subscription", "expressionType")]
)
def test_pull_missing_required_field_is_named(missing: str) -> None:
    with pytest.raises(HeaderFieldError) as err:
        h.PullMessageRequestHeader.from_ext({k: v for k, v in PULL.items() if k != missing})
    assert err.value.field == missing


def test_send_response_header_carries_region_and_trace() -> None:
    resp = h.SendMessageResponseHeader("0A0000010000", 3, 42, None, "DefaultRegion", "true")
    ext = resp.to_ext()
    assert ext == {
        "msgId": "0A0000010000",
        "queueId": "3",
        "queueOffset": "42",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    assert h.SendMessageResponseHeader.from_ext(ext) == resp


# -- declarative headers: every required field of every registered header ------

ALL_DECLARATIVE = sorted(
    {*h.REQUEST_HEADERS.values(), *h.RESPONSE_HEADERS.values()}, key=lambda c: c.__name__
)


def _sample(kind: type) -> str:
    return {int: "7", bool: "true", str: "v"}[kind]


def _full_ext(cls: type[h.ExtHeader]) -> dict[str, str]:
    return {f.wire: _sample(f.kind) for f in h._spec(cls)}


REQUIRED_CASES = [(cls, f.wire) for cls in ALL_DECLARATIVE for f in h._spec(cls) if f.required]


@pytest.mark.parametrize(("cls", "wire"), REQUIRED_CASES, ids=lambda x: getattr(x, "__name__", x))
def test_every_required_field_missing_is_named(cls: type[h.ExtHeader], wire: str) -> None:
    ext = _full_ext(cls)
    del ext[wire]
    with pytest.raises(HeaderFieldError) as err:
        cls.from_ext(ext)
    assert err.value.field == wire
    assert wire in str(err.value)


@pytest.mark.parametrize("cls", ALL_DECLARATIVE, ids=lambda c: c.__name__)
def test_declarative_headers_round_trip(cls: type[h.ExtHeader]) -> None:
    ext = _full_ext(cls)
    value = cls.from_ext(ext)
    assert value.to_ext() == ext
    assert type(value).from_ext(value.to_ext()) == value


def test_registry_has_every_required_code() -> None:
    codes = {
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
        RequestCode.CONSUMER_SEND_MSG_BACK,
        RequestCode.END_TRANSACTION,
        RequestCode.CHECK_TRANSACTION_STATE,
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        RequestCode.QUERY_MESSAGE,
        RequestCode.VIEW_MESSAGE_BY_ID,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.GET_TOPIC_STATS_INFO,
        RequestCode.GET_CONSUME_STATS,
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.GET_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.GET_KVLIST_BY_NAMESPACE,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.QUERY_DATA_VERSION,
        RequestCode.GET_TOPICS_BY_CLUSTER,
    }
    assert codes <= set(h.REQUEST_HEADERS)


@pytest.mark.parametrize(
    ("cls", "ext"),
    [
        (h.UnregisterClientRequestHeader, {"clientID": "c1", "producerGroup": "pg"}),
        (h.GetConsumerRunningInfoRequestHeader, {"consumerGroup": "g", "clientId": "c1"}),
        (
            h.ResetOffsetRequestHeader,
            {"topic": "t", "group": "g", "timestamp": "5", "isForce": "true"},
        ),
        (
            h.QueryMessageResponseHeader,
            {"indexLastUpdateTimestamp": "1", "indexLastUpdatePhyoffset": "2"},
        ),
        (
            h.RegisterBrokerRequestHeader,
            {
                "brokerName": "b",
                "brokerAddr": "1.2.3.4:10911",
                "clusterName": "c",
                "haServerAddr": "1.2.3.4:10912",
                "brokerId": "0",
                "compressed": "true",
                "bodyCrc32": "-12345",
            },
        ),
        (
            h.EndTransactionRequestHeader,
            {
                "producerGroup": "pg",
                "tranStateTableOffset": "3",
                "commitLogOffset": "4096",
                "commitOrRollback": "8",
                "msgId": "ID",
                "fromTransactionCheck": "true",
            },
        ),
    ],
)
def test_exact_rocketmq_wire_names(cls: type[h.ExtHeader], ext: dict[str, str]) -> None:
    # A wrong wire name would make from_ext miss a required field or drop a value.
    value = cls.from_ext(ext)
    assert ext.items() <= value.to_ext().items()


def test_declarative_parsing_rules() -> None:
    value = h.GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": "12", "lo": "true"})
    assert value == h.GetMaxOffsetRequestHeader("T", 12, True)
    assert (
        h.GetMaxOffsetRequestHeader.from_ext(
            {"topic": "T", "queueId": "1", "committed": "FALSE"}
        ).committed
        is False
    )
    with pytest.raises(HeaderFieldError) as err:
        h.GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": "1", "committed": "yes"})
    assert err.value.field == "committed"
    with pytest.raises(HeaderFieldError) as err:
        h.GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": "x1"})
    assert err.value.field == "queueId"
    # an optional number sent empty (as C++ does for unused fields) takes its default
    back = h.ConsumerSendMsgBackRequestHeader.from_ext(
        {"offset": "1", "group": "g", "delayLevel": "0", "maxReconsumeTimes": ""}
    )
    assert back.max_reconsume_times is None and back.unit_mode is False


def test_headers_survive_a_frame_round_trip() -> None:
    hdr = h.QueryDataVersionRequestHeader("b", "1.2.3.4:10911", "c", 0)
    cmd = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, hdr.to_ext())
    (back,) = FrameDecoder().feed(encode_bytes(cmd))
    assert h.REQUEST_HEADERS[back.code].from_ext(back.ext_fields) == hdr
    assert dataclasses.is_dataclass(hdr)
