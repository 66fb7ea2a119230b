"""The hand-written C extension, when this installation has it.

Owns: deciding whether ``apogee._groupsync`` (built from ``_groupsync.c`` by
``pip install`` where a C compiler is at hand) is used.

That module holds one type, ``GroupSync``: the SYNC_FLUSH sync loop run
without the GIL, the twin of ``apogee.store.group_sync.GroupSyncPython``
(which is the specification and the fallback). Everything else that is
compiled is Cython in pure-Python mode, one source for both builds
(``apogee._util.compiled``). ``APOGEE_PURE_PYTHON=1`` in the environment
leaves this extension unused too.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from apogee._util.compiled import PURE_PYTHON


def _load() -> ModuleType | None:
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module("apogee._groupsync")
    except ImportError:  # installed without a C compiler
        return None


#: ``apogee._groupsync``, or None when it is missing or switched off.
groupsync = _load()
