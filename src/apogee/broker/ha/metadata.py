"""A slave copies its master's metadata (RocketMQ SlaveSynchronize).

Owns: the periodic copy, every ``slaveSyncIntervalMs`` (10 s) and once at
start, of the master's topic configs (GET_ALL_TOPIC_CONFIG), consumer
offsets (GET_ALL_CONSUMER_OFFSET), delay progress (GET_ALL_DELAY_OFFSET) and
subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), over the remoting
port of the master the name servers name; and handing back offsets that
consumers committed to this slave while the master was away.

Rules (as RocketMQ, plus the hand-back):
* topics and groups are taken whole, and only when the master's DataVersion
  differs from the one held;
* delay offsets are taken whole;
* consumer offsets: first every offset committed here that is ahead of the
  master's is sent to the master (UPDATE_CONSUMER_OFFSET) and forgotten once
  the master took it (or is as far); then the master's table is taken, with
  the offsets still waiting to go back on top;
* a master that cannot be reached is logged and tried again next round;
  nothing held here changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.offsets import ConsumerOffsetManager, decode_offset_table, offset_key
from apogee.broker.schedule_service import DelayOffsetTable
from apogee.broker.topics import TopicConfigManager
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ApogeeError, ProtocolError
from apogee.protocol.bodies import decode_subscription_group_wrapper, decode_topic_config_wrapper
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import UpdateConsumerOffsetRequestHeader
from apogee.remoting.client import RemotingClient

log = logging.getLogger(__name__)


class SlaveSync:
    """Copies metadata from the master; ``sync_all`` is one round."""

    def __init__(
        self,
        client: RemotingClient,
        master_addr: Callable[[], str | None],
        *,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        delay_offsets: DelayOffsetTable,
        timeout_s: float = 3.0,
    ) -> None:
        self._client = client
        self._master_addr = master_addr
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._delay_offsets = delay_offsets
        self._timeout_s = timeout_s
        self.rounds = 0
        self.handed_back = 0
        self._failing = False

    async def sync_all(self) -> bool:
        """One round; False when the master could not be asked everything."""
        addr = self._master_addr()
        if not addr:
            return False
        try:
            topics = await self._get(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
            if self._topics.adopt(decode_topic_config_wrapper(topics)):
                log.info("topic configs copied from the master %s", addr)
            await self._sync_offsets(addr)
            delays = await self._get(addr, RequestCode.GET_ALL_DELAY_OFFSET)
            before = dict(self._delay_offsets.table)
            self._delay_offsets.load(delays)
            self._delay_offsets.dirty = self._delay_offsets.table != before
            groups = await self._get(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            if self._groups.adopt(decode_subscription_group_wrapper(groups)):
                log.info("subscription groups copied from the master %s", addr)
        except (ApogeeError, ProtocolError) as exc:
            # Once per outage, not every round while the master is away.
            level = logging.WARNING if not self._failing else logging.DEBUG
            log.log(level, "copying metadata from the master %s failed: %s", addr, exc)
            self._failing = True
            return False
        if self._failing:
            log.info("copying metadata from the master %s again", addr)
            self._failing = False
        self.rounds += 1
        return True

    async def _get(self, addr: str, code: int) -> bytes:
        response = await self._client.invoke(addr, RemotingCommand.request(code), self._timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise ApogeeError(f"request {code} answered {response.code}: {response.remark}")
        return response.body_bytes()

    async def _sync_offsets(self, addr: str) -> None:
        theirs = decode_offset_table(await self._get(addr, RequestCode.GET_ALL_CONSUMER_OFFSET))
        local = self._offsets.local_commits
        if local:
            for (group, topic, queue_id), offset in list(local.items()):
                known = theirs.get(offset_key(topic, group), {}).get(queue_id, -1)
                if offset > known:
                    await self._hand_back(addr, group, topic, queue_id, offset)
                    theirs.setdefault(offset_key(topic, group), {})[queue_id] = offset
                    self.handed_back += 1
                if local.get((group, topic, queue_id)) == offset:
                    del local[(group, topic, queue_id)]
        self._offsets.adopt(theirs)

    async def _hand_back(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
        response = await self._client.invoke(addr, request, self._timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise ApogeeError(f"the master refused offset {offset} of {group}: {response.remark}")
        log.info("gave the master %s the offset %d of %s %s:%d committed here", addr, offset,
                 group, topic, queue_id)  # fmt: skip
