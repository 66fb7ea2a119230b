"""``apogee.client`` hands out its names on first use, and importing one of its parts
does not import the rest (the Spark connector's processes import only the broker API)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import apogee.client
from apogee.client import _HOME


def test_every_exported_name_is_its_home_modules_object() -> None:
    assert sorted(_HOME) == sorted(apogee.client.__all__)
    for name, home in _HOME.items():
        assert getattr(apogee.client, name) is getattr(importlib.import_module(home), name)
    from apogee.client import Producer, PushConsumer  # noqa: PLC0415  # the form users write

    assert Producer.__module__ == "apogee.client.producer"
    assert PushConsumer.__module__ == "apogee.client.push_consumer"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = apogee.client.NoSuchThing


def test_importing_the_broker_api_imports_no_producer_or_consumer() -> None:
    code = (
        "import json, sys, apogee.client.broker_api; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('apogee.client.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out))
    assert "apogee.client.broker_api" in loaded
    for heavy in ("producer", "push_consumer", "lite_pull_consumer", "transaction_producer"):
        assert f"apogee.client.{heavy}" not in loaded
