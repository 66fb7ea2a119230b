"""mqadmin's client and consumption commands: deleteSubGroup, consumerConnection,
producerConnection, consumerStatus, resetOffsetByTime, skipAccumulatedMessage and
statsAll, and ``dlq``, the dead-letter view.

Owns: their flags (mqadmin's letters and long names) and output. The work is
``apogee.admin.operations``. Commands that walk many topics show a progress
bar on a terminal and end with a summary.
"""

from __future__ import annotations

from typing import Any

import click

from apogee._util.progress import Progress
from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient
from apogee.admin.cli._common import (
    admin_command,
    emit_json,
    fail,
    human_time,
    parse_bool,
    parse_time,
    print_lines,
    print_table,
    run_admin,
    table,
)
from apogee.admin.cli.render import message_to_json, print_message_list
from apogee.model.client import MessageQueue
from apogee.model.message import MessageExt
from apogee.model.stats import ConsumerConnection
from apogee.protocol.admin_bodies import connection_to_json
from apogee.protocol.bodies import subscription_to_json
from apogee.protocol.ops_bodies import ProducerInfo

_TF = "true|false"


@admin_command("deleteSubGroup")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group name.")
@click.option("-b", "--brokerAddr", "broker_addr", help="Delete it from this broker only.")
@click.option("-c", "--clusterName", "cluster", help="Delete it from every master of a cluster.")
@click.option("-r", "--removeOffset", "remove_offset", metavar=_TF, help="Drop its offsets too.")
def delete_sub_group(
    *,
    namesrv: str,
    as_json: bool,
    group: str,
    broker_addr: str | None,
    cluster: str | None,
    remove_offset: str | None,
) -> None:
    """Delete a consumer group (with -c, its retry and dead-letter topics too)."""
    if not broker_addr and not cluster:
        raise fail("deleteSubGroup needs -b broker address or -c cluster name")
    remove = bool(parse_bool(remove_offset, "-r"))

    async def act(admin: AdminClient) -> list[str]:
        return await ops.delete_group(
            admin, group, cluster=cluster, broker_addr=broker_addr, remove_offset=remove
        )

    done = run_admin(namesrv, act)
    if as_json:
        emit_json({"group": group, "brokers": done, "removeOffset": remove})
        return
    print_lines([f"delete subscription group [{group}] from broker [{addr}] success."
                 for addr in done])  # fmt: skip


def _connection_json(cc: ConsumerConnection) -> dict[str, Any]:
    return {
        "connections": [connection_to_json(c) for c in cc.connections],
        "subscriptions": [subscription_to_json(s) for s in cc.subscription_table.values()],
        "consumeType": cc.consume_type.name if cc.consume_type else None,
        "messageModel": cc.message_model.name if cc.message_model else None,
        "consumeFromWhere": cc.consume_from_where.name if cc.consume_from_where else None,
    }


@admin_command("consumerConnection")
@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group name.")
@click.option("-b", "--brokerAddr", "broker_addr", help="Ask this broker.")
def consumer_connection(
    *, namesrv: str, as_json: bool, group: str, broker_addr: str | None
) -> None:
    """Show a group's live consumers and what they subscribe to."""

    async def act(admin: AdminClient) -> ConsumerConnection:
        return await ops.consumer_connection(admin, group, broker_addr)

    cc = run_admin(namesrv, act)
    if as_json:
        emit_json({"group": group, **_connection_json(cc)})
        return
    t = table("#ClientId", "#ClientAddr", "#Language", "#Version", title=f"group {group}")
    for c in cc.connections:
        t.add_row(c.client_id, c.client_addr, c.language.name, str(c.version))
    print_table(t)
    s = table("#Topic", "#SubExpression")
    for topic, sub in sorted(cc.subscription_table.items()):
        s.add_row(topic, sub.sub_string)
    print_table(s)
    print_lines([
        f"ConsumeType: {cc.consume_type.name if cc.consume_type else '-'}",
        f"MessageModel: {cc.message_model.name if cc.message_model else '-'}",
        f"ConsumeFromWhere: {cc.consume_from_where.name if cc.consume_from_where else '-'}",
    ])  # fmt: skip


def _producer_json(p: ProducerInfo) -> dict[str, Any]:
    return {"clientId": p.client_id, "clientAddr": p.remote_ip, "language": p.language,
            "version": p.version}  # fmt: skip


@admin_command("producerConnection")
@click.option("-g", "--producerGroup", "group", required=True, help="Producer group name.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to.")
def producer_connection(*, namesrv: str, as_json: bool, group: str, topic: str) -> None:
    """Show a producer group's live producers."""

    async def act(admin: AdminClient) -> list[ProducerInfo]:
        return await ops.producer_connection(admin, group, topic)

    producers = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json({"group": group, "connections": [_producer_json(p) for p in producers]})
        return
    t = table("#ClientId", "#ClientAddr", "#Language", "#Version", title=f"group {group}")
    for p in producers:
        t.add_row(p.client_id, p.remote_ip, p.language, str(p.version))
    print_table(t)


@admin_command("consumerStatus")
@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group name.")
@click.option("-i", "--clientId", "client_id", help="One consumer (else every one).")
@click.option("-s", "--jstackEnable", "jstack", is_flag=True, help="Accepted; stacks are Java's.")
@click.option("-b", "--brokerAddr", "broker_addr", help="Ask this broker.")
def consumer_status(
    *,
    namesrv: str,
    as_json: bool,
    group: str,
    client_id: str | None,
    jstack: bool,
    broker_addr: str | None,
) -> None:
    """Show what a group's consumers report of themselves (queues, offsets, settings)."""

    async def act(admin: AdminClient) -> dict[str, dict[str, Any]]:
        ids = [client_id] if client_id else []
        if client_id is None:
            live = await ops.consumer_connection(admin, group, broker_addr)
            ids = [c.client_id for c in live.connections]
        out = {}
        for cid in ids:
            try:
                out[cid] = await ops.consumer_running_info(admin, group, cid)
            except Exception as exc:  # one silent client must not hide the others
                out[cid] = {"error": str(exc)}
        return out

    infos = run_admin(namesrv, act)
    if as_json:
        emit_json({"group": group, "consumers": infos})
        return
    for cid, info in infos.items():
        t = table("#Key", "#Value", title=f"consumer {cid}")
        if "error" in info:
            t.add_row("error", str(info["error"]))
        for key, value in sorted(dict(info.get("properties") or {}).items()):
            t.add_row(str(key), str(value))
        for name in ("subscriptionSet", "mqTable", "statusTable"):
            if name in info:
                t.add_row(name, f"{len(info[name])} entries")
        print_table(t)


def _offsets_json(table_: dict[MessageQueue, int]) -> list[dict[str, Any]]:
    return [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
            for mq, offset in table_.items()]  # fmt: skip


def _print_offsets(group: str, topic: str, table_: dict[MessageQueue, int]) -> None:
    t = table("#Broker Name", "#QID", "#New Offset", title=f"group {group}, topic {topic}")
    for mq, offset in table_.items():
        t.add_row(mq.broker_name, str(mq.queue_id), str(offset))
    print_table(t)
    print_lines([f"{len(table_)} queue(s) on {len({mq.broker_name for mq in table_})} "
                 "broker(s) moved"])  # fmt: skip


@admin_command("resetOffsetByTime")
@click.option("-g", "--group", "group", required=True, help="Consumer group name.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option(
    "-s", "--timestamp", "when", required=True,
    help="now, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS.",
)  # fmt: skip
@click.option("-f", "--force", metavar=_TF, help="Also move forward (default true).")
@click.option("-c", "--cplus", "cplus", metavar=_TF, help="Accepted; every client is told.")
def reset_offset_by_time(
    *,
    namesrv: str,
    as_json: bool,
    group: str,
    topic: str,
    when: str,
    force: str | None,
    cplus: str | None,
) -> None:
    """Move a group's offsets on a topic to the first message stored at a time."""
    timestamp = parse_time(when, "-s")
    forced = parse_bool(force, "-f") is not False

    with Progress("brokers", None) as bar:

        async def act(admin: AdminClient) -> dict[MessageQueue, int]:
            return await ops.reset_offset_by_time(admin, group, topic, timestamp, force=forced,
                                                  progress=bar.update)  # fmt: skip

        done = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json({"group": group, "topic": topic, "timestamp": timestamp,
                   "offsets": _offsets_json(done)})  # fmt: skip
        return
    _print_offsets(group, topic, done)


@admin_command("skipAccumulatedMessage")
@click.option("-g", "--group", "group", required=True, help="Consumer group name.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-f", "--force", metavar=_TF, help="Accepted (the end is always ahead).")
def skip_accumulated_message(
    *, namesrv: str, as_json: bool, group: str, topic: str, force: str | None
) -> None:
    """Move a group to the end of every queue of a topic: its backlog is skipped."""

    async def act(admin: AdminClient) -> dict[MessageQueue, int]:
        return await ops.reset_offset_by_time(admin, group, topic, -1, force=True)

    done = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json({"group": group, "topic": topic, "offsets": _offsets_json(done)})
        return
    _print_offsets(group, topic, done)


@admin_command("statsAll")
@click.option("-a", "--activeTopic", "active", is_flag=True, help="Only topics with traffic.")
@click.option("-t", "--topic", help="Only this topic.")
def stats_all(*, namesrv: str, as_json: bool, active: bool, topic: str | None) -> None:
    """Backlog and traffic (now and over 24 hours) of every topic and consuming group."""
    with Progress("topics", None) as bar:

        async def act(admin: AdminClient) -> list[ops.TopicGroupStats]:
            return await ops.stats_all(admin, topic=topic, active_only=active, progress=bar.update)

        rows = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json({"stats": [{
            "topic": r.topic, "consumerGroup": r.group, "accumulation": r.accumulation,
            "inTps": r.in_tps, "outTps": r.out_tps, "inMsg24Hour": r.in_24h,
            "outMsg24Hour": r.out_24h,
        } for r in rows]})  # fmt: skip
        return
    t = table("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
              "#OutMsg24Hour")  # fmt: skip
    for r in rows:
        t.add_row(r.topic, r.group or "-", str(r.accumulation), f"{r.in_tps:.2f}",
                  f"{r.out_tps:.2f}", str(r.in_24h), str(r.out_24h))  # fmt: skip
    print_table(t)
    print_lines([f"{len({r.topic for r in rows})} topic(s), {len(rows)} row(s), "
                 f"accumulation {sum(r.accumulation for r in rows)}"])  # fmt: skip


@admin_command("dlq")
@click.option("-g", "--consumerGroup", "group", help="One group's dead letters (else a summary).")
@click.option("-m", "--maxNum", "max_num", type=click.IntRange(1), default=64, show_default=True)
@click.option("-i", "--msgId", "msg_ids", multiple=True, help="Only these messages (with -r).")
@click.option("-r", "--resend", is_flag=True, help="Send them to the group's consumers again.")
def dlq(
    *,
    namesrv: str,
    as_json: bool,
    group: str | None,
    max_num: int,
    msg_ids: tuple[str, ...],
    resend: bool,
) -> None:
    """Dead letters at a glance: per group, how many and the newest; -g lists them."""
    if group is None:
        if resend:
            raise fail("-r resend needs -g consumer group")
        _dlq_summary(namesrv, as_json)
        return

    async def act(admin: AdminClient) -> tuple[list[MessageExt], list[str]]:
        found = await ops.dead_letter_messages(admin, group, max_num)
        if msg_ids:
            found = [m for m in found if m.client_msg_id in msg_ids or m.msg_id in msg_ids]
        sent = [(await ops.resend(admin, m, group)).msg_id for m in found] if resend else []
        return found, sent

    found, sent = run_admin(namesrv, act)
    if as_json:
        emit_json({"group": group, "messages": [message_to_json(m) for m in found],
                   "resent": sent})  # fmt: skip
        return
    print_message_list(found, title=f"dead letters of {group}: {len(found)} shown")
    if resend:
        print_lines([f"resent {len(sent)} message(s) to {group}"])


def _dlq_summary(namesrv: str, as_json: bool) -> None:
    with Progress("dead-letter topics", None) as bar:

        async def act(admin: AdminClient) -> list[ops.DeadLetters]:
            return await ops.dead_letters(admin, progress=bar.update)

        rows = run_admin(namesrv, act)
    if as_json:
        emit_json({"deadLetters": [{"group": d.group, "count": d.count, "total": d.total,
                                    "lastTimestamp": d.last_ms, "brokers": d.brokers}
                                   for d in rows]})  # fmt: skip
        return
    t = table("#Consumer Group", "#Dead Letters", "#Ever", "#Newest", "#Brokers")
    for d in rows:
        t.add_row(d.group, str(d.count), str(d.total), human_time(d.last_ms), ",".join(d.brokers))
    print_table(t)
    print_lines([f"{sum(d.count for d in rows)} dead letter(s) in {len(rows)} group(s)"])
