"""Apogee: a RocketMQ-compatible message queue for Python.

The package root stays import-light: nothing here loads the store, the
network stack or the client, so ``import apogee.store`` stays cheap.
"""

from __future__ import annotations

from apogee._util import compiled as _compiled

__version__ = "0.1.0"

if _compiled.PURE_PYTHON:
    # before any other apogee module is imported (see apogee._util.compiled)
    _compiled.install_source_finder()
