"""Build of the compiled modules; everything else is declared in pyproject.toml.

Two kinds of compiled code, both optional (a machine without a C compiler
installs and runs the Python sources alone):

* Cython modules in pure-Python mode, the kernels among them
  (``apogee.model.kernels``, ``apogee.store.kernels``): every
  ``src/apogee/**/*.py`` whose first line is a ``# cython:`` directive comment
  is compiled under its own module name, so the extension
  (``name.cpython-*.so``) sits beside its source and wins the import. A
  ``.pxd`` beside a module declares its C-level functions for other modules
  to ``cimport`` (``src`` is on Cython's include path). ``APOGEE_PURE_PYTHON=1``
  makes ``import apogee`` load the ``.py`` source instead
  (``apogee._util.compiled``). The generated C goes to ``build/cython``.
* ``apogee._groupsync``: the SYNC_FLUSH sync loop in hand-written C (it runs
  without the GIL), with a Python twin in ``apogee.store.group_sync``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # a build without Cython installs those modules as they are
    cythonize = None

SRC = Path("src")
CYTHON_HEADER = "# cython:"
# "if cython.compiled:" branches leave their interpreted side unreachable on purpose
CYTHON_DIRECTIVES = {"language_level": 3, "embedsignature": True, "warn.unreachable": False}


def cython_sources() -> list[Path]:
    """The pure-Python-mode modules to compile (see the module docstring)."""
    found = []
    for path in sorted((SRC / "apogee").rglob("*.py")):
        with path.open(encoding="utf-8") as f:
            if f.readline().startswith(CYTHON_HEADER):
                found.append(path)
    return found


def cython_extensions() -> list[Extension]:
    sources = cython_sources()
    if not sources:
        return []
    if cythonize is None:
        print("warning: Cython is not installed; its modules stay interpreted", file=sys.stderr)
        return []
    extensions = cythonize(
        [
            Extension(".".join(path.relative_to(SRC).with_suffix("").parts), [str(path)])
            for path in sources
        ],
        build_dir="build/cython",
        include_path=[str(SRC)],  # where cimport finds apogee/**/*.pxd
        compiler_directives=CYTHON_DIRECTIVES,
        quiet=True,
        nthreads=os.cpu_count() or 1,
    )
    for extension in extensions:
        extension.optional = True  # cythonize does not carry the flag over
    return list(extensions)


GROUPSYNC = Extension("apogee._groupsync", sources=["src/apogee/_groupsync.c"], optional=True)

# The C of every module compiles at once, one per core: a fresh install waits minutes less.
setup(
    ext_modules=[GROUPSYNC, *cython_extensions()],
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
