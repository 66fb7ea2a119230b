"""The property filter has no compiled twin: its tests run once, not per kernel."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def _every_kernel() -> str:
    # Overrides tests/unit/model/conftest.py, which runs each test per kernel.
    return "python"
