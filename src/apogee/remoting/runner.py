"""Run an asyncio main on uvloop when it is installed.

Owns: the one way Apogee processes start their event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None for asyncio's default loop."""
    try:
        import uvloop  # noqa: PLC0415  # optional at run time
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """``asyncio.run(main)`` on uvloop when available."""
    with asyncio.Runner(debug=debug, loop_factory=loop_factory()) as runner:
        return runner.run(main)
