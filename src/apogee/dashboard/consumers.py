"""The consumer groups pages.

Owns: the groups list (lag, consume TPS and live clients of each; the
create-or-update form) and one group's page: per queue its broker and
consumer offsets and lag, a chart of the lag over time (all queues, and the
busiest ones), the live consumers with their subscriptions, its
subscription config on each broker, and the actions: update that config
(a form filled with what the brokers hold), reset the group's offsets on a
topic to a time, to the oldest or to the newest message (skipping the
backlog), and delete the group.

Saving a group keeps the settings the form does not show (consume from
min, which broker when slow, attributes) as the brokers hold them, so an
update changes only what the operator changed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient
from apogee.dashboard.app import Page, act
from apogee.dashboard.charts import line_chart
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.stats import ConsumerConnection, ConsumeStats
from apogee.model.topic import validate_group


async def groups(request: Request) -> Response:
    page = Page(request)
    names = (await page.ask(ops.all_groups)) or []
    search = request.query_params.get("q", "")
    rows = []
    for name in names:
        if search.lower() in name.lower():
            rows.append(await ops.group_overview(page.admin, name))
    clusters = (await page.ask(AdminClient.cluster_names)) or []
    return page.render("consumers.html", groups=rows, q=search, clusters=clusters)


async def save_group(request: Request) -> Response:
    form = await Page(request).form()
    name = form.get("group", "")

    async def run() -> str:
        problem = validate_group(name)
        if problem:
            raise ValueError(problem)
        admin: AdminClient = request.app.state.admin
        held = await ops.group_configs(admin, name)
        config = dataclasses.replace(
            next(iter(held.values()), SubscriptionGroupConfig(name)),
            consume_enable=form.get("consume_enable") == "on",
            consume_broadcast_enable=form.get("broadcast") == "on",
            consume_message_orderly=form.get("orderly") == "on",
            retry_queue_nums=int(form.get("retry_queues") or 1),
            retry_max_times=int(form.get("retry_max") or 16),
        )
        done = await admin.update_subscription_group(config, cluster=form.get("cluster") or None)
        return f"group {name} created or updated on {', '.join(done)}"

    # the group page's form comes back to the group page
    there = f"/consumers/{quote(name, safe='')}" if form.get("back") == "group" else "/consumers"
    return await act(there, run())


async def group(request: Request) -> Response:
    page = Page(request)
    name = request.path_params["group"]
    stats = (await page.ask(lambda a: ops.group_progress(a, name))) or ConsumeStats()
    live = (await page.ask(lambda a: ops.consumer_connection(a, name))) or ConsumerConnection()
    if live.connections == () and page.errors and "no consumer online" in page.errors[-1]:
        page.errors.pop()  # an offline group is a state, not a fault
    queues: list[dict[str, Any]] = [
        {"topic": mq.topic, "broker": mq.broker_name, "id": mq.queue_id,
         "broker_offset": w.broker_offset, "consumer_offset": w.consumer_offset, "lag": w.diff,
         "last": w.last_timestamp}
        for mq, w in stats.offset_table.items()
    ]  # fmt: skip
    h = page.history
    total = {"all queues": h.lag[name]} if name in h.lag else {}
    chart = line_chart(f"Lag of {name} (messages)", {**total, **h.queue_lag.get(name, {})})
    topics = sorted({q["topic"] for q in queues if not q["topic"].startswith("%")})
    clusters = (await page.ask(AdminClient.cluster_names)) or []
    configs = (await page.ask(lambda a: ops.group_configs(a, name))) or {}
    return page.render(
        "consumer.html", group=name, queues=queues, total=stats.total_diff(),
        tps=stats.consume_tps, chart=chart, live=live, topics=topics, clusters=clusters,
        configs=configs, config=next(iter(configs.values()), None),
    )  # fmt: skip


def _when(form: dict[str, str]) -> int:
    """The form's reset point: "oldest" (0), "newest" (-1) or a local date and time."""
    choice = form.get("to", "time")
    if choice == "oldest":
        return 0
    if choice == "newest":
        return -1
    text = form.get("time", "")
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{text!r} is not a date and time") from None


async def reset(request: Request) -> Response:
    form = await Page(request).form()
    name = request.path_params["group"]

    async def run() -> str:
        topic = form.get("topic", "")
        when = _when(form)
        admin: AdminClient = request.app.state.admin
        table = await ops.reset_offset_by_time(admin, name, topic, when, force=True)
        moved = ", ".join(f"{mq.broker_name}:{mq.queue_id}={o}" for mq, o in table.items())
        return f"offsets of {name} on {topic} now {moved}"

    return await act(f"/consumers/{quote(name, safe='')}", run())


async def delete(request: Request) -> Response:
    form = await Page(request).form()
    name = request.path_params["group"]

    async def run() -> str:
        admin: AdminClient = request.app.state.admin
        done = await ops.delete_group(admin, name, cluster=form.get("cluster", ""),
                                      remove_offset=True)  # fmt: skip
        return f"group {name} deleted from {', '.join(done)}"

    return await act("/consumers", run())


ROUTES = [
    Route("/consumers", groups),
    Route("/consumers", save_group, methods=["POST"]),
    Route("/consumers/{group}", group),
    Route("/consumers/{group}/reset", reset, methods=["POST"]),
    Route("/consumers/{group}/delete", delete, methods=["POST"]),
]
