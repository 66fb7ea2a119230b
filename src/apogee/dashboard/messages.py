"""The messages and dead-letter pages.

Owns: finding messages by topic and time range (at most 2,000, queue by
queue), by key, or by id (an offset message id or a producer's unique key);
one message's body, properties and place, with the groups that consume its
topic and how far each got; resending it to a group (to one of its online
consumers directly, as RocketMQ's Dashboard does, or, when none takes it,
through the group's retry topic: ``apogee.admin.direct.redeliver``); and
the dead-letter page: every group's dead letters at a glance, one group's
messages, resending one or all of them.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient
from apogee.admin.direct import redeliver
from apogee.dashboard.app import Page, act
from apogee.model.message import MessageExt

PAGE_LIMIT = 2000


def _ms(text: str, default: int) -> int:
    if not text:
        return default
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{text!r} is not a date and time") from None


def body_text(msg: MessageExt) -> tuple[str, bool]:
    """The body as text, and whether it is shown as hex because it is not UTF-8."""
    try:
        return msg.body.decode("utf-8"), False
    except UnicodeDecodeError:
        return msg.body.hex(" "), True


async def search(request: Request) -> Response:
    page = Page(request)
    q = request.query_params
    mode, topic = q.get("mode", "topic"), q.get("topic", "")
    found: list[MessageExt] = []
    if mode == "topic" and topic:
        try:
            begin, end = _ms(q.get("begin", ""), 0), _ms(q.get("end", ""), 2**63 - 1)
        except ValueError as exc:
            page.errors.append(str(exc))
        else:
            queues = (
                await page.ask(
                    lambda a: ops.messages_by_time(a, topic, begin, end, limit=PAGE_LIMIT)
                )
            ) or []
            found = ops.flatten(queues)
    elif mode == "key" and topic and q.get("key"):
        found = (await page.ask(lambda a: a.query_msg_by_key(topic, q.get("key", "")))) or []
    elif mode == "id" and q.get("id"):
        one = await page.ask(lambda a: a.query_msg_by_id(q.get("id", ""), topic=topic or None))
        found = [one] if one is not None else []
    found.sort(key=lambda m: m.store_timestamp, reverse=True)
    return page.render("messages.html", messages=found[:PAGE_LIMIT], mode=mode, q=q,
                       searched=bool(q.get("topic") or q.get("id")))  # fmt: skip


async def view(request: Request) -> Response:
    page = Page(request)
    msg_id, topic = request.query_params.get("id", ""), request.query_params.get("topic", "")
    msg = await page.ask(lambda a: a.query_msg_by_id(msg_id, topic=topic or None))
    if msg is None:
        return page.render("message.html", msg=None, status_code=404)
    text, as_hex = body_text(msg)
    groups = (await page.ask(lambda a: _progress_of(a, msg))) or []
    return page.render("message.html", msg=msg, body=text, body_hex=as_hex, groups=groups)


async def _progress_of(admin: AdminClient, msg: MessageExt) -> list[dict[str, object]]:
    """Each group consuming the message's topic, and whether it got past the message."""
    route = await admin.topic_route(msg.topic)
    out = []
    for group in await ops.consumed_by(admin, msg.topic, route):
        stats = await admin.consumer_progress(group, msg.topic)
        offsets = [w.consumer_offset for mq, w in stats.offset_table.items()
                   if mq.queue_id == msg.queue_id and mq.topic == msg.topic]  # fmt: skip
        consumed = bool(offsets) and offsets[0] > msg.queue_offset
        out.append({"group": group, "consumed": consumed})
    return out


async def resend(request: Request) -> Response:
    form = await Page(request).form()
    msg_id, group = form.get("id", ""), form.get("group", "")

    async def run() -> str:
        admin: AdminClient = request.app.state.admin
        msg = await admin.query_msg_by_id(msg_id, topic=form.get("topic") or None)
        return (await redeliver(admin, msg, group)).describe(group)

    return await act(f"/messages/view?id={quote(msg_id, safe='')}", run())


async def dlq(request: Request) -> Response:
    page = Page(request)
    group = request.query_params.get("group", "")
    summary = (await page.ask(ops.dead_letters)) or []
    messages = (
        (await page.ask(lambda a: ops.dead_letter_messages(a, group, 200))) or [] if group else []
    )
    return page.render("dlq.html", summary=summary, group=group, messages=messages)


async def dlq_resend(request: Request) -> Response:
    form = await Page(request).form()
    group, msg_id = form.get("group", ""), form.get("id", "")

    async def run() -> str:
        admin: AdminClient = request.app.state.admin
        letters = await ops.dead_letter_messages(admin, group, 200)
        chosen = [m for m in letters if not msg_id or msg_id in (m.msg_id, m.client_msg_id)]
        if not chosen:
            raise ValueError(f"no dead letter {msg_id} in {group}")
        outcomes = [await redeliver(admin, m, group) for m in chosen]
        if len(outcomes) == 1:
            return f"resent 1 dead letter(s) to {group}: {outcomes[0].describe(group)}"
        direct = sum(1 for o in outcomes if o.direct is not None)
        return (
            f"resent {len(chosen)} dead letter(s) to {group}: {direct} consumed directly, "
            f"{len(chosen) - direct} through its retry topic"
        )

    return await act(f"/dlq?group={quote(group, safe='')}", run())


ROUTES = [
    Route("/messages", search),
    Route("/messages/view", view),
    Route("/messages/resend", resend, methods=["POST"]),
    Route("/dlq", dlq),
    Route("/dlq/resend", dlq_resend, methods=["POST"]),
]
