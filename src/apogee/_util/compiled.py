"""Which copy of a Cython-compiled module runs: the extension or its source.

Owns: the ``APOGEE_PURE_PYTHON`` switch for modules compiled by Cython, and
loading a module's interpreted copy beside the compiled one (tests compare
the two).

A module in Cython's pure-Python mode is an ordinary ``.py`` file whose first
line is a ``# cython:`` directive comment; ``setup.py`` compiles it under the
same module name when a C compiler is at hand, so the extension
(``name.cpython-*.so``) sits beside ``name.py`` and Python's import system
picks it first. Call sites never choose: they import the module by its name.

``APOGEE_PURE_PYTHON=1`` (any value but empty or ``0``) in the environment
when ``apogee`` is first imported puts :class:`SourceFinder` in front of the
import system: from then on every ``apogee`` module that has a ``.py`` source
is loaded from it, the compiled extension beside it being ignored. The same
variable also leaves the C ``apogee._groupsync`` unused (``apogee._util.native``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ExtensionFileLoader, ModuleSpec
from pathlib import Path
from types import ModuleType

#: The switch, read once when ``apogee`` is imported.
PURE_PYTHON = os.environ.get("APOGEE_PURE_PYTHON", "") not in ("", "0")

#: First line of every module that setup.py compiles with Cython.
CYTHON_HEADER = "# cython:"

#: Suffix of the module name of an interpreted copy (:func:`load_interpreted`).
INTERPRETED_SUFFIX = "__interpreted"


class SourceFinder:
    """Finds ``apogee`` modules in their ``.py`` source, never their extension.

    A meta path finder needs only ``find_spec``; it does not subclass
    ``importlib.abc.MetaPathFinder``, whose import (``importlib.resources``,
    ``tempfile``, ``shutil``) would cost every ``import apogee`` about 30 ms.
    """

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if not fullname.startswith("apogee.") or path is None:
            return None  # top-level names are someone else's
        leaf = fullname.rpartition(".")[2]
        for folder in path:
            source = Path(folder, leaf + ".py")
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None  # packages, and modules with no source (apogee._groupsync)


def install_source_finder() -> None:
    """Load ``apogee`` modules from source from now on (idempotent)."""
    if not any(isinstance(f, SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceFinder())


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from a compiled extension."""
    spec = module.__spec__
    return spec is not None and isinstance(spec.loader, ExtensionFileLoader)


def source_path(name: str) -> Path:
    """The ``.py`` source of the module ``name`` (imports its package, not it)."""
    package, _, leaf = name.rpartition(".")
    for folder in importlib.import_module(package).__path__:
        source = Path(folder, leaf + ".py")
        if source.is_file():
            return source
    raise ModuleNotFoundError(f"no source file for {name}", name=name)


def load_interpreted(name: str) -> ModuleType:
    """A fresh interpreted copy of module ``name``, whether or not it was compiled.

    The copy is named ``name + "__interpreted"`` and registered under that
    name; it never replaces ``sys.modules[name]``, so both copies can be
    compared in one process.
    """
    alias = name + INTERPRETED_SUFFIX
    loaded = sys.modules.get(alias)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(alias, source_path(name))
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"cannot load {name} from source", name=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[alias]
        raise
    return module


def cython_sources(package_dir: Path) -> list[Path]:
    """The modules under ``package_dir`` that setup.py compiles (same rule)."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        with path.open(encoding="utf-8") as f:
            if f.readline().startswith(CYTHON_HEADER):
                found.append(path)
    return found
