"""A server process leaves what start-up built out of later collections (``gc.freeze``).

Run in a child process of its own, so that the freeze does not reach the test runner.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import asyncio, gc, os, signal
    from apogee.cli.process import GC_THRESHOLD, run_service

    seen = {}

    async def start():
        seen["frozen_at_start"] = gc.get_freeze_count()
        asyncio.get_running_loop().call_later(0.2, os.kill, os.getpid(), signal.SIGTERM)

    async def stop():
        seen["frozen_once_started"] = gc.get_freeze_count()
        seen["threshold"] = gc.get_threshold()

    run_service(start, stop)
    print(seen["frozen_at_start"], seen["frozen_once_started"], seen["threshold"] == GC_THRESHOLD)
    """
)


def test_a_started_service_has_frozen_its_start_up_objects() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    at_start, once_started, threshold_set = done.stdout.split()
    assert int(at_start) == 0  # nothing frozen while starting
    assert int(once_started) > 10_000  # modules, classes, config: tens of thousands
    assert threshold_set == "True"
