"""JSON bodies of the operations requests: who consumes a topic, traffic windows, producers.

Owns: GroupList (QUERY_TOPIC_CONSUME_BY_WHO), BrokerStatsData
(VIEW_BROKER_STATS_DATA) and ProducerTableInfo (GET_ALL_PRODUCER_INFO), in
RocketMQ's field names, to and from model-free value types. Same rules as
``bodies``: sorted standard JSON out, tolerant in, ProtocolError naming the
bad field.

Shapes::

    GroupList          {"groupList": ["g1", "g2"]}
    BrokerStatsData    {"statsMinute": {"sum": 60, "tps": 1.0, "avgpt": 0.0},
                        "statsHour": {...}, "statsDay": {...}}
    ProducerTableInfo  {"data": {"<group>": [{"clientId": "...", "remoteIP": "h:p",
                        "language": "JAVA", "version": 413,
                        "lastUpdateTimestamp": 1700000000000}]}}
    ResetOffsetBodyForC {"offsetTable": [{"brokerName": "b", "offset": 5, "queueId": 0,
                        "topic": "t"}]}   (the C++ client's form of ResetOffsetBody)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from apogee.errors import ProtocolError
from apogee.model.client import MessageQueue
from apogee.protocol.bodies import _dict, _int, _list, _load_object, _str

Data = bytes | bytearray | memoryview | str


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def encode_offset_list_for_c(table: Mapping[MessageQueue, int]) -> bytes:
    return _dumps(
        {
            "offsetTable": [
                {"brokerName": mq.broker_name, "offset": offset, "queueId": mq.queue_id,
                 "topic": mq.topic}
                for mq, offset in sorted(table.items())
            ]
        }
    )  # fmt: skip


def encode_group_list(groups: Iterable[str]) -> bytes:
    return _dumps({"groupList": sorted(set(groups))})


def decode_group_list(data: Data) -> list[str]:
    groups = _list(_load_object(data, "GroupList"), "groupList")
    if not all(isinstance(g, str) for g in groups):
        raise ProtocolError("body field 'groupList' holds a non-string")
    return list(groups)


@dataclass(frozen=True, slots=True)
class StatsItem:
    """Traffic over one window: the total and its rate."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    minute: StatsItem
    hour: StatsItem
    day: StatsItem


def _item_json(item: StatsItem) -> dict[str, Any]:
    return {"sum": item.sum, "tps": item.tps, "avgpt": item.avgpt}


def _item(obj: Any, key: str) -> StatsItem:
    value = _dict(obj, key)
    try:
        return StatsItem(
            int(value.get("sum", 0)), float(value.get("tps", 0.0)), float(value.get("avgpt", 0.0))
        )
    except (TypeError, ValueError):
        raise ProtocolError(f"body field {key!r} has a non-number figure") from None


def encode_broker_stats_data(data: BrokerStatsData) -> bytes:
    return _dumps(
        {
            "statsMinute": _item_json(data.minute),
            "statsHour": _item_json(data.hour),
            "statsDay": _item_json(data.day),
        }
    )


def decode_broker_stats_data(data: Data) -> BrokerStatsData:
    obj = _load_object(data, "BrokerStatsData")
    return BrokerStatsData(
        _item(obj, "statsMinute"), _item(obj, "statsHour"), _item(obj, "statsDay")
    )


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int


def encode_producer_table(table: Mapping[str, Iterable[ProducerInfo]]) -> bytes:
    return _dumps(
        {
            "data": {
                group: [
                    {
                        "clientId": p.client_id,
                        "remoteIP": p.remote_ip,
                        "language": p.language,
                        "version": p.version,
                        "lastUpdateTimestamp": p.last_update_timestamp,
                    }
                    for p in producers
                ]
                for group, producers in sorted(table.items())
            }
        }
    )


def decode_producer_table(data: Data) -> dict[str, list[ProducerInfo]]:
    obj = _dict(_load_object(data, "ProducerTableInfo"), "data")
    out: dict[str, list[ProducerInfo]] = {}
    for group, producers in obj.items():
        if not isinstance(producers, list):
            raise ProtocolError(f"producers of {group!r} are not a list")
        out[group] = [
            ProducerInfo(
                _str(p, "clientId"),
                _str(p, "remoteIP", ""),
                str(p.get("language", "")) if isinstance(p, dict) else "",
                _int(p, "version", 0),
                _int(p, "lastUpdateTimestamp", 0),
            )
            for p in producers
        ]
    return out
