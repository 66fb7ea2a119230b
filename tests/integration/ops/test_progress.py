"""Long work shows how far it got: on a terminal a bar, in a log a line per tenth, and it
ends with a summary table.

The terminal is a real pseudo-terminal (``pty``), as a person's shell gives one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pty
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee._util.progress import Progress
from apogee.admin.admin_client import AdminClient
from apogee.model.message import Message
from apogee.model.topic import TopicConfig
from apogee.testing.cluster import StandaloneProcess
from tests.unit.admin.test_store_verify import build


def run_on_a_terminal(*args: str, timeout_s: float = 60) -> tuple[int, str, str]:
    """(exit code, stdout, what the terminal on stderr showed)."""
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "apogee", *args],
        stdout=subprocess.PIPE,
        stderr=side,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(side)
    shown = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        shown += chunk
    out, _ = proc.communicate(timeout=timeout_s)
    os.close(main)
    return proc.returncode, out.decode(), shown.decode("utf-8", "replace")


def test_store_verify_shows_a_bar_on_a_terminal_and_ends_with_a_summary(tmp_path: Path) -> None:
    build(tmp_path)
    code, out, terminal = run_on_a_terminal("admin", "store-verify", "--store", str(tmp_path))
    assert code == 0, terminal
    assert "commit log" in terminal and "consume queues" in terminal  # the bars
    assert "100%" in terminal
    assert "store-verify" in out and "41 records" in out  # the summary table
    assert out.rstrip().endswith("result: consistent")


def test_without_a_terminal_a_log_gets_a_line_per_tenth(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("apogee.test.progress")
    with (
        caplog.at_level(logging.INFO, "apogee.test.progress"),
        Progress("recovering", 200, log=log, enabled=False) as bar,
    ):
        for done in range(0, 201, 7):
            bar.update(done)
        bar.update(200)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"recovering: {p}% done" for p in range(10, 101, 10)]


def test_bench_produce_shows_each_round_on_a_terminal() -> None:
    code, out, terminal = run_on_a_terminal(
        "bench",
        "produce",
        "--threads",
        "2",
        "--per-producer",
        "1",
        "--seconds",
        "1",
        "--warmup",
        "0.3",
        timeout_s=120,
    )
    assert code == 0, terminal
    assert "2 sender threads" in terminal  # a bar while the round runs, not silence
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["bench", "produce"]  # the summary table: title, then its header
    assert "msgs/s" in lines[1]
    assert "a send failed" not in terminal


def test_bench_store_names_each_phase_and_ends_with_a_summary(tmp_path: Path) -> None:
    code, out, terminal = run_on_a_terminal(
        "bench", "store", "--dir", str(tmp_path), "--messages", "3000", "--batch-messages",
        "3000", "--sync-messages", "640", "--read-messages", "3000",
    )  # fmt: skip
    assert code == 0, terminal
    assert "single appends" in terminal and "of 5 phases" in terminal  # the bar
    assert "bench store" in out  # the summary table
    assert "single_msgs_per_s" in out and "read_mb_per_s" in out


def test_bench_replication_fills_a_bar_with_bytes_and_ends_with_a_summary() -> None:
    code, out, terminal = run_on_a_terminal(
        "bench", "replication", "--size", "3000000", "--timeout", "60", timeout_s=120
    )
    assert code == 0, terminal
    assert "preloading the master" in terminal and "bytes" in terminal
    assert "bench replication" in out and "mb_per_s" in out


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cluster where group cg-walk has consumed 2 of the 5 messages of topic Walked."""
    with StandaloneProcess(tmp_path_factory.mktemp("walk") / "store") as cluster:

        async def prepare() -> None:
            async with AdminClient(cluster.address) as a:
                for topic in ("Walked", "%RETRY%cg-walk"):
                    await a.create_topic(TopicConfig(topic, 2, 2), cluster="DefaultCluster")
                for i in range(5):
                    await a.send_message(Message("Walked", b"m%d" % i))
                (broker,) = await a.master_addrs("DefaultCluster")
                for queue_id in (0, 1):
                    await a.broker.update_consumer_offset(broker, "cg-walk", "Walked", queue_id, 1)

        asyncio.run(prepare())
        yield cluster.address


@pytest.mark.parametrize(
    ("command", "summary"),
    [
        (("consumerProgress", "-g", "cg-walk"), "2 queue(s) of 1 topic(s) on 1 broker(s)"),
        (("topicStatus", "-t", "Walked"), "2 queue(s) on 1 broker(s), 5 message(s) stored"),
        (("resetOffsetByTime", "-g", "cg-walk", "-t", "Walked", "-s", "now"),
         "2 queue(s) on 1 broker(s) moved"),
    ],
)  # fmt: skip
def test_admin_walks_show_a_bar_a_summary_and_keep_json_clean(
    standalone: str, command: tuple[str, ...], summary: str
) -> None:
    code, out, terminal = run_on_a_terminal("admin", *command, "-n", standalone)
    assert code == 0, terminal
    assert "brokers" in terminal  # the bar, on the terminal
    assert summary in out
    code, out, terminal = run_on_a_terminal("admin", *command, "-n", standalone, "--json")
    assert code == 0, terminal
    doc = json.loads(out)  # nothing but the document on stdout
    assert doc["queues" if command[0] != "resetOffsetByTime" else "offsets"]
