"""Telling the name servers about this broker: REGISTER_BROKER and UNREGISTER_BROKER.

Owns: the registration request (header + RegisterBrokerBody with the topic
wrapper and its DataVersion, reference §3.4), sending it to every name
server at once, what the answers say (masterAddr, haServerAddr, kept for
slaves and HA), and the registration loop: at start, every
registerNameServerPeriod (30 s) and as soon as the topic table changes.

A name server that does not answer is logged and retried on the next round;
the other name servers are not held up by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from zlib_ng.zlib_ng import crc32

from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ApogeeError
from apogee.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigWrapper,
    encode_register_broker_body,
)
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from apogee.remoting.client import RemotingClient

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str  # ip:port clients use
    ha_server_addr: str


class NamesrvRegistrar:
    """Registers one broker with every configured name server."""

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: list[str],
        identity: BrokerIdentity,
        topics: Callable[[], TopicConfigWrapper],
        *,
        timeout_s: float = 6.0,
    ) -> None:
        self._client = client
        self.namesrv_addrs = namesrv_addrs
        self.identity = identity
        self._topics = topics
        self._timeout_s = timeout_s
        self.master_addr: str | None = None
        self.ha_server_addr: str | None = None
        self.registrations = 0  # rounds with at least one name server answering 0

    def _register_request(self) -> RemotingCommand:
        ident = self.identity
        body = encode_register_broker_body(RegisterBrokerBody(self._topics()))
        header = RegisterBrokerRequestHeader(
            broker_name=ident.broker_name,
            broker_addr=ident.broker_addr,
            cluster_name=ident.cluster_name,
            ha_server_addr=ident.ha_server_addr,
            broker_id=ident.broker_id,
            compressed=False,
            body_crc32=_java_crc32(body),
        )
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), body)

    async def register_all(self) -> int:
        """Register with every name server; the number that accepted."""
        if not self.namesrv_addrs:
            return 0
        results = await asyncio.gather(*(self._register(addr) for addr in self.namesrv_addrs))
        accepted = sum(results)
        if accepted:
            self.registrations += 1
        return accepted

    async def _register(self, addr: str) -> bool:
        try:
            response = await self._client.invoke(addr, self._register_request(), self._timeout_s)
        except ApogeeError as exc:
            log.warning("register broker with name server %s failed: %s", addr, exc)
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "name server %s refused the registration: %d %s",
                addr,
                response.code,
                response.remark,
            )
            return False
        answer = RegisterBrokerResponseHeader.from_ext(response.ext_fields)
        self.master_addr = answer.master_addr or self.master_addr
        self.ha_server_addr = answer.ha_server_addr or self.ha_server_addr
        return True

    async def unregister_all(self) -> None:
        ident = self.identity
        header = UnregisterBrokerRequestHeader(
            ident.broker_name, ident.broker_addr, ident.cluster_name, ident.broker_id
        )

        async def one(addr: str) -> None:
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext())
            try:
                await self._client.invoke(addr, request, self._timeout_s)
            except ApogeeError as exc:
                log.warning("unregister broker from name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(addr) for addr in self.namesrv_addrs))


def _java_crc32(data: bytes) -> int:
    """CRC32 as Java's UtilAll.crc32 reports it: a non-negative int (top bit cleared)."""
    return crc32(data) & 0x7FFFFFFF


class RegistrationService:
    """Registers at start, again after ``first_delay_s`` (RocketMQ: 10 s), then every
    ``period_s``, and soon after ``request()``.

    A round that some name server did not accept is tried again after
    ``retry_s``, doubling up to ``period_s``: a broker that starts while its
    name server is busy or restarting is routable within seconds, not after
    the next 30 s round.
    """

    def __init__(
        self,
        registrar: NamesrvRegistrar,
        period_s: float,
        first_delay_s: float = 10.0,
        retry_s: float = 1.0,
    ) -> None:
        self._registrar = registrar
        self._period_s = period_s
        self._first_delay_s = min(first_delay_s, period_s)
        self._retry_s = min(retry_s, period_s)
        self._next_wait_s = self._first_delay_s
        self._retry_wait_s: float | None = None  # while name servers miss rounds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def request(self) -> None:
        """Register again soon (the topic table changed)."""
        self._wake.set()

    async def register_now(self) -> int:
        """Register with every name server now and wait for the answers.

        Admin changes answer only after this, so the change is visible in routes
        as soon as the admin tool hears back (RocketMQ registers synchronously
        there too). A round the change listener asked for is covered by it.
        """
        self._wake.clear()
        return await self._registrar.register_all()

    async def start(self) -> None:
        """Register once now, then keep registering in the background."""
        await self._round(self._first_delay_s)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="registration")

    async def _run(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the
            # event's result when the event is set as the task is cancelled, so
            # ``stop`` would wait forever for a loop that never saw its cancel.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._next_wait_s):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._round(self._period_s)
            except Exception:
                log.exception("registration round failed")
                self._next_wait_s = self._period_s

    async def _round(self, then_s: float) -> None:
        """One round; the next comes after ``then_s``, or sooner when a name server missed it."""
        accepted = await self._registrar.register_all()
        if accepted < len(self._registrar.namesrv_addrs):
            last = self._retry_wait_s
            self._retry_wait_s = self._retry_s if last is None else min(last * 2, self._period_s)
            self._next_wait_s = self._retry_wait_s
        else:
            self._retry_wait_s = None
            self._next_wait_s = then_s

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
