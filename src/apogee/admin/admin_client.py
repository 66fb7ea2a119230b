"""Cluster-wide administration, the way mqadmin spans name servers and brokers.

Owns: AdminClient and the small report values it returns (BrokerSummary,
HAGroup, TopicDeletion, QueueMessages).

Each operation starts from the name servers (routes, cluster info) and then
talks to brokers directly: per-cluster changes go to every master of the
cluster, per-topic reads to the master of every broker serving the topic.
Nothing is cached between calls, so every answer reflects the cluster now.
With ``credentials`` every request is signed (clusters with ``aclEnable``);
with ``tls`` (an SSLContext) every connection is TLS.
Faults are apogee.errors exceptions; an argument that names something the
cluster does not have (a cluster, a broker, a queue) is a ClientError whose
message says which.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeVar

from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi, parse_namesrv_addrs
from apogee.codes import ResponseCode
from apogee.errors import (
    ApogeeError,
    BrokerResponseError,
    ClientError,
    RemotingError,
    TopicNotExistError,
    error_for_code,
)
from apogee.model.client import MessageQueue
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import Message, MessageExt
from apogee.model.msgid import UniqKey, classify_msg_id
from apogee.model.results import PullStatus, SendResult
from apogee.model.route import (
    MASTER_ID,
    BrokerData,
    QueueData,
    TopicRouteData,
    readable,
    writeable,
)
from apogee.model.stats import ConsumeStats, HARuntimeInfo, TopicStatsTable
from apogee.model.topic import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicConfig,
    is_system_topic,
    retry_topic,
)
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import ExtHeader
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig

T = TypeVar("T")

#: Groups mqadmin uses when the operator names none.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
#: mqadmin queryMsgByKey's default and the broker's cap per query.
DEFAULT_QUERY_MAX_NUM = 64
_PULL_BATCH = 32
#: a unique key without a topic is looked for in at most this many topics
UNIQ_KEY_SEARCH_TOPICS = 200


@dataclass(frozen=True, slots=True)
class BrokerSummary:
    """One broker process of a cluster, with figures from its runtime info."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # why the runtime info could not be read


@dataclass(frozen=True, slots=True)
class HANode:
    """One broker process and its replication status (None when it could not be read)."""

    broker_id: int
    addr: str
    status: HARuntimeInfo | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class HAGroup:
    """A broker name's master and slaves (haStatus)."""

    cluster: str
    broker_name: str
    nodes: list[HANode]

    @property
    def master(self) -> HANode | None:
        return next((n for n in self.nodes if n.broker_id == MASTER_ID), None)


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    brokers: list[str]  # broker addresses the topic was deleted from
    namesrvs: list[str]  # name servers that forgot its route


@dataclass(frozen=True, slots=True)
class QueueMessages:
    """What consumeMessage read from one queue, and how the last pull ended."""

    queue: MessageQueue
    messages: list[MessageExt]
    status: PullStatus
    next_offset: int


def _masters(route: TopicRouteData) -> dict[str, str]:
    """Broker name -> master address, for the brokers of a route that have one."""
    return {
        b.broker_name: addr for b in route.broker_datas if (addr := b.master_addr()) is not None
    }


def _broker_addrs(route: TopicRouteData) -> list[str]:
    """One address per broker of the route: the master, else its first slave
    (RocketMQ's BrokerData.selectBrokerAddr)."""
    out = []
    for broker in route.broker_datas:
        addrs = broker.broker_addrs
        if addrs:
            out.append(addrs.get(MASTER_ID) or addrs[min(addrs)])
    return out


async def _gather_counted(
    calls: list[Awaitable[T]], progress: Callable[[int, int], None] | None
) -> list[T]:
    """``asyncio.gather(*calls)``, telling ``progress`` each time one of them is done."""
    if progress is None:
        return list(await asyncio.gather(*calls))
    done = 0
    progress(0, len(calls))

    async def counted(call: Awaitable[T]) -> T:
        nonlocal done
        result = await call
        done += 1
        progress(done, len(calls))
        return result

    return list(await asyncio.gather(*(counted(c) for c in calls)))


def host_port_addr(host: str, port: int) -> str:
    """``host:port`` as a connection address (``[host]:port`` for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class AdminClient:
    """``async with AdminClient("127.0.0.1:9876") as admin: ...``"""

    def __init__(
        self,
        namesrv_addrs: str | Sequence[str],
        *,
        timeout_s: float = 3.0,
        remoting: RemotingClient | None = None,
        credentials: SessionCredentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        addrs = (
            parse_namesrv_addrs(namesrv_addrs)
            if isinstance(namesrv_addrs, str)
            else list(namesrv_addrs)
        )
        self._own_remoting = remoting is None
        self.remoting = remoting or RemotingClient(
            ClientConfig(
                connect_timeout_s=timeout_s,
                request_timeout_s=timeout_s,
                ssl_context=tls,
                credentials=credentials,
            )
        )
        self.namesrv = NamesrvApi(self.remoting, addrs, timeout_s=timeout_s)
        self.broker = BrokerApi(self.remoting, timeout_s=timeout_s)

    async def call(
        self,
        addr: str,
        code: int,
        header: ExtHeader | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        """One admin request to ``addr``; its answer, or the error its code names."""
        request = RemotingCommand.request(code, header.to_ext() if header else None, body)
        response = await self.remoting.invoke(addr, request, timeout_s or self.broker.timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"{addr}: {response.remark}")
        return response

    async def close(self) -> None:
        if self._own_remoting:
            await self.remoting.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- cluster layout -----------------------------------------------------------------

    async def master_addrs(self, cluster: str) -> list[str]:
        """Addresses of the masters of ``cluster``, sorted by broker name."""
        info = await self.namesrv.get_cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise ClientError(f"cluster {cluster} does not exist (known clusters: {known})")
        addrs = [
            addr
            for name in sorted(names)
            if (broker := info.broker_addr_table.get(name)) is not None
            and (addr := broker.master_addr()) is not None
        ]
        if not addrs:
            raise ClientError(f"cluster {cluster} has no master broker")
        return addrs

    async def target_brokers(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """mqadmin's ``-b`` (that broker) or ``-c`` (every master of the cluster)."""
        return await self._targets(cluster, broker_addr)

    async def _targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        # mqadmin: -b wins over -c
        if broker_addr:
            return [broker_addr]
        if cluster:
            return await self.master_addrs(cluster)
        raise ClientError("name a broker address or a cluster")

    async def cluster_list(self) -> list[BrokerSummary]:
        """Every broker process by cluster, name and id, with its runtime figures."""
        info = await self.namesrv.get_cluster_info()
        rows: list[tuple[str, BrokerData, int, str]] = []
        for cluster in sorted(info.cluster_addr_table):
            for name in sorted(info.cluster_addr_table[cluster]):
                broker = info.broker_addr_table.get(name)
                if broker is not None:
                    rows += [
                        (cluster, broker, bid, broker.broker_addrs[bid])
                        for bid in sorted(broker.broker_addrs)
                    ]
        answers = await asyncio.gather(
            *(self.broker.get_broker_runtime_info(addr) for *_, addr in rows),
            return_exceptions=True,
        )
        out = []
        for (cluster, broker, bid, addr), answer in zip(rows, answers, strict=True):
            if isinstance(answer, ApogeeError):
                out.append(BrokerSummary(cluster, broker.broker_name, bid, addr, error=str(answer)))
            elif isinstance(answer, BaseException):
                raise answer
            else:
                out.append(BrokerSummary(cluster, broker.broker_name, bid, addr, answer))
        return out

    async def ha_status(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[HAGroup]:
        """Replication status of every master and slave (of ``cluster``; or of the
        one broker at ``broker_addr``), grouped by broker name."""
        info = await self.namesrv.get_cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise ClientError(f"cluster {cluster} does not exist (known clusters: {known})")
        groups: list[tuple[str, str, list[tuple[int, str]]]] = []
        for name_cluster in sorted(info.cluster_addr_table):
            if cluster is not None and name_cluster != cluster:
                continue
            for name in sorted(info.cluster_addr_table[name_cluster]):
                broker = info.broker_addr_table.get(name)
                if broker is None:
                    continue
                nodes = sorted(broker.broker_addrs.items())
                if broker_addr is not None:
                    nodes = [(bid, addr) for bid, addr in nodes if addr == broker_addr]
                if nodes:
                    groups.append((name_cluster, name, nodes))
        if broker_addr is not None and not groups:
            groups.append(("", "", [(-1, broker_addr)]))  # a broker the name servers lack
        answers = await asyncio.gather(
            *(self.broker.get_broker_ha_status(addr) for _, _, ns in groups for _, addr in ns),
            return_exceptions=True,
        )
        out: list[HAGroup] = []
        it = iter(answers)
        for name_cluster, name, ns in groups:
            found: list[HANode] = []
            for bid, addr in ns:
                answer = next(it)
                if isinstance(answer, ApogeeError):
                    found.append(HANode(bid, addr, None, str(answer)))
                elif isinstance(answer, BaseException):
                    raise answer
                else:
                    found.append(HANode(bid, addr, answer))
            out.append(HAGroup(name_cluster, name, found))
        return out

    async def broker_status(self, broker_addr: str) -> dict[str, str]:
        return await self.broker.get_broker_runtime_info(broker_addr)

    async def update_broker_config(
        self, key: str, value: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Set one run-time broker setting on a broker or every master of a cluster."""
        targets = await self._targets(cluster, broker_addr)
        for addr in targets:
            await self.broker.update_broker_config(addr, {key: value})
        return targets

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Name-server side drain: topics of ``broker_name`` lose their write bit."""
        return await self.namesrv.wipe_write_perm(broker_name)

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        return await self.namesrv.add_write_perm(broker_name)

    # -- topics -------------------------------------------------------------------------

    async def create_topic(
        self, config: TopicConfig, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Create or update the topic on one broker or every master of a cluster."""
        targets = await self._targets(cluster, broker_addr)
        for addr in targets:
            await self.broker.create_topic(addr, config)
        return targets

    async def delete_topic(self, topic: str, cluster: str) -> TopicDeletion:
        """Delete the topic from every master of the cluster, then from the name servers."""
        masters = await self.master_addrs(cluster)
        for addr in masters:
            await self.broker.delete_topic(addr, topic)
        await self.namesrv.delete_topic(topic, cluster)
        return TopicDeletion(masters, list(self.namesrv.addrs))

    async def topic_list(self) -> list[str]:
        return sorted(await self.namesrv.get_all_topics())

    async def cluster_names(self) -> list[str]:
        """The clusters the name servers know, sorted."""
        return sorted((await self.namesrv.get_cluster_info()).cluster_addr_table)

    async def topic_clusters(self) -> dict[str, list[str]]:
        """Topic -> clusters serving it, without retry and dead-letter topics."""
        clusters = await self.cluster_names()
        lists = await asyncio.gather(*(self.namesrv.get_topics_by_cluster(c) for c in clusters))
        out: dict[str, list[str]] = {}
        for cluster, topics in zip(clusters, lists, strict=True):
            for topic in topics:
                if not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                    out.setdefault(topic, []).append(cluster)
        return dict(sorted(out.items()))

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.namesrv.get_route(topic)

    async def topic_status(
        self, topic: str, *, progress: Callable[[int, int], None] | None = None
    ) -> TopicStatsTable:
        """Min/max offset and last update of every queue, across the topic's brokers.

        ``progress(done, total)`` hears of each broker that answered.
        """
        route = await self.namesrv.get_route(topic)
        tables = await _gather_counted(
            [self.broker.get_topic_stats(addr, topic) for addr in _broker_addrs(route)], progress
        )
        merged = TopicStatsTable()
        for table in tables:
            merged = merged.merged(table)
        return TopicStatsTable(dict(sorted(merged.offset_table.items())))

    # -- consumer groups ------------------------------------------------------------------

    async def update_subscription_group(
        self,
        config: SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        targets = await self._targets(cluster, broker_addr)
        for addr in targets:
            await self.broker.update_subscription_group(addr, config)
        return targets

    async def consumer_progress(
        self,
        group: str,
        topic: str | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> ConsumeStats:
        """Per queue: broker offset, consumer offset and lag, across the group's brokers.

        The brokers are those of the group's retry topic, else of ``topic``
        (RocketMQ 5's rule); TopicNotExistError when neither has a route.
        ``progress(done, total)`` hears of each broker that answered.
        """
        candidates = [retry_topic(group)] + ([topic] if topic else [])
        route: TopicRouteData | None = None
        for i, name in enumerate(candidates):
            try:
                route = await self.namesrv.get_route(name)
                break
            except TopicNotExistError:
                if i == len(candidates) - 1:
                    raise
        assert route is not None
        parts = await _gather_counted(
            [self.broker.get_consume_stats(addr, group, topic) for addr in _broker_addrs(route)],
            progress,
        )
        merged = ConsumeStats()
        for part in parts:
            merged = merged.merged(part)
        return ConsumeStats(dict(sorted(merged.offset_table.items())), merged.consume_tps)

    # -- messages ---------------------------------------------------------------------------

    async def query_msg_by_id(self, msg_id: str, *, topic: str | None = None) -> MessageExt:
        """The message an id names: an offset msgId (its broker is encoded in it) or
        a producer's unique key (UNIQ_KEY, the ``msgId`` of a send result).

        A unique key is looked up in ``topic``, or, without one, in every
        topic of the cluster (up to UNIQ_KEY_SEARCH_TOPICS of them). When an
        offset lookup fails and ``topic`` is given, the id is tried as a
        unique key too, as mqadmin does.
        """
        text = msg_id.strip()
        try:
            kind = classify_msg_id(text)
        except ValueError as exc:
            raise ClientError(
                f"message id {msg_id!r} is neither an offset message id nor a unique key: {exc}"
            ) from None
        if isinstance(kind, UniqKey):
            if topic is not None:
                return await self._by_unique_key(topic, text)
            return await self._by_unique_key_anywhere(kind)
        where = kind
        addr = host_port_addr(where.host, where.port)
        try:
            return await self.broker.view_message(addr, where.offset)
        except (RemotingError, BrokerResponseError):
            if topic is None:
                raise
            return await self._by_unique_key(topic, msg_id)

    async def _by_unique_key_anywhere(self, key: UniqKey) -> MessageExt:
        topics = [
            t for t in await self.topic_list() if not t.startswith("%") and not is_system_topic(t)
        ]
        made = dt.datetime.fromtimestamp(key.made_around(int(time.time() * 1000)) / 1000)
        what = (
            f"{key.text} is a producer's unique key (made at {key.producer_ip}, pid {key.pid}, "
            f"around {made:%Y-%m-%d %H:%M:%S})"
        )
        if len(topics) > UNIQ_KEY_SEARCH_TOPICS:
            raise ClientError(f"{what}; give its topic with -t ({len(topics)} topics to search)")
        gate = asyncio.Semaphore(16)

        async def look(topic: str) -> list[MessageExt]:
            async with gate:
                try:
                    return await self.query_msg_by_key(topic, key.text, unique_key=True)
                except TopicNotExistError:
                    return []

        found = [m for part in await asyncio.gather(*(look(t) for t in topics)) for m in part]
        if not found:
            raise ClientError(f"{what}; no topic holds it ({len(topics)} searched)")
        return min(found, key=lambda m: m.store_timestamp)

    async def _by_unique_key(self, topic: str, key: str) -> MessageExt:
        found = await self.query_msg_by_key(topic, key, unique_key=True)
        if not found:
            raise ClientError(f"no message of topic {topic} has id {key}")
        return found[0]

    async def query_msg_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin_ms: int = 0,
        end_ms: int = 2**63 - 1,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """Messages with ``key`` among their KEYS, from every broker of the topic, oldest first."""
        route = await self.namesrv.get_route(topic)
        found = await asyncio.gather(
            *(
                self.broker.query_message(
                    addr,
                    topic,
                    key,
                    max_num=max_num,
                    begin_ms=begin_ms,
                    end_ms=end_ms,
                    unique_key=unique_key,
                )
                for addr in _broker_addrs(route)
            )
        )
        messages = [m for part in found for m in part]
        return sorted(messages, key=lambda m: (m.store_timestamp, m.msg_id))

    async def send_message(
        self,
        msg: Message,
        *,
        broker_name: str | None = None,
        queue_id: int | None = None,
        producer_group: str = DEFAULT_PRODUCER_GROUP,
    ) -> SendResult:
        """Send one message to a queue the route offers, or to the queue named."""
        route = await self.namesrv.get_route(msg.topic)
        masters = _masters(route)
        queues = [
            MessageQueue(msg.topic, q.broker_name, i)
            for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if writeable(q.perm) and q.broker_name in masters
            for i in range(q.write_queue_nums)
        ]
        if broker_name is not None:
            if broker_name not in masters:
                raise ClientError(f"broker {broker_name} has no master serving topic {msg.topic}")
            queues = [q for q in queues if q.broker_name == broker_name]
        if queue_id is not None:
            if broker_name is None:
                raise ClientError("a queue id needs a broker name")
            queues = [q for q in queues if q.queue_id == queue_id]
        if not queues:
            where = (
                f"queue {queue_id} of broker {broker_name}" if queue_id is not None else "a queue"
            )
            raise ClientError(f"topic {msg.topic} has no writable {where}")
        mq = random.choice(queues)
        return await self.broker.send(
            masters[mq.broker_name],
            mq.broker_name,
            msg,
            queue_id=mq.queue_id,
            producer_group=producer_group,
        )

    async def consume_messages(
        self,
        topic: str,
        *,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        count: int = 128,
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> list[QueueMessages]:
        """Read up to ``count`` messages, queue by queue, without committing offsets.

        Each queue is read from ``offset`` (only with a queue named) or its min
        offset, until ``count`` is reached or the queue has no more.
        """
        if queue_id is not None and broker_name is None:
            raise ClientError("a queue id needs a broker name")
        if offset is not None and queue_id is None:
            raise ClientError("an offset needs a queue id")
        if count <= 0:
            raise ClientError("the message count must be positive")
        route = await self.namesrv.get_route(topic)
        masters = _masters(route)
        queues = self._read_queues(topic, route.queue_datas, masters, broker_name, queue_id)
        out: list[QueueMessages] = []
        left = count
        for mq in queues:
            if left <= 0:
                break
            read = await self._read_queue(masters[mq.broker_name], mq, offset, left, group)
            left -= len(read.messages)
            out.append(read)
        return out

    @staticmethod
    def _read_queues(
        topic: str,
        queue_datas: Sequence[QueueData],
        masters: dict[str, str],
        broker_name: str | None,
        queue_id: int | None,
    ) -> list[MessageQueue]:
        queues = [
            MessageQueue(topic, q.broker_name, i)
            for q in sorted(queue_datas, key=lambda q: q.broker_name)
            if readable(q.perm) and q.broker_name in masters
            for i in range(q.read_queue_nums)
        ]
        if broker_name is not None:
            queues = [q for q in queues if q.broker_name == broker_name]
            if not queues:
                raise ClientError(f"broker {broker_name} has no master serving topic {topic}")
        if queue_id is not None:
            queues = [q for q in queues if q.queue_id == queue_id]
            if not queues:
                raise ClientError(
                    f"topic {topic} has no readable queue {queue_id} on {broker_name}"
                )
        return queues

    async def _read_queue(
        self, addr: str, mq: MessageQueue, offset: int | None, limit: int, group: str
    ) -> QueueMessages:
        next_offset = offset
        if next_offset is None:
            next_offset = await self.broker.get_min_offset(addr, mq.topic, mq.queue_id)
        messages: list[MessageExt] = []
        status = PullStatus.NO_NEW_MSG
        while len(messages) < limit:
            result = await self.broker.pull(
                addr,
                group,
                mq.topic,
                mq.queue_id,
                next_offset,
                max_nums=min(_PULL_BATCH, limit - len(messages)),
            )
            status = result.status
            if status is PullStatus.OFFSET_ILLEGAL or result.next_begin_offset == next_offset:
                break
            next_offset = result.next_begin_offset
            messages += result.messages  # never more than asked for
            if status is PullStatus.NO_NEW_MSG:
                break
        return QueueMessages(mq, messages, status, next_offset)
