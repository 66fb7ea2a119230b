"""The dashboard as an operator uses it: headless Chromium, driven by Playwright, clicking
through every page of ``apogee dashboard`` served for a live ``apogee standalone``.

One cluster, one dashboard process and one browser for the module. Debian's Chromium
(the Makefile installs it) is started with the flags this machine's closed network needs.
What the pages did is checked through the admin client, not only on the page.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from apogee.admin.admin_client import AdminClient
from apogee.client import sync
from apogee.model.message import Message
from apogee.model.topic import TopicConfig
from apogee.testing.cluster import DashboardProcess, StandaloneProcess
from tests.harness.cpp import start_cpp

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
T = TypeVar("T")


def admin(namesrv: str, action: Callable[[AdminClient], Awaitable[T]]) -> T:
    """Run ``action`` with an AdminClient on a loop of its own (Playwright owns this thread)."""

    async def main() -> T:
        async with AdminClient(namesrv) as client:
            return await action(client)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result(60)


@dataclass
class Site:
    namesrv: str
    url: str
    page: Page

    def open(self, path: str) -> Page:
        self.page.goto(self.url + path)
        return self.page


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("dashboard")
    with StandaloneProcess(root / "store") as cluster:
        dash = DashboardProcess(cluster.address, root / "dash", sample_interval_s=0.5)
        dash.start()
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            yield Site(cluster.address, dash.url, page)
            page.close()
        finally:
            assert dash.stop() == 0, dash.log_text()[-3000:]  # SIGTERM stops it cleanly
        assert "Traceback" not in dash.log_text(), dash.log_text()[-3000:]


def test_cluster_page_lists_the_broker_and_charts_tps(site: Site) -> None:
    page = site.open("/")
    row = page.locator("#brokers tbody tr").first
    expect(row).to_contain_text("broker-a")
    expect(row).to_contain_text("master")
    expect(row).to_contain_text("%")  # disk use
    for _ in range(20):  # the chart appears once the sampler has two samples
        if page.locator("#tps-chart svg").count():
            break
        page.wait_for_timeout(500)
        page.reload()
    expect(page.locator("#tps-chart svg")).to_have_count(1)


def test_topics_create_view_send_and_delete(site: Site) -> None:
    page = site.open("/topics")
    form = page.locator("#create-topic")
    form.locator("input[name=topic]").fill("WebOrders")
    form.locator("input[name=read]").fill("4")
    form.locator("input[name=write]").fill("4")
    form.locator("button").click()
    expect(page.locator("#notice")).to_contain_text("topic WebOrders created or updated")
    route = admin(site.namesrv, lambda a: a.topic_route("WebOrders"))
    assert [q.write_queue_nums for q in route.queue_datas] == [4]

    page.get_by_role("link", name="WebOrders", exact=True).click()
    expect(page.locator("h1")).to_contain_text("Topic WebOrders")
    expect(page.locator("#route")).to_contain_text("broker-a")
    expect(page.locator("#queues tbody tr")).to_have_count(4)

    send = page.locator("#send-test")
    send.locator("input[name=body]").fill("from the browser")
    send.locator("input[name=tags]").fill("Web")
    send.locator("button").click()
    expect(page.locator("#notice")).to_contain_text("sent: SEND_OK")
    stats = admin(site.namesrv, lambda a: a.topic_status("WebOrders"))
    assert sum(o.max_offset for o in stats.offset_table.values()) == 1

    page.locator("#delete-topic button").click()
    expect(page.locator("#notice")).to_contain_text("topic WebOrders deleted")
    assert "WebOrders" not in admin(site.namesrv, AdminClient.topic_list)
    expect(page.locator("#topics")).not_to_contain_text("WebOrders")


def _lagging_group(namesrv: str) -> None:
    """Topic Backlog with 6 messages; group web_lag has consumed 2 of them."""

    async def act(a: AdminClient) -> None:
        await a.create_topic(TopicConfig("Backlog", 1, 1), cluster="DefaultCluster")
        for i in range(6):
            await a.send_message(Message("Backlog", f"job-{i}".encode(), keys=[f"job-{i}"]))
        (broker,) = await a.master_addrs("DefaultCluster")
        await a.broker.update_consumer_offset(broker, "web_lag", "Backlog", 0, 2)

    admin(namesrv, act)


def test_consumer_page_shows_lag_over_time_and_resets_offsets(site: Site) -> None:
    _lagging_group(site.namesrv)
    page = site.open("/consumers")
    row = page.locator("#groups tbody tr", has_text="web_lag")
    expect(row).to_contain_text("4")
    row.get_by_role("link", name="web_lag").click()
    expect(page.locator("#total-lag")).to_have_text("4")
    expect(page.locator("#progress")).to_contain_text("Backlog")
    expect(page.locator("#connections")).to_contain_text("No consumer of this group is online")
    for _ in range(20):
        if page.locator("#lag-chart svg").count():
            break
        page.wait_for_timeout(500)
        page.reload()
    expect(page.locator("#lag-chart svg")).to_have_count(1)

    page.locator("#reset-offset input[value=newest]").check()
    page.locator("#reset-offset button").click()
    expect(page.locator("#notice")).to_contain_text("offsets of web_lag on Backlog now")
    expect(page.locator("#total-lag")).to_have_text("0")
    page.locator("#reset-offset input[value=oldest]").check()
    page.locator("#reset-offset button").click()
    expect(page.locator("#total-lag")).to_have_text("6")


@contextlib.contextmanager
def cpp_consumer(namesrv: str, group: str, topic: str) -> Iterator[None]:
    """A C++ push consumer running (on a loop of its own) for the ``with`` block."""
    spec = {"action": "push_consume", "namesrv": namesrv, "topic": topic, "group": group,
            "run_s": 60}  # fmt: skip
    started, stop = threading.Event(), threading.Event()
    outcome: list[str] = []

    async def main() -> None:
        proc = await start_cpp(spec, timeout_s=70)
        if await proc.wait_event("started", 10) is None:
            outcome.append((await proc.stop()).describe())
        started.set()
        await asyncio.to_thread(stop.wait)
        await proc.stop()

    runner = threading.Thread(target=asyncio.run, args=(main(),))
    runner.start()
    try:
        assert started.wait(30) and not outcome, outcome
        yield
    finally:
        stop.set()
        runner.join(60)


def test_consumers_online_show_with_their_subscriptions(site: Site) -> None:
    with cpp_consumer(site.namesrv, "web_live", "Backlog"):
        page = site.open("/consumers/web_live")
        for _ in range(20):
            if "CPP" in page.locator("#connections").inner_text():
                break
            page.wait_for_timeout(500)
            page.reload()
        expect(page.locator("#connections")).to_contain_text("CPP")
        expect(page.locator("main")).to_contain_text("Backlog: *")
        page.goto(site.url + "/consumers")
        expect(page.locator("#groups tbody tr", has_text="web_live")).to_contain_text("1")


def test_messages_found_by_topic_key_and_id_then_resent(site: Site) -> None:
    page = site.open("/messages?mode=topic&topic=Backlog")
    expect(page.locator("#results tbody tr")).to_have_count(6)
    page.goto(site.url + "/messages?mode=key&topic=Backlog&key=job-3")
    expect(page.locator("#results tbody tr")).to_have_count(1)
    page.locator("#results a").first.click()
    expect(page.locator("#body")).to_have_text("job-3")
    expect(page.locator("#properties")).to_contain_text("KEYS")
    expect(page.locator("#consumption")).to_contain_text("web_lag")
    unique = page.locator("h1").inner_text().removeprefix("Message ").strip()
    page.goto(site.url + f"/messages?mode=id&id={unique}")
    expect(page.locator("#results tbody tr")).to_have_count(1)

    page.locator("#results a").first.click()
    admin(site.namesrv, lambda a: _retry_topic_of(a, "web_resend"))
    page.locator("#resend input[name=group]").fill("web_resend")
    page.locator("#resend button").click()
    expect(page.locator("#notice")).to_contain_text("resent to web_resend: SEND_OK")
    copies = admin(site.namesrv, lambda a: a.consume_messages("%RETRY%web_resend"))
    bodies = [m.body for q in copies for m in q.messages]
    assert b"job-3" in bodies
    assert any(m.properties.get("RETRY_TOPIC") == "Backlog" for q in copies for m in q.messages)


async def _retry_topic_of(a: AdminClient, group: str) -> None:
    # a consumer's heartbeat makes its retry topic; here the operator does
    await a.create_topic(TopicConfig(f"%RETRY%{group}", 1, 1), cluster="DefaultCluster")


def test_dead_letters_are_listed_and_resent(site: Site) -> None:
    async def poison(a: AdminClient) -> None:
        await a.create_topic(TopicConfig("Payments", 1, 1), cluster="DefaultCluster")
        sent = await a.send_message(Message("Payments", b"bad card"))
        msg = await a.query_msg_by_id(sent.offset_msg_id)
        (broker,) = await a.master_addrs("DefaultCluster")
        await a.broker.send_back(broker, msg, "web_pay", delay_level=-1)  # straight to the DLQ

    admin(site.namesrv, poison)
    page = site.open("/dlq")
    row = page.locator("#dlq-summary tbody tr", has_text="web_pay")
    expect(row).to_contain_text("1")
    row.get_by_role("link", name="web_pay").click()
    expect(page.locator("#dlq-messages")).to_contain_text("bad card")
    expect(page.locator("#dlq-messages")).to_contain_text("Payments")
    page.locator("#resend-all button").click()
    expect(page.locator("#notice")).to_contain_text("resent 1 dead letter(s) to web_pay")
    copies = admin(site.namesrv, lambda a: a.consume_messages("%RETRY%web_pay"))
    assert [m.body for q in copies for m in q.messages] == [b"bad card"]


def test_producers_page_lists_live_producers(site: Site) -> None:
    with sync.Producer("web_pg", namesrv=site.namesrv) as producer:
        producer.send(Message("Backlog", b"one more"))
        page = site.open("/producers")
        row = page.locator("#producers tbody tr", has_text="web_pg")
        expect(row).to_contain_text("PYTHON")
        expect(row).to_contain_text(re.compile(r"127\.0\.0\.1:\d+"))


def test_a_second_dashboard_on_the_same_port_fails_in_one_line(site: Site) -> None:
    port = site.url.rsplit(":", 1)[1]
    result = subprocess.run(
        [sys.executable, "-m", "apogee", "dashboard", "-n", site.namesrv,
         "--listen", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert error.startswith(f"Error: cannot listen on 127.0.0.1:{port}: Address already in use; "
                            "held by pid ")  # fmt: skip
    assert "apogee dashboard" in error
