"""A HandlerTable guard sees every request first; a client with credentials signs all it sends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from apogee.codes import ResponseCode
from apogee.protocol import header_json
from apogee.protocol.command import RemotingCommand
from apogee.protocol.signing import ACCESS_KEY, SessionCredentials, signature_matches
from apogee.remoting import (
    ClientConfig,
    HandlerTable,
    RemotingClient,
    RemotingServer,
    RequestContext,
    ServerConfig,
)

ECHO = 1000
RECORD = 1005
SECRET = "secret-key-1"


class Guarded:
    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []
        self.recorded: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.table = HandlerTable()
        self.table.register(ECHO, self.echo)
        self.table.register(RECORD, self.record)
        self.table.guard = self.guard

    def guard(self, request: RemotingCommand, peer: str) -> RemotingCommand | None:
        self.seen.append((request.code, peer))
        if request.ext_fields.get("explode"):
            raise RuntimeError("guard bug")
        if signature_matches(SECRET, request):
            return None
        return request.make_response(ResponseCode.NO_PERMISSION, "not signed")

    def echo(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(body=req.body_bytes())

    def record(self, ctx: RequestContext, req: RemotingCommand) -> None:
        self.recorded.put_nowait(req)


@pytest.fixture
async def guarded() -> AsyncIterator[tuple[Guarded, str]]:
    harness = Guarded()
    server = RemotingServer(harness.table, ServerConfig(host="127.0.0.1", port=0))
    await server.start()
    try:
        yield harness, f"127.0.0.1:{server.port}"
    finally:
        await server.stop(grace_s=0.5)


async def test_every_way_of_sending_is_signed(guarded: tuple[Guarded, str]) -> None:
    harness, addr = guarded
    config = ClientConfig(credentials=SessionCredentials("account1", SECRET))
    async with RemotingClient(config) as client:
        answer = await client.invoke(addr, RemotingCommand.request(ECHO, {"k": "v"}, b"body"))
        assert answer.code == ResponseCode.SUCCESS
        conn = client.pooled(addr)
        assert conn is not None
        direct = await conn.invoke(RemotingCommand.request(ECHO, body=[b"a", b"b"]), 2.0)
        assert direct.code == ResponseCode.SUCCESS
        await client.invoke_oneway(addr, RemotingCommand.oneway(RECORD, {"x": "1"}))
        recorded = await asyncio.wait_for(harness.recorded.get(), 2)
        assert recorded.ext_fields[ACCESS_KEY] == "account1"
    assert [code for code, _ in harness.seen] == [ECHO, ECHO, RECORD]
    assert all(peer.startswith("127.0.0.1:") for _, peer in harness.seen)


async def test_unsigned_and_wrongly_signed_requests_get_the_guards_answer(
    guarded: tuple[Guarded, str],
) -> None:
    _, addr = guarded
    wrong = ClientConfig(credentials=SessionCredentials("account1", "not-the-secret"))
    for config in (ClientConfig(), wrong):
        async with RemotingClient(config) as client:
            answer = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"x"))
            assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "not signed")


async def test_a_failing_guard_refuses(guarded: tuple[Guarded, str]) -> None:
    _, addr = guarded
    async with RemotingClient() as client:
        answer = await client.invoke(addr, RemotingCommand.request(ECHO, {"explode": "1"}))
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "guard failed: guard bug" in (answer.remark or "")


async def test_a_request_the_caller_encoded_is_signed_too(guarded: tuple[Guarded, str]) -> None:
    harness, addr = guarded
    # what the encoder writes for the request, cut around its opaque
    header = header_json.encode(RemotingCommand.request(ECHO, {"k": "v"}))
    head, _, end = header.partition(b'"opaque":0')
    config = ClientConfig(credentials=SessionCredentials("account1", SECRET))
    async with RemotingClient(config) as client:
        conn = await client.connection(addr)
        answer = await conn.request_encoded(ECHO, head + b'"opaque":', end, b"body", 2.0)
    assert isinstance(answer, RemotingCommand)  # not a send: no SendAnswer
    assert (answer.code, answer.body_bytes()) == (ResponseCode.SUCCESS, b"body")
    assert [code for code, _ in harness.seen] == [ECHO]
