"""Requests built to hurt the broker: each is refused clearly and nobody else waits."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ApogeeError
from apogee.model.client import ConsumerData, HeartbeatData
from apogee.model.javahash import java_string_hash
from apogee.model.subscription import MAX_TAG_EXPRESSION_LENGTH, SubscriptionData
from apogee.protocol.bodies import encode_heartbeat
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker
from tests.integration.broker.wire import pull, send

MANY_TAGS = " || ".join(f"tag-{i}" for i in range(100_000))  # ~1 MB


async def answered_while(
    client: RemotingClient, addr: str, hostile: asyncio.Future[RemotingCommand]
) -> float:
    """The slowest answer another client got while ``hostile`` was being served."""
    slowest = 0.0
    while not hostile.done():
        began = time.monotonic()
        answer = await client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        assert answer.code == ResponseCode.SUCCESS
        slowest = max(slowest, time.monotonic() - began)
        await asyncio.sleep(0.005)
    return slowest


async def test_a_pull_with_a_huge_tag_expression_is_refused_without_freezing_the_loop(
    broker: Broker, client: RemotingClient
) -> None:
    assert (await send(client, broker.address, "T", b"x", tags="tag-7")).code == 0
    async with RemotingClient() as other:
        hostile = asyncio.ensure_future(
            pull(client, broker.address, "T", 0, 0, subscription=MANY_TAGS, timeout_s=30)
        )
        slowest = await answered_while(other, broker.address, hostile)
        answer = await hostile
    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert str(MAX_TAG_EXPRESSION_LENGTH) in (answer.remark or "")
    assert slowest < 1.0  # it was 68 s when tags were de-duplicated in a list

    # Thousands of tags within the limit still work, and match by set look-up.
    within = " || ".join(f"tag-{i}" for i in range(5000))
    assert len(within) <= MAX_TAG_EXPRESSION_LENGTH
    found = await pull(client, broker.address, "T", 0, 0, subscription=within)
    assert found.code == ResponseCode.SUCCESS


async def test_a_heartbeat_with_a_huge_subscription_is_refused(
    broker: Broker, client: RemotingClient
) -> None:
    tags = tuple(f"tag-{i}" for i in range(100_000))
    sub = SubscriptionData("T", MANY_TAGS, tags, tuple(java_string_hash(t) for t in tags))
    beat = HeartbeatData("c1", consumers=(ConsumerData("cg", subscriptions=(sub,)),))
    request = RemotingCommand.request(RequestCode.HEART_BEAT, body=encode_heartbeat(beat))
    async with RemotingClient() as other:
        hostile = asyncio.ensure_future(client.invoke(broker.address, request, 30))
        slowest = await answered_while(other, broker.address, hostile)
        answer = await hostile
    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert slowest < 1.0


async def test_an_absurd_committed_offset_is_refused_and_saving_goes_on(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with run_broker(store) as broker, RemotingClient() as client:
        api = BrokerApi(client, timeout_s=5)
        assert (await send(client, broker.address, "T", b"x")).code == ResponseCode.SUCCESS
        with pytest.raises(ApogeeError) as refused:
            await api.update_consumer_offset(broker.address, "g1", "T", 0, 2**64)
        assert "commitOffset" in str(refused.value)
        await api.update_consumer_offset(broker.address, "g2", "T", 0, 1)
        assert await api.query_consumer_offset(broker.address, "g2", "T", 0) == 1
        everything = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET)
        )
        assert everything.code == ResponseCode.SUCCESS
    assert not (store / "abort").exists()  # closed cleanly
    async with run_broker(store) as broker, RemotingClient() as client:
        api = BrokerApi(client, timeout_s=5)
        assert await api.query_consumer_offset(broker.address, "g2", "T", 0) == 1


async def test_a_pull_at_an_offset_beyond_any_long_is_refused_naming_the_field(
    broker: Broker, client: RemotingClient
) -> None:
    answer = await pull(client, broker.address, "T", 0, 10**100)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "queueOffset" in (answer.remark or "")
