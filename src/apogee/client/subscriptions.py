"""What a consumer subscribes to: topics with a tag expression or an SQL92 selector.

Owns: :class:`Subscriptions`, a consumer's table of ``SubscriptionData`` by
topic, and the per-message checks a consumer makes on what it pulled.

Rules (RocketMQ's FilterAPI and DefaultMQPushConsumerImpl.copySubscription):

* a tag expression is ``"*"`` (everything) or tags joined by ``||``
  (``"created || paid"``); an SQL92 selector is checked by the client
  (``apogee.model.filter``) so a bad one fails at ``subscribe``, naming where,
  and is evaluated by the broker (``enablePropertyFilter=true``);
* ``sub_version`` is the millisecond time of the subscription, so a broker
  keeps the newest one a client sent;
* a CLUSTERING push consumer also reads ``%RETRY%<group>`` with ``"*"``:
  the messages it handed back for a later retry come back there. A
  BROADCASTING consumer does not (its failures are not retried), nor does a
  lite pull consumer (it hands nothing back);
* brokers filter TAG subscriptions on tag hash codes; the client re-checks
  the tag itself (:meth:`Subscriptions.tag_filter`), so a hash collision
  never reaches the application.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from apogee.errors import ClientError
from apogee.model.client import MessageModel
from apogee.model.filter import compile_sql92
from apogee.model.subscription import EXPRESSION_SQL92, SUB_ALL, SubscriptionData
from apogee.model.topic import retry_topic, validate_topic

#: a check on one message's tag; None when every tag passes
TagFilter = Callable[[str | None], bool]


def build_subscription(
    topic: str, expression: str = SUB_ALL, *, sql: str | None = None, sub_version: int = 0
) -> SubscriptionData:
    """The subscription of ``topic`` to a tag ``expression`` or to an ``sql`` selector.

    Raises:
        ClientError: a bad topic name, or both a tag expression and SQL.
        TagExpressionError / FilterExpressionError: the expression does not parse.
    """
    why = validate_topic(topic)
    if why is not None:
        raise ClientError(f"topic: {why}")
    version = sub_version or time.time_ns() // 1_000_000
    if sql is not None:
        if expression not in ("", SUB_ALL):
            raise ClientError("subscribe with a tag expression or with sql=..., not both")
        if not sql.strip():
            raise ClientError("sql: the selector is empty")
        compile_sql92(sql)  # refuses a bad selector here, naming where
        return SubscriptionData(topic, sql, sub_version=version, expression_type=EXPRESSION_SQL92)
    return SubscriptionData.build(topic, expression, sub_version=version)


class Subscriptions:
    """A consumer's subscriptions by topic (see the module docstring)."""

    def __init__(self, group: str, model: MessageModel, *, with_retry: bool = True) -> None:
        self.group = group
        self.model = model
        self._by_topic: dict[str, SubscriptionData] = {}
        self._retry = retry_topic(group)
        if model is MessageModel.CLUSTERING and with_retry:
            self._by_topic[self._retry] = SubscriptionData.build(self._retry, SUB_ALL)

    @property
    def retry_topic(self) -> str:
        return self._retry

    def add(self, sub: SubscriptionData) -> bool:
        """Subscribe (or change the subscription of its topic); True when it changed."""
        if sub.topic == self._retry:
            raise ClientError(f"topic: {sub.topic} is the group's retry topic, read already")
        old = self._by_topic.get(sub.topic)
        self._by_topic[sub.topic] = sub
        return old is None or (old.sub_string, old.expression_type) != (
            sub.sub_string,
            sub.expression_type,
        )

    def remove(self, topic: str) -> bool:
        if topic == self._retry:
            return False
        return self._by_topic.pop(topic, None) is not None

    def get(self, topic: str) -> SubscriptionData | None:
        return self._by_topic.get(topic)

    def __contains__(self, topic: object) -> bool:
        return topic in self._by_topic

    def topics(self) -> list[str]:
        """Every topic read, the retry topic included (CLUSTERING)."""
        return list(self._by_topic)

    def user_topics(self) -> list[str]:
        return [t for t in self._by_topic if t != self._retry]

    def all(self) -> tuple[SubscriptionData, ...]:
        return tuple(self._by_topic.values())

    def tag_filter(self, topic: str) -> TagFilter | None:
        """The client-side tag check for ``topic``; None when every message passes."""
        sub = self._by_topic.get(topic)
        if sub is None or sub.expression_type == EXPRESSION_SQL92 or sub.is_all:
            return None
        return sub.matches_tag
