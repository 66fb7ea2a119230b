"""Messages and routes as JSON documents and table rows for the admin commands.

Owns: the JSON field names of the admin commands' ``--json`` output (camelCase,
like RocketMQ's own JSON) and the message detail view.

Bodies are shown as UTF-8 text when they decode, else as base64 with
``"bodyEncoding": "base64"``, so JSON output never loses bytes.
"""

from __future__ import annotations

import base64
from typing import Any

from apogee.admin.cli._common import human_time, print_table, table
from apogee.model.message import MessageExt, properties_to_string
from apogee.model.route import TopicRouteData, perm_to_string


def host(hp: tuple[str, int]) -> str:
    return f"[{hp[0]}]:{hp[1]}" if ":" in hp[0] else f"{hp[0]}:{hp[1]}"


def body_fields(body: bytes) -> dict[str, str]:
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode(), "bodyEncoding": "base64"}


def message_to_json(m: MessageExt) -> dict[str, Any]:
    return {
        "msgId": m.client_msg_id,
        "offsetMsgId": m.msg_id,
        "topic": m.topic,
        "tags": m.tags,
        "keys": m.keys,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset,
        "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "bornHost": host(m.born_host),
        "storeHost": host(m.store_host),
        "sysFlag": m.sys_flag,
        "flag": m.flag,
        "bodyCRC": m.body_crc,
        "storeSize": m.store_size,
        "properties": dict(sorted(m.properties.items())),
        **body_fields(m.body),
    }


def print_message_detail(m: MessageExt) -> None:
    """One message, field by field (mqadmin queryMsgById's layout)."""
    t = table("Field", "Value")
    body = body_fields(m.body)
    rows = [
        ("OffsetID", m.msg_id),
        ("Unique Key", m.uniq_key or "-"),
        ("Topic", m.topic),
        ("Tags", m.tags or "-"),
        ("Keys", m.keys or "-"),
        ("Queue ID", str(m.queue_id)),
        ("Queue Offset", str(m.queue_offset)),
        ("CommitLog Offset", str(m.commit_log_offset)),
        ("Reconsume Times", str(m.reconsume_times)),
        ("Born Timestamp", human_time(m.born_timestamp)),
        ("Store Timestamp", human_time(m.store_timestamp)),
        ("Born Host", host(m.born_host)),
        ("Store Host", host(m.store_host)),
        ("System Flag", str(m.sys_flag)),
        (
            "Properties",
            properties_to_string(m.properties).replace("\x01", "=").replace("\x02", " "),
        ),
        ("Message Body" + (" (base64)" if "bodyEncoding" in body else ""), body["body"]),
    ]
    for field, value in rows:
        t.add_row(field, value)
    print_table(t)


def print_message_list(messages: list[MessageExt], title: str | None = None) -> None:
    t = table(
        "#Message ID", "#QID", "#Offset", "#Tags", "#Keys", "#Store Time", "#Body", title=title
    )
    for m in messages:
        text = body_fields(m.body)["body"]
        t.add_row(
            m.client_msg_id,
            str(m.queue_id),
            str(m.queue_offset),
            m.tags or "",
            m.keys or "",
            human_time(m.store_timestamp),
            text if len(text) <= 60 else text[:57] + "...",
        )
    print_table(t)


def route_to_json(route: TopicRouteData) -> dict[str, Any]:
    """The route in RocketMQ's own JSON shape (what mqadmin topicRoute prints)."""
    doc: dict[str, Any] = {
        "brokerDatas": [
            {
                "brokerAddrs": {str(i): b.broker_addrs[i] for i in sorted(b.broker_addrs)},
                "brokerName": b.broker_name,
                "cluster": b.cluster,
            }
            for b in route.broker_datas
        ],
        "queueDatas": [
            {
                "brokerName": q.broker_name,
                "perm": q.perm,
                "readQueueNums": q.read_queue_nums,
                "topicSysFlag": q.topic_sys_flag,
                "writeQueueNums": q.write_queue_nums,
            }
            for q in route.queue_datas
        ],
    }
    if route.order_topic_conf is not None:
        doc["orderTopicConf"] = route.order_topic_conf
    return doc


def print_route(topic: str, route: TopicRouteData) -> None:
    brokers = {b.broker_name: b for b in route.broker_datas}
    t = table(
        "#Cluster",
        "#Broker Name",
        "#BID",
        "#Addr",
        "#Read",
        "#Write",
        "#Perm",
        title=f"topic {topic}",
    )
    for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
        b = brokers.get(q.broker_name)
        addrs = sorted(b.broker_addrs.items()) if b else [(-1, "-")]
        for bid, addr in addrs:
            t.add_row(
                b.cluster if b else "-",
                q.broker_name,
                str(bid) if bid >= 0 else "-",
                addr,
                str(q.read_queue_nums),
                str(q.write_queue_nums),
                f"{perm_to_string(q.perm)} ({q.perm})",
            )
    print_table(t)
    if route.order_topic_conf:
        print_table(table(f"orderTopicConf: {route.order_topic_conf}"))
