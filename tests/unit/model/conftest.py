"""Every model test runs with the compiled kernels and with their Python twins."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def _every_kernel(kernels: str) -> str:
    return kernels
