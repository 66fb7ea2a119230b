"""mqadmin's consumer-group commands: updateSubGroup and consumerProgress.

Owns: their flags and output.

updateSubGroup keeps mqadmin's quirk: a group it creates has broadcast and
consume-from-min switched off unless ``-d``/``-m`` say otherwise (the class
defaults are on).
"""

from __future__ import annotations

import click

from apogee._util.progress import Progress
from apogee.admin.admin_client import AdminClient
from apogee.admin.cli._common import (
    admin_command,
    emit_json,
    fail,
    human_time,
    parse_bool,
    print_lines,
    print_table,
    run_admin,
    table,
)
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.stats import ConsumeStats
from apogee.model.topic import validate_group
from apogee.protocol.bodies import subscription_group_to_json

_TF = "true|false"


@admin_command("updateSubGroup")
@click.option("-b", "--brokerAddr", "broker_addr", help="Create the group on this broker only.")
@click.option(
    "-c", "--clusterName", "cluster", help="Create the group on every master of this cluster."
)
@click.option("-g", "--groupName", "group", required=True, help="Consumer group name.")
@click.option("-s", "--consumeEnable", "consume_enable", metavar=_TF, help="Consumers may pull.")
@click.option(
    "-m",
    "--consumeFromMinEnable",
    "from_min",
    metavar=_TF,
    help="A new group starts at the min offset.",
)
@click.option(
    "-d",
    "--consumeBroadcastEnable",
    "broadcast",
    metavar=_TF,
    help="Broadcasting consumers allowed.",
)
@click.option("-o", "--consumeMessageOrderly", "orderly", metavar=_TF, help="Orderly consumption.")
@click.option(
    "-q",
    "--retryQueueNums",
    "retry_queues",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="Queues of the group's retry topic.",
)
@click.option(
    "-r",
    "--retryMaxTimes",
    "retry_max",
    type=click.IntRange(-1),
    default=16,
    show_default=True,
    help="Redeliveries before the dead-letter queue.",
)
@click.option(
    "-i",
    "--brokerId",
    "broker_id",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Broker id consumers pull from.",
)
@click.option(
    "-w",
    "--whichBrokerWhenConsumeSlowly",
    "slow_broker",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="Broker id to pull from when consumption lags.",
)
@click.option(
    "-a",
    "--notifyConsumerIdsChanged",
    "notify",
    metavar=_TF,
    help="Tell consumers when members change.",
)
def update_sub_group(
    *,
    namesrv: str,
    as_json: bool,
    broker_addr: str | None,
    cluster: str | None,
    group: str,
    consume_enable: str | None,
    from_min: str | None,
    broadcast: str | None,
    orderly: str | None,
    retry_queues: int,
    retry_max: int,
    broker_id: int,
    slow_broker: int,
    notify: str | None,
) -> None:
    """Create or update a consumer group on a broker or every master of a cluster."""
    if not broker_addr and not cluster:
        raise fail("updateSubGroup needs -b broker address or -c cluster name")
    problem = validate_group(group)
    if problem:
        raise fail(problem)
    config = SubscriptionGroupConfig(
        group,
        consume_enable=parse_bool(consume_enable, "-s") is not False,
        consume_from_min_enable=bool(parse_bool(from_min, "-m")),
        consume_broadcast_enable=bool(parse_bool(broadcast, "-d")),
        consume_message_orderly=bool(parse_bool(orderly, "-o")),
        retry_queue_nums=retry_queues,
        retry_max_times=retry_max,
        broker_id=broker_id,
        which_broker_when_consume_slowly=slow_broker,
        notify_consumer_ids_changed_enable=parse_bool(notify, "-a") is not False,
    )

    async def act(admin: AdminClient) -> list[str]:
        return await admin.update_subscription_group(
            config, cluster=cluster, broker_addr=broker_addr
        )

    done = run_admin(namesrv, act)
    doc = subscription_group_to_json(config)
    if as_json:
        emit_json({"brokers": done, "groupConfig": doc})
        return
    print_lines([f"create subscription group to {addr} success." for addr in done])
    t = table("#Setting", "#Value", title=f"group {group}")
    for key, value in doc.items():
        t.add_row(key, str(value).lower() if isinstance(value, bool) else str(value))
    print_table(t)


@admin_command("consumerProgress")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group name.")
@click.option("-t", "--topicName", "topic", help="Only this topic.")
def consumer_progress(*, namesrv: str, as_json: bool, group: str, topic: str | None) -> None:
    """Show a group's progress per queue: broker offset, consumer offset, lag."""

    with Progress("brokers", None) as bar:

        async def act(admin: AdminClient) -> ConsumeStats:
            return await admin.consumer_progress(group, topic, progress=bar.update)

        stats = run_admin(
            namesrv, act, not_found=f"consumer group {group} is unknown to the name servers"
        )
    if as_json:
        queues = [
            {
                "topic": mq.topic,
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "brokerOffset": w.broker_offset,
                "consumerOffset": w.consumer_offset,
                "diff": w.diff,
                "lastTimestamp": w.last_timestamp,
            }
            for mq, w in stats.offset_table.items()
        ]
        emit_json(
            {
                "group": group,
                "queues": queues,
                "consumeTps": stats.consume_tps,
                "diffTotal": stats.total_diff(),
            }
        )
        return
    t = table(
        "#Topic",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#LastTime",
        title=f"group {group}",
    )
    for mq, w in stats.offset_table.items():
        t.add_row(
            mq.topic,
            mq.broker_name,
            str(mq.queue_id),
            str(w.broker_offset),
            str(w.consumer_offset),
            str(w.diff),
            human_time(w.last_timestamp),
        )
    print_table(t)
    walked = stats.offset_table
    print_lines([f"Consume TPS: {stats.consume_tps:.2f}", f"Diff Total: {stats.total_diff()}",
                 f"{len(walked)} queue(s) of {len({mq.topic for mq in walked})} topic(s) on "
                 f"{len({mq.broker_name for mq in walked})} broker(s)"])  # fmt: skip
