"""mqadmin's message commands: queryMsgById, queryMsgByKey, sendMessage, consumeMessage.

Owns: their flags and output.

consumeMessage reads with mqadmin's tools group and never commits an
offset, so it disturbs no consumer; sendMessage uses the route like a
producer does, or the broker and queue named with ``-b``/``-i``.
"""

from __future__ import annotations

import click

from apogee.admin.admin_client import (
    DEFAULT_QUERY_MAX_NUM,
    TOOLS_CONSUMER_GROUP,
    AdminClient,
    QueueMessages,
)
from apogee.admin.cli._common import (
    admin_command,
    emit_json,
    fail,
    print_lines,
    print_table,
    run_admin,
    table,
)
from apogee.admin.cli.render import message_to_json, print_message_detail, print_message_list
from apogee.admin.direct import DirectResult, consume_message_directly
from apogee.model.message import PROPERTY_KEYS, PROPERTY_TAGS, Message, MessageExt
from apogee.model.results import SendResult
from apogee.model.topic import validate_topic


@admin_command("queryMsgById")
@click.option(
    "-i",
    "--msgId",
    "msg_id",
    required=True,
    help="Offset message id, or a producer's unique key (the msgId of a send).",
)
@click.option("-t", "--topic", help="Topic of a unique key (else every topic is searched).")
@click.option("-g", "--consumerGroup", "group", help="With -d: the consumer's group.")
@click.option(
    "-d", "--clientId", "client_id", help="With -g: have this consumer consume the message once."
)
def query_msg_by_id(
    *,
    namesrv: str,
    as_json: bool,
    msg_id: str,
    topic: str | None,
    group: str | None,
    client_id: str | None,
) -> None:
    """Show the message an offset message id or a unique key names, or (-g, -d) hand it to
    one live consumer of a group, which consumes it once and says how that went."""
    not_found = f"topic {topic} does not exist" if topic else None
    if group is not None or client_id is not None:
        if group is None or client_id is None:
            raise fail("-g (consumer group) and -d (client id) go together")
        consumer = (group, client_id)

        async def push(admin: AdminClient) -> DirectResult:
            msg = await admin.query_msg_by_id(msg_id, topic=topic)
            return await consume_message_directly(admin, *consumer, msg)

        result = run_admin(namesrv, push, not_found=not_found)
        if as_json:
            emit_json(result.to_json())
            return
        print_lines(
            [
                f"consumer {result.client_id} of {group}: {result.consume_result}"
                + (f" ({result.remark})" if result.remark else ""),
                f"spent {result.spent_ms} ms, order={str(result.order).lower()}, "
                f"autoCommit={str(result.auto_commit).lower()}",
            ]
        )
        return

    async def act(admin: AdminClient) -> MessageExt:
        return await admin.query_msg_by_id(msg_id, topic=topic)

    msg = run_admin(namesrv, act, not_found=not_found)
    if as_json:
        emit_json(message_to_json(msg))
        return
    print_message_detail(msg)


@admin_command("queryMsgByKey")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-k", "--msgKey", "key", required=True, help="Message key.")
@click.option(
    "-b",
    "--beginTimestamp",
    "begin_ms",
    type=click.IntRange(0),
    default=0,
    help="From this store time (ms).",
)
@click.option(
    "-e",
    "--endTimestamp",
    "end_ms",
    type=click.IntRange(0),
    default=2**63 - 1,
    help="Up to this store time (ms).",
)
@click.option(
    "-m",
    "--maxNum",
    "max_num",
    type=click.IntRange(1),
    default=DEFAULT_QUERY_MAX_NUM,
    show_default=True,
)
def query_msg_by_key(
    *, namesrv: str, as_json: bool, topic: str, key: str, begin_ms: int, end_ms: int, max_num: int
) -> None:
    """Find the messages of a topic that carry a key, on every broker of the topic."""

    async def act(admin: AdminClient) -> list[MessageExt]:
        return await admin.query_msg_by_key(
            topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms
        )

    found = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json({"topic": topic, "key": key, "messages": [message_to_json(m) for m in found]})
        return
    print_message_list(found, title=f"topic {topic}, key {key}: {len(found)} message(s)")


@admin_command("sendMessage")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-p", "--body", required=True, help="Message body (UTF-8 text).")
@click.option("-k", "--key", "keys", help="Message keys, space separated.")
@click.option("-c", "--tags", help="Message tag.")
@click.option("-b", "--broker", "broker_name", help="Send to this broker (by name).")
@click.option(
    "-i", "--qid", "queue_id", type=click.IntRange(0), help="Send to this queue (needs -b)."
)
def send_message(
    *,
    namesrv: str,
    as_json: bool,
    topic: str,
    body: str,
    keys: str | None,
    tags: str | None,
    broker_name: str | None,
    queue_id: int | None,
) -> None:
    """Send one message, to a queue of the route or to the one named."""
    if queue_id is not None and broker_name is None:
        raise fail("-i queue id needs -b broker name")
    problem = validate_topic(topic)
    if problem:
        raise fail(problem)
    properties = {}
    if tags:
        properties[PROPERTY_TAGS] = tags
    if keys:
        properties[PROPERTY_KEYS] = keys
    msg = Message(topic, body.encode("utf-8"), properties=properties)

    async def act(admin: AdminClient) -> SendResult:
        return await admin.send_message(msg, broker_name=broker_name, queue_id=queue_id)

    result = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    mq = result.message_queue
    if as_json:
        emit_json(
            {
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "queueOffset": result.queue_offset,
                "sendStatus": result.status.value,
                "msgId": result.msg_id,
                "offsetMsgId": result.offset_msg_id,
            }
        )
        return
    t = table("#Broker Name", "#QID", "#Queue Offset", "#Send Result", "#MsgId", "#OffsetMsgId")
    t.add_row(
        mq.broker_name,
        str(mq.queue_id),
        str(result.queue_offset),
        result.status.value,
        result.msg_id,
        result.offset_msg_id,
    )
    print_table(t)


@admin_command("consumeMessage")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "broker_name", help="Only this broker.")
@click.option(
    "-i", "--queueId", "queue_id", type=click.IntRange(0), help="Only this queue (needs -b)."
)
@click.option(
    "-o", "--offset", type=click.IntRange(0), help="Start at this queue offset (needs -i)."
)
@click.option("-g", "--consumerGroup", "group", default=TOOLS_CONSUMER_GROUP, show_default=True)
@click.option(
    "-c", "--MessageNumber", "count", type=click.IntRange(1), default=128, show_default=True
)
def consume_message(
    *,
    namesrv: str,
    as_json: bool,
    topic: str,
    broker_name: str | None,
    queue_id: int | None,
    offset: int | None,
    group: str,
    count: int,
) -> None:
    """Read messages from a topic, a broker's queues or one queue, committing nothing."""
    if queue_id is not None and broker_name is None:
        raise fail("-i queue id needs -b broker name")
    if offset is not None and queue_id is None:
        raise fail("-o offset needs -i queue id")

    async def act(admin: AdminClient) -> list[QueueMessages]:
        return await admin.consume_messages(
            topic,
            broker_name=broker_name,
            queue_id=queue_id,
            offset=offset,
            count=count,
            group=group,
        )

    queues = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json(
            {
                "topic": topic,
                "queues": [
                    {
                        "brokerName": q.queue.broker_name,
                        "queueId": q.queue.queue_id,
                        "status": q.status.value,
                        "nextOffset": q.next_offset,
                        "messages": [message_to_json(m) for m in q.messages],
                    }
                    for q in queues
                ],
            }
        )
        return
    total = 0
    for q in queues:
        total += len(q.messages)
        if q.messages:
            print_message_list(q.messages, title=f"{q.queue.broker_name} queue {q.queue.queue_id}")
    print_lines([f"{total} message(s) from {len(queues)} queue(s)"])
