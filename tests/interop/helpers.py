"""What the C++ client interop modules share: a cluster of real processes, and producing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from apogee.testing.cluster import BrokerProcess, NamesrvProcess
from tests.harness.cpp import CppRun, run_cpp


def process_cluster(
    root: Path, properties: Mapping[str, str] | None = None
) -> Iterator[tuple[str, BrokerProcess]]:
    """A name server and a broker (with ``properties``) as processes, for a module fixture."""
    with NamesrvProcess(root / "ns") as ns:
        broker = BrokerProcess(root / "store", ns.address, properties=properties)
        broker.start()
        try:
            yield ns.address, broker
        finally:
            assert broker.stop() == 0, broker.log_text()


async def produce(namesrv: str, topic: str, count: int, **spec: Any) -> CppRun:
    """``count`` messages sent by the C++ driver; it must finish cleanly."""
    run = await run_cpp(
        {"action": "produce", "namesrv": namesrv, "topic": topic, "count": count, **spec},
        timeout_s=30,
    )
    assert run.returncode == 0, run.describe()
    return run
