"""Helpers of the admin command tests."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from click.testing import Result

AdminCli = Callable[..., Awaitable[Result]]


def json_of(result: Result) -> dict[str, Any]:
    """The one JSON document a ``--json`` command printed."""
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
