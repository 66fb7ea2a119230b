"""What the C++ client interop modules share: producing with the C++ driver."""

from __future__ import annotations

from typing import Any

from tests.harness.cpp import CppRun, run_cpp


async def produce(namesrv: str, topic: str, count: int, **spec: Any) -> CppRun:
    """``count`` messages sent by the C++ driver; it must finish cleanly."""
    run = await run_cpp(
        {"action": "produce", "namesrv": namesrv, "topic": topic, "count": count, **spec},
        timeout_s=30,
    )
    assert run.returncode == 0, run.describe()
    return run
