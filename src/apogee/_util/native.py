"""The compiled kernels, when this installation has them.

Owns: deciding whether ``apogee._speedups`` (built from ``_speedups.c`` by
``pip install`` where a C compiler is at hand) is used.

Every function of that module is the twin of a pure-Python function named in
its source, with the same results byte for byte; modules that use one bind
the compiled twin at import when ``speedups`` is not None, else the Python
one. ``APOGEE_PURE_PYTHON=1`` in the environment leaves the compiled module
unused (to compare, or to rule it out), as it does the modules compiled by
Cython (``apogee._util.compiled``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from apogee._util.compiled import PURE_PYTHON


def _load() -> ModuleType | None:
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module("apogee._speedups")
    except ImportError:  # installed without a C compiler
        return None


#: ``apogee._speedups``, or None when it is missing or switched off.
speedups = _load()
