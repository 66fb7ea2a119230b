"""Long work shows how far it got: on a terminal a bar, in a log a line per tenth, and it
ends with a summary table.

The terminal is a real pseudo-terminal (``pty``), as a person's shell gives one.
"""

from __future__ import annotations

import logging
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apogee._util.progress import Progress
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
    assert "msgs/s" in out.splitlines()[0]
    assert "a send failed" not in terminal
