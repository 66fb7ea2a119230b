"""A name server and a broker registered with it, in-process on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.testing.cluster import run_broker, run_namesrv


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[str, Broker]]:
    """(name server address, broker); the broker auto-creates topics from TBW102."""
    async with run_namesrv(tmp_path / "ns") as ns:
        ns_addr = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "store", ns_addr) as broker:
            yield ns_addr, broker
