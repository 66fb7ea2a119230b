"""Day-to-day operations across a cluster, beyond AdminClient's basics.

Owns: what mqadmin's consumer, producer, statistics and browsing commands
and the dashboard do: resetting a group's offsets by time, live
connections of consumer and producer groups, a consumer's running state,
traffic per topic and group (statsAll), messages by queue, offset and time
range, dead-letter queues (a summary, their messages, and resending them to
their group), deleting a group. Each function takes an open AdminClient and
raises ``apogee.errors`` exceptions; an argument naming something the
cluster lacks is a ClientError saying which.

Long walks (every queue of a topic, every topic) report ``progress(done,
total)`` when given one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from apogee.admin.admin_client import TOOLS_CONSUMER_GROUP, AdminClient, QueueMessages
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import (
    ApogeeError,
    BrokerResponseError,
    ClientError,
    TopicNotExistError,
)
from apogee.model.client import MessageQueue
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    Message,
    MessageExt,
)
from apogee.model.results import PullStatus, SendResult
from apogee.model.route import TopicRouteData, readable
from apogee.model.stats import ConsumerConnection, ConsumeStats
from apogee.model.topic import DLQ_GROUP_TOPIC_PREFIX, dlq_topic, is_system_topic, retry_topic
from apogee.protocol import admin_bodies, bodies, tolerant_json
from apogee.protocol import headers as h
from apogee.protocol.ops_bodies import (
    BrokerStatsData,
    decode_broker_stats_data,
    decode_group_list,
    decode_producer_table,
)
from apogee.protocol.ops_bodies import ProducerInfo as ProducerInfo  # noqa: PLC0414  # re-exported

Progress = Callable[[int, int], None]

#: how many messages a time-range walk returns at most (the Dashboard's limit)
MAX_BROWSE = 2000
#: properties a resent copy must not carry over (they steered its earlier trips)
_NOT_RESENT = (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)


def _one_addr(route: TopicRouteData) -> list[str]:
    addrs = []
    for broker in route.broker_datas:
        if broker.broker_addrs:
            addrs.append(broker.master_addr() or broker.broker_addrs[min(broker.broker_addrs)])
    return addrs


async def _group_brokers(admin: AdminClient, group: str) -> list[str]:
    """The brokers of a consumer group: those of its retry topic (mqadmin's rule)."""
    try:
        return _one_addr(await admin.namesrv.get_route(retry_topic(group)))
    except TopicNotExistError:
        raise ClientError(
            f"consumer group {group} is unknown to the name servers (no {retry_topic(group)})"
        ) from None


# -- topics and groups ------------------------------------------------------------------


async def topic_clusters(admin: AdminClient, topic: str) -> list[str]:
    """mqadmin topicClusterList: the clusters whose brokers serve ``topic``."""
    route = await admin.namesrv.get_route(topic)
    return sorted({b.cluster for b in route.broker_datas})


async def delete_group(
    admin: AdminClient,
    group: str,
    *,
    cluster: str | None = None,
    broker_addr: str | None = None,
    remove_offset: bool = False,
) -> list[str]:
    """mqadmin deleteSubGroup: the group goes from the brokers; with a cluster, its
    retry and dead-letter topics go too (from the brokers and the name servers)."""
    targets = await admin._targets(cluster, broker_addr)
    for addr in targets:
        await admin.broker.delete_subscription_group(addr, group, clean_offset=remove_offset)
    if cluster and not broker_addr:
        for topic in (retry_topic(group), dlq_topic(group)):
            for addr in targets:
                await admin.broker.delete_topic(addr, topic)
            await admin.namesrv.delete_topic(topic, cluster)
    return targets


# -- clients ------------------------------------------------------------------------------


async def consumer_connection(
    admin: AdminClient, group: str, broker_addr: str | None = None
) -> ConsumerConnection:
    """mqadmin consumerConnection: the live consumers of a group and their subscriptions."""
    addrs = [broker_addr] if broker_addr else await _group_brokers(admin, group)
    last: ApogeeError | None = None
    for addr in addrs:
        try:
            return await admin.broker.get_consumer_connections(addr, group)
        except BrokerResponseError as exc:
            last = exc
    if last is not None and last.code == ResponseCode.CONSUMER_NOT_ONLINE:
        raise ClientError(f"consumer group {group} has no consumer online") from None
    raise last or ClientError(f"consumer group {group} has no broker")


async def producer_connection(admin: AdminClient, group: str, topic: str) -> list[ProducerInfo]:
    """mqadmin producerConnection: the live producers of a group, on ``topic``'s brokers."""
    found: dict[str, ProducerInfo] = {}
    for addr in _one_addr(await admin.namesrv.get_route(topic)):
        try:
            response = await admin.call(
                addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                h.GetProducerConnectionListRequestHeader(group),
            )  # fmt: skip
        except BrokerResponseError:
            continue  # this broker has heard from none of them
        for c in admin_bodies.decode_producer_connection(response.body_bytes()):
            found.setdefault(c.client_id, ProducerInfo(c.client_id, c.client_addr,
                                                       c.language.name, c.version, 0))  # fmt: skip
    if not found:
        raise ClientError(f"producer group {group} has no producer online for topic {topic}")
    return list(found.values())


async def all_producers(admin: AdminClient) -> dict[str, list[ProducerInfo]]:
    """Every live producer by group, from every master (GET_ALL_PRODUCER_INFO)."""
    info = await admin.namesrv.get_cluster_info()
    addrs = sorted({addr for b in info.broker_addr_table.values()
                    if (addr := b.master_addr()) is not None})  # fmt: skip
    out: dict[str, dict[str, ProducerInfo]] = {}
    for addr in addrs:
        response = await admin.call(addr, RequestCode.GET_ALL_PRODUCER_INFO)
        for group, producers in decode_producer_table(response.body_bytes()).items():
            for p in producers:
                out.setdefault(group, {}).setdefault(p.client_id, p)
    return {g: list(p.values()) for g, p in sorted(out.items())}


async def consumer_running_info(admin: AdminClient, group: str, client_id: str) -> dict[str, Any]:
    """mqadmin consumerStatus -i: what one consumer reports of itself."""
    header = h.GetConsumerRunningInfoRequestHeader(group, client_id)
    last: ApogeeError | None = None
    for addr in await _group_brokers(admin, group):
        try:
            response = await admin.call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header)
        except BrokerResponseError as exc:
            last = exc
            continue
        doc = tolerant_json.loads(response.body_bytes() or b"{}")  # a C++ or Java client's
        return doc if isinstance(doc, dict) else {"value": doc}
    raise last or ClientError(f"consumer {client_id} of {group} is not online")


# -- offsets --------------------------------------------------------------------------------


async def reset_offset_by_time(
    admin: AdminClient,
    group: str,
    topic: str,
    timestamp_ms: int,
    *,
    force: bool = True,
    progress: Progress | None = None,
) -> dict[MessageQueue, int]:
    """mqadmin resetOffsetByTime (-1: the end of each queue, skipAccumulatedMessage).

    Every broker of the topic moves the group; a broker that answers
    CONSUMER_NOT_ONLINE (RocketMQ's own) is set queue by queue instead, as
    mqadmin does.
    """
    route = await admin.namesrv.get_route(topic)
    header = h.ResetOffsetRequestHeader(topic, group, timestamp_ms, force)
    table: dict[MessageQueue, int] = {}
    addrs = _one_addr(route)
    for done, addr in enumerate(addrs):
        if progress is not None:
            progress(done, len(addrs))
        try:
            response = await admin.call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        except BrokerResponseError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            table.update(
                await _reset_queue_by_queue(admin, addr, group, topic, timestamp_ms, force)
            )
            continue
        table.update(bodies.decode_mq_offset_table(response.body_bytes()))
    if progress is not None:
        progress(len(addrs), len(addrs))
    return dict(sorted(table.items()))


async def _reset_queue_by_queue(  # noqa: PLR0917
    admin: AdminClient, addr: str, group: str, topic: str, timestamp_ms: int, force: bool
) -> dict[MessageQueue, int]:
    stats = await admin.broker.get_consume_stats(addr, group, topic)
    out = {}
    for mq, wrapper in stats.offset_table.items():
        if timestamp_ms < 0:
            target = await admin.broker.get_max_offset(addr, topic, mq.queue_id)
        else:
            target = await admin.broker.search_offset(addr, topic, mq.queue_id, timestamp_ms)
        if force or target < wrapper.consumer_offset:
            await admin.broker.update_consumer_offset(addr, group, topic, mq.queue_id, target)
            out[mq] = target
        else:
            out[mq] = wrapper.consumer_offset
    return out


# -- browsing messages ------------------------------------------------------------------------


async def message_at(
    admin: AdminClient, topic: str, broker_name: str, queue_id: int, offset: int
) -> MessageExt:
    """mqadmin queryMsgByOffset: the message at one queue offset."""
    read = await admin.consume_messages(
        topic, broker_name=broker_name, queue_id=queue_id, offset=offset, count=1
    )
    for q in read:
        if q.messages:
            return q.messages[0]
    raise ClientError(f"no message at offset {offset} of {topic} queue {queue_id} on {broker_name}")


async def messages_by_time(
    admin: AdminClient,
    topic: str,
    begin_ms: int = 0,
    end_ms: int = 2**63 - 1,
    *,
    broker_name: str | None = None,
    queue_id: int | None = None,
    tags: str | None = None,
    limit: int = MAX_BROWSE,
    progress: Progress | None = None,
) -> list[QueueMessages]:
    """mqadmin printMsg / printMsgByQueue: messages stored between two times, queue by queue.

    ``tags``: "a || b" keeps messages with one of those tags ("*" or None: all).
    """
    route = await admin.namesrv.get_route(topic)
    masters = {b.broker_name: a for b in route.broker_datas if (a := b.master_addr())}
    queues = [
        MessageQueue(topic, q.broker_name, i)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if readable(q.perm) and q.broker_name in masters
        and (broker_name is None or q.broker_name == broker_name)
        for i in range(q.read_queue_nums)
        if queue_id is None or i == queue_id
    ]  # fmt: skip
    if not queues:
        where = f" queue {queue_id}" if queue_id is not None else ""
        raise ClientError(
            f"topic {topic} has no readable{where} queue on {broker_name or 'any broker'}"
        )
    wanted = None if tags in (None, "", "*") else {t.strip() for t in (tags or "").split("||")}
    out: list[QueueMessages] = []
    left = limit
    for done, mq in enumerate(queues):
        if progress is not None:
            progress(done, len(queues))
        if left <= 0:
            break
        read = await _read_range(admin, masters[mq.broker_name], mq, begin_ms, end_ms, left, wanted)
        left -= len(read.messages)
        out.append(read)
    if progress is not None:
        progress(len(queues), len(queues))
    return out


async def _read_range(  # noqa: PLR0917
    admin: AdminClient,
    addr: str,
    mq: MessageQueue,
    begin_ms: int,
    end_ms: int,
    limit: int,
    tags: set[str] | None,
) -> QueueMessages:
    api = admin.broker
    low = await api.get_min_offset(addr, mq.topic, mq.queue_id)
    high = await api.get_max_offset(addr, mq.topic, mq.queue_id)
    start = low
    if begin_ms > 0:
        start = max(await api.search_offset(addr, mq.topic, mq.queue_id, begin_ms), low)
    offset, status = start, PullStatus.NO_NEW_MSG
    messages: list[MessageExt] = []
    while offset < high and len(messages) < limit:
        result = await api.pull(addr, TOOLS_CONSUMER_GROUP, mq.topic, mq.queue_id, offset,
                                max_nums=min(32, high - offset))  # fmt: skip
        status = result.status
        if status is not PullStatus.FOUND or result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
        for m in result.messages:
            if m.store_timestamp > end_ms:
                return QueueMessages(mq, messages, status, offset)
            if m.store_timestamp >= begin_ms and (tags is None or m.tags in tags):
                messages.append(m)
    return QueueMessages(mq, messages[:limit], status, offset)


# -- dead letters -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeadLetters:
    """One group's dead-letter queue at a glance."""

    group: str
    count: int  # messages in it now
    total: int  # messages ever sent to it
    last_ms: int  # when the newest arrived (0: never)
    brokers: list[str] = field(default_factory=list)


async def dead_letters(
    admin: AdminClient, *, progress: Progress | None = None
) -> list[DeadLetters]:
    """Every %DLQ% topic of the cluster: how many dead letters, and the newest's time."""
    topics = [t for t in await admin.topic_list() if t.startswith(DLQ_GROUP_TOPIC_PREFIX)]
    out = []
    for done, topic in enumerate(topics):
        if progress is not None:
            progress(done, len(topics))
        try:
            stats = await admin.topic_status(topic)
        except TopicNotExistError:
            continue
        offsets = stats.offset_table.values()
        out.append(
            DeadLetters(
                topic.removeprefix(DLQ_GROUP_TOPIC_PREFIX),
                sum(o.max_offset - o.min_offset for o in offsets),
                sum(o.max_offset for o in offsets),
                max((o.last_update_timestamp for o in offsets), default=0),
                sorted({mq.broker_name for mq in stats.offset_table}),
            )
        )
    if progress is not None:
        progress(len(topics), len(topics))
    return sorted(out, key=lambda d: (-d.count, d.group))


async def dead_letter_messages(admin: AdminClient, group: str, limit: int = 64) -> list[MessageExt]:
    try:
        read = await admin.consume_messages(dlq_topic(group), count=limit)
    except TopicNotExistError:
        raise ClientError(f"consumer group {group} has no dead-letter queue") from None
    return [m for q in read for m in q.messages]


def resend_copy(msg: MessageExt, group: str) -> Message:
    """A copy of ``msg`` for ``group``'s retry topic: its consumers get it again, under
    its own topic (RETRY_TOPIC), with its id (UNIQ_KEY) kept."""
    properties = {k: v for k, v in msg.properties.items() if k not in _NOT_RESENT}
    original = properties.get(PROPERTY_RETRY_TOPIC) or msg.topic
    if original.startswith(("%RETRY%", DLQ_GROUP_TOPIC_PREFIX)):
        raise ClientError(f"message {msg.client_msg_id} has no original topic to go back to")
    properties[PROPERTY_RETRY_TOPIC] = original
    return Message(retry_topic(group), msg.body, properties=properties, flag=msg.flag)


async def resend(admin: AdminClient, msg: MessageExt, group: str) -> SendResult:
    """Send ``msg`` again to the consumers of ``group`` (through its retry topic)."""
    copy = resend_copy(msg, group)
    try:
        return await admin.send_message(copy, producer_group=f"apogee_resend_{group}")
    except TopicNotExistError:
        raise ClientError(
            f"consumer group {group} has no retry topic: no consumer of it ever connected"
        ) from None


# -- statistics -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicGroupStats:
    """One row of mqadmin statsAll."""

    topic: str
    group: str  # "" for a topic no group consumes
    accumulation: int
    in_tps: float
    out_tps: float
    in_24h: int
    out_24h: int


async def _stats_data(admin: AdminClient, addr: str, name: str, key: str) -> BrokerStatsData | None:
    try:
        response = await admin.call(
            addr,
            RequestCode.VIEW_BROKER_STATS_DATA,
            h.ViewBrokerStatsDataRequestHeader(name, key),
        )
    except BrokerResponseError:
        return None  # nothing counted under that key yet
    return decode_broker_stats_data(response.body_bytes())


async def consumed_by(admin: AdminClient, topic: str, route: TopicRouteData) -> list[str]:
    groups: set[str] = set()
    for addr in _one_addr(route):
        response = await admin.call(
            addr,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
            h.QueryTopicConsumeByWhoRequestHeader(topic),
        )
        groups.update(decode_group_list(response.body_bytes()))
    return sorted(groups)


async def stats_all(
    admin: AdminClient,
    *,
    topic: str | None = None,
    active_only: bool = False,
    progress: Progress | None = None,
) -> list[TopicGroupStats]:
    """mqadmin statsAll: per topic and consuming group, backlog and traffic."""
    topics = [topic] if topic else [
        t for t in await admin.topic_list() if not t.startswith("%") and not is_system_topic(t)
    ]  # fmt: skip
    rows: list[TopicGroupStats] = []
    for done, name in enumerate(topics):
        if progress is not None:
            progress(done, len(topics))
        try:
            route = await admin.namesrv.get_route(name)
        except TopicNotExistError:
            continue
        rows += await _topic_rows(admin, name, route, active_only)
    if progress is not None:
        progress(len(topics), len(topics))
    return rows


async def _topic_rows(
    admin: AdminClient, topic: str, route: TopicRouteData, active_only: bool
) -> list[TopicGroupStats]:
    addrs = _one_addr(route)
    puts = [d for a in addrs if (d := await _stats_data(admin, a, "TOPIC_PUT_NUMS", topic))]
    in_tps = sum(d.minute.tps for d in puts)
    in_24h = sum(d.day.sum for d in puts)
    groups = await consumed_by(admin, topic, route)
    if not groups:
        return (
            []
            if active_only and in_tps == 0
            else [TopicGroupStats(topic, "", 0, in_tps, 0, in_24h, 0)]
        )
    rows = []
    for group in groups:
        gets = [
            d
            for a in addrs
            if (d := await _stats_data(admin, a, "GROUP_GET_NUMS", f"{topic}@{group}"))
        ]
        out_tps = sum(d.minute.tps for d in gets)
        if active_only and out_tps == 0 and in_tps == 0:
            continue
        stats = await asyncio.gather(
            *(admin.broker.get_consume_stats(a, group, topic) for a in addrs),
            return_exceptions=True,
        )
        backlog = sum(s.total_diff() for s in stats if not isinstance(s, BaseException))
        rows.append(TopicGroupStats(topic, group, backlog, in_tps, out_tps, in_24h,
                                    sum(d.day.sum for d in gets)))  # fmt: skip
    return rows


def flatten(queues: Iterable[QueueMessages]) -> list[MessageExt]:
    return [m for q in queues for m in q.messages]


# -- groups at a glance --------------------------------------------------------------------------

#: groups every RocketMQ broker has for its own tools and proxies
SYSTEM_GROUPS = frozenset(
    {"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
     "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER"}
)  # fmt: skip


async def master_addrs(admin: AdminClient) -> list[str]:
    info = await admin.namesrv.get_cluster_info()
    return sorted({addr for b in info.broker_addr_table.values()
                   if (addr := b.master_addr()) is not None})  # fmt: skip


async def all_groups(admin: AdminClient) -> list[str]:
    """Every consumer group of every master: those with a subscription config and
    those with committed offsets (system groups left out), sorted."""
    names: set[str] = set()
    for addr in await master_addrs(admin):
        names.update(await _group_table(admin, addr))
        response = await admin.call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        table = tolerant_json.loads(response.body_bytes() or b"{}")
        offsets = table.get("offsetTable", {}) if isinstance(table, dict) else {}
        names.update(key.partition("@")[2] for key in offsets if "@" in key)
    return sorted(
        n for n in names if n and n not in SYSTEM_GROUPS and not n.startswith("CID_RMQ_SYS_")
    )


async def _group_table(admin: AdminClient, addr: str) -> dict[str, SubscriptionGroupConfig]:
    response = await admin.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    return bodies.decode_subscription_group_wrapper(response.body_bytes()).subscription_group_table


async def group_configs(admin: AdminClient, group: str) -> dict[str, SubscriptionGroupConfig]:
    """The subscription config of ``group`` on each master that has one, by broker address."""
    out: dict[str, SubscriptionGroupConfig] = {}
    for addr in await master_addrs(admin):
        config = (await _group_table(admin, addr)).get(group)
        if config is not None:
            out[addr] = config
    return out


@dataclass(frozen=True, slots=True)
class GroupOverview:
    """One consumer group on the consumers page."""

    group: str
    lag: int | None  # None: it has consumed nothing yet
    tps: float
    clients: int


async def group_progress(admin: AdminClient, group: str) -> ConsumeStats:
    """A group's progress on every topic it has offsets for, from every master.

    Unlike ``AdminClient.consumer_progress`` (mqadmin's rule: the brokers of
    the group's retry topic) this also covers a group no consumer ever
    joined, whose offsets an operator committed or reset.
    """
    merged = ConsumeStats()
    for addr in await master_addrs(admin):
        merged = merged.merged(await admin.broker.get_consume_stats(addr, group))
    return ConsumeStats(dict(sorted(merged.offset_table.items())), merged.consume_tps)


async def group_overview(admin: AdminClient, group: str) -> GroupOverview:
    try:
        stats = await group_progress(admin, group)
        lag: int | None = stats.total_diff() if stats.offset_table else None
        tps = stats.consume_tps
    except BrokerResponseError:
        lag, tps = None, 0.0
    try:
        clients = len((await consumer_connection(admin, group)).connections)
    except ApogeeError:
        clients = 0
    return GroupOverview(group, lag, tps, clients)
