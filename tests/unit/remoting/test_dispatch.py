"""A HandlerTable answers through a Responder: run here on a fake one, with no socket."""

from __future__ import annotations

import asyncio

from apogee.codes import ResponseCode
from apogee.errors import ApogeeError
from apogee.protocol.command import FLAG_RESPONSE, RemotingCommand
from apogee.remoting import HandlerTable, RequestContext, Responder, ResponseBatch
from tests.harness.responder import FakeResponder

ECHO, SLOW, BROKEN, REFUSED, UNKNOWN = 10, 11, 12, 13, 99


def _table() -> HandlerTable:
    table = HandlerTable()

    def echo(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(remark=f"echo from {ctx.peer}", body=req.body_bytes())

    async def slow(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0)
        return req.make_response(body=b"later")

    def broken(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("handler bug")

    async def refused(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        raise ApogeeError("no such topic", code=ResponseCode.TOPIC_NOT_EXIST)

    table.register(ECHO, echo)
    table.register(SLOW, slow)
    table.register(BROKEN, broken)
    table.register(REFUSED, refused)
    return table


def _dispatch(table: HandlerTable, request: RemotingCommand) -> FakeResponder:
    responder = FakeResponder()
    table.dispatch(table.context(responder, request))
    return responder


def test_fake_responder_is_a_responder() -> None:
    responder: Responder = FakeResponder()  # mypy checks the fake against the protocol
    assert responder.peer_address == ("10.0.0.7", 40123)


def test_sync_handler_answers_at_once() -> None:
    request = RemotingCommand.request(ECHO, body=b"ping")
    request.opaque = 41
    responder = _dispatch(_table(), request)
    [answer] = responder.sent
    assert answer.code == ResponseCode.SUCCESS and answer.body_bytes() == b"ping"
    assert answer.opaque == 41 and answer.flag & FLAG_RESPONSE
    assert answer.remark == "echo from 10.0.0.7:40123"


async def test_async_handler_answers_when_done() -> None:
    table = _table()
    request = RemotingCommand.request(SLOW)
    request.opaque = 7
    responder = _dispatch(table, request)
    assert responder.sent == []
    assert await table.drain(1.0)
    [answer] = responder.sent
    assert answer.code == ResponseCode.SUCCESS and answer.body_bytes() == b"later"
    assert answer.opaque == 7


def test_unknown_code_is_not_supported() -> None:
    responder = _dispatch(_table(), RemotingCommand.request(UNKNOWN))
    [answer] = responder.sent
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert answer.remark == f" request type {UNKNOWN} not supported"


def test_empty_table_answers_not_supported() -> None:
    responder = _dispatch(HandlerTable(), RemotingCommand.request(ECHO))
    assert [a.code for a in responder.sent] == [ResponseCode.REQUEST_CODE_NOT_SUPPORTED]


async def test_oneway_requests_get_no_answer() -> None:
    table = _table()
    responders = [
        _dispatch(table, RemotingCommand.oneway(code)) for code in (ECHO, SLOW, BROKEN, UNKNOWN)
    ]
    assert await table.drain(1.0)
    assert all(r.sent == [] for r in responders)


def test_raising_handler_answers_system_error() -> None:
    responder = _dispatch(_table(), RemotingCommand.request(BROKEN))
    [answer] = responder.sent
    assert answer.code == ResponseCode.SYSTEM_ERROR and answer.remark == "handler bug"


async def test_apogee_error_answers_its_code() -> None:
    table = _table()
    responder = _dispatch(table, RemotingCommand.request(REFUSED))
    assert await table.drain(1.0)
    [answer] = responder.sent
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST and answer.remark == "no such topic"


def test_observer_sees_every_answer() -> None:
    table = _table()
    seen: list[tuple[str, int]] = []
    table.observer = lambda ctx, response: seen.append((ctx.peer, response.code))
    _dispatch(table, RemotingCommand.request(ECHO))
    _dispatch(table, RemotingCommand.request(UNKNOWN))
    assert seen == [
        ("10.0.0.7:40123", ResponseCode.SUCCESS),
        ("10.0.0.7:40123", ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
    ]


def test_batch_writes_held_answers_when_it_closes() -> None:
    responder = FakeResponder()
    ctxs = [RequestContext(responder, RemotingCommand.request(ECHO)) for _ in range(3)]
    with ResponseBatch() as batch:
        for ctx in ctxs:
            batch.respond(ctx, ctx.request.make_response())
        assert responder.sent == []
    assert len(responder.sent) == 3


def test_answer_to_closed_responder_is_not_written() -> None:
    responder = FakeResponder()
    responder.closed = True
    ctx = RequestContext(responder, RemotingCommand.request(ECHO))
    assert ctx.respond(ctx.request.make_response()) is False
    assert ctx.channel is None
