"""BrokerApi lock, send-back and group-deletion calls against a real broker (41, 42, 36, 207)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.model.client import MessageQueue
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import Message
from apogee.protocol.bodies import LockBatchRequestBody
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with run_broker(tmp_path / "store") as b:
        yield b


@pytest.fixture
async def api() -> AsyncIterator[BrokerApi]:
    async with RemotingClient() as client:
        yield BrokerApi(client)


async def test_lock_and_unlock_batch(broker: Broker, api: BrokerApi) -> None:
    addr = broker.address
    await api.send(addr, "broker-a", Message("T1", b"x"), queue_id=0, producer_group="pg")
    mqs = (MessageQueue("T1", "broker-a", 0), MessageQueue("T1", "broker-a", 1))
    mine = LockBatchRequestBody("G", "cid-1", mqs)
    assert set(await api.lock_batch(addr, mine)) == set(mqs)
    assert await api.lock_batch(addr, LockBatchRequestBody("G", "cid-2", mqs)) == ()
    await api.unlock_batch(addr, mine)
    assert set(await api.lock_batch(addr, LockBatchRequestBody("G", "cid-2", mqs))) == set(mqs)


async def test_send_back_lands_in_the_retry_topic(broker: Broker, api: BrokerApi) -> None:
    addr = broker.address
    await api.send(addr, "broker-a", Message("T1", b"fail me"), queue_id=0, producer_group="pg")
    [msg] = (await api.pull(addr, "G", "T1", 0, 0)).messages
    await api.send_back(addr, msg, "G", delay_level=-1)  # straight to the dead-letter queue
    [dead] = (await api.pull(addr, "G", "%DLQ%G", 0, 0)).messages
    assert dead.body == b"fail me"


async def test_delete_subscription_group(broker: Broker, api: BrokerApi) -> None:
    await api.update_subscription_group(broker.address, SubscriptionGroupConfig("G9"))
    assert broker.groups.get("G9") is not None
    await api.delete_subscription_group(broker.address, "G9", clean_offset=True)
    assert broker.groups.get("G9") is None
