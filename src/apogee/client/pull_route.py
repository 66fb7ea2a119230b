"""Which broker of a group a consumer pulls each queue from (RocketMQ's pullFromWhichNodeTable).

Owns: ``PullTargets``: per message queue, the broker id the last pull answer
suggested (``suggestWhichBrokerId``: a master sends a consumer that reads
cold data to a slave, a slave sends it back), the address to pull from given
the group's ``BrokerData``, and ``pull``, which pulls through ``BrokerApi``
and records the new suggestion.

Choosing (RocketMQ ``findBrokerAddressInSubscribe(name, id, onlyThisBroker=false)``):
the suggested id if the route lists it; else the master; else, the master
being gone, the slave with the lowest id, so consumers keep consuming from
the slave. A pull that goes to a slave never carries a commit offset (a
slave does not take offsets that way). Without a suggestion the master is
asked first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apogee.client.broker_api import BrokerApi
from apogee.errors import ClientError
from apogee.model.client import MessageQueue
from apogee.model.received import ReceivedMessage
from apogee.model.results import PullResult
from apogee.model.route import MASTER_ID, BrokerData


@dataclass(frozen=True, slots=True)
class PullTarget:
    addr: str
    broker_id: int

    @property
    def is_slave(self) -> bool:
        return self.broker_id != MASTER_ID


def pull_address(addrs: Mapping[int, str], wanted: int) -> PullTarget | None:
    """The broker of a group to pull from (see the module docstring); None if none listed."""
    addr = addrs.get(wanted)
    if addr is not None:
        return PullTarget(addr, wanted)
    addr = addrs.get(MASTER_ID)
    if addr is not None:
        return PullTarget(addr, MASTER_ID)
    if addrs:
        lowest = min(addrs)
        return PullTarget(addrs[lowest], lowest)
    return None


class PullTargets:
    """Suggested broker ids by queue, and the address each queue is pulled from."""

    def __init__(self) -> None:
        self._suggested: dict[MessageQueue, int] = {}

    def suggest(self, mq: MessageQueue, broker_id: int) -> None:
        self._suggested[mq] = broker_id

    def suggested(self, mq: MessageQueue) -> int:
        return self._suggested.get(mq, MASTER_ID)

    def target(self, mq: MessageQueue, broker: BrokerData) -> PullTarget | None:
        """Where to pull ``mq`` from; None when the route lists no address at all."""
        return pull_address(broker.broker_addrs, self.suggested(mq))

    async def pull(
        self,
        api: BrokerApi,
        broker: BrokerData,
        group: str,
        mq: MessageQueue,
        offset: int,
        *,
        max_nums: int = 32,
        expression: str | None = "*",
        commit_offset: int | None = None,
        suspend_timeout_ms: int = 0,
        timeout_s: float | None = None,
    ) -> tuple[PullTarget, PullResult[ReceivedMessage]]:
        """Pull ``mq`` from the broker this table picks; the target and the result.

        Raises:
            ClientError: the route lists no broker address for ``broker``.
            RemotingError: the chosen broker cannot be reached (the caller
                refreshes the route; a master that is gone drops out of it).
        """
        target = self.target(mq, broker)
        if target is None:
            raise ClientError(f"no address of broker {broker.broker_name} in the route")
        result = await api.pull(
            target.addr, group, mq.topic, mq.queue_id, offset, max_nums=max_nums,
            expression=expression, sub_version=0,
            commit_offset=None if target.is_slave else commit_offset,
            suspend_timeout_ms=suspend_timeout_ms, timeout_s=timeout_s, lazy=True,
        )  # fmt: skip
        self.suggest(mq, result.suggest_which_broker_id)
        return target, result
