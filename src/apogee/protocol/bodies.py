"""JSON (and one zlib) request/response bodies <-> model values.

Owns: the wire shapes of TopicRouteData, ClusterInfo, TopicList, KVTable,
DataVersion, RegisterBrokerBody / TopicConfigSerializeWrapper (plain JSON and
compressed), SubscriptionGroupConfig and its wrapper, HeartbeatData (Java and
C++ forms), CheckClientRequestBody, LockBatch request/response,
GetConsumerListByGroupResponseBody and MessageQueue-keyed tables.

Output is standard JSON that Java (fastjson) and C++ (jsoncpp) both accept:
map keys quoted, object keys in sorted order like fastjson's MapSortField,
broker ids in numeric order. Input is tolerant: fastjson's bare integer and
object map keys, enums by name or ordinal, numbers sent as strings, and
missing collections (the C++ client omits empty arrays) all parse.
Malformed bodies raise ProtocolError naming the bad field.

Compressed RegisterBrokerBody (``compressed=true``), a zlib stream of::

    int32 n, n bytes DataVersion JSON
    int32 topicCount
    topicCount x (int32 n, n bytes "<name> <read> <write> <perm> <filterType>")
    int32 n, n bytes filterServerList JSON array
    [5.x brokers only: topic-queue mapping entries -- ignored on input]
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

import orjson

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
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.route import BrokerData, ClusterInfo, DataVersion, QueueData, TopicRouteData
from apogee.model.subscription import EXPRESSION_TAG, SUB_ALL, SubscriptionData
from apogee.model.topic import MULTI_TAG, SINGLE_TAG, TopicConfig
from apogee.protocol import tolerant_json

E = TypeVar("E", bound=IntEnum)
_I32 = struct.Struct(">i")
_MISSING: Any = object()


# -- tolerant field access --------------------------------------------------


def _load_object(data: bytes | bytearray | memoryview | str, what: str) -> dict[str, Any]:
    obj = tolerant_json.loads(data)
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} body is not a JSON object")
    return obj


def _get(obj: Any, key: str, default: Any = _MISSING) -> Any:
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a JSON object holding {key!r}")
    value = obj.get(key)
    if value is None:
        if default is _MISSING:
            raise ProtocolError(f"body field {key!r} is missing")
        return default
    return value


def _str(obj: Any, key: str, default: Any = _MISSING) -> str:
    value = _get(obj, key, default)
    if not isinstance(value, str):
        raise ProtocolError(f"body field {key!r} is not a string: {value!r}")
    return value


def _int(obj: Any, key: str, default: Any = _MISSING) -> int:
    value = _get(obj, key, default)
    if isinstance(value, bool):
        raise ProtocolError(f"body field {key!r} is not an integer: {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(value)  # C++ sends subVersion as a string
    except (TypeError, ValueError):
        raise ProtocolError(f"body field {key!r} is not an integer: {value!r}") from None


def _bool(obj: Any, key: str, default: bool = False) -> bool:
    value = _get(obj, key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ProtocolError(f"body field {key!r} is not a boolean: {value!r}")


def _list(obj: Any, key: str) -> list[Any]:
    value = _get(obj, key, [])
    if not isinstance(value, list):
        raise ProtocolError(f"body field {key!r} is not an array")
    return value


def _dict(obj: Any, key: str) -> dict[str, Any]:
    value = _get(obj, key, {})
    if not isinstance(value, dict):
        raise ProtocolError(f"body field {key!r} is not an object")
    return value


def _enum(enum: type[E], obj: Any, key: str, default: E) -> E:
    value = _get(obj, key, default)
    if isinstance(value, enum):
        return value
    try:
        if isinstance(value, str) and not value.lstrip("-").isdigit():
            return enum[value]
        return enum(int(value))
    except (KeyError, ValueError, TypeError):
        raise ProtocolError(f"body field {key!r} is not a {enum.__name__}: {value!r}") from None


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


# -- route data -------------------------------------------------------------


def queue_data_to_json(q: QueueData) -> dict[str, Any]:
    return {
        "brokerName": q.broker_name,
        "perm": q.perm,
        "readQueueNums": q.read_queue_nums,
        "topicSysFlag": q.topic_sys_flag,
        "writeQueueNums": q.write_queue_nums,
    }


def queue_data_from_json(obj: Any) -> QueueData:
    return QueueData(
        broker_name=_str(obj, "brokerName"),
        read_queue_nums=_int(obj, "readQueueNums"),
        write_queue_nums=_int(obj, "writeQueueNums"),
        perm=_int(obj, "perm"),
        topic_sys_flag=_int(obj, "topicSysFlag", 0),
    )


def broker_data_to_json(b: BrokerData) -> dict[str, Any]:
    return {
        "brokerAddrs": {str(bid): b.broker_addrs[bid] for bid in sorted(b.broker_addrs)},
        "brokerName": b.broker_name,
        "cluster": b.cluster,
    }


def broker_data_from_json(obj: Any) -> BrokerData:
    addrs: dict[int, str] = {}
    for key, addr in _dict(obj, "brokerAddrs").items():
        try:
            bid = int(key)
        except ValueError:
            raise ProtocolError(f"broker id {key!r} in brokerAddrs is not an integer") from None
        if not isinstance(addr, str):
            raise ProtocolError(f"address of broker id {bid} is not a string")
        addrs[bid] = addr
    return BrokerData(
        cluster=_str(obj, "cluster", ""),
        broker_name=_str(obj, "brokerName"),
        broker_addrs=addrs,
    )


def encode_topic_route(route: TopicRouteData) -> bytes:
    obj: dict[str, Any] = {
        "brokerDatas": [broker_data_to_json(b) for b in route.broker_datas],
        "filterServerTable": {
            k: list(route.filter_server_table[k]) for k in sorted(route.filter_server_table)
        },
    }
    if route.order_topic_conf is not None:
        obj["orderTopicConf"] = route.order_topic_conf
    obj["queueDatas"] = [queue_data_to_json(q) for q in route.queue_datas]
    return _dumps(obj)


def decode_topic_route(data: bytes | bytearray | memoryview | str) -> TopicRouteData:
    obj = _load_object(data, "TopicRouteData")
    filters = {str(k): [str(a) for a in v] for k, v in _dict(obj, "filterServerTable").items()}
    return TopicRouteData(
        queue_datas=tuple(queue_data_from_json(q) for q in _list(obj, "queueDatas")),
        broker_datas=tuple(broker_data_from_json(b) for b in _list(obj, "brokerDatas")),
        filter_server_table=filters,
        order_topic_conf=_get(obj, "orderTopicConf", None),
    )


def encode_cluster_info(info: ClusterInfo) -> bytes:
    table = info.broker_addr_table
    clusters = info.cluster_addr_table
    return _dumps(
        {
            "brokerAddrTable": {name: broker_data_to_json(table[name]) for name in sorted(table)},
            "clusterAddrTable": {c: sorted(clusters[c]) for c in sorted(clusters)},
        }
    )


def decode_cluster_info(data: bytes | bytearray | memoryview | str) -> ClusterInfo:
    obj = _load_object(data, "ClusterInfo")
    brokers = {name: broker_data_from_json(b) for name, b in _dict(obj, "brokerAddrTable").items()}
    clusters = {c: [str(n) for n in names] for c, names in _dict(obj, "clusterAddrTable").items()}
    return ClusterInfo(broker_addr_table=brokers, cluster_addr_table=clusters)


# -- small bodies -------------------------------------------------------------


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    obj: dict[str, Any] = {}
    if broker_addr is not None:
        obj["brokerAddr"] = broker_addr
    obj["topicList"] = sorted(topics)
    return _dumps(obj)


def decode_topic_list(data: bytes | bytearray | memoryview | str) -> list[str]:
    return [str(t) for t in _list(_load_object(data, "TopicList"), "topicList")]


def encode_kv_table(table: dict[str, str]) -> bytes:
    return _dumps({"table": {k: table[k] for k in sorted(table)}})


def decode_kv_table(data: bytes | bytearray | memoryview | str) -> dict[str, str]:
    table = _dict(_load_object(data, "KVTable"), "table")
    return {str(k): v if isinstance(v, str) else str(v) for k, v in table.items()}


def data_version_to_json(v: DataVersion) -> dict[str, Any]:
    return {"counter": v.counter, "stateVersion": v.state_version, "timestamp": v.timestamp}


def data_version_from_json(obj: Any) -> DataVersion:
    return DataVersion(
        timestamp=_int(obj, "timestamp", 0),
        counter=_int(obj, "counter", 0),
        state_version=_int(obj, "stateVersion", 0),
    )


def encode_data_version(v: DataVersion) -> bytes:
    return _dumps(data_version_to_json(v))


def decode_data_version(data: bytes | bytearray | memoryview | str) -> DataVersion:
    return data_version_from_json(_load_object(data, "DataVersion"))


def encode_consumer_id_list(client_ids: Iterable[str]) -> bytes:
    return _dumps({"consumerIdList": list(client_ids)})


def decode_consumer_id_list(data: bytes | bytearray | memoryview | str) -> list[str]:
    obj = _load_object(data, "GetConsumerListByGroupResponseBody")
    return [str(c) for c in _list(obj, "consumerIdList")]


# -- topic configs and broker registration ----------------------------------


@dataclass(frozen=True, slots=True)
class TopicConfigWrapper:
    """TopicConfigSerializeWrapper: a broker's topics and their version."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    wrapper: TopicConfigWrapper = field(default_factory=TopicConfigWrapper)
    filter_server_list: tuple[str, ...] = ()


def topic_config_to_json(t: TopicConfig) -> dict[str, Any]:
    return {
        "order": t.order,
        "perm": t.perm,
        "readQueueNums": t.read_queue_nums,
        "topicFilterType": t.topic_filter_type,
        "topicName": t.topic_name,
        "topicSysFlag": t.topic_sys_flag,
        "writeQueueNums": t.write_queue_nums,
    }


def topic_config_from_json(obj: Any, name: str | None = None) -> TopicConfig:
    filter_type = _str(obj, "topicFilterType", SINGLE_TAG)
    if filter_type not in (SINGLE_TAG, MULTI_TAG):
        raise ProtocolError(f"topicFilterType {filter_type!r} is neither SINGLE_TAG nor MULTI_TAG")
    return TopicConfig(
        topic_name=_str(obj, "topicName", name) if name is not None else _str(obj, "topicName"),
        read_queue_nums=_int(obj, "readQueueNums", 16),
        write_queue_nums=_int(obj, "writeQueueNums", 16),
        perm=_int(obj, "perm", 6),
        topic_filter_type=filter_type,
        topic_sys_flag=_int(obj, "topicSysFlag", 0),
        order=_bool(obj, "order", False),
    )


def wrapper_to_json(w: TopicConfigWrapper) -> dict[str, Any]:
    table = w.topic_config_table
    return {
        "dataVersion": data_version_to_json(w.data_version),
        "topicConfigTable": {name: topic_config_to_json(table[name]) for name in sorted(table)},
    }


def wrapper_from_json(obj: Any) -> TopicConfigWrapper:
    table = {
        name: topic_config_from_json(cfg, name)
        for name, cfg in _dict(obj, "topicConfigTable").items()
    }
    return TopicConfigWrapper(table, data_version_from_json(_get(obj, "dataVersion", {})))


def encode_topic_config_wrapper(w: TopicConfigWrapper) -> bytes:
    """Body of GET_ALL_TOPIC_CONFIG (and the plain registration's inner part)."""
    return _dumps(wrapper_to_json(w))


def decode_topic_config_wrapper(data: bytes | bytearray | memoryview | str) -> TopicConfigWrapper:
    return wrapper_from_json(_load_object(data, "TopicConfigSerializeWrapper"))


def encode_register_broker_body(body: RegisterBrokerBody, *, compressed: bool = False) -> bytes:
    if compressed:
        return _encode_register_compressed(body)
    return _dumps(
        {
            "filterServerList": list(body.filter_server_list),
            "topicConfigSerializeWrapper": wrapper_to_json(body.wrapper),
        }
    )


def decode_register_broker_body(data: bytes, *, compressed: bool = False) -> RegisterBrokerBody:
    if compressed:
        return _decode_register_compressed(data)
    obj = _load_object(data, "RegisterBrokerBody")
    return RegisterBrokerBody(
        wrapper_from_json(_get(obj, "topicConfigSerializeWrapper", {})),
        tuple(str(a) for a in _list(obj, "filterServerList")),
    )


def _encode_topic_config_text(t: TopicConfig) -> bytes:
    # 4.x TopicConfig.encode; 5.x readers accept it too (attributes are optional).
    return (
        f"{t.topic_name} {t.read_queue_nums} {t.write_queue_nums} {t.perm} {t.topic_filter_type}"
    ).encode()


def _decode_topic_config_text(text: str) -> TopicConfig:
    parts = text.split(" ")
    if len(parts) < 5:
        raise ProtocolError(f"compressed topic config {text[:60]!r} has fewer than 5 fields")
    name, read, write, perm, filter_type = parts[:5]
    if filter_type not in (SINGLE_TAG, MULTI_TAG):
        raise ProtocolError(f"compressed topic config {name!r}: bad filter type {filter_type!r}")
    try:
        return TopicConfig(name, int(read), int(write), int(perm), filter_type)
    except ValueError:
        raise ProtocolError(f"compressed topic config {name!r} has a non-integer field") from None


def _encode_register_compressed(body: RegisterBrokerBody) -> bytes:
    parts: list[bytes] = []

    def chunk(payload: bytes) -> None:
        parts.append(_I32.pack(len(payload)))
        parts.append(payload)

    chunk(encode_data_version(body.wrapper.data_version))
    table = body.wrapper.topic_config_table
    parts.append(_I32.pack(len(table)))
    for name in sorted(table):
        chunk(_encode_topic_config_text(table[name]))
    chunk(_dumps(list(body.filter_server_list)))
    return zlib.compress(b"".join(parts), 9)  # Deflater.BEST_COMPRESSION


def _decode_register_compressed(data: bytes) -> RegisterBrokerBody:
    try:
        raw = zlib.decompress(data)
    except zlib.error as exc:
        raise ProtocolError(f"compressed RegisterBrokerBody does not inflate: {exc}") from exc
    pos = 0

    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(raw):
            raise ProtocolError(f"compressed RegisterBrokerBody ends inside {what}")
        piece = raw[pos : pos + n]
        pos += n
        return piece

    def length(what: str) -> int:
        (n,) = _I32.unpack(take(4, f"the length of {what}"))
        return int(n)

    version = decode_data_version(take(length("dataVersion"), "dataVersion"))
    table: dict[str, TopicConfig] = {}
    for _ in range(length("topic count")):
        text = take(length("a topic config"), "a topic config").decode()
        cfg = _decode_topic_config_text(text)
        table[cfg.topic_name] = cfg
    servers = tolerant_json.loads(take(length("filterServerList"), "filterServerList"))
    if not isinstance(servers, list):
        raise ProtocolError("compressed RegisterBrokerBody filterServerList is not an array")
    return RegisterBrokerBody(TopicConfigWrapper(table, version), tuple(str(s) for s in servers))


# -- subscription groups ------------------------------------------------------


def subscription_group_to_json(g: SubscriptionGroupConfig) -> dict[str, Any]:
    """Every field, 5.x ones included (a 4.x fastjson reader skips what it does not know)."""
    return {
        "attributes": {k: g.attributes[k] for k in sorted(g.attributes)},
        "brokerId": g.broker_id,
        "consumeBroadcastEnable": g.consume_broadcast_enable,
        "consumeEnable": g.consume_enable,
        "consumeFromMinEnable": g.consume_from_min_enable,
        "consumeMessageOrderly": g.consume_message_orderly,
        "consumeTimeoutMinute": g.consume_timeout_minute,
        "groupName": g.group_name,
        "groupSysFlag": g.group_sys_flag,
        "notifyConsumerIdsChangedEnable": g.notify_consumer_ids_changed_enable,
        "retryMaxTimes": g.retry_max_times,
        "retryQueueNums": g.retry_queue_nums,
        "whichBrokerWhenConsumeSlowly": g.which_broker_when_consume_slowly,
    }


def subscription_group_from_json(obj: Any, name: str | None = None) -> SubscriptionGroupConfig:
    """Missing fields take RocketMQ's defaults; 5.x's retry policy and
    subscription set are not modelled and are skipped."""
    default = SubscriptionGroupConfig("")
    return SubscriptionGroupConfig(
        group_name=_str(obj, "groupName", name) if name is not None else _str(obj, "groupName"),
        consume_enable=_bool(obj, "consumeEnable", default.consume_enable),
        consume_from_min_enable=_bool(obj, "consumeFromMinEnable", default.consume_from_min_enable),
        consume_broadcast_enable=_bool(
            obj, "consumeBroadcastEnable", default.consume_broadcast_enable
        ),
        retry_queue_nums=_int(obj, "retryQueueNums", default.retry_queue_nums),
        retry_max_times=_int(obj, "retryMaxTimes", default.retry_max_times),
        broker_id=_int(obj, "brokerId", default.broker_id),
        which_broker_when_consume_slowly=_int(
            obj, "whichBrokerWhenConsumeSlowly", default.which_broker_when_consume_slowly
        ),
        notify_consumer_ids_changed_enable=_bool(
            obj, "notifyConsumerIdsChangedEnable", default.notify_consumer_ids_changed_enable
        ),
        consume_message_orderly=_bool(
            obj, "consumeMessageOrderly", default.consume_message_orderly
        ),
        group_sys_flag=_int(obj, "groupSysFlag", default.group_sys_flag),
        consume_timeout_minute=_int(obj, "consumeTimeoutMinute", default.consume_timeout_minute),
        attributes={str(k): str(v) for k, v in _dict(obj, "attributes").items()},
    )


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """A broker's subscription groups and their version (subscriptionGroup.json)."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


def encode_subscription_group_wrapper(w: SubscriptionGroupWrapper) -> bytes:
    """Body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG, and the broker's file."""
    table = w.subscription_group_table
    return _dumps(
        {
            "dataVersion": data_version_to_json(w.data_version),
            "subscriptionGroupTable": {
                name: subscription_group_to_json(table[name]) for name in sorted(table)
            },
        }
    )


def decode_subscription_group_wrapper(
    data: bytes | bytearray | memoryview | str,
) -> SubscriptionGroupWrapper:
    obj = _load_object(data, "SubscriptionGroupWrapper")
    table = {
        name: subscription_group_from_json(cfg, name)
        for name, cfg in _dict(obj, "subscriptionGroupTable").items()
    }
    return SubscriptionGroupWrapper(table, data_version_from_json(_get(obj, "dataVersion", {})))


# -- heartbeat ----------------------------------------------------------------


def subscription_to_json(s: SubscriptionData) -> dict[str, Any]:
    return {
        "classFilterMode": s.class_filter_mode,
        "codeSet": list(s.code_set),
        "expressionType": s.expression_type,
        "subString": s.sub_string,
        "subVersion": s.sub_version,
        "tagsSet": list(s.tags_set),
        "topic": s.topic,
    }


def subscription_from_json(obj: Any) -> SubscriptionData:
    codes = []
    for code in _list(obj, "codeSet"):
        if isinstance(code, bool) or not isinstance(code, int | str):
            raise ProtocolError(f"codeSet holds a non-integer: {code!r}")
        codes.append(int(code))
    return SubscriptionData(
        topic=_str(obj, "topic"),
        sub_string=_str(obj, "subString", SUB_ALL),
        tags_set=tuple(str(t) for t in _list(obj, "tagsSet")),
        code_set=tuple(codes),
        sub_version=_int(obj, "subVersion", 0),
        expression_type=_str(obj, "expressionType", EXPRESSION_TAG),
        class_filter_mode=_bool(obj, "classFilterMode", False),
    )


def consumer_data_to_json(c: ConsumerData) -> dict[str, Any]:
    return {
        "consumeFromWhere": c.consume_from_where.name,
        "consumeType": c.consume_type.name,
        "groupName": c.group_name,
        "messageModel": c.message_model.name,
        "subscriptionDataSet": [subscription_to_json(s) for s in c.subscriptions],
        "unitMode": c.unit_mode,
    }


def consumer_data_from_json(obj: Any) -> ConsumerData:
    return ConsumerData(
        group_name=_str(obj, "groupName"),
        consume_type=_enum(ConsumeType, obj, "consumeType", ConsumeType.CONSUME_PASSIVELY),
        message_model=_enum(MessageModel, obj, "messageModel", MessageModel.CLUSTERING),
        consume_from_where=_enum(
            ConsumeFromWhere, obj, "consumeFromWhere", ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        ),
        subscriptions=tuple(subscription_from_json(s) for s in _list(obj, "subscriptionDataSet")),
        unit_mode=_bool(obj, "unitMode", False),
    )


def encode_heartbeat(hb: HeartbeatData) -> bytes:
    """The Java form: enum names, numbers as numbers, every field present."""
    return _dumps(
        {
            "clientID": hb.client_id,
            "consumerDataSet": [consumer_data_to_json(c) for c in hb.consumers],
            "producerDataSet": [{"groupName": p.group_name} for p in hb.producers],
        }
    )


def decode_heartbeat(data: bytes | bytearray | memoryview | str) -> HeartbeatData:
    """Either form: Java's enum names or C++'s ordinals, string subVersion, gaps."""
    obj = _load_object(data, "HeartbeatData")
    return HeartbeatData(
        client_id=_str(obj, "clientID"),
        producers=tuple(ProducerData(_str(p, "groupName")) for p in _list(obj, "producerDataSet")),
        consumers=tuple(consumer_data_from_json(c) for c in _list(obj, "consumerDataSet")),
    )


@dataclass(frozen=True, slots=True)
class CheckClientBody:
    """CHECK_CLIENT_CONFIG (Java CheckClientRequestBody): may the broker filter by this?"""

    client_id: str
    group: str
    subscription: SubscriptionData | None


def encode_check_client_body(
    client_id: str, group: str, subscription: SubscriptionData | None
) -> bytes:
    obj: dict[str, Any] = {"clientId": client_id, "group": group}
    if subscription is not None:
        obj["subscriptionData"] = subscription_to_json(subscription)
    return _dumps(obj)


def decode_check_client_body(data: bytes | bytearray | memoryview | str) -> CheckClientBody:
    obj = _load_object(data, "CheckClientRequestBody")
    sub = _get(obj, "subscriptionData", None)
    return CheckClientBody(
        client_id=_str(obj, "clientId", ""),
        group=_str(obj, "group", ""),
        subscription=None if sub is None else subscription_from_json(sub),
    )


# -- message queues and locks -------------------------------------------------


def mq_to_json(mq: MessageQueue) -> dict[str, Any]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


def mq_from_json(obj: Any) -> MessageQueue:
    return MessageQueue(_str(obj, "topic"), _str(obj, "brokerName"), _int(obj, "queueId"))


def mq_from_key(key: str) -> MessageQueue:
    """A MessageQueue map key, as the tolerant reader hands it over (JSON text)."""
    try:
        obj = orjson.loads(key)
    except orjson.JSONDecodeError:
        raise ProtocolError(f"map key {key[:80]!r} is not a MessageQueue object") from None
    return mq_from_json(obj)


def decode_mq_table(obj: Any, key: str = "offsetTable") -> dict[MessageQueue, Any]:
    """A ``Map<MessageQueue, V>`` field (fastjson writes object keys bare)."""
    return {mq_from_key(k): v for k, v in _dict(obj, key).items()}


def decode_mq_offset_table(data: bytes | bytearray | memoryview | str) -> dict[MessageQueue, int]:
    """ResetOffsetBody / local offsets.json: ``{"offsetTable":{<mq>:<long>}}``."""
    table = decode_mq_table(_load_object(data, "offset table"))
    out: dict[MessageQueue, int] = {}
    for mq, offset in table.items():
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ProtocolError(f"offset of {mq} is not an integer: {offset!r}")
        out[mq] = offset
    return out


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ and UNLOCK_BATCH_MQ request body."""

    consumer_group: str
    client_id: str
    mq_set: tuple[MessageQueue, ...] = ()
    only_this_broker: bool = False


def encode_lock_batch_request(body: LockBatchRequestBody) -> bytes:
    return _dumps(
        {
            "clientId": body.client_id,
            "consumerGroup": body.consumer_group,
            "mqSet": [mq_to_json(mq) for mq in sorted(body.mq_set)],
            "onlyThisBroker": body.only_this_broker,
        }
    )


def decode_lock_batch_request(data: bytes | bytearray | memoryview | str) -> LockBatchRequestBody:
    obj = _load_object(data, "LockBatchRequestBody")
    return LockBatchRequestBody(
        consumer_group=_str(obj, "consumerGroup"),
        client_id=_str(obj, "clientId"),
        mq_set=tuple(mq_from_json(mq) for mq in _list(obj, "mqSet")),
        only_this_broker=_bool(obj, "onlyThisBroker", False),
    )


def encode_lock_batch_response(locked: Iterable[MessageQueue]) -> bytes:
    return _dumps({"lockOKMQSet": [mq_to_json(mq) for mq in sorted(locked)]})


def decode_lock_batch_response(
    data: bytes | bytearray | memoryview | str,
) -> tuple[MessageQueue, ...]:
    obj = _load_object(data, "LockBatchResponseBody")
    return tuple(mq_from_json(mq) for mq in _list(obj, "lockOKMQSet"))
