"""Request timeouts over real sockets: one timer per connection, every deadline kept.

The peer is a plain asyncio server on 127.0.0.1 that reads the client's frames
and answers only the requests it is told to (ext field ``answer``), so a
request's answer can be made to never come. Each test runs on asyncio and on
uvloop (the directory's conftest).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from apogee.errors import RemotingClosedError, RemotingTimeoutError
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.remoting import RemotingClient
from apogee.remoting.connection import SWEEP_GAP_PER_REQUEST_S, TIMER_SLACK_S

CODE = 1234
#: how early a deadline may fire: the connection's slack plus the loop's clock
EARLY_S = TIMER_SLACK_S + 0.002
#: how late one may fire on a loaded machine shared with other jobs (generous)
LATE_S = 1.0


class Peer:
    """Reads frames; answers those with ``answer=yes`` after ``delay`` seconds, no others."""

    def __init__(self) -> None:
        self.received = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for cmd in decoder.feed(data):
                self.received += 1
                if cmd.ext_fields.get("answer") == "yes":
                    delay = float(cmd.ext_fields.get("delay", "0"))
                    asyncio.get_running_loop().call_later(
                        delay, self._answer, writer, cmd.make_response(body=cmd.body_bytes())
                    )

    @staticmethod
    def _answer(writer: asyncio.StreamWriter, response: RemotingCommand) -> None:
        if not writer.is_closing():
            writer.write(encode_bytes(response))


@pytest.fixture
async def peer() -> AsyncIterator[tuple[Peer, str]]:
    p = Peer()
    server = await asyncio.start_server(p.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield p, f"127.0.0.1:{port}"
    finally:
        for w in p.writers:
            w.close()
        server.close()
        await server.wait_closed()


def request(answer: bool, delay: float = 0.0, body: bytes = b"") -> RemotingCommand:
    ext = {"answer": "yes" if answer else "no", "delay": str(delay)}
    return RemotingCommand.request(CODE, ext, body)


async def timed(fut: asyncio.Future[RemotingCommand]) -> tuple[float, BaseException | None]:
    """When (loop time) ``fut`` ended, and how."""
    try:
        await fut
    except Exception as exc:
        return asyncio.get_running_loop().time(), exc
    return asyncio.get_running_loop().time(), None


async def test_a_request_never_answered_times_out_at_its_timeout(peer: tuple[Peer, str]) -> None:
    _, address = peer
    async with RemotingClient() as client:
        conn = await client.connection(address)
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(RemotingTimeoutError, match=f"request code {CODE} .* within 0.3s"):
            await conn.invoke(request(False), 0.3)
        elapsed = loop.time() - start
        assert 0.3 - EARLY_S <= elapsed < 0.3 + LATE_S
        assert "pending=0" in repr(conn)
        # the connection is still good
        answer = await conn.invoke(request(True, body=b"after"), 2.0)
        assert answer.body == b"after"


async def test_many_requests_with_different_timeouts_each_fail_at_their_own(
    peer: tuple[Peer, str],
) -> None:
    """Shuffled timeouts on one connection, the later ones sent first; answered ones mixed in."""
    p, address = peer
    timeouts = [0.05 * i for i in range(1, 21)]
    random.Random(7).shuffle(timeouts)
    async with RemotingClient() as client:
        conn = await client.connection(address)
        loop = asyncio.get_running_loop()
        start = loop.time()
        silent = [conn.request(request(False), t) for t in timeouts]
        # answered requests, some answered after several deadlines went by
        answered = [conn.request(request(True, delay=0.03 * i), 5.0) for i in range(10)]
        ends = await asyncio.gather(*(timed(f) for f in silent))
        for t, (end, exc) in zip(timeouts, ends, strict=True):
            assert isinstance(exc, RemotingTimeoutError), (t, exc)
            assert f"within {t}s" in str(exc)
            assert t - EARLY_S <= end - start < t + LATE_S, (t, end - start)
        # they failed in the order of their deadlines
        order = sorted(range(len(timeouts)), key=lambda i: ends[i][0])
        assert [timeouts[i] for i in order] == sorted(timeouts)
        for fut in answered:
            assert (await fut).code == 0
        assert p.received == 30
        assert "pending=0" in repr(conn)


async def test_thousands_never_answered_with_spread_deadlines_none_early(
    peer: tuple[Peer, str],
) -> None:
    """A pipelining sender whose peer went silent: every deadline kept, in order."""
    p, address = peer
    n = 3000
    timeouts = [0.3 + 0.6 * i / n for i in range(n)]
    random.Random(3).shuffle(timeouts)
    async with RemotingClient() as client:
        conn = await client.connection(address)
        loop = asyncio.get_running_loop()
        start = loop.time()
        futs = [conn.request(request(False), t) for t in timeouts]
        ends = await asyncio.gather(*(timed(f) for f in futs))
        # sweeps may be spaced by 1 µs per waiting request: 3 ms here
        late = LATE_S + n * SWEEP_GAP_PER_REQUEST_S
        for t, (end, exc) in zip(timeouts, ends, strict=True):
            assert isinstance(exc, RemotingTimeoutError)
            assert t - EARLY_S <= end - start < t + late, (t, end - start)
        assert p.received == n
        assert "pending=0" in repr(conn)


async def test_a_shorter_timeout_sent_after_a_longer_one_fires_first(
    peer: tuple[Peer, str],
) -> None:
    _, address = peer
    async with RemotingClient() as client:
        conn = await client.connection(address)
        loop = asyncio.get_running_loop()
        start = loop.time()
        long = conn.request(request(False), 1.5)
        short = conn.request(request(False), 0.1)
        end, exc = await timed(short)
        assert isinstance(exc, RemotingTimeoutError)
        assert 0.1 - EARLY_S <= end - start < 0.1 + LATE_S
        assert not long.done()
        end, exc = await timed(long)
        assert isinstance(exc, RemotingTimeoutError)
        assert end - start >= 1.5 - EARLY_S


async def test_deadlines_of_answered_requests_do_not_touch_later_ones(
    peer: tuple[Peer, str],
) -> None:
    """The timer armed for an answered request's deadline re-arms for the next one."""
    _, address = peer
    async with RemotingClient() as client:
        conn = await client.connection(address)
        loop = asyncio.get_running_loop()
        # answered at once: the timer stays armed for its deadline (0.2 s from now)
        assert (await conn.invoke(request(True), 0.2)).code == 0
        start = loop.time()
        late = conn.request(request(True, delay=0.4), 0.6)  # answered after the old deadline
        silent = conn.request(request(False), 0.5)
        assert (await late).code == 0
        end, exc = await timed(silent)
        assert isinstance(exc, RemotingTimeoutError)
        assert 0.5 - EARLY_S <= end - start < 0.5 + LATE_S


async def test_a_cancelled_request_leaves_the_table_at_its_deadline(
    peer: tuple[Peer, str],
) -> None:
    _, address = peer
    async with RemotingClient() as client:
        conn = await client.connection(address)
        task = asyncio.ensure_future(conn.invoke(request(False), 0.2))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)
        assert "pending=0" in repr(conn)


async def test_closing_fails_waiting_requests_and_stops_the_timer(
    peer: tuple[Peer, str],
) -> None:
    p, address = peer
    client = RemotingClient()
    try:
        conn = await client.connection(address)
        futs = [conn.request(request(False), t) for t in (0.3, 5.0)]
        while not p.writers:
            await asyncio.sleep(0.01)
        p.writers[0].close()  # the peer goes away
        for fut in futs:
            with pytest.raises(RemotingClosedError):
                await fut
        await asyncio.sleep(0.4)  # the first deadline passes with nothing to fail
    finally:
        await client.close()
