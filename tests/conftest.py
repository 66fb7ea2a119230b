"""Shared pytest configuration: every test gets real files under tmp_path.

``kernels`` runs a test once with the compiled kernels (when they were built)
and once with their pure-Python twins; store and model tests use it for
every test (see their conftest files). ``cython_build`` does the same for a
module compiled by Cython: a test that uses it gets the compiled module, then
its source run interpreted, in one process. ``make test`` sets ``APOGEE_REQUIRE_SPEEDUPS=1``:
there a missing build fails instead of skipping.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from tests.harness.kernels import (
    BUILDS,
    COMPILED,
    NotCompiledError,
    module_build,
    python_kernels,
)


@pytest.fixture(scope="session", autouse=True)
def _log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``apogee`` processes the tests start write their log files under the test tmp dir."""
    saved = os.environ.get("APOGEE_LOG_DIR")
    os.environ["APOGEE_LOG_DIR"] = str(tmp_path_factory.mktemp("apogeelogs"))
    yield
    if saved is None:
        os.environ.pop("APOGEE_LOG_DIR", None)
    else:
        os.environ["APOGEE_LOG_DIR"] = saved


@pytest.fixture(scope="module", params=BUILDS)
def cython_build(request: pytest.FixtureRequest) -> Callable[[str], ModuleType]:
    """Gives a module by name in this run's build: compiled, then interpreted."""

    def build_of(name: str) -> ModuleType:
        try:
            return module_build(name, request.param)
        except NotCompiledError as exc:
            if os.environ.get("APOGEE_REQUIRE_SPEEDUPS") == "1":
                pytest.fail(f"{exc}; the compiled build is required here")
            pytest.skip(str(exc))

    return build_of


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
