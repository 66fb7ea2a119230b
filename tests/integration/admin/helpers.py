"""Helpers of the admin command tests."""

from __future__ import annotations

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
