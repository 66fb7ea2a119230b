"""Small-file persistence: atomic replace and JSON read-or-default.

Owns: the one way Apogee writes a config/state file so that a crash leaves
either the old or the new content, never a mix.

Write order: ``<name>.tmp`` written and fsynced, the current file copied to
``<name>.bak`` (RocketMQ keeps the same backup next to each config file),
then ``rename(tmp, name)`` and an fsync of the directory so the rename itself
survives power loss.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import orjson


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, backup: bool = True) -> None:
    """Replace ``path`` with ``data`` so readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if backup and path.exists():
        bak = path.with_name(path.name + ".bak")
        with contextlib.suppress(OSError):
            bak.write_bytes(path.read_bytes())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json(path: Path, obj: Any, *, backup: bool = True) -> None:
    """Atomically persist ``obj`` as indented JSON (operators read these files)."""
    atomic_write(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2), backup=backup)


def read_json(path: Path, default: Any = None) -> Any:
    """Load JSON from ``path``; fall back to ``.bak`` and then to ``default``.

    A corrupt main file with a readable backup is the crash-between-writes
    case; both unreadable means the caller starts from ``default``.
    """
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            raw = candidate.read_bytes()
        except FileNotFoundError:
            continue
        if not raw.strip():
            continue
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
    return default
