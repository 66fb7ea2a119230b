"""Requests the broker sends to its clients over their own connections (RocketMQ Broker2Client).

Owns: NOTIFY_CONSUMER_IDS_CHANGED, sent oneway (header consumerGroup) to
every consumer of a group whose membership changed, so that each one
rebalances at once instead of at its next 10 s (C++) or 20 s (Java) round;
CHECK_TRANSACTION_STATE, sent oneway to one open connection of a producer
group, picked at random (ProducerManager.getAvailableChannel); any oneway
notice to every consumer of a group (``tell_all``: RESET_CONSUMER_CLIENT_OFFSET).

Sends never block the caller (a registry change listener): each one runs as
a task, tracked until it finishes so that ``close`` can wait for them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Coroutine, Hashable, Iterable
from typing import Any

from apogee.codes import RequestCode
from apogee.errors import ApogeeError
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import CheckTransactionStateRequestHeader
from apogee.remoting.connection import Connection

log = logging.getLogger(__name__)


class Broker2Client:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0

    def notify_consumer_ids_changed(self, group: str, channels: Iterable[Hashable]) -> None:
        for channel in channels:
            if isinstance(channel, Connection) and not channel.closed:
                request = RemotingCommand.oneway(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}
                )
                self._spawn(self._oneway(channel, request))

    def tell_all(self, channels: Iterable[Hashable], request: RemotingCommand) -> int:
        """Send oneway ``request`` to every open connection among ``channels``; how many."""
        told = 0
        for channel in channels:
            if isinstance(channel, Connection) and not channel.closed:
                copy = RemotingCommand.oneway(request.code, dict(request.ext_fields or {}),
                                              request.body_bytes())  # fmt: skip
                self._spawn(self._oneway(channel, copy))
                told += 1
        return told

    def check_transaction_state(
        self,
        channels: Iterable[Hashable],
        header: CheckTransactionStateRequestHeader,
        body: bytes,
    ) -> bool:
        """Ask one open producer connection among ``channels``; False when there is none."""
        live = [c for c in channels if isinstance(c, Connection) and not c.closed]
        if not live:
            return False
        request = RemotingCommand.oneway(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), body)
        self._spawn(self._oneway(random.choice(live), request))
        return True

    async def _oneway(self, conn: Connection, request: RemotingCommand) -> None:
        try:
            await conn.invoke_oneway(request)
            self.sent += 1
        except ApogeeError as exc:
            log.info("cannot notify %s: %s", conn.peer, exc)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
