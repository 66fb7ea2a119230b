"""The cluster, topics and producers pages.

Owns: what they show and the topic actions (create or update, delete, send
a test message). Cluster: every broker by cluster with its role (brokerId 0
is the master), version, TPS, disk use and message totals, and a chart of
put and get TPS over time. Topics: every topic with its kind (normal,
retry, dead-letter, system), a search box and the create form; one topic:
its route, each queue's offsets, the groups that consume it. Producers:
every live producer by group.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient, BrokerSummary
from apogee.dashboard.app import Page, act
from apogee.dashboard.charts import line_chart
from apogee.model.message import Message
from apogee.model.route import perm_to_string
from apogee.model.stats import TopicStatsTable
from apogee.model.topic import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicConfig,
    is_system_topic,
    validate_topic,
)


def _space(text: str | None) -> str:
    try:
        return f"{float(text or '') * 100:.1f}%"
    except ValueError:
        return "-"


async def cluster(request: Request) -> Response:
    page = Page(request)
    brokers: list[BrokerSummary] = (await page.ask(AdminClient.cluster_list)) or []
    rows = [
        {
            "cluster": b.cluster,
            "name": b.broker_name,
            "id": b.broker_id,
            "role": "master" if b.broker_id == 0 else f"slave {b.broker_id}",
            "addr": b.addr,
            "version": b.runtime.get("brokerVersionDesc", "-"),
            "in_tps": (b.runtime.get("putTps") or "-").split(" ")[0],
            "out_tps": (b.runtime.get("getTransferedTps") or "-").split(" ")[0],
            "space": _space(b.runtime.get("commitLogDiskRatio")),
            "capacity": b.runtime.get("commitLogDirCapacity", "-"),
            "today_in": b.runtime.get("msgPutTotalTodayNow", "-"),
            "today_out": b.runtime.get("msgGetTotalTodayNow", "-"),
            "error": b.error,
        }
        for b in brokers
    ]
    h = page.history
    tps = {**{f"in {a}": s for a, s in h.put_tps.items()},
           **{f"out {a}": s for a, s in h.get_tps.items()}}  # fmt: skip
    return page.render("cluster.html", brokers=rows, chart=line_chart("Messages per second", tps))


def topic_kind(topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    return "system" if is_system_topic(topic) else "normal"


async def topics(request: Request) -> Response:
    page = Page(request)
    search = request.query_params.get("q", "")
    kind = request.query_params.get("kind", "normal")
    names: list[str] = (await page.ask(AdminClient.topic_list)) or []
    shown = [
        {"name": t, "kind": topic_kind(t)}
        for t in names
        if search.lower() in t.lower() and kind in ("all", topic_kind(t))
    ]
    clusters: list[str] = (await page.ask(AdminClient.cluster_names)) or []
    return page.render("topics.html", topics=shown, q=search, kind=kind, clusters=clusters)


async def create_topic(request: Request) -> Response:
    form = await Page(request).form()
    name = form.get("topic", "")

    async def run() -> str:
        problem = validate_topic(name)
        if problem:
            raise ValueError(problem)
        read, write = int(form.get("read") or 8), int(form.get("write") or 8)
        perm, order = int(form.get("perm") or 6), form.get("order") == "on"
        config = TopicConfig(name, read, write, perm, order=order)
        admin: AdminClient = request.app.state.admin
        done = await admin.create_topic(config, cluster=form.get("cluster") or None,
                                        broker_addr=form.get("broker") or None)  # fmt: skip
        return f"topic {name} created or updated on {', '.join(done)}"

    return await act("/topics", run())


async def topic(request: Request) -> Response:
    page = Page(request)
    name = request.path_params["topic"]
    route = await page.ask(lambda a: a.topic_route(name))
    status = (await page.ask(lambda a: a.topic_status(name))) or TopicStatsTable()
    groups: list[str] = []
    if route is not None:
        groups = (await page.ask(lambda a: ops.consumed_by(a, name, route))) or []
    brokers = {b.broker_name: b for b in (route.broker_datas if route else [])}
    queue_datas: list[dict[str, str]] = []
    for q in route.queue_datas if route else []:
        b = brokers.get(q.broker_name)
        addrs = ", ".join(f"{i}: {a}" for i, a in sorted(b.broker_addrs.items())) if b else "-"
        queue_datas.append({
            "broker": q.broker_name, "read": str(q.read_queue_nums),
            "write": str(q.write_queue_nums),
            "perm": f"{perm_to_string(q.perm)} ({q.perm})", "addrs": addrs,
            "cluster": b.cluster if b else "-",
        })  # fmt: skip
    queues = [
        {"broker": mq.broker_name, "id": mq.queue_id, "min": o.min_offset, "max": o.max_offset,
         "last": o.last_update_timestamp}
        for mq, o in status.offset_table.items()
    ]  # fmt: skip
    clusters = sorted({q["cluster"] for q in queue_datas if q["cluster"] != "-"})
    return page.render("topic.html", topic=name, kind=topic_kind(name), route=queue_datas,
                       queues=queues, groups=groups, clusters=clusters)  # fmt: skip


async def delete_topic(request: Request) -> Response:
    form = await Page(request).form()
    name = request.path_params["topic"]

    async def run() -> str:
        admin: AdminClient = request.app.state.admin
        done = await admin.delete_topic(name, form.get("cluster", ""))
        return f"topic {name} deleted from {', '.join(done.brokers)} and the name servers"

    return await act("/topics", run())


async def send_test(request: Request) -> Response:
    form = await Page(request).form()
    name = request.path_params["topic"]

    async def run() -> str:
        admin: AdminClient = request.app.state.admin
        keys = form.get("keys") or None
        msg = Message(name, form.get("body", "").encode(), tags=form.get("tags") or None,
                      keys=keys.split() if keys else None)  # fmt: skip
        result = await admin.send_message(msg)
        ids = f"msgId {result.msg_id}, offsetMsgId {result.offset_msg_id}"
        return f"sent: {result.status.value}, {ids}"

    return await act(f"/topics/{quote(name, safe='')}", run())


async def producers(request: Request) -> Response:
    page = Page(request)
    table: dict[str, list[ops.ProducerInfo]] = (await page.ask(ops.all_producers)) or {}
    rows: list[dict[str, Any]] = [
        {"group": group, "client": p.client_id, "addr": p.remote_ip, "language": p.language,
         "version": p.version, "seen": p.last_update_timestamp}
        for group, found in table.items()
        for p in found
    ]  # fmt: skip
    return page.render("producers.html", producers=rows)


ROUTES = [
    Route("/", cluster),
    Route("/topics", topics),
    Route("/topics", create_topic, methods=["POST"]),
    Route("/topics/{topic}", topic),
    Route("/topics/{topic}/delete", delete_topic, methods=["POST"]),
    Route("/topics/{topic}/send", send_test, methods=["POST"]),
    Route("/producers", producers),
]
