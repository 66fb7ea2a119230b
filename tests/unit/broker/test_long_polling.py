"""PullHoldService on its own: when a woken pull is re-run, with a fake responder (no socket)."""

from __future__ import annotations

import asyncio

from apogee.broker.long_polling import PullHoldService
from apogee.codes import RequestCode
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting import HandlerTable, RequestContext
from tests.harness.responder import FakeResponder

TOPIC = "HoldT"


def _park(holds: PullHoldService, responder: FakeResponder, queue_id: int, offset: int) -> None:
    header = PullMessageRequestHeader(
        consumer_group="g", topic=TOPIC, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=32, sys_flag=2, commit_offset=0, suspend_timeout_millis=15_000, sub_version=0,
    )  # fmt: skip
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    ctx = HandlerTable().context(responder, request)
    assert holds.hold(ctx, header, None, 15.0)


def _service() -> tuple[PullHoldService, list[tuple[int, int]]]:
    runs: list[tuple[int, int]] = []

    def resume(ctx: RequestContext, header: PullMessageRequestHeader) -> None:
        runs.append((header.queue_id, header.queue_offset))
        ctx.respond(ctx.request.make_response(remark=f"q{header.queue_id}"))

    return PullHoldService(resume), runs


async def test_a_woken_pull_waits_for_the_next_loop_turn_on_its_own() -> None:
    holds, runs = _service()
    responder = FakeResponder()
    _park(holds, responder, 0, 5)
    holds.on_arrival(TOPIC, 0, 5, 0, 0)
    assert runs == [] and len(holds) == 1
    await asyncio.sleep(0)
    assert runs == [(0, 5)] and len(holds) == 0
    assert [r.remark for r in responder.sent] == ["q0"]


async def test_run_ready_answers_the_woken_pulls_at_once_and_only_once() -> None:
    holds, runs = _service()
    responder = FakeResponder()
    for queue_id in range(3):
        _park(holds, responder, queue_id, 5)
    holds.on_arrival(TOPIC, 0, 5, 0, 0)
    holds.on_arrival(TOPIC, 2, 6, 0, 0)
    holds.on_arrival(TOPIC, 1, 4, 0, 0)  # below what the pull waits for: not woken
    holds.run_ready()
    assert runs == [(0, 5), (2, 5)]  # in the turn that woke them
    assert sorted(r.remark or "" for r in responder.sent) == ["q0", "q2"]
    assert len(holds) == 1
    for _ in range(3):  # the turn that had been scheduled for them runs nothing again
        await asyncio.sleep(0)
    assert runs == [(0, 5), (2, 5)] and len(responder.sent) == 2
    holds.run_ready()  # nothing woken: nothing run
    assert runs == [(0, 5), (2, 5)]
    holds.on_arrival(TOPIC, 1, 5, 0, 0)  # a later wake is scheduled as before
    await asyncio.sleep(0)
    assert runs == [(0, 5), (2, 5), (1, 5)] and len(holds) == 0
