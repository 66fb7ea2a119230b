"""Transactions across a SIGKILL of a real ``apogee broker`` process.

Before the crash one half message is left open (the broker has already put it
again for checks nobody answered: no producer had joined), one is committed
and one rolled back. After the restart the open one is asked about and its
commit delivers it once; the committed one is not delivered again and the
rolled-back one never is, whatever the producer sends for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from apogee.client.broker_api import BrokerApi
from apogee.client.transaction import (
    LocalTransactionState,
    TransactionCheckHandler,
    end_transaction,
    send_half,
)
from apogee.model.client import HeartbeatData, ProducerData
from apogee.model.message import Message, MessageExt
from apogee.model.results import SendResult
from apogee.model.topic import TRANS_HALF_TOPIC
from apogee.remoting.client import RemotingClient
from apogee.remoting.dispatch import HandlerTable
from apogee.testing.cluster import BrokerProcess, eventually
from apogee.testing.reading import read_queue

GROUP = "tx-pg"
FAST_CHECKS = {"transactionCheckInterval": "150", "transactionTimeOut": "100"}


async def delivered(api: BrokerApi, addr: str, topic: str = "TxTopic") -> list[bytes]:
    return [m.body for m in await read_queue(api, addr, topic, 0)]


@asynccontextmanager
async def producer(asked: list[MessageExt]) -> AsyncIterator[BrokerApi]:
    def commit(msg: MessageExt) -> LocalTransactionState:
        asked.append(msg)
        return LocalTransactionState.COMMIT_MESSAGE

    table = HandlerTable()
    checks = TransactionCheckHandler()
    checks.add_listener(GROUP, commit)
    checks.register(table)
    async with RemotingClient(handlers=table) as client:
        yield BrokerApi(client, timeout_s=5)


async def half(api: BrokerApi, addr: str, body: bytes) -> SendResult:
    msg = Message("TxTopic", body)
    return await send_half(api, addr, "broker-a", msg, queue_id=0, producer_group=GROUP)


async def test_a_crash_keeps_open_transactions_open_and_resolved_ones_resolved(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "store", "", properties=FAST_CHECKS)
    broker.start()
    asked: list[MessageExt] = []
    try:
        async with producer(asked) as api:
            addr = broker.address
            await half(api, addr, b"open")
            committed = await half(api, addr, b"committed")
            rolled = await half(api, addr, b"rolled")
            commit, rollback = (
                LocalTransactionState.COMMIT_MESSAGE,
                LocalTransactionState.ROLLBACK_MESSAGE,
            )
            await end_transaction(api, addr, committed, GROUP, commit, oneway=False)
            await end_transaction(api, addr, rolled, GROUP, rollback, oneway=False)

            async def checked_twice() -> bool:
                # Two copies of "open" beyond its half. Counting copies of that body, not
                # the queue's length: on a busy machine a round may copy "committed" too,
                # before its END_TRANSACTION arrives.
                halves = await delivered(api, addr, TRANS_HALF_TOPIC)
                return halves.count(b"open") >= 3

            await eventually(checked_twice, timeout_s=10)
            assert await delivered(api, addr) == [b"committed"]
        broker.kill()
        broker.start()
        async with producer(asked) as api:
            hb = HeartbeatData("tx-client@1", producers=(ProducerData(GROUP),))
            await api.heartbeat(addr, hb)

            async def open_one_committed() -> list[bytes] | None:
                got = await delivered(api, addr)
                return got if len(got) >= 2 else None

            assert await eventually(open_one_committed, timeout_s=15) == [b"committed", b"open"]
            for again in (committed, rolled):
                await end_transaction(api, addr, again, GROUP, commit, oneway=False)
            marker = Message("TxTopic", b"marker")  # in the queue after anything those did
            await api.send(addr, "broker-a", marker, queue_id=0, producer_group="plain")

            async def settled() -> list[bytes] | None:
                got = await delivered(api, addr)
                return got if got[-1:] == [b"marker"] else None

            assert await eventually(settled) == [b"committed", b"open", b"marker"]
    finally:
        broker.stop()
    assert {m.body for m in asked} == {b"open"}
    assert all(int(m.properties["TRANSACTION_CHECK_TIMES"]) >= 3 for m in asked)
