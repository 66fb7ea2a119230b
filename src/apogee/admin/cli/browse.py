"""mqadmin's message browsing commands: queryMsgByUniqueKey, queryMsgByOffset, printMsg
and printMsgByQueue.

Owns: their flags and output. printMsg walks every queue of a topic, with a
progress bar on a terminal, and ends with a count per queue; at most 2,000
messages are read (``-m``), as the Dashboard reads.
"""

from __future__ import annotations

import click

from apogee._util.progress import Progress
from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient, QueueMessages
from apogee.admin.cli._common import (
    admin_command,
    emit_json,
    fail,
    parse_bool,
    parse_time,
    print_lines,
    print_table,
    run_admin,
    table,
)
from apogee.admin.cli.render import message_to_json, print_message_detail, print_message_list
from apogee.model.message import MessageExt

_FAR_FUTURE = 2**63 - 1


@admin_command("queryMsgByUniqueKey")
@click.option("-i", "--msgId", "msg_id", required=True, help="The unique key (UNIQ_KEY).")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--showAll", "show_all", is_flag=True, help="Every copy (up to 32).")
def query_msg_by_unique_key(
    *, namesrv: str, as_json: bool, msg_id: str, topic: str, show_all: bool
) -> None:
    """Find a message by the unique key its producer gave it."""

    async def act(admin: AdminClient) -> list[MessageExt]:
        return await admin.query_msg_by_key(topic, msg_id, unique_key=True, max_num=32)

    found = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if not found:
        raise fail(f"no message of topic {topic} has unique key {msg_id}")
    shown = found if show_all else found[:1]
    if as_json:
        emit_json(
            {"topic": topic, "msgId": msg_id, "messages": [message_to_json(m) for m in shown]}
        )
        return
    for m in shown:
        print_message_detail(m)


@admin_command("queryMsgByOffset")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), required=True)
@click.option("-o", "--offset", type=click.IntRange(0), required=True, help="Queue offset.")
def query_msg_by_offset(
    *, namesrv: str, as_json: bool, topic: str, broker_name: str, queue_id: int, offset: int
) -> None:
    """Show the message at one offset of one queue."""

    async def act(admin: AdminClient) -> MessageExt:
        return await ops.message_at(admin, topic, broker_name, queue_id, offset)

    msg = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json(message_to_json(msg))
        return
    print_message_detail(msg)


def _browse(
    namesrv: str,
    topic: str,
    *,
    begin: str | None,
    end: str | None,
    tags: str | None,
    broker_name: str | None = None,
    queue_id: int | None = None,
    limit: int = ops.MAX_BROWSE,
) -> list[QueueMessages]:
    begin_ms = parse_time(begin, "-b") if begin else 0
    end_ms = parse_time(end, "-e") if end else _FAR_FUTURE
    with Progress("queues", None) as bar:

        async def act(admin: AdminClient) -> list[QueueMessages]:
            return await ops.messages_by_time(
                admin, topic, begin_ms, end_ms, broker_name=broker_name, queue_id=queue_id,
                tags=tags, limit=limit, progress=bar.update,
            )  # fmt: skip

        return run_admin(namesrv, act, not_found=f"topic {topic} does not exist")


def _print_browse(topic: str, queues: list[QueueMessages], as_json: bool, bodies: bool) -> None:
    if as_json:
        emit_json({"topic": topic, "queues": [{
            "brokerName": q.queue.broker_name, "queueId": q.queue.queue_id,
            "messages": [message_to_json(m) for m in q.messages],
        } for q in queues]})  # fmt: skip
        return
    if bodies:
        for q in queues:
            if q.messages:
                print_message_list(
                    q.messages, title=f"{q.queue.broker_name} queue {q.queue.queue_id}"
                )
    t = table("#Broker Name", "#QID", "#Messages", title="summary")
    for q in queues:
        t.add_row(q.queue.broker_name, str(q.queue.queue_id), str(len(q.messages)))
    print_table(t)
    print_lines([f"{sum(len(q.messages) for q in queues)} message(s) from {len(queues)} queue(s)"])


_time_help = "now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"


@admin_command("printMsg")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-c", "--charset", default="UTF-8", help="Accepted; bodies are shown as UTF-8.")
@click.option("-s", "--subExpression", "tags", help="Tags, 'a || b' (default every message).")
@click.option("-b", "--beginTimestamp", "begin", help=f"From this store time ({_time_help}).")
@click.option("-e", "--endTimestamp", "end", help=f"Up to this store time ({_time_help}).")
@click.option("-d", "--printBody", "print_body", metavar="true|false", help="Show the messages.")
@click.option("-m", "--maxNum", "max_num", type=click.IntRange(1), default=ops.MAX_BROWSE,
              show_default=True)  # fmt: skip
def print_msg(
    *,
    namesrv: str,
    as_json: bool,
    topic: str,
    charset: str,
    tags: str | None,
    begin: str | None,
    end: str | None,
    print_body: str | None,
    max_num: int,
) -> None:
    """Print the messages of every queue of a topic stored in a time range."""
    queues = _browse(namesrv, topic, begin=begin, end=end, tags=tags, limit=max_num)
    _print_browse(topic, queues, as_json, parse_bool(print_body, "-d") is not False)


@admin_command("printMsgByQueue")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), required=True)
@click.option("-c", "--charset", default="UTF-8", help="Accepted; bodies are shown as UTF-8.")
@click.option("-s", "--subExpression", "tags", help="Tags, 'a || b' (default every message).")
@click.option("-b", "--beginTimestamp", "begin", help=f"From this store time ({_time_help}).")
@click.option("-e", "--endTimestamp", "end", help=f"Up to this store time ({_time_help}).")
@click.option("-p", "--print", "print_body", metavar="true|false", help="Show the messages.")
@click.option("-f", "--calculate", "by_tag", metavar="true|false", help="Count them per tag.")
def print_msg_by_queue(
    *,
    namesrv: str,
    as_json: bool,
    topic: str,
    broker_name: str,
    queue_id: int,
    charset: str,
    tags: str | None,
    begin: str | None,
    end: str | None,
    print_body: str | None,
    by_tag: str | None,
) -> None:
    """Print the messages of one queue stored in a time range (and count them by tag)."""
    queues = _browse(namesrv, topic, begin=begin, end=end, tags=tags,
                     broker_name=broker_name, queue_id=queue_id)  # fmt: skip
    _print_browse(topic, queues, as_json, bool(parse_bool(print_body, "-p")))
    if parse_bool(by_tag, "-f") and not as_json:
        counts: dict[str, int] = {}
        for m in ops.flatten(queues):
            counts[m.tags or ""] = counts.get(m.tags or "", 0) + 1
        t = table("#Tag", "#Count")
        for tag, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            t.add_row(tag or "(none)", str(n))
        print_table(t)
