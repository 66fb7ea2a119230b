"""The producers and consumers one client instance serves, and what heartbeats say of them.

Owns: ConsumerMember (what a consumer implements to join a ClientInstance)
and Members (producer groups and consumer members, one of each group per
instance, and the HeartbeatData built from them).

A consumer joins with ``ClientInstance.register_consumer(member)``; from then
on the instance

* puts ``member.consumer_data()`` (group, consume type, message model,
  consume-from-where, subscriptions) into every heartbeat, read afresh each
  time, so a changed subscription goes out with the next one (or at once
  with ``ClientInstance.heartbeat_now()``);
* refreshes the routes of the subscribed topics with its other routes;
* calls ``persist_offsets()`` every 5 s and once more when the member
  leaves or the instance closes;
* routes the broker's requests about the group to the member:
  NOTIFY_CONSUMER_IDS_CHANGED -> ``on_consumer_ids_changed()`` (rebalance),
  RESET_CONSUMER_CLIENT_OFFSET -> ``reset_offsets(topic, offsets)``,
  GET_CONSUMER_RUNNING_INFO -> ``running_info()`` (a JSON-ready mapping, the
  body of the answer: ConsumerRunningInfo's fields),
  CONSUME_MESSAGE_DIRECTLY -> ``await consume_directly(message)`` (the
  ConsumeMessageDirectlyResult fields; ClientError when this consumer cannot).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from apogee.errors import ClientError
from apogee.model.client import ConsumerData, HeartbeatData, MessageQueue, ProducerData
from apogee.model.received import ReceivedMessage


class ConsumerMember(Protocol):
    """A consumer as its client instance sees it."""

    @property
    def group(self) -> str: ...

    def consumer_data(self) -> ConsumerData:
        """What heartbeats announce for this consumer now."""
        ...

    async def persist_offsets(self) -> None:
        """Commit the offsets consumed so far (broker or local file)."""
        ...

    def on_consumer_ids_changed(self) -> None:
        """The broker says the group's members changed: rebalance soon."""
        ...

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """An operator reset the group's offsets of ``topic`` (resetOffsetByTime)."""
        ...

    def running_info(self) -> Mapping[str, object]:
        """The state an admin tool asks for (consumerStatus); JSON-ready."""
        ...

    async def consume_directly(self, msg: ReceivedMessage) -> Mapping[str, object]:
        """Consume one message an admin handed over; raises ClientError when it cannot."""
        ...


class Members:
    """Producer groups and consumer members of one client instance."""

    def __init__(self) -> None:
        self.producers: set[str] = set()
        self.consumers: dict[str, ConsumerMember] = {}

    def __bool__(self) -> bool:
        return bool(self.producers or self.consumers)

    def add_producer(self, group: str) -> None:
        if group in self.producers:
            raise ClientError(
                f"producer group {group} is already started in this client instance; "
                "give the second producer another instance_name"
            )
        self.producers.add(group)

    def remove_producer(self, group: str) -> bool:
        if group not in self.producers:
            return False
        self.producers.discard(group)
        return True

    def add_consumer(self, member: ConsumerMember) -> None:
        if member.group in self.consumers:
            raise ClientError(
                f"consumer group {member.group} is already started in this client instance; "
                "give the second consumer another instance_name"
            )
        self.consumers[member.group] = member

    def remove_consumer(self, group: str) -> ConsumerMember | None:
        return self.consumers.pop(group, None)

    def subscribed_topics(self) -> set[str]:
        return {
            sub.topic
            for member in self.consumers.values()
            for sub in member.consumer_data().subscriptions
        }

    def heartbeat(self, client_id: str) -> HeartbeatData:
        return HeartbeatData(
            client_id,
            producers=tuple(ProducerData(g) for g in sorted(self.producers)),
            consumers=tuple(m.consumer_data() for m in self.consumers.values()),
        )
