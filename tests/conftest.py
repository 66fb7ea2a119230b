"""Shared pytest configuration: every test gets real files under tmp_path.

``kernels`` runs a test once with the compiled kernels (when they were built)
and once with their pure-Python twins; store and model tests use it for
every test (see their conftest files). ``make test`` sets
``APOGEE_REQUIRE_SPEEDUPS=1``: there a missing build fails instead of skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from apogee.testing.kernels import COMPILED, python_kernels


@pytest.fixture(scope="module", params=["compiled", "python"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled":
        if not COMPILED:
            if os.environ.get("APOGEE_REQUIRE_SPEEDUPS") == "1":
                pytest.fail("apogee._speedups is required here but was not built")
            pytest.skip("apogee._speedups is not built (or APOGEE_PURE_PYTHON is set)")
        yield "compiled"
        return
    with python_kernels():
        yield "python"
