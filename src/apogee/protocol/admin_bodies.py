"""JSON bodies of the admin requests <-> model values.

Owns: the wire shapes of TopicStatsTable, ConsumeStats, ConsumerConnection
and ProducerConnection, and the UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body (its
field mapping is ``bodies.subscription_group_to_json``, shared with the
broker's subscriptionGroup.json; the broker runtime info is a plain KVTable,
``bodies.encode_kv_table``).

Same rules as ``bodies``: standard JSON out with sorted keys, tolerant in,
ProtocolError naming the bad field. ``Map<MessageQueue, V>`` fields are the
tricky part: fastjson writes the MessageQueue object itself as the map key,
which is not JSON. We write the key as a *string* holding the queue's JSON
text (``"{\\"brokerName\\":\\"b\\",\\"queueId\\":0,\\"topic\\":\\"t\\"}"``): a strict
parser accepts it, and fastjson (1.2.66 and later, RocketMQ 4.9 ships 1.2.69)
parses a string key of a bean-typed map as that bean's JSON. On input both
that form and fastjson's bare object keys are accepted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

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
from apogee.protocol.bodies import (
    _bool,
    _dict,
    _enum,
    _get,
    _int,
    _list,
    _load_object,
    _str,
    decode_mq_table,
    mq_to_json,
    subscription_from_json,
    subscription_group_from_json,
    subscription_group_to_json,
    subscription_to_json,
)

Data = bytes | bytearray | memoryview | str


def mq_key(mq: MessageQueue) -> str:
    """A MessageQueue as a standard-JSON map key (see the module docstring)."""
    return orjson.dumps(mq_to_json(mq)).decode()


def encode_mq_offset_table(table: dict[MessageQueue, int]) -> bytes:
    """``{"offsetTable":{<mq>:<long>}}`` (a client's offsets.json, ResetOffsetBody), indented.

    ``bodies.decode_mq_offset_table`` reads it back, and fastjson's form too.
    """
    body = {"offsetTable": {mq_key(mq): offset for mq, offset in sorted(table.items())}}
    return orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def _float(obj: Any, key: str, default: float = 0.0) -> float:
    value = _get(obj, key, default)
    if isinstance(value, bool):
        raise ProtocolError(f"body field {key!r} is not a number: {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ProtocolError(f"body field {key!r} is not a number: {value!r}") from None


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


# -- TopicStatsTable ------------------------------------------------------------


def encode_topic_stats_table(table: TopicStatsTable) -> bytes:
    offsets = table.offset_table
    return _dumps(
        {
            "offsetTable": {
                mq_key(mq): {
                    "lastUpdateTimestamp": offsets[mq].last_update_timestamp,
                    "maxOffset": offsets[mq].max_offset,
                    "minOffset": offsets[mq].min_offset,
                }
                for mq in sorted(offsets)
            }
        }
    )


def decode_topic_stats_table(data: Data) -> TopicStatsTable:
    obj = _load_object(data, "TopicStatsTable")
    return TopicStatsTable(
        {
            mq: TopicOffset(
                min_offset=_int(value, "minOffset", 0),
                max_offset=_int(value, "maxOffset", 0),
                last_update_timestamp=_int(value, "lastUpdateTimestamp", 0),
            )
            for mq, value in decode_mq_table(obj).items()
        }
    )


# -- ConsumeStats ---------------------------------------------------------------


def encode_consume_stats(stats: ConsumeStats) -> bytes:
    offsets = stats.offset_table
    return _dumps(
        {
            "consumeTps": float(stats.consume_tps),
            "offsetTable": {
                mq_key(mq): {
                    "brokerOffset": offsets[mq].broker_offset,
                    "consumerOffset": offsets[mq].consumer_offset,
                    "lastTimestamp": offsets[mq].last_timestamp,
                }
                for mq in sorted(offsets)
            },
        }
    )


def decode_consume_stats(data: Data) -> ConsumeStats:
    obj = _load_object(data, "ConsumeStats")
    table = {
        mq: OffsetWrapper(
            broker_offset=_int(value, "brokerOffset", 0),
            consumer_offset=_int(value, "consumerOffset", 0),
            last_timestamp=_int(value, "lastTimestamp", 0),
        )
        for mq, value in decode_mq_table(obj).items()
    }
    return ConsumeStats(table, _float(obj, "consumeTps"))


# -- ConsumerConnection -----------------------------------------------------------


def connection_to_json(c: Connection) -> dict[str, Any]:
    return {
        "clientAddr": c.client_addr,
        "clientId": c.client_id,
        "language": c.language.name,
        "version": c.version,
    }


def connection_from_json(obj: Any) -> Connection:
    return Connection(
        client_id=_str(obj, "clientId"),
        client_addr=_str(obj, "clientAddr", ""),
        language=_enum(LanguageCode, obj, "language", LanguageCode.OTHER),
        version=_int(obj, "version", 0),
    )


def encode_consumer_connection(cc: ConsumerConnection) -> bytes:
    obj: dict[str, Any] = {
        "connectionSet": [
            connection_to_json(c) for c in sorted(cc.connections, key=lambda c: c.client_id)
        ],
        "subscriptionTable": {
            topic: subscription_to_json(cc.subscription_table[topic])
            for topic in sorted(cc.subscription_table)
        },
    }
    # fastjson leaves null enums out; so do we.
    if cc.consume_type is not None:
        obj["consumeType"] = cc.consume_type.name
    if cc.message_model is not None:
        obj["messageModel"] = cc.message_model.name
    if cc.consume_from_where is not None:
        obj["consumeFromWhere"] = cc.consume_from_where.name
    return _dumps(obj)


def _opt_enum(enum: Any, obj: Any, key: str) -> Any:
    if _get(obj, key, None) is None:
        return None
    return _enum(enum, obj, key, None)


def decode_consumer_connection(data: Data) -> ConsumerConnection:
    obj = _load_object(data, "ConsumerConnection")
    return ConsumerConnection(
        connections=tuple(connection_from_json(c) for c in _list(obj, "connectionSet")),
        subscription_table={
            str(topic): subscription_from_json(sub)
            for topic, sub in _dict(obj, "subscriptionTable").items()
        },
        consume_type=_opt_enum(ConsumeType, obj, "consumeType"),
        message_model=_opt_enum(MessageModel, obj, "messageModel"),
        consume_from_where=_opt_enum(ConsumeFromWhere, obj, "consumeFromWhere"),
    )


# -- ProducerConnection -----------------------------------------------------------


def encode_producer_connection(connections: Iterable[Connection]) -> bytes:
    """Body of GET_PRODUCER_CONNECTION_LIST: ``{"connectionSet": [...]}``."""
    ordered = sorted(connections, key=lambda c: (c.client_id, c.client_addr))
    return _dumps({"connectionSet": [connection_to_json(c) for c in ordered]})


def decode_producer_connection(data: Data) -> tuple[Connection, ...]:
    obj = _load_object(data, "ProducerConnection")
    return tuple(connection_from_json(c) for c in _list(obj, "connectionSet"))


# -- SubscriptionGroupConfig ------------------------------------------------------


def encode_subscription_group(g: SubscriptionGroupConfig) -> bytes:
    """Body of UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (the field mapping is ``bodies``')."""
    return _dumps(subscription_group_to_json(g))


def decode_subscription_group(data: Data) -> SubscriptionGroupConfig:
    return subscription_group_from_json(_load_object(data, "SubscriptionGroupConfig"))


# -- HA status (GET_BROKER_HA_STATUS, RocketMQ 5.x HARuntimeInfo) -----------------------


def encode_ha_runtime_info(info: HARuntimeInfo) -> bytes:
    client = info.ha_client_runtime_info
    return _dumps(
        {
            "master": info.master,
            "masterCommitLogMaxOffset": info.master_commit_log_max_offset,
            "inSyncSlaveNums": info.in_sync_slave_nums,
            "haConnectionInfo": [
                {
                    "addr": c.addr,
                    "slaveAckOffset": c.slave_ack_offset,
                    "diff": c.diff,
                    "inSync": c.in_sync,
                    "transferredByteInSecond": c.transferred_byte_in_second,
                    "transferFromWhere": c.transfer_from_where,
                    "lagMillis": c.lag_ms,
                }
                for c in info.ha_connection_info
            ],
            "haClientRuntimeInfo": {
                "masterAddr": client.master_addr,
                "transferredByteInSecond": client.transferred_byte_in_second,
                "maxOffset": client.max_offset,
                "lastReadTimestamp": client.last_read_timestamp,
                "lastWriteTimestamp": client.last_write_timestamp,
                "masterFlushOffset": client.master_flush_offset,
                "activated": client.activated,
            },
        }
    )


def decode_ha_runtime_info(data: Data) -> HARuntimeInfo:
    obj = _load_object(data, "HARuntimeInfo")
    client = _dict(obj, "haClientRuntimeInfo")
    return HARuntimeInfo(
        master=_bool(obj, "master"),
        master_commit_log_max_offset=_int(obj, "masterCommitLogMaxOffset", 0),
        in_sync_slave_nums=_int(obj, "inSyncSlaveNums", 0),
        ha_connection_info=tuple(
            HAConnectionInfo(
                addr=_str(c, "addr", ""),
                slave_ack_offset=_int(c, "slaveAckOffset", -1),
                diff=_int(c, "diff", 0),
                in_sync=_bool(c, "inSync"),
                transferred_byte_in_second=_int(c, "transferredByteInSecond", 0),
                transfer_from_where=_int(c, "transferFromWhere", -1),
                lag_ms=_int(c, "lagMillis", 0),
            )
            for c in _list(obj, "haConnectionInfo")
        ),
        ha_client_runtime_info=HAClientInfo(
            master_addr=_str(client, "masterAddr", ""),
            transferred_byte_in_second=_int(client, "transferredByteInSecond", 0),
            max_offset=_int(client, "maxOffset", 0),
            last_read_timestamp=_int(client, "lastReadTimestamp", 0),
            last_write_timestamp=_int(client, "lastWriteTimestamp", 0),
            master_flush_offset=_int(client, "masterFlushOffset", 0),
            activated=_bool(client, "activated"),
        ),
    )
