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
import datetime as dt
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from apogee.admin import operations as ops
from apogee.admin.admin_client import AdminClient
from apogee.client import sync
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import Message
from apogee.model.received import ReceivedMessage
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


def _config_of(namesrv: str, group: str) -> SubscriptionGroupConfig | None:
    configs = admin(namesrv, lambda a: ops.group_configs(a, group))
    return next(iter(configs.values()), None)


def test_consumer_groups_are_created_updated_and_deleted(site: Site) -> None:
    page = site.open("/consumers")
    form = page.locator("#create-group")
    form.locator("input[name=group]").fill("web_grp")
    form.locator("input[name=retry_max]").fill("3")
    form.locator("input[name=orderly]").check()
    form.locator("button").click()
    expect(page.locator("#notice")).to_contain_text("group web_grp created or updated on")
    created = _config_of(site.namesrv, "web_grp")
    assert created is not None
    assert (created.retry_max_times, created.consume_message_orderly) == (3, True)
    assert (created.consume_enable, created.consume_broadcast_enable) == (True, False)

    page.locator("#groups tbody tr", has_text="web_grp").get_by_role("link").click()
    expect(page.locator("#group-config")).to_contain_text("on")
    update = page.locator("#update-group")
    expect(update.locator("input[name=retry_max]")).to_have_value("3")  # filled from the broker
    expect(update.locator("input[name=orderly]")).to_be_checked()
    update.locator("input[name=retry_max]").fill("5")
    update.locator("input[name=consume_enable]").uncheck()
    update.locator("button").click()
    expect(page.locator("#notice")).to_contain_text("group web_grp created or updated on")
    expect(page.locator("h1")).to_contain_text("Group web_grp")  # back on the group's page
    expect(page.locator("#update-group input[name=retry_max]")).to_have_value("5")
    updated = _config_of(site.namesrv, "web_grp")
    assert updated is not None
    assert (updated.retry_max_times, updated.consume_enable) == (5, False)
    assert updated.consume_message_orderly  # left as it was

    page.locator("#delete-group button").click()
    expect(page.locator("#notice")).to_contain_text("group web_grp deleted from")
    assert _config_of(site.namesrv, "web_grp") is None
    expect(page.locator("#groups")).not_to_contain_text("web_grp")


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
    # no consumer of the group is online: the copy goes through its retry topic
    expect(page.locator("#notice")).to_contain_text(
        "no consumer of web_resend took it directly (no consumer online); "
        "copy sent to its retry topic"
    )
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
    expect(page.locator("#notice")).to_contain_text(
        "resent 1 dead letter(s) to web_pay: no consumer of web_pay took it directly"
    )
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


def test_one_dead_letter_is_resent_to_the_live_consumer(site: Site) -> None:
    async def poison(a: AdminClient) -> None:
        await a.create_topic(TopicConfig("Refunds", 1, 1), cluster="DefaultCluster")
        (broker,) = await a.master_addrs("DefaultCluster")
        for body in (b"refund-1", b"refund-2"):
            sent = await a.send_message(Message("Refunds", body))
            msg = await a.query_msg_by_id(sent.offset_msg_id)
            await a.broker.send_back(broker, msg, "web_refund", delay_level=-1)

    admin(site.namesrv, poison)
    got: list[tuple[str, bytes]] = []
    lock = threading.Lock()

    def listener(msg: ReceivedMessage) -> None:
        with lock:
            got.append((msg.topic, msg.body))

    def received(body: bytes) -> int:
        with lock:
            return sum(1 for _, b in got if b == body)

    def until(check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline, got
            time.sleep(0.05)

    consumer = sync.PushConsumer("web_refund", namesrv=site.namesrv, consume_from="first",
                                 listener=listener)  # fmt: skip
    consumer.subscribe("Refunds", "*")
    with consumer:
        until(lambda: received(b"refund-1") == 1 and received(b"refund-2") == 1)  # it is live
        page = site.open("/dlq?group=web_refund")
        row = page.locator("#dlq-messages tbody tr", has_text="refund-1")
        row.get_by_role("button", name="Resend").click()
        expect(page.locator("#notice")).to_contain_text(
            re.compile(r"resent 1 dead letter\(s\) to web_refund: consumed directly by \S+ "
                       r"of web_refund: CR_SUCCESS")
        )  # fmt: skip
        until(lambda: received(b"refund-1") == 2)
    assert received(b"refund-2") == 1
    with lock:
        assert got[-1] == ("Refunds", b"refund-1")  # under its own topic again
    # handed to the consumer itself: no copy was stored for the group
    copies = admin(site.namesrv, lambda a: a.consume_messages("%RETRY%web_refund"))
    assert [m.body for q in copies for m in q.messages] == []


def _wait_past(ms: int) -> None:
    """Until the clock (the broker's too: one machine) is past ``ms``."""
    while time.time() * 1000 <= ms:
        time.sleep(0.01)


def _form_time(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M:%S")


def test_messages_found_by_topic_show_only_those_inside_the_time_range(site: Site) -> None:
    def send(*keys: str) -> int:
        """Send one message per key; the time (ms) after the last was stored."""

        async def act(a: AdminClient) -> None:
            for key in keys:
                await a.send_message(Message("Timeline", key.encode(), keys=[key]))

        admin(site.namesrv, act)
        return int(time.time() * 1000)

    timeline = TopicConfig("Timeline", 2, 2)
    admin(site.namesrv, lambda a: a.create_topic(timeline, cluster="DefaultCluster"))
    early_done = send("early-0", "early-1")
    begin = (early_done // 1000 + 1) * 1000  # the form takes whole seconds
    _wait_past(begin)
    middle_done = send("mid-0", "mid-1", "mid-2")
    end = -(-middle_done // 1000) * 1000
    _wait_past(end)
    send("late-0", "late-1")

    page = site.open("/messages")
    form = page.locator("#message-search")
    form.locator("select[name=mode]").select_option("topic")
    form.locator("input[name=topic]").fill("Timeline")
    form.locator("input[name=begin]").fill(_form_time(begin))
    form.locator("input[name=end]").fill(_form_time(end))
    form.get_by_role("button", name="Search").click()
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(3)
    shown = rows.all_inner_texts()
    assert sorted(k for k in ("mid-0", "mid-1", "mid-2") if any(k in r for r in shown)) == [
        "mid-0", "mid-1", "mid-2"]  # fmt: skip
    assert not any("early" in r or "late" in r for r in shown), shown
    page.goto(site.url + "/messages?mode=topic&topic=Timeline")  # no range: all of them
    expect(page.locator("#results tbody tr")).to_have_count(7)
