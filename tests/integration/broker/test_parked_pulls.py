"""Parked pulls: bounded per connection, dropped with their connection, and re-checked.

The periodic check is RocketMQ's safety net (checkHoldRequest): a parked pull
whose queue has grown is woken even when no arrival was heard for it.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from apogee.broker.broker import Broker
from apogee.broker.long_polling import DROP_SLICE, RUN_SLICE
from apogee.codes import ResponseCode
from apogee.model.message_codec import iter_records
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.remoting.client import RemotingClient
from apogee.store.file_store import FileMessageStore
from apogee.testing.cluster import eventually, run_broker
from tests.integration.broker.wire import pull, pull_request, send

SUSPEND = 0x2 | 0x4  # FLAG_SUSPEND | FLAG_SUBSCRIPTION


async def test_parked_pulls_are_bounded_per_connection(tmp_path: Path) -> None:
    async with (
        run_broker(tmp_path / "store", max_parked_pulls_per_connection=3) as broker,
        RemotingClient() as client,
    ):
        assert (await send(client, broker.address, "T", b"x")).code == ResponseCode.SUCCESS
        parked = [
            asyncio.ensure_future(pull(client, broker.address, "T", q, 0 if q else 1,
                                       sys_flag=SUSPEND, suspend_ms=5000, timeout_s=10))
            for q in range(3)
        ]  # fmt: skip
        await eventually(lambda: _async(len(broker.holds) == 3))
        refused = await pull(client, broker.address, "T", 3, 0, sys_flag=SUSPEND, suspend_ms=5000)
        assert refused.code == ResponseCode.SYSTEM_BUSY
        assert "parked pulls" in (refused.remark or "")
        async with RemotingClient() as other:  # another connection still parks
            other_pull = asyncio.ensure_future(
                pull(other, broker.address, "T", 0, 1, sys_flag=SUSPEND, suspend_ms=300)
            )
            assert (await other_pull).code == ResponseCode.PULL_NOT_FOUND
        for p in parked:
            p.cancel()


async def test_the_pulls_of_a_closed_connection_are_dropped_at_once(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker, RemotingClient() as client:
        assert (await send(client, broker.address, "T", b"x")).code == ResponseCode.SUCCESS
        _, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        requests = [pull_request("T", 0, 1, sys_flag=SUSPEND, suspend_ms=60_000) for _ in range(50)]
        for i, request in enumerate(requests):
            request.opaque = i
        writer.write(b"".join(encode_bytes(r) for r in requests))
        await writer.drain()
        await eventually(lambda: _async(len(broker.holds) == 50))
        writer.close()
        await eventually(lambda: _async(len(broker.holds) == 0))


async def test_many_closing_connections_drop_their_pulls_a_slice_per_loop_turn(
    tmp_path: Path,
) -> None:
    # Connections closing together have their close callbacks run in one loop turn:
    # dropping all their pulls there would make every other client wait for it.
    connections, per_connection = 12, 1000
    async with (
        run_broker(tmp_path / "store", max_parked_pulls_per_connection=per_connection) as broker,
        RemotingClient() as client,
    ):
        peers = await _park(broker, client, connections, per_connection)
        for _, writer in peers:
            writer.close()
        per_turn = _parked_per_turn(broker)
        # another topic: a message on T would wake the pulls rather than drop them
        answer = await send(client, broker.address, "Other", b"meanwhile")
        parked_when_answered = len(broker.holds)
        await eventually(lambda: _async(len(broker.holds) == 0))
        # the recorder's own turn after the last drop may come after this coroutine's
        await eventually(lambda: _async(per_turn[-1] == 0))

        assert answer.code == ResponseCode.SUCCESS
        assert parked_when_answered > 0  # answered while the closed pulls were being dropped
        drops = [a - b for a, b in itertools.pairwise(per_turn)]
        assert max(drops) <= DROP_SLICE  # never all of them in one turn
        assert per_turn[-1] == 0 and broker.holds.dropping == 0


async def test_a_message_waking_many_parked_pulls_releases_them_a_slice_per_loop_turn(
    tmp_path: Path,
) -> None:
    # One message on a queue where thousands of pulls wait wakes all of them: taking
    # them all out of the tables in the arrival's turn would stall every other client.
    connections, per_connection = 12, 1000
    async with (
        run_broker(tmp_path / "store", max_parked_pulls_per_connection=per_connection) as broker,
        RemotingClient() as client,
    ):
        peers = await _park(broker, client, connections, per_connection)
        per_turn = _parked_per_turn(broker)
        assert (await send(client, broker.address, "T", b"y")).code == ResponseCode.SUCCESS
        await eventually(lambda: _async(len(broker.holds) == 0), timeout_s=30)

        drops = [a - b for a, b in itertools.pairwise(per_turn)]
        assert max(drops) <= RUN_SLICE  # never all of them in one turn
        for reader, writer in peers:  # and every one of them got its message
            answers = await _answers(reader, per_connection)
            assert {a.code for a in answers} == {ResponseCode.SUCCESS}
            writer.close()


Peer = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _park(
    broker: Broker, client: RemotingClient, connections: int, per_connection: int
) -> list[Peer]:
    """Parks ``per_connection`` pulls of queue T:0 on each of ``connections`` new connections
    (after one message on T, so that the topic exists) and waits until all are held."""
    assert (await send(client, broker.address, "T", b"x")).code == ResponseCode.SUCCESS
    frames = b"".join(
        encode_bytes(_with_opaque(pull_request("T", 0, 1, sys_flag=SUSPEND, suspend_ms=60_000), i))
        for i in range(per_connection)
    )
    peers = []
    for _ in range(connections):
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        writer.write(frames)
        peers.append((reader, writer))
    total = connections * per_connection
    await eventually(lambda: _async(len(broker.holds) == total), timeout_s=60)
    return peers


def _parked_per_turn(broker: Broker) -> list[int]:
    """How many pulls are parked, recorded from the next loop turn on at every turn until
    none is (the broker runs on this loop)."""
    loop = asyncio.get_running_loop()
    per_turn: list[int] = []

    def record() -> None:
        per_turn.append(len(broker.holds))
        if per_turn[-1]:
            loop.call_soon(record)

    loop.call_soon(record)
    return per_turn


async def _answers(reader: asyncio.StreamReader, count: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    while len(got) < count:
        chunk = await asyncio.wait_for(reader.read(1 << 20), 30)
        assert chunk, f"connection closed after {len(got)} answers"
        got += decoder.feed(chunk)
    return got


def _with_opaque(request: RemotingCommand, opaque: int) -> RemotingCommand:
    request.opaque = opaque
    return request


async def test_a_parked_pull_whose_arrival_was_not_heard_is_woken_by_the_periodic_check(
    tmp_path: Path,
) -> None:
    async with (
        run_broker(tmp_path / "store", pull_hold_check_interval_ms=200) as broker,
        RemotingClient() as client,
    ):
        assert (await send(client, broker.address, "T", b"first")).code == ResponseCode.SUCCESS
        store = broker.store
        assert store is not None
        parked = asyncio.ensure_future(
            pull(client, broker.address, "T", 0, 1, sys_flag=SUSPEND, suspend_ms=20_000,
                 timeout_s=30)
        )  # fmt: skip
        await eventually(lambda: _async(len(broker.holds) == 1))
        # The seam: the store dispatches without telling the hold service.
        store.set_arrival_listener(None)
        assert (await send(client, broker.address, "T", b"second")).code == ResponseCode.SUCCESS
        began = asyncio.get_running_loop().time()
        answer = await asyncio.wait_for(parked, 5)
        assert answer.code == ResponseCode.SUCCESS
        assert asyncio.get_running_loop().time() - began < 5  # not the 20 s hold


async def test_a_parked_tag_pull_gets_a_delayed_message_when_it_is_delivered(
    tmp_path: Path,
) -> None:
    # The periodic check is pushed out of reach: only the delivery's arrival can wake the pull.
    async with (
        run_broker(tmp_path / "store", pull_hold_check_interval_ms=600_000) as broker,
        RemotingClient() as client,
    ):
        store = broker.store
        assert store is not None
        answer = await send(client, broker.address, "T", b"old", tags="A")
        assert answer.code == ResponseCode.SUCCESS  # an existing topic, one message in queue 0
        loop = asyncio.get_running_loop()
        parked = asyncio.ensure_future(
            pull(client, broker.address, "T", 0, 1, sys_flag=SUSPEND, subscription="A || B",
                 suspend_ms=20_000, timeout_s=30)
        )  # fmt: skip
        await eventually(lambda: _async(len(broker.holds) == 1))
        level_1 = {"DELAY": "1"}  # one second
        answer = await send(client, broker.address, "T", b"other", tags="C", extra=level_1)
        assert answer.code == ResponseCode.SUCCESS
        await eventually(lambda: _async(store.max_offset_in_queue("T", 0) == 2))
        assert not parked.done() and len(broker.holds) == 1  # another tag does not wake it
        sent_at = loop.time()
        answer = await send(client, broker.address, "T", b"wanted", tags="B", extra=level_1)
        assert answer.code == ResponseCode.SUCCESS
        woken = await asyncio.wait_for(parked, 10)
        waited = loop.time() - sent_at
        assert woken.code == ResponseCode.SUCCESS
        assert [r.body for r in iter_records(woken.body_bytes())] == [b"wanted"]
        assert 0.9 < waited < 3.0  # its one-second delay, not the 20 s hold


async def _async(value: bool) -> bool:
    return value


async def test_the_store_tells_of_arrivals_only_while_a_pull_is_parked(tmp_path: Path) -> None:
    # The periodic check is pushed out of reach: only an arrival can wake the pull.
    async with (
        run_broker(tmp_path / "store", pull_hold_check_interval_ms=600_000) as broker,
        RemotingClient() as client,
    ):
        store = broker.store
        assert store is not None
        assert (await send(client, broker.address, "T", b"first")).code == ResponseCode.SUCCESS
        assert not _listening(store)  # nothing parked: no call per dispatched message
        for round_ in range(2):
            parked = asyncio.ensure_future(
                pull(client, broker.address, "T", 0, 1 + round_, sys_flag=SUSPEND,
                     suspend_ms=20_000, timeout_s=30)
            )  # fmt: skip
            await eventually(lambda: _async(len(broker.holds) == 1))
            assert _listening(store)
            body = f"arrived {round_}".encode()
            assert (await send(client, broker.address, "T", body)).code == ResponseCode.SUCCESS
            answer = await asyncio.wait_for(parked, 5)  # woken by the arrival, not the 20 s
            assert answer.code == ResponseCode.SUCCESS
            assert [m.body for m in iter_records(answer.body_bytes())] == [body]
            assert len(broker.holds) == 0
            assert not _listening(store)


def _listening(store: FileMessageStore) -> bool:
    """Whether the store tells anyone of the messages it dispatches."""
    return store.reput.arrival is not None
