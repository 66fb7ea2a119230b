"""mqadmin's topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus,
topicClusterList.

Owns: their flags (mqadmin's letters and long names) and output.
"""

from __future__ import annotations

import click

from apogee._util.progress import Progress
from apogee.admin.admin_client import AdminClient, TopicDeletion
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
from apogee.admin.cli.render import print_route, route_to_json
from apogee.admin.operations import topic_clusters
from apogee.model.route import TopicRouteData, perm_is_valid, perm_to_string
from apogee.model.stats import TopicStatsTable
from apogee.model.topic import TopicConfig, validate_topic

#: mqadmin updateTopic's queue count when -r/-w are not given.
DEFAULT_QUEUE_NUMS = 8


def _topic_config_json(c: TopicConfig) -> dict[str, object]:
    return {
        "order": c.order,
        "perm": c.perm,
        "readQueueNums": c.read_queue_nums,
        "topicFilterType": c.topic_filter_type,
        "topicName": c.topic_name,
        "topicSysFlag": c.topic_sys_flag,
        "writeQueueNums": c.write_queue_nums,
    }


@admin_command("updateTopic")
@click.option("-b", "--brokerAddr", "broker_addr", help="Create the topic on this broker only.")
@click.option(
    "-c", "--clusterName", "cluster", help="Create the topic on every master of this cluster."
)
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option(
    "-r",
    "--readQueueNums",
    "read",
    type=click.IntRange(1),
    default=DEFAULT_QUEUE_NUMS,
    show_default=True,
    help="Queues consumers read.",
)
@click.option(
    "-w",
    "--writeQueueNums",
    "write",
    type=click.IntRange(1),
    default=DEFAULT_QUEUE_NUMS,
    show_default=True,
    help="Queues producers write.",
)
@click.option("-p", "--perm", type=int, default=6, show_default=True, help="2: W, 4: R, 6: RW.")
@click.option("-o", "--order", metavar="true|false", help="Mark the topic as ordered.")
def update_topic(
    *,
    namesrv: str,
    as_json: bool,
    broker_addr: str | None,
    cluster: str | None,
    topic: str,
    read: int,
    write: int,
    perm: int,
    order: str | None,
) -> None:
    """Create or update a topic on a broker or on every master of a cluster."""
    if not broker_addr and not cluster:
        raise fail("updateTopic needs -b broker address or -c cluster name")
    problem = validate_topic(topic)
    if problem:
        raise fail(problem)
    if not perm_is_valid(perm):
        raise fail(f"-p perm must be 0..7 (2: W, 4: R, 6: RW), not {perm}")
    config = TopicConfig(topic, read, write, perm, order=bool(parse_bool(order, "-o")))

    async def act(admin: AdminClient) -> list[str]:
        return await admin.create_topic(config, cluster=cluster, broker_addr=broker_addr)

    done = run_admin(namesrv, act)
    if as_json:
        emit_json({"brokers": done, "topicConfig": _topic_config_json(config)})
        return
    print_lines([f"create topic to {addr} success." for addr in done])
    t = table("#Topic", "#Read", "#Write", "#Perm", "#Order")
    t.add_row(
        topic, str(read), str(write), f"{perm_to_string(perm)} ({perm})", str(config.order).lower()
    )
    print_table(t)


@admin_command("deleteTopic")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option(
    "-c", "--clusterName", "cluster", required=True, help="Delete the topic from this cluster."
)
def delete_topic(*, namesrv: str, as_json: bool, topic: str, cluster: str) -> None:
    """Delete a topic from every master of a cluster, then from the name servers."""

    async def act(admin: AdminClient) -> TopicDeletion:
        return await admin.delete_topic(topic, cluster)

    done = run_admin(namesrv, act)
    if as_json:
        emit_json(
            {"topic": topic, "cluster": cluster, "brokers": done.brokers, "namesrvs": done.namesrvs}
        )
        return
    print_lines(
        [f"delete topic [{topic}] from broker {addr} success." for addr in done.brokers]
        + [f"delete topic [{topic}] from cluster [{cluster}] success."]
        + [f"delete topic [{topic}] from NameServer {addr} success." for addr in done.namesrvs]
    )


@admin_command("topicList")
@click.option(
    "-c", "--clusterModel", "with_cluster", is_flag=True, help="Also show each topic's clusters."
)
def topic_list(*, namesrv: str, as_json: bool, with_cluster: bool) -> None:
    """List the topics the name servers know."""
    if with_cluster:
        clusters = run_admin(namesrv, AdminClient.topic_clusters)
        if as_json:
            emit_json({"topics": [{"topic": t, "clusters": c} for t, c in clusters.items()]})
            return
        t = table("#Cluster Name", "#Topic")
        for topic, names in clusters.items():
            t.add_row(",".join(names), topic)
        print_table(t)
        return
    topics = run_admin(namesrv, AdminClient.topic_list)
    if as_json:
        emit_json({"topics": topics})
        return
    t = table("#Topic")
    for topic in topics:
        t.add_row(topic)
    print_table(t)


@admin_command("topicRoute")
@click.option("-t", "--topic", required=True, help="Topic name.")
def topic_route(*, namesrv: str, as_json: bool, topic: str) -> None:
    """Show which brokers serve a topic, with queue counts and permissions."""

    async def act(admin: AdminClient) -> TopicRouteData:
        return await admin.topic_route(topic)

    route = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json(route_to_json(route))
        return
    print_route(topic, route)


@admin_command("topicStatus")
@click.option("-t", "--topic", required=True, help="Topic name.")
def topic_status(*, namesrv: str, as_json: bool, topic: str) -> None:
    """Show each queue's min and max offset and when it last grew."""

    with Progress("brokers", None) as bar:

        async def act(admin: AdminClient) -> TopicStatsTable:
            return await admin.topic_status(topic, progress=bar.update)

        stats = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        queues = [
            {
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "minOffset": o.min_offset,
                "maxOffset": o.max_offset,
                "lastUpdateTimestamp": o.last_update_timestamp,
            }
            for mq, o in stats.offset_table.items()
        ]
        emit_json({"topic": topic, "queues": queues})
        return
    t = table(
        "#Broker Name",
        "#QID",
        "#Min Offset",
        "#Max Offset",
        "#Last Updated",
        title=f"topic {topic}",
    )
    for mq, o in stats.offset_table.items():
        t.add_row(
            mq.broker_name,
            str(mq.queue_id),
            str(o.min_offset),
            str(o.max_offset),
            human_time(o.last_update_timestamp),
        )
    print_table(t)
    offsets = stats.offset_table
    print_lines([f"{len(offsets)} queue(s) on {len({mq.broker_name for mq in offsets})} "
                 f"broker(s), {sum(o.max_offset - o.min_offset for o in offsets.values())} "
                 "message(s) stored"])  # fmt: skip


@admin_command("topicClusterList")
@click.option("-t", "--topic", required=True, help="Topic name.")
def topic_cluster_list(*, namesrv: str, as_json: bool, topic: str) -> None:
    """Show which clusters serve a topic."""

    async def act(admin: AdminClient) -> list[str]:
        return await topic_clusters(admin, topic)

    clusters = run_admin(namesrv, act, not_found=f"topic {topic} does not exist")
    if as_json:
        emit_json({"topic": topic, "clusters": clusters})
        return
    print_lines(clusters)
