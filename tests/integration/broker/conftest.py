"""A real broker in-process on 127.0.0.1 (no name server) and a real remoting client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with run_broker(tmp_path / "store") as b:
        yield b


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c
