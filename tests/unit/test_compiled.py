"""Modules compiled by Cython: built, switchable, and loadable both ways at once.

A module whose first line is a ``# cython:`` directive is compiled under its
own name by ``pip install``; ``APOGEE_PURE_PYTHON=1`` runs its source instead.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import FunctionType

import pytest

import apogee
from apogee._util.compiled import (
    INTERPRETED_SUFFIX,
    cython_sources,
    is_compiled,
    load_interpreted,
    source_path,
)

PACKAGE = Path(apogee.__file__).parent
REQUIRED = os.environ.get("APOGEE_REQUIRE_SPEEDUPS") == "1"
MODULES = [
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    for path in cython_sources(PACKAGE)
]


def _env(pure: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("APOGEE_PURE_PYTHON", None)
    if pure:
        env["APOGEE_PURE_PYTHON"] = "1"
    return env


def test_the_decoder_and_the_kernels_are_compiled_modules() -> None:
    assert {"apogee.model.received", "apogee.model.kernels", "apogee.store.kernels"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_cython_module_is_built_and_not_older_than_its_source(name: str) -> None:
    module = importlib.import_module(name)
    if not is_compiled(module):
        if REQUIRED:
            pytest.fail(f"{name} was not compiled (is Cython or a C compiler missing?)")
        pytest.skip(f"{name} runs from its source here")
    assert module.__file__ is not None
    built = Path(module.__file__).stat().st_mtime
    assert built >= source_path(name).stat().st_mtime, f"{name} is stale: reinstall (make)"


def test_the_interpreted_copy_is_the_source_and_leaves_the_import_alone() -> None:
    name = "apogee.model.received"
    imported = importlib.import_module(name)
    copy = load_interpreted(name)
    assert copy.__name__ == name + INTERPRETED_SUFFIX
    assert copy is not imported
    assert sys.modules[name] is imported
    assert not is_compiled(copy)
    assert isinstance(copy.decode_received, FunctionType)  # a Python function, not compiled
    assert load_interpreted(name) is copy


def _probe(pure: bool) -> str:
    code = (
        "import apogee.model.received as m, apogee._util.native as n;"
        "from apogee._util.compiled import is_compiled;"
        "print(is_compiled(m), n.groupsync is None, m.__file__.endswith('.py'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(pure), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_switch_runs_the_source_even_when_the_extension_is_installed() -> None:
    assert _probe(pure=True) == "False True True"


def test_without_the_switch_the_extension_wins_the_import() -> None:
    if not is_compiled(importlib.import_module("apogee.model.received")):
        if REQUIRED:
            pytest.fail("apogee.model.received was not compiled")
        pytest.skip("not compiled here")
    assert _probe(pure=False) == "True False False"
