"""Shared pytest configuration: every test gets real files under tmp_path.

The compiled modules run wherever they were built; the same tests run
interpreted when the suite is run again with ``APOGEE_PURE_PYTHON=1``
(``make test`` does both). ``make test`` sets ``APOGEE_REQUIRE_SPEEDUPS=1``
for the compiled run: there every test fails unless every module that
setup.py compiles, and the C ``apogee._groupsync``, is what runs, so a build
that silently fell back to the sources cannot pass. ``cython_build`` gives a
test a module compiled, then its source run interpreted, in one process.

Hypothesis runs without its per-example deadline: on a shared machine one
example can take 200 ms for reasons of the machine's, not the code's, and a
property test is about results, not time.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

import apogee
from apogee._util.compiled import PURE_PYTHON, cython_sources, is_compiled
from apogee._util.native import groupsync
from tests.harness.kernels import BUILDS, NotCompiledError, module_build

REQUIRED = os.environ.get("APOGEE_REQUIRE_SPEEDUPS") == "1"

settings.register_profile("apogee", deadline=None)
settings.load_profile("apogee")


def not_compiled() -> list[str]:
    """The compiled modules that run from their source in this process."""
    package = Path(apogee.__file__).parent
    names = [
        ".".join(path.relative_to(package.parent).with_suffix("").parts)
        for path in cython_sources(package)
    ]
    missing = [name for name in names if not is_compiled(importlib.import_module(name))]
    if groupsync is None:
        missing.append("apogee._groupsync")
    return missing


@pytest.fixture(scope="session", autouse=True)
def _compiled_when_required() -> None:
    """Under APOGEE_REQUIRE_SPEEDUPS=1 the compiled build must be the one that runs."""
    if not REQUIRED:
        return
    if PURE_PYTHON:
        pytest.fail("APOGEE_REQUIRE_SPEEDUPS=1 and APOGEE_PURE_PYTHON=1 contradict each other")
    missing = not_compiled()
    if missing:
        pytest.fail(f"not compiled (is Cython or a C compiler missing? run make): {missing}")


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


@pytest.fixture(scope="session", autouse=True)
def _temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``tempfile``'s directories made in this process go under the run's tmp dir too.

    Some are kept on purpose (a C++ client's home, whose log a failure message
    quotes); pytest removes old runs' tmp dirs, so they do not pile up in /tmp.
    """
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tmp"))
    yield
    tempfile.tempdir = saved


@pytest.fixture(scope="module", params=BUILDS)
def cython_build(request: pytest.FixtureRequest) -> Callable[[str], ModuleType]:
    """Gives a module by name in this run's build: compiled, then interpreted."""

    def build_of(name: str) -> ModuleType:
        try:
            return module_build(name, request.param)
        except NotCompiledError as exc:
            if REQUIRED:
                pytest.fail(f"{exc}; the compiled build is required here")
            pytest.skip(str(exc))

    return build_of
