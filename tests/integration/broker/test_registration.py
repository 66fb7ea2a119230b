"""A real NameServer and Broker in-process: registration, prompt topic routes, unregistration."""

from __future__ import annotations

import asyncio
import zlib
from pathlib import Path

from apogee.broker.registration import BrokerIdentity, NamesrvRegistrar, RegistrationService
from apogee.codes import RequestCode
from apogee.model.client import ConsumerData, HeartbeatData
from apogee.model.route import DataVersion, TopicRouteData
from apogee.model.topic import TopicConfig
from apogee.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigWrapper,
    encode_heartbeat,
    encode_register_broker_body,
)
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.namesrv import get_route
from tests.integration.broker.wire import send


async def test_a_broker_registers_its_topics_and_new_ones_at_once(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        ns_addr = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "store", ns_addr) as broker:
            route = await get_route(client, ns_addr, "TBW102")
            assert route is not None
            assert route.broker_datas[0].broker_addrs == {0: broker.address}
            assert route.queue_datas[0].perm == 7

            assert await get_route(client, ns_addr, "Fresh") is None
            await send(client, broker.address, "Fresh")

            async def fresh_routed() -> TopicRouteData | None:
                return await get_route(client, ns_addr, "Fresh")

            await eventually(fresh_routed)  # long before the 30 s round

            beat = HeartbeatData("id-1", consumers=(ConsumerData("cg"),))
            request = RemotingCommand.request(RequestCode.HEART_BEAT, body=encode_heartbeat(beat))
            await client.invoke(broker.address, request)

            async def retry_routed() -> TopicRouteData | None:
                return await get_route(client, ns_addr, "%RETRY%cg")

            await eventually(retry_routed)

        # stopping unregisters: the name server forgets the broker's topics at once
        assert await get_route(client, ns_addr, "Fresh") is None


def _registrar(client: RemotingClient, namesrvs: list[str]) -> NamesrvRegistrar:
    return NamesrvRegistrar(
        client,
        namesrvs,
        BrokerIdentity("C", "b", 0, "127.0.0.1:10911", "127.0.0.1:10912"),
        lambda: TopicConfigWrapper({}, DataVersion(1, 1)),
        timeout_s=1,
    )


async def test_registration_repeats_and_survives_a_missing_name_server(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        # the second one is not there
        registrar = _registrar(client, [f"127.0.0.1:{ns.port}", "127.0.0.1:1"])
        service = RegistrationService(registrar, period_s=0.05)
        await service.start()
        try:
            await asyncio.sleep(0.3)
        finally:
            await service.stop()
        assert registrar.registrations >= 3
        assert registrar.master_addr is None  # a master is told no master address


async def test_the_second_round_comes_after_the_first_delay_then_each_period(
    tmp_path: Path,
) -> None:
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        registrar = _registrar(client, [f"127.0.0.1:{ns.port}"])
        service = RegistrationService(registrar, period_s=30, first_delay_s=0.2)

        async def second() -> bool:
            return registrar.registrations == 2

        await service.start()
        try:
            assert registrar.registrations == 1
            await eventually(second)
            await asyncio.sleep(0.5)
        finally:
            await service.stop()
        assert registrar.registrations == 2  # the next one is a period away


async def test_a_round_a_name_server_missed_is_tried_again_within_seconds(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        # the second name server is not there (yet): the first still hears every round
        registrar = _registrar(client, [f"127.0.0.1:{ns.port}", "127.0.0.1:1"])
        service = RegistrationService(registrar, period_s=30, first_delay_s=30, retry_s=0.05)

        async def retried() -> bool:
            return registrar.registrations >= 4

        await service.start()
        try:
            # retries after 0.05, 0.1, 0.2, 0.4 s ... instead of the 30 s first delay
            await eventually(retried, 5.0)
        finally:
            await service.stop()


async def test_a_body_whose_crc_has_the_top_bit_set_is_accepted(tmp_path: Path) -> None:
    # Java's UtilAll.crc32 clears the top bit; both sides must agree on that
    def wrapper(name: str) -> TopicConfigWrapper:
        return TopicConfigWrapper({name: TopicConfig(name)}, DataVersion(1, 1))

    name = next(
        f"T{i}"
        for i in range(1000)
        if zlib.crc32(encode_register_broker_body(RegisterBrokerBody(wrapper(f"T{i}")))) >> 31
    )
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        registrar = NamesrvRegistrar(
            client,
            [f"127.0.0.1:{ns.port}"],
            BrokerIdentity("C", "b", 0, "127.0.0.1:10911", "127.0.0.1:10912"),
            lambda: wrapper(name),
        )
        assert await registrar.register_all() == 1
        assert await get_route(client, f"127.0.0.1:{ns.port}", name) is not None


async def test_stop_ends_the_loop_even_when_a_round_was_just_asked_for() -> None:
    """A slave asks for a round when its master goes away, which can be as it stops:
    the loop must see the cancel, whichever comes first."""
    async with RemotingClient() as client:
        registrar = NamesrvRegistrar(
            client,
            [],  # no name server: a round does nothing
            BrokerIdentity("C", "b", 1, "127.0.0.1:10911", "127.0.0.1:10912"),
            lambda: TopicConfigWrapper({}, DataVersion(1, 1)),
        )
        for spins in range(4):  # the request 0..3 loop iterations before the stop
            service = RegistrationService(registrar, period_s=30, first_delay_s=30)
            await service.start()
            await asyncio.sleep(0)
            service.request()
            for _ in range(spins):
                await asyncio.sleep(0)
            stopping = asyncio.ensure_future(service.stop())
            done, _ = await asyncio.wait({stopping}, timeout=2)
            stopping.cancel()  # a stop that hung is not left waiting
            assert done, f"stop hung: the round was asked for {spins} iterations before"
