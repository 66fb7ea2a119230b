"""Apogee: a RocketMQ-compatible message queue for Python.

The package root stays import-light: nothing here loads the store, the
network stack or the client, so ``import apogee.store`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"
