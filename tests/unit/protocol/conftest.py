"""Fixtures of the header kernels' tests: the direct route (reader and writer) compiled,
the dict route."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.harness.kernels import NotCompiledError, module_build


@pytest.fixture(scope="module")
def scan() -> ModuleType:
    """``header_scan``, the direct route, compiled; skipped where it was not."""
    try:
        return module_build("apogee.protocol.header_scan", "compiled")
    except NotCompiledError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def write() -> ModuleType:
    """``header_write``, the direct route's writer, compiled; skipped where it was not."""
    try:
        return module_build("apogee.protocol.header_write", "compiled")
    except NotCompiledError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def full() -> ModuleType:
    """``header_json`` run interpreted: the dict route, the full decode."""
    return module_build("apogee.protocol.header_json", "interpreted")
