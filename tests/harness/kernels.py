"""Either build of a module compiled by Cython, in one process.

Owns: :func:`module_build`, the module as compiled or its source run
interpreted (for tests that compare the two side by side, such as the
decoder's), and :data:`BUILDS`. The kernels (``apogee.model.kernels``,
``apogee.store.kernels``) are not compared this way: they call each other at
C level, so their tests run once per build, the whole suite again under
``APOGEE_PURE_PYTHON=1``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from apogee._util.compiled import is_compiled, load_interpreted

#: The two builds of a Cython module that tests compare.
BUILDS = ("compiled", "interpreted")


class NotCompiledError(RuntimeError):
    """The compiled build of a module was asked for but is not in use."""


def module_build(name: str, build: str) -> ModuleType:
    """Module ``name`` as compiled by Cython, or its source run interpreted.

    Raises:
        NotCompiledError: ``build`` is "compiled" and the import of ``name``
            gave its source (no C compiler at install, or APOGEE_PURE_PYTHON).
    """
    if build == "interpreted":
        return load_interpreted(name)
    module = importlib.import_module(name)
    if not is_compiled(module):
        raise NotCompiledError(f"{name} runs from its source here, not compiled")
    return module
