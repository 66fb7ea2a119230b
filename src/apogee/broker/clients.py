"""Producers and consumers the broker has heard from (RocketMQ ProducerManager / ConsumerManager).

Owns: per group, the client channels that sent a HEART_BEAT (client id,
language, version, last heard) and, for consumer groups, the consumption
settings and subscriptions; expiry of silent channels; membership-change
notifications.

A channel is any hashable handle of one client connection (the remoting
Connection in the broker); the registry never reads or writes it, it only
hands it to the ``notify`` callback. Rules:

* a channel silent for 120 s (CHANNEL_EXPIRED_MS) is dropped by ``scan_expired``;
  a closed channel is dropped at once by ``channel_closed``;
* a consumer group whose channels or subscriptions change calls
  ``notify(group, channels)`` with its remaining channels, when the group's
  notifyConsumerIdsChangedEnable allows (``wants_notify``), so that each
  consumer rebalances at once (NOTIFY_CONSUMER_IDS_CHANGED);
* subscriptions are replaced by each heartbeat's set; tag codes are
  recomputed from the tag strings, since the C++ client sends garbage codes;
* with property filters on, each SQL92 subscription is kept with its
  compiled filter (RocketMQ's ConsumerFilterData); one that does not compile
  has none, and is logged when it arrives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from apogee._util.clock import Clock
from apogee.errors import FilterExpressionError
from apogee.model.client import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel
from apogee.model.filter import SqlFilter, compile_sql92
from apogee.model.subscription import EXPRESSION_SQL92, EXPRESSION_TAG, SubscriptionData

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_MS = 120_000

Notify = Callable[[str, list[Hashable]], None]


@dataclass(slots=True)
class ClientChannel:
    channel: Hashable
    client_id: str
    language: str
    version: int
    last_update_ms: int


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    channels: dict[Hashable, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    filters: dict[str, SqlFilter] = field(default_factory=dict)  # topic -> compiled SQL92

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})


def normalize_subscription(sub: SubscriptionData) -> SubscriptionData:
    """Tag codes recomputed from the expression (the C++ client fills codeSet with atoi)."""
    if sub.expression_type != EXPRESSION_TAG or sub.class_filter_mode:
        return sub
    return SubscriptionData.build(sub.topic, sub.sub_string, sub_version=sub.sub_version)


class ClientRegistry:
    def __init__(
        self,
        clock: Clock,
        notify: Notify,
        wants_notify: Callable[[str], bool] = lambda group: True,
        *,
        property_filter: bool = False,
    ) -> None:
        self._clock = clock
        self._notify = notify
        self._wants_notify = wants_notify
        self._property_filter = property_filter
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[Hashable, ClientChannel]] = {}

    # -- registration ----------------------------------------------------------

    def _client(
        self, channel: Hashable, client_id: str, language: str, version: int
    ) -> ClientChannel:
        return ClientChannel(channel, client_id, language, version, self._clock.now_ms())

    def register_producer(
        self, channel: Hashable, client_id: str, group: str, *, language: str = "", version: int = 0
    ) -> None:
        channels = self.producers.setdefault(group, {})
        channels[channel] = self._client(channel, client_id, language, version)

    def register_consumer(
        self,
        channel: Hashable,
        client_id: str,
        data: ConsumerData,
        *,
        language: str = "",
        version: int = 0,
    ) -> bool:
        """Record a consumer heartbeat; True when membership or subscriptions changed."""
        info = self.consumers.get(data.group_name)
        if info is None:
            info = self.consumers[data.group_name] = ConsumerGroupInfo(
                data.group_name, data.consume_type, data.message_model, data.consume_from_where
            )
        info.consume_type = data.consume_type
        info.message_model = data.message_model
        info.consume_from_where = data.consume_from_where
        old = info.channels.get(channel)
        joined = old is None or old.client_id != client_id
        info.channels[channel] = self._client(channel, client_id, language, version)
        subs = {s.topic: normalize_subscription(s) for s in data.subscriptions}
        resubscribed = _topics_or_expressions_differ(info.subscriptions, subs)
        info.subscriptions = subs
        if self._property_filter:
            info.filters = _compile_filters(info.group, subs, log_refusals=resubscribed)
        if joined or resubscribed:
            self._group_changed(info)
        return joined or resubscribed

    def unregister_producer(self, group: str, channel: Hashable) -> None:
        channels = self.producers.get(group)
        if channels is not None and channels.pop(channel, None) is not None and not channels:
            del self.producers[group]

    def unregister_consumer(self, group: str, channel: Hashable) -> None:
        info = self.consumers.get(group)
        if info is not None and info.channels.pop(channel, None) is not None:
            self._after_removal(info)

    # -- expiry ----------------------------------------------------------------

    def channel_closed(self, channel: Hashable) -> None:
        """Forget ``channel`` in every group at once (its connection closed)."""
        for group in list(self.producers):
            self.unregister_producer(group, channel)
        for info in list(self.consumers.values()):
            if info.channels.pop(channel, None) is not None:
                self._after_removal(info)

    def scan_expired(self) -> list[ClientChannel]:
        """Drop channels not heard from for CHANNEL_EXPIRED_MS; return them."""
        cutoff = self._clock.now_ms() - CHANNEL_EXPIRED_MS
        expired: list[ClientChannel] = []
        for group, channels in list(self.producers.items()):
            for key, client in list(channels.items()):
                if client.last_update_ms < cutoff:
                    expired.append(client)
                    self.unregister_producer(group, key)
        for info in list(self.consumers.values()):
            gone = [c for c in info.channels.values() if c.last_update_ms < cutoff]
            for client in gone:
                del info.channels[client.channel]
            if gone:
                expired += gone
                self._after_removal(info)
        for client in expired:
            log.info(
                "client %s expired: silent for %d s", client.client_id, CHANNEL_EXPIRED_MS // 1000
            )
        return expired

    def _after_removal(self, info: ConsumerGroupInfo) -> None:
        if info.channels:
            self._group_changed(info)
        else:
            del self.consumers[info.group]

    def _group_changed(self, info: ConsumerGroupInfo) -> None:
        if self._wants_notify(info.group):
            self._notify(info.group, list(info.channels))

    # -- queries -----------------------------------------------------------------

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumers.get(group)

    def consumer_ids(self, group: str) -> list[str]:
        info = self.consumers.get(group)
        return info.client_ids() if info is not None else []

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumers.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def sql_filter(self, group: str, topic: str) -> SqlFilter | None:
        """The compiled SQL92 subscription of ``group`` to ``topic``, if it has one."""
        info = self.consumers.get(group)
        return info.filters.get(topic) if info is not None else None

    def producer_channels(self, group: str) -> Iterable[ClientChannel]:
        return list(self.producers.get(group, {}).values())


def _topics_or_expressions_differ(
    old: dict[str, SubscriptionData], new: dict[str, SubscriptionData]
) -> bool:
    if old.keys() != new.keys():
        return True
    return any(
        old[t].sub_string != new[t].sub_string or old[t].expression_type != new[t].expression_type
        for t in new
    )


def _compile_filters(
    group: str, subs: dict[str, SubscriptionData], *, log_refusals: bool
) -> dict[str, SqlFilter]:
    filters: dict[str, SqlFilter] = {}
    for topic, sub in subs.items():
        if sub.expression_type != EXPRESSION_SQL92:
            continue
        try:
            filters[topic] = compile_sql92(sub.sub_string)
        except FilterExpressionError as error:
            if log_refusals:
                log.warning("group %s: SQL92 subscription of %s refused: %s", group, topic, error)
    return filters
