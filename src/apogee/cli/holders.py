"""Naming what holds a port or a store another process needs.

Owns: ``port_holder`` (the process listening on a TCP port) and
``process_label`` (pid and command line of a process), for the one-line
errors of ``apogee`` processes that cannot start. Uses psutil; when the
holder cannot be seen (another user's process, no permission) it says
nothing rather than guess.
"""

from __future__ import annotations

import contextlib

import psutil


def process_label(pid: int) -> str:
    """``pid 1234 (apogee standalone --store /x)``; just ``pid 1234`` when it cannot be read."""
    with contextlib.suppress(psutil.Error):
        words = psutil.Process(pid).cmdline()
        command = " ".join(_shorten(w) for w in words)
        if command:
            return f"pid {pid} ({command})"
    return f"pid {pid}"


def _shorten(word: str) -> str:
    # "python -m apogee ..." and ".venv/bin/apogee ...": keep the command a person typed
    if word.endswith(("python", "apogee")) or "/python" in word:
        return word.rsplit("/", 1)[-1]
    return word


def port_holder(port: int) -> str | None:
    """Who listens on TCP ``port`` on this host, or None when that cannot be seen."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            return process_label(conn.pid) if conn.pid else None
    return None
