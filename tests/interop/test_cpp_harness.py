"""The C++ driver and its harness on their own: specs, background runs, stop and kill.

No server is needed: a name server address nobody listens on is enough for a client to start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee._util.net import free_port
from tests.harness.cpp import run_cpp, run_cpp_sync, start_cpp

pytestmark = pytest.mark.interop


def nowhere() -> str:
    return f"127.0.0.1:{free_port()}"


def test_a_bad_spec_is_refused_with_exit_code_2(tmp_path: Path) -> None:
    run = run_cpp_sync({"action": "produce", "namesrv": nowhere(), "colour": "blue"}, home=tmp_path)

    assert run.returncode == 2, run.describe()
    [error] = run.events("error")
    assert "colour" in str(error["error"])
    assert run.events("done") == [{"event": "done", "exit": 2}]


async def test_max_reconsume_times_is_refused_because_the_library_cannot_set_it(
    tmp_path: Path,
) -> None:
    spec = {"action": "push_consume", "namesrv": nowhere(), "max_reconsume_times": 3}
    run = await run_cpp(spec, home=tmp_path)

    assert run.returncode == 2, run.describe()
    assert "no setter" in str(run.events("error")[0]["error"])


async def test_a_background_consumer_starts_and_stops_on_request(tmp_path: Path) -> None:
    spec = {"action": "push_consume", "namesrv": nowhere(), "topic": "HarnessTopic"}
    async with await start_cpp(spec, home=tmp_path, timeout_s=30.0) as consumer:
        started = await consumer.wait_event("started", timeout_s=15.0)
        assert started is not None, consumer.lines
        run = await consumer.stop()

    assert run.returncode == 0, run.describe()
    assert not run.timed_out
    assert run.events("shutdown") == [{"event": "shutdown", "clean": True}], run.describe()
    assert run.log_path is not None and run.log_path.is_relative_to(tmp_path)
    assert "DefaultMQPushConsumer:apogee_cpp_consumer start" in run.log_text(), run.describe()


async def test_the_harness_kills_a_driver_that_outlives_its_timeout(tmp_path: Path) -> None:
    # the driver's own deadline is far away, so only the harness can end this run
    spec = {"action": "push_consume", "namesrv": nowhere(), "deadline_s": 120}
    consumer = await start_cpp(spec, home=tmp_path, timeout_s=4.0)
    run = await consumer.wait()

    assert run.timed_out, run.describe()
    assert run.returncode is not None and run.returncode < 0
    assert not run.crashed
    assert run.events("done") == []
