"""Shared pytest configuration: every test gets real files under tmp_path.

``kernels`` runs a test once with the compiled kernels (when they were built)
and once with their pure-Python twins; store and model tests use it for
every test (see their conftest files).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apogee.testing.kernels import COMPILED, python_kernels


@pytest.fixture(scope="module", params=["compiled", "python"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled":
        if not COMPILED:
            pytest.skip("apogee._speedups is not built (or APOGEE_PURE_PYTHON is set)")
        yield "compiled"
        return
    with python_kernels():
        yield "python"
