"""Run ``apogee admin`` commands in-process, off the test's event loop.

The commands start their own event loop, so they run in a worker thread
while the servers under test keep serving on the test's loop.
"""

from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner, Result

from apogee.cli.admin import admin
from tests.integration.admin.helpers import AdminCli


@pytest.fixture
def admin_cli() -> AdminCli:
    async def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
        runner = CliRunner()
        return await asyncio.to_thread(runner.invoke, admin, list(args), env=env)

    return invoke
